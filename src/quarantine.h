/*-------------------------------------------------------------------------
 *
 * quarantine.h
 *	  The quarantine table (quarantine.c): queries held back in a budget
 *	  after they ran away, what the runaway worker and the statement path
 *	  ask of it, and its SQL functions.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DBGATE_QUARANTINE_H
#define DBGATE_QUARANTINE_H

#include "executor/execdesc.h"
#include "utils/timestamp.h"

#include "classify.h"
#include "shmem.h"

/*
 * A quarantine entry (quarantine.c has the rules): a query id held back in
 * a budget of one database until 'until'.  The key and 'until', 'runaways'
 * and the text change only under quarantine_lock (shmem.h) exclusive; 'hits' and
 * 'last_hit' are counted by the statement path under the lock shared.
 */
#define DBGATE_QUARANTINE_TEXT 1024

typedef struct DbgateQuarantineEntry
{
	bool		in_use;
	int32		next;			/* the next entry of its hash bucket, or -1 */
	int32		budget;			/* budget index */
	uint32		incarnation;	/* of that budget */
	Oid			dbid;
	uint64		queryid;		/* never 0 */
	TimestampTz until;
	uint64		runaways;		/* runaways that made or extended it */
	pg_atomic_uint64 hits;
	pg_atomic_uint64 last_hit;	/* TimestampTz; 0: none */
	int32		query_len;		/* -1: no text (quarantine_add) */
	char		query[DBGATE_QUARANTINE_TEXT];
} DbgateQuarantineEntry;

/*
 * quarantine.c's shared memory: the table of max entries (may be 0) and
 * its hash buckets.  Sized and set up by quarantine.c (dbgate.c's
 * shared-memory hooks call it); its lock is quarantine_lock of
 * dbgate's tranche (shmem.h).
 */
typedef struct DbgateQuarantineShared
{
	int			max;			/* dbgate.max_quarantine at start */
	uint32		mask;			/* buckets - 1 (a power of 2) */
	DbgateQuarantineEntry *entries; /* [max] */
	int32	   *buckets;		/* first entry of each bucket, or -1 */
} DbgateQuarantineShared;

extern void dbgate_quarantine_shmem_request(void);
extern void dbgate_quarantine_shmem_init(void);

/*
 * The runaway worker (runaway.c): a runaway of budget (index, incarnation),
 * whose quarantine is quarantine_ms > 0, of query id 'queryid' (not 0) in
 * database 'dbid', noticed at 'at' in the backend of 'pid'.
 */
extern void dbgate_quarantine_note_runaway(int budget, uint32 incarnation,
										   int32 quarantine_ms, Oid dbid,
										   uint64 queryid, TimestampTz at,
										   int pid);

/*
 * The runaway worker, about once a second: free the entries that ended
 * (or whose budget was dropped) and bring the budgets' counts up to date.
 */
extern void dbgate_quarantine_tick(void);

/* The runaway worker: the table into a file at shutdown, and back at start. */
extern void dbgate_quarantine_save(void);
extern void dbgate_quarantine_load(void);

/*
 * The statement path (slot.c), for a statement that would take a slot of
 * lk's budget while that budget has quarantine entries (lk->quarantine):
 * a statement whose query is quarantined there is counted, and refused
 * (ERROR 53000) when the budget's runaway_action is 'cancel'.  Returns the
 * lookup to gate it by: lk, or for 'demote' *target, filled in with the
 * budget's runaway_budget (demote.c).
 */
extern const DbgateLookup *dbgate_quarantine_check(const DbgateLookup *lk,
												   const QueryDesc *queryDesc,
												   DbgateLookup *target);

#endif							/* DBGATE_QUARANTINE_H */
