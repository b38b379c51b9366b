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
