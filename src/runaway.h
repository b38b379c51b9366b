/*-------------------------------------------------------------------------
 *
 * runaway.h
 *	  Runaway statements (runaway.c): the backend's runaway timer, the
 *	  rewrite of its cancel, and the runaway worker.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DBGATE_RUNAWAY_H
#define DBGATE_RUNAWAY_H

#include <signal.h>

#include "utils/timeout.h"
#include "utils/timestamp.h"

#include "compat.h"
#include "shmem.h"

/*
 * A backend's runaway record, indexed by proc number (runaway.c has the
 * protocol): written by the backend's runaway timer handler (seq and the
 * facts), read by the runaway worker (which alone writes 'taken').
 */
typedef struct DbgateRunawayRec
{
	uint32		seq;			/* odd while written; seq / 2 = runaways */
	uint32		taken;			/* runaways the worker has counted */
	int32		budget;			/* leaf budget index */
	uint32		incarnation;	/* of that budget */
	int32		pid;
	Oid			dbid;
	int32		action;			/* DBGATE_RUNAWAY_*, as it acted */
	int32		after_ms;		/* runaway_after then */
	uint32		ticket;			/* 'demote': the move asked for (demote.c) */
	uint64		queryid;		/* 0: none computed */
	TimestampTz start;			/* the statement's runaway clock started */
	TimestampTz at;				/* it ran out (the handler ran) */
} DbgateRunawayRec;

typedef union DbgateRunawayPadded
{
	DbgateRunawayRec d;
	char		pad[DBGATE_LINES(sizeof(DbgateRunawayRec))];
} DbgateRunawayPadded;

/*
 * runaway.c's shared memory: the records, one per proc number, and the
 * worker's latch (NULL while no worker runs).  Sized and set up by
 * runaway.c (dbgate.c's shared-memory hooks call it).
 */
typedef struct DbgateRunawayShared
{
	struct Latch *volatile latch;
	DbgateRunawayPadded *recs;	/* [MaxBackends] */
} DbgateRunawayShared;

extern void dbgate_runaway_shmem_request(void);
extern void dbgate_runaway_shmem_init(void);

/*
 * Set by the runaway timer's handler when it asked for the statement's
 * cancel (action 'cancel'); the error that the cancel raises is rewritten
 * while it is set (dbgate_runaway_rethrow()).
 */
extern volatile sig_atomic_t dbgate_runaway_cancel_fired;

/*
 * What the timer's handler records of the statement it fires for (its
 * query id and the start of its clock, set by dbgate_runaway_prepare()
 * before the timer is armed: the handler runs only while it is armed),
 * the slot's chain and limits (slot.c's, at fixed places: set once, at
 * registration),
 * and the clock start of the statement that last ran away (a statement
 * runs away once).  One struct, so that the inline prepare reaches all of
 * it through one address.  runaway.c's.
 */
typedef struct DbgateRunawayArmed
{
	uint64		queryid;		/* the statement's (queryid.h), or 0 */
	TimestampTz start;
	volatile TimestampTz fired_start;
	const DbgateChain *chain;	/* NULL until the timer is registered */
	const DbgateLimits *lim;
} DbgateRunawayArmed;

extern DbgateRunawayArmed dbgate_runaway_armed;
/* the timer, for timeouts.c to arm: registered by the first prepare */
extern TimeoutId dbgate_runaway_timeout_id;
extern void dbgate_runaway_register(const DbgateChain *c, const DbgateLimits *l);

/*
 * The statement path (slot.c): the deadline of the statement of query id
 * 'queryid' (dbgate_statement_queryid()) that starts its outermost run at
 * 'start' under the slot of chain c with limits l (l->runaway_after_ms >
 * 0; slot.c's, always the same two), or 0 when that statement has already
 * run away.  Remembers what the timer's handler
 * will record.  Inline: it is on the path of every statement of such a
 * budget.
 */
static inline TimestampTz
dbgate_runaway_prepare(TimestampTz start, const DbgateChain *c,
					   const DbgateLimits *l, uint64 queryid)
{
	DbgateRunawayArmed *a = &dbgate_runaway_armed;

	if (unlikely(start == a->fired_start))
		return 0;				/* this statement ran away already */
	if (unlikely(a->chain == NULL))
		dbgate_runaway_register(c, l);
	Assert(a->chain == c && a->lim == l);
	a->queryid = queryid;
	a->start = start;
	dbgate_runaway_cancel_fired = false;
	return TimestampTzPlusMilliseconds(start, l->runaway_after_ms);
}

/*
 * After the run ended normally with the runaway timer disarmed: a cancel
 * that fired and was not noticed yet is raised now (dbgate_run_end(),
 * slot.c, once everything else of the run is undone).
 */
extern void dbgate_runaway_report_cancel(void);

/*
 * In the PG_CATCH of a run that armed the timer (dbgate.c), after the
 * run's limits were undone: if the error is the cancel that the runaway
 * timer asked for, throw it again with the message that names the budget.
 * Returns if not.
 */
extern void dbgate_runaway_rethrow(void);

/* The runaway worker: registered by _PG_init (dbgate.c). */
extern void dbgate_runaway_register_worker(void);
extern PGDLLEXPORT void dbgate_runaway_worker_main(Datum arg);

#endif							/* DBGATE_RUNAWAY_H */
