/*-------------------------------------------------------------------------
 *
 * timeouts.h
 *	  A budget's statement_timeout, lock_timeout and
 *	  idle_in_transaction_timeout, and the timer of its runaway_after
 *	  (timeouts.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef DBGATE_TIMEOUTS_H
#define DBGATE_TIMEOUTS_H

#include "utils/timestamp.h"

#include "gucvar.h"
#include "memgrant.h"

/* What an ExecutorRun or ExecutorFinish under a slot applied (slot.c). */
typedef struct DbgateLimitState
{
	bool		tracked;		/* the run is a reference of our slot */
	bool		applied;		/* budget limits were applied */
	bool		stmt_armed;		/* we set STATEMENT_TIMEOUT */
	bool		stmt_had_session;	/* a session timer was active before */
	TimestampTz stmt_session_fin;	/* its finish time */
	TimestampTz stmt_our_fin;	/* the finish time we set */
	bool		runaway_armed;	/* we set the runaway timer (runaway.c) */
	DbgateGucOverride lock;		/* lock_timeout */
	DbgateMemStretch mem;		/* memgrant.c: the run's work_mem */
} DbgateLimitState;

extern void dbgate_limits_apply(DbgateLimitState *st, TimestampTz start,
								int statement_timeout_ms, int lock_timeout_ms,
								TimestampTz runaway_at);
extern void dbgate_limits_apply_call(DbgateLimitState *st, TimestampTz start,
									 int statement_timeout_ms,
									 int lock_timeout_ms);
extern bool dbgate_limits_restore(DbgateLimitState *st, bool is_error);
extern void dbgate_idle_timeout_arm(int idle_timeout_ms);
extern void dbgate_idle_timeout_disarm(void);
extern bool dbgate_idle_timeout_fired(void);

#endif							/* DBGATE_TIMEOUTS_H */
