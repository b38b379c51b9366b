/*-------------------------------------------------------------------------
 *
 * timeouts.c
 *	  A budget's statement_timeout and lock_timeout for admitted statements.
 *
 * Both limits only tighten: the effective value is the smaller non-zero one
 * of the session's and the budget's.  They are applied around the outermost
 * ExecutorRun and ExecutorFinish of an executor run that holds a slot (that
 * is where statements spend their time and wait for row, transaction and
 * relation locks), and undone when that call returns, normally or by error
 * (the caller's PG_CATCH runs before any (sub)transaction abort).
 *
 * statement_timeout
 *	  The deadline is the budget's statement_timeout counted from admission,
 *	  or, for a later statement that runs under a slot already held (a FETCH
 *	  or CLOSE of an open cursor, another Execute message for a portal, a
 *	  statement of a DO block or procedure), from that statement's start
 *	  (the caller's: slot.c, "Clocks").  While the outermost run is in
 *	  progress, PostgreSQL's own STATEMENT_TIMEOUT timer is set to the
 *	  earlier of that deadline and the session's own timer, if one is
 *	  running, so that expiry produces PostgreSQL's own error (57014,
 *	  "canceling statement due to statement timeout").  Afterwards the
 *	  session's timer is put back exactly as it was, or disarmed if there
 *	  was none: no timer is left armed while the backend waits for the
 *	  client, and the protocol code (which arms and disarms the session's
 *	  timer per message) never sees ours.
 *
 *	  A fast-path function call (slot.c) gets the same deadline, counted
 *	  from its admission, on the same timer, which postgres.c disarms when
 *	  the call's message has been processed.
 *
 * runaway_after (1.3)
 *	  The runaway timer of runaway.c is armed here with the statement
 *	  timer, from the same start, by one enable_timeouts() (one clock read,
 *	  at most one setitimer), and disarmed with it by one
 *	  disable_timeouts() (which needs no setitimer: timeout.c leaves a
 *	  pending alarm to fire into nothing).  A cancel that it asked for and
 *	  that no interrupt check noticed before the run ended is raised once
 *	  the run's limits are undone, as the statement timer's is
 *	  (dbgate_run_end()).
 *
 * lock_timeout
 *	  The lock manager reads the variable behind the lock_timeout GUC when a
 *	  lock wait starts, so the gate sets that variable for the run and puts
 *	  the session's value back afterwards, without the GUC machinery and
 *	  keeping what the statement itself does to the setting (gucvar.c).
 *
 * idle_in_transaction_timeout
 *	  While a slot is kept between statements of a transaction (see
 *	  slot.c) and the session waits for its client, the budget's
 *	  idle_in_transaction_timeout ends the session exactly as PostgreSQL's
 *	  own idle_in_transaction_session_timeout does (FATAL 25P03, through
 *	  ProcessInterrupts).  The gate arms a timer of its own when a statement
 *	  ends under a kept slot and disarms it when the next one starts (any
 *	  executor run, any utility command) or the slot is returned.  When it
 *	  fires and the backend is idle in a transaction (pg_stat_activity's
 *	  state, which the backend reports before it waits for its client), it
 *	  raises PostgreSQL's own idle-in-transaction interrupt; when the
 *	  backend is busy (a DO block still running after a write, say), it
 *	  does nothing and the end of that statement arms the timer again.  The
 *	  session's setting is never touched until the session is ended, so SHOW
 *	  and current_setting() show the session's own value and a SET of it
 *	  keeps its meaning; a session whose own timeout is tighter is ended by
 *	  that one (the gate does not arm then).  With track_activities off the
 *	  backend's state is unknown, and the timer ends nothing.  Besides a
 *	  kept slot, a slot held by a portal that stays open (a cursor between
 *	  FETCHes, a portal of the extended protocol fetched in parts) is
 *	  bounded the same way inside a transaction block.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "storage/proc.h"
#include "utils/guc.h"
#include "utils/backend_status.h"
#include "utils/timeout.h"
#include "utils/timestamp.h"

#include "compat.h"
#include "gucvar.h"
#include "runaway.h"
#include "timeouts.h"

static struct config_generic *lock_timeout_rec = NULL;

void
dbgate_limits_apply(DbgateLimitState *st, TimestampTz start,
					int statement_timeout_ms, int lock_timeout_ms,
					TimestampTz runaway_at)
{
	st->stmt_armed = false;
	st->stmt_had_session = false;
	st->runaway_armed = false;
	st->lock.applied = false;

	if (statement_timeout_ms > 0)
	{
		TimestampTz ours = TimestampTzPlusMilliseconds(start,
													   statement_timeout_ms);

		if (get_timeout_active(STATEMENT_TIMEOUT))
		{
			TimestampTz fin = get_timeout_finish_time(STATEMENT_TIMEOUT);

			if (fin > ours)
			{
				st->stmt_had_session = true;
				st->stmt_session_fin = fin;
				st->stmt_armed = true;
			}
		}
		else
			st->stmt_armed = true;
		if (st->stmt_armed)
			st->stmt_our_fin = ours;
	}

	/* a deadline in the past fires at once */
	if (unlikely(runaway_at != 0))
	{
		if (st->stmt_armed)
		{
			/* both timers with one clock read and at most one setitimer */
			EnableTimeoutParams p[2];

			p[0].id = STATEMENT_TIMEOUT;
			p[0].type = TMPARAM_AT;
			p[0].delay_ms = 0;
			p[0].fin_time = st->stmt_our_fin;
			p[1].id = dbgate_runaway_timeout_id;
			p[1].type = TMPARAM_AT;
			p[1].delay_ms = 0;
			p[1].fin_time = runaway_at;
			enable_timeouts(p, 2);
		}
		else
			enable_timeout_at(dbgate_runaway_timeout_id, runaway_at);
		st->runaway_armed = true;
	}
	else if (st->stmt_armed)
		enable_timeout_at(STATEMENT_TIMEOUT, st->stmt_our_fin);

	if (lock_timeout_ms > 0 && (LockTimeout == 0 || LockTimeout > lock_timeout_ms))
	{
		if (lock_timeout_rec == NULL)
			lock_timeout_rec = dbgate_find_guc("lock_timeout");
		if (lock_timeout_rec != NULL)
			dbgate_guc_override_apply(&st->lock, lock_timeout_rec,
									  &LockTimeout, lock_timeout_ms);
	}

	st->applied = st->stmt_armed || st->runaway_armed || st->lock.applied;
}

/*
 * dbgate_limits_apply() for a fast-path function call (slot.c), which no
 * hook wraps: PostgreSQL's STATEMENT_TIMEOUT timer is set as for a run,
 * and left to postgres.c, which disarms it when it has processed the
 * call's message (finish_xact_command()) or on error, as it does the
 * session's own.  dbgate_limits_restore() then only puts lock_timeout
 * back.
 */
void
dbgate_limits_apply_call(DbgateLimitState *st, TimestampTz start,
						 int statement_timeout_ms, int lock_timeout_ms)
{
	dbgate_limits_apply(st, start, statement_timeout_ms, lock_timeout_ms, 0);
	st->stmt_armed = false;
	st->applied = st->lock.applied;
}

/*
 * Undo dbgate_limits_apply().  Returns true when the budget's statement
 * timer fired and the run ended without error before the cancel was
 * noticed, or the runaway timer asked for a cancel that nothing noticed
 * yet: the caller reports it with dbgate_runaway_report_cancel() and
 * CHECK_FOR_INTERRUPTS() once it has undone everything else of the run (an
 * ERROR from here would skip that).
 */
bool
dbgate_limits_restore(DbgateLimitState *st, bool is_error)
{
	bool		fired = false;

	if (unlikely(st->runaway_armed))
	{
		/*
		 * The runaway timer goes first (with the statement timer, if that
		 * is to be disarmed too: one call); if it fired, runaway.c has its
		 * facts, and a cancel it asked for is reported below.
		 */
		DisableTimeoutParams d[2];
		int			n = 0;
		TimeoutId	id = dbgate_runaway_timeout_id;

		if (get_timeout_active(id))
		{
			d[n].id = id;
			d[n].keep_indicator = false;
			n++;
		}
		if (st->stmt_armed && !st->stmt_had_session &&
			get_timeout_active(STATEMENT_TIMEOUT) &&
			get_timeout_finish_time(STATEMENT_TIMEOUT) == st->stmt_our_fin)
		{
			d[n].id = STATEMENT_TIMEOUT;
			d[n].keep_indicator = false;
			n++;
			st->stmt_armed = false;
		}
		if (n == 1)
			disable_timeout(d[0].id, false);
		else if (n == 2)
			disable_timeouts(d, 2);
		st->runaway_armed = false;
	}

	if (st->stmt_armed)
	{
		/*
		 * Only touch the timer if it is still ours; if it fired, the cancel
		 * it requested is pending and must be reported.
		 */
		if (get_timeout_active(STATEMENT_TIMEOUT) &&
			get_timeout_finish_time(STATEMENT_TIMEOUT) == st->stmt_our_fin)
		{
			if (st->stmt_had_session)
				enable_timeout_at(STATEMENT_TIMEOUT, st->stmt_session_fin);
			else
				disable_timeout(STATEMENT_TIMEOUT, false);
		}
		else if (!get_timeout_active(STATEMENT_TIMEOUT))
		{
			/*
			 * Ours fired.  On error, its error is being thrown (or another
			 * one); if a handler catches it (an exception block of a DO
			 * block), the rest of the statement still runs under the
			 * session's own timer.  Without error the run ended before the
			 * cancel was noticed: the caller reports it now, in this
			 * statement, rather than leave it pending for whatever comes
			 * next.
			 */
			if (is_error)
			{
				if (st->stmt_had_session)
					enable_timeout_at(STATEMENT_TIMEOUT, st->stmt_session_fin);
			}
			else
				fired = true;
		}
		st->stmt_armed = false;
	}

	if (st->lock.applied)
		dbgate_guc_override_restore(&st->lock);

	st->applied = false;

	/* the runaway's cancel too (runaway.c), reported as the timer's */
	if (unlikely(dbgate_runaway_cancel_fired) && !is_error)
		fired = true;
	return fired;
}

/* ----------
 * idle_in_transaction_timeout
 * ----------
 */
static TimeoutId idle_timeout_id = MAX_TIMEOUTS;	/* registered at first use */
static bool idle_armed = false;
static volatile int idle_ms;	/* the budget's value while armed */
static volatile sig_atomic_t idle_fired = false;	/* ours ended the session */

/* Is the backend waiting for its client inside a transaction? */
static bool
idle_in_transaction(void)
{
	volatile PgBackendStatus *be = MyBEEntry;

	if (be == NULL || be->st_state == STATE_DISABLED)
		return false;			/* not tracked: never end a session that may run */
	return be->st_state == STATE_IDLEINTRANSACTION ||
		be->st_state == STATE_IDLEINTRANSACTION_ABORTED;
}

/* The timer's handler (signal context: sets flags only). */
static void
idle_timeout_handler(void)
{
	if (!idle_in_transaction())
		return;
	/* ProcessInterrupts ends the session only while this is set */
	if (IdleInTransactionSessionTimeout == 0 ||
		IdleInTransactionSessionTimeout > idle_ms)
		IdleInTransactionSessionTimeout = idle_ms;
	idle_fired = true;
	IdleInTransactionSessionTimeoutPending = true;
	InterruptPending = true;
	SetLatch(MyLatch);
}

void
dbgate_idle_timeout_arm(int idle_timeout_ms)
{
	/* the session's own timeout is tighter: it ends the session first */
	if (IdleInTransactionSessionTimeout > 0 &&
		IdleInTransactionSessionTimeout <= idle_timeout_ms)
	{
		dbgate_idle_timeout_disarm();
		return;
	}
	if (idle_timeout_id == MAX_TIMEOUTS)
		idle_timeout_id = RegisterTimeout(USER_TIMEOUT, idle_timeout_handler);
	idle_ms = idle_timeout_ms;
	enable_timeout_after(idle_timeout_id, idle_timeout_ms);
	idle_armed = true;
}

void
dbgate_idle_timeout_disarm(void)
{
	if (likely(!idle_armed))
		return;
	disable_timeout(idle_timeout_id, false);
	idle_armed = false;
}

bool
dbgate_idle_timeout_fired(void)
{
	return idle_fired;
}
