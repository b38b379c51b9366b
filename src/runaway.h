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

#include "executor/execdesc.h"
#include "utils/timeout.h"
#include "utils/timestamp.h"

#include "compat.h"
#include "dbgate.h"

/*
 * Set by the runaway timer's handler when it asked for the statement's
 * cancel (action 'cancel'); the error that the cancel raises is rewritten
 * while it is set (dbgate_runaway_rethrow()).
 */
extern volatile sig_atomic_t dbgate_runaway_cancel_fired;

/*
 * The statement path (slot.c): the deadline of the statement that starts
 * its outermost run at 'start' under the slot of chain c with limits l
 * (l->runaway_after_ms > 0), or 0 when that statement has already run
 * away.  Remembers what the timer's handler will record.
 */
extern TimestampTz dbgate_runaway_prepare(TimestampTz start,
										  const DbgateChain *c,
										  const DbgateLimits *l,
										  const QueryDesc *queryDesc);

/*
 * The timer, for timeouts.c to arm: registered by the first
 * dbgate_runaway_prepare() of the backend.
 */
extern TimeoutId dbgate_runaway_timeout_id;

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
