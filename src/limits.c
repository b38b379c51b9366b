/*-------------------------------------------------------------------------
 *
 * limits.c
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
 *	  or CLOSE of an open cursor, another Execute message for a portal),
 *	  from that statement's start.  While the outermost run is in progress,
 *	  PostgreSQL's own STATEMENT_TIMEOUT timer is set to the earlier of that
 *	  deadline and the session's own timer, if one is running, so that
 *	  expiry produces PostgreSQL's own error (57014, "canceling statement due
 *	  to statement timeout").  Afterwards the session's timer is put back
 *	  exactly as it was, or disarmed if there was none: no timer is left
 *	  armed while the backend waits for the client, and the protocol code
 *	  (which arms and disarms the session's timer per message) never sees
 *	  ours.
 *
 * lock_timeout
 *	  The lock manager reads the variable behind the lock_timeout GUC when a
 *	  lock wait starts, so the gate sets that variable for the run and puts
 *	  the session's value back afterwards, without the GUC machinery and
 *	  keeping what the statement itself does to the setting (gucvar.c).
 *
 * idle_in_transaction_timeout
 *	  While a slot is kept between statements of a transaction (see
 *	  admission.c), PostgreSQL's own idle_in_transaction_session_timeout is
 *	  tightened to the budget's value: PostgresMain arms its timer from the
 *	  variable when it goes idle in a transaction and ends the session with
 *	  its own FATAL (25P03) when it fires, so the gate sets the variable
 *	  while the slot is kept and puts the session's value back as soon as
 *	  anything runs (ExecutorStart, any utility command such as SHOW or
 *	  SET) and when the slot is returned.  No GUC machinery is involved;
 *	  the value is put back only if it is still the gate's (a reload of the
 *	  configuration file may have replaced it, and then that value stays).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "storage/proc.h"
#include "utils/guc.h"
#include "utils/timeout.h"
#include "utils/timestamp.h"

#include "compat.h"
#include "dbgate.h"

static struct config_generic *lock_timeout_rec = NULL;

void
dbgate_limits_apply(DbgateLimitState *st, TimestampTz start,
					int statement_timeout_ms, int lock_timeout_ms)
{
	st->stmt_armed = false;
	st->stmt_had_session = false;
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
		{
			/* a deadline in the past fires at once */
			st->stmt_our_fin = ours;
			enable_timeout_at(STATEMENT_TIMEOUT, ours);
		}
	}

	if (lock_timeout_ms > 0 && (LockTimeout == 0 || LockTimeout > lock_timeout_ms))
	{
		if (lock_timeout_rec == NULL)
			lock_timeout_rec = dbgate_find_guc("lock_timeout");
		if (lock_timeout_rec != NULL)
			dbgate_guc_override_apply(&st->lock, lock_timeout_rec,
									  &LockTimeout, lock_timeout_ms);
	}

	st->applied = st->stmt_armed || st->lock.applied;
}

/*
 * Undo dbgate_limits_apply().
 */
void
dbgate_limits_restore(DbgateLimitState *st, bool is_error)
{
	bool		fired = false;

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
			 * cancel was noticed: report it now, in this statement, rather
			 * than leave it pending for whatever comes next.
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

	if (fired)
		CHECK_FOR_INTERRUPTS();
}

/* ----------
 * idle_in_transaction_timeout
 * ----------
 */
static bool idle_applied = false;
static int	idle_ours;			/* the value the gate set */
static int	idle_session;		/* the session's value before */

void
dbgate_idle_timeout_apply(int idle_timeout_ms)
{
	if (idle_applied)
	{
		if (IdleInTransactionSessionTimeout == idle_ours)
			return;
		/* replaced meanwhile: start again from the new value */
		idle_applied = false;
	}
	if (IdleInTransactionSessionTimeout != 0 &&
		IdleInTransactionSessionTimeout <= idle_timeout_ms)
		return;					/* the session's own is tighter */
	idle_session = IdleInTransactionSessionTimeout;
	idle_ours = idle_timeout_ms;
	IdleInTransactionSessionTimeout = idle_timeout_ms;
	idle_applied = true;
}

void
dbgate_idle_timeout_restore(void)
{
	if (likely(!idle_applied))
		return;
	if (IdleInTransactionSessionTimeout == idle_ours)
		IdleInTransactionSessionTimeout = idle_session;
	idle_applied = false;
}

bool
dbgate_idle_timeout_applied(void)
{
	return idle_applied && IdleInTransactionSessionTimeout == idle_ours;
}
