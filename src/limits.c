/*-------------------------------------------------------------------------
 *
 * limits.c
 *	  A budget's statement_timeout and lock_timeout for admitted statements.
 *
 * Both limits only tighten: the effective value is the smaller non-zero one
 * of the session's and the budget's.  They are applied around the outermost
 * ExecutorRun and ExecutorFinish of an executor run that holds a slot (that
 * is where statements spend their time and wait for row, transaction and
 * relation locks), and undone when that call returns, normally or by error.
 *
 * statement_timeout
 *	  The deadline is the budget's statement_timeout counted from admission,
 *	  or, for a later statement that runs under a slot already held (a FETCH
 *	  or CLOSE of an open cursor, another Execute message for a portal),
 *	  from that statement's start.  While the outermost run is in progress, PostgreSQL's
 *	  own STATEMENT_TIMEOUT timer is set to the earlier of that deadline and
 *	  the session's own timer, if one is running, so that expiry produces
 *	  PostgreSQL's own error (57014, "canceling statement due to statement
 *	  timeout").  Afterwards the session's timer is put back exactly as it
 *	  was, or disarmed if there was none: no timer is left armed while the
 *	  backend waits for the client, and the protocol code (which arms and
 *	  disarms the session's timer per message) never sees ours.
 *
 * lock_timeout
 *	  Applied the way PostgreSQL applies a function's SET clause: a new GUC
 *	  nesting level with lock_timeout saved (GUC_ACTION_SAVE), popped when
 *	  the run returns.  An error pops it with the (sub)transaction abort.
 *	  So SHOW lock_timeout after the statement reports the session's value.
 *	  What the statement itself does to lock_timeout keeps its meaning: a
 *	  SET survives it (GUC turns the saved entry into a SET), and a SET LOCAL
 *	  (say set_config(..., true) in a query), which the popped level would
 *	  undo, is applied again at transaction level when the level is popped,
 *	  so that it lasts until the end of the transaction as usual.  The gate
 *	  applies its value with context PGC_SUSET, which a gated (non-superuser)
 *	  role's own SET cannot have: the GUC record's scontext tells whether the
 *	  statement set lock_timeout, even to the very value the gate applied.
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

void
dbgate_limits_apply(DbgateLimitState *st, TimestampTz admitted_at,
					int statement_timeout_ms, int lock_timeout_ms)
{
	st->stmt_armed = false;
	st->stmt_had_session = false;
	st->guc_nestlevel = 0;

	if (statement_timeout_ms > 0)
	{
		TimestampTz ours = TimestampTzPlusMilliseconds(admitted_at,
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
		char		buf[32];

		snprintf(buf, sizeof(buf), "%d", lock_timeout_ms);
		st->guc_nestlevel = NewGUCNestLevel();
		st->lock_ms = lock_timeout_ms;
		(void) set_config_option("lock_timeout", buf, PGC_SUSET,
								 PGC_S_SESSION, GUC_ACTION_SAVE, true, 0,
								 false);
	}

	st->applied = st->stmt_armed || st->guc_nestlevel > 0;
}

/*
 * Undo dbgate_limits_apply().  On error the GUC level is left to the
 * (sub)transaction abort that follows, which pops it.
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

	if (st->guc_nestlevel > 0)
	{
		if (!is_error)
		{
			static struct config_generic *rec = NULL;
			int			inside = LockTimeout;
			bool		touched;

			if (rec == NULL)
				rec = dbgate_find_guc("lock_timeout");
			touched = (inside != st->lock_ms ||
					   (rec != NULL && rec->scontext != PGC_SUSET));

			AtEOXact_GUC(true, st->guc_nestlevel);

			/*
			 * The statement set lock_timeout, and popping our level lost it:
			 * that was a SET LOCAL (a SET would have survived).  Apply it
			 * again for the rest of the transaction.
			 */
			if (touched && LockTimeout != inside)
			{
				char		buf[32];

				snprintf(buf, sizeof(buf), "%d", inside);
				(void) set_config_option("lock_timeout", buf, PGC_USERSET,
										 PGC_S_SESSION, GUC_ACTION_LOCAL,
										 true, 0, false);
			}
		}
		st->guc_nestlevel = 0;
	}
	st->applied = false;

	if (fired)
		CHECK_FOR_INTERRUPTS();
}
