/*-------------------------------------------------------------------------
 *
 * slotxact.c
 *	  This backend's slot at the edges of the executor: subtransactions,
 *	  the commit and the transaction's end, utility commands, fast-path
 *	  function calls, and the backend's exit.
 *
 * One of the files of this backend's slot (slot_internals.h; slot.c's
 * header has the rules, and the states and references they change).
 * dbgate.c's transaction callbacks and ProcessUtility and object access
 * hooks call here; the executor runs are slot.c's.
 *
 * Fast-path function calls
 * ------------------------
 * The protocol's FunctionCall message (libpq's PQfn, which its large-object
 * functions use) calls one function with no query around it: lo_open or
 * lowrite run no executor.  dbgate.c recognises the call where
 * HandleFunctionRequest() invokes the function-execute hook, just before
 * it reads the arguments and calls the function, and the call is then
 * gated like a statement of its own (dbgate_slot_call_start()): admitted,
 * queued or refused with 53300 like an executor run, counted, and run
 * under the budget's statement_timeout and lock_timeout; queries that the
 * function runs run under its slot.  The call is a reference until its
 * message has been processed, which PostgresMain marks by resetting
 * MessageContext before it tells the client that it is ready (a reset
 * callback ends the reference there); then the scope rule decides.  In
 * an implicit transaction the transaction's end has returned the slot
 * before that; a call that fails is ended by the (sub)transaction abort.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "miscadmin.h"
#include "replication/syncrep.h"
#include "tcop/pquery.h"
#include "tcop/tcopprot.h"
#include "utils/memutils.h"

#include "admission.h"
#include "classify.h"
#include "memgrant.h"
#include "shmem.h"
#include "slot.h"
#include "slot_internals.h"
#include "timeouts.h"

/* A fast-path function call (REF_CALL): see the file header. */
static char call_key;
static bool call_cb_pending = false;	/* its reset callback is registered */
static DbgateLimitState call_limits;	/* its lock_timeout (limits.c) */

static void call_forget(void);

/* Forget every reference (the transaction ended). */
void
drop_all_refs(void)
{
	if (call_running)
		call_forget();
	dbgate_nrefs = 0;
	running_refs = 0;
	portal_ref = NULL;
	dbgate_refs_span_subxacts = false;
	set_run_work();
	if (refs != inline_refs)
	{
		pfree(refs);
		refs = inline_refs;
		maxrefs = INLINE_REFS;
	}
}

/* A subtransaction starts. */
void
dbgate_slot_subxact_start(void)
{
	if (dbgate_nrefs > 0 && !dbgate_refs_span_subxacts)
	{
		dbgate_refs_span_subxacts = true;
		set_run_work();
	}
}

/*
 * Subtransaction abort: drop the references whose runs died in it.  A
 * kept slot stays kept (the transaction goes on).
 */
void
dbgate_slot_subxact_abort(SubTransactionId mySubid)
{
	int			i;

	/* memgrant.c: the grants of the runs that died in it go back */
	if (unlikely(dbgate_memgrant_nrecs > 0))
		dbgate_memgrant_subxact_abort(mySubid);

	if (dbgate_nrefs == 0)
	{
		/*
		 * A statement failed in a savepoint while the slot is kept: the
		 * session goes idle (in an aborted subtransaction) still keeping
		 * it, and the error took every timer away (PostgresMain's error
		 * recovery disables them before the abort): start the idle clock
		 * again.
		 */
		if (unlikely(slot_state != SLOT_NONE))
			slot_enter(SLOT_KEPT, slot_state == SLOT_RUNNING ?
					   GetCurrentTimestamp() : 0);
		return;
	}
	for (i = dbgate_nrefs - 1; i >= 0; i--)
	{
		if (refs[i].kind == REF_UTILITY && utility_running)
			continue;
		if (refs[i].create_subid >= mySubid ||
			(refs[i].run_subid != InvalidSubTransactionId &&
			 refs[i].run_subid >= mySubid))
		{
			if (refs[i].kind == REF_CALL)
				call_forget();
			remove_ref(i);
		}
	}
	if (dbgate_nrefs == 0 && slot_state != SLOT_NONE)
		slot_unreferenced();
}

/*
 * committing: the commit (or prepare) of the top-level transaction starts;
 * its deferred triggers have fired and its portals are closed.  A kept
 * slot stays through the local WAL flush, which is short: returned now, it
 * would admit more work while this transaction still needs the CPU and
 * still locks its rows until the flush is done, and on hot rows that costs
 * more than the flush (docs/design.md, "Why a commit keeps its slot through
 * its flush", has the figures).  A
 * wait for a synchronous standby is a network round trip or longer, and
 * can last as long as the standby is away: where one is configured the
 * slot goes now, for every commit (one that turns out to write no commit
 * record loses nothing by it, and NOTIFY or ON COMMIT actions may still
 * assign a transaction ID after this point), and always for a prepare.
 */
void
dbgate_slot_commit_start(bool prepare)
{
	if (slot_state == SLOT_NONE)
		return;
	if (prepare ||
		(SyncRepRequested() && SyncRepStandbyNames != NULL &&
		 SyncRepStandbyNames[0] != '\0'))
	{
		dbgate_slot_xact_end();
		return;
	}
	/* the session is committing, not waiting for its client */
	slot_enter(SLOT_RUNNING, GetCurrentTimestamp());
}

/*
 * ended: the top-level transaction ends (commit, abort, prepare): no
 * executor run survives it, and no slot does either -- except that of a
 * gated utility command that is still running (VACUUM commits transactions
 * of its own).
 */
void
dbgate_slot_xact_end(void)
{
	if (utility_running)
		return;
	drop_all_refs();
	slot_enter(SLOT_NONE, 0);
	dbgate_slot_busy = false;
}

/*
 * A utility command starts or ends while a slot is held between
 * statements (kept by the scope rule, or by an open cursor): the command
 * runs (the backend shows as active, and waits for locks like one), and
 * the idle timeout counts only after it.  When a top-level command ends
 * inside a transaction block with the slot still held, the session is
 * about to wait for its client holding it.  The command may also be the
 * last statement of a portal that holds the slot (the NOTIFY of a rule).
 */
void
dbgate_slot_utility_start(void)
{
	if (unlikely(slot_state == SLOT_OPEN || slot_state == SLOT_KEPT))
		slot_enter(SLOT_RUNNING, GetCurrentStatementStartTimestamp());
}

void
dbgate_slot_utility_done(PlannedStmt *pstmt, bool toplevel)
{
	if (likely(slot_state == SLOT_NONE))
		return;
	if (unlikely(portal_ref != NULL))
	{
		portal_statement_done(pstmt);
		if (dbgate_nrefs == 0)
		{
			slot_unreferenced();
			return;
		}
	}
	if (!toplevel || running_refs > 0 || utility_running)
		return;
	/* the session is about to wait for its client holding the slot */
	if (dbgate_nrefs == 0)
		slot_enter(SLOT_KEPT, GetCurrentTimestamp());
	else if (IsTransactionBlock())
		slot_enter(SLOT_OPEN, GetCurrentTimestamp());
}

bool
dbgate_utility_begin(void)
{
	if (slot_state != SLOT_NONE || utility_running)
		return false;			/* runs under the slot already held */
	if (!dbgate_gating() || !backend_init())
		return false;
	if (ActivePortal == NULL && in_commit())
		return false;
	if (!gate(dbgate_classify(), true, NULL))
		return false;
	add_ref(&utility_key, REF_UTILITY, NULL);
	utility_running = true;
	return true;
}

void
dbgate_utility_end(void)
{
	int			i;

	if (!utility_running)
		return;
	utility_running = false;
	i = find_ref(&utility_key);
	if (i >= 0)
		remove_ref(i);
	if (dbgate_nrefs == 0 && slot_state != SLOT_NONE)
	{
		/* outside a transaction now (an internal one ended): return it */
		if (!IsTransactionState())
			slot_enter(SLOT_NONE, 0);
		else
			slot_unreferenced();
	}
}

/* ----------
 * Fast-path function calls (see the file header)
 * ----------
 */

/*
 * The call is over: put its lock_timeout back (the statement timer that
 * its statement_timeout set is postgres.c's to disarm, see limits.c).  The
 * caller drops its reference (every place that drops a REF_CALL calls
 * this; remove_ref() does not look, it is on every statement's path).
 */
static void
call_forget(void)
{
	call_running = false;
	if (call_limits.applied)
		(void) dbgate_limits_restore(&call_limits, true);
}

/*
 * MessageContext is being reset: PostgresMain has processed the call's
 * message (or recovered from its error) and is about to tell the client
 * that it is ready.  The reference goes, and the scope rule decides about
 * the slot, as at the ExecutorEnd of a statement's last run.  A reset
 * callback must not fail; nothing here allocates.
 */
static void
call_message_done(void *arg)
{
	int			i;

	call_cb_pending = false;
	if (!call_running)
		return;					/* the transaction's end took the call */
	call_forget();
	i = find_ref(&call_key);
	if (i >= 0)
		remove_ref(i);
	if (slot_state == SLOT_NONE)
		return;
	if (dbgate_nrefs == 0)
		slot_unreferenced();
	else if (running_refs == 0 && IsTransactionBlock())
		slot_enter(SLOT_OPEN, GetCurrentTimestamp());	/* a portal holds it */
}

/*
 * A fast-path function call is about to run (dbgate.c recognised it, in
 * the call's transaction command, with MessageContext current): gate it
 * like an executor run that starts while no slot is held, or run it under
 * a slot kept between statements or held by an open portal.  Inside an
 * admitted call or command it runs under that slot.
 */
void
dbgate_slot_call_start(void)
{
	const DbgateLookup *lk = NULL;
	MemoryContextCallback *cb = NULL;

	if (call_running || utility_running || slot_state == SLOT_RUNNING)
		return;
	if (slot_state == SLOT_NONE)
	{
		if (!dbgate_gating() || !backend_init() || in_commit())
			return;
		lk = dbgate_classify();
		if (lk->budget < 0)
			return;
	}

	/* allocated before the slot is taken: nothing below may fail then */
	if (!call_cb_pending)
		cb = MemoryContextAlloc(MessageContext, sizeof(MemoryContextCallback));
	if (lk != NULL)
	{
		if (!gate(lk, false, NULL))
			return;
	}
	else
	{
		/* resumed */
		ensure_ref_space();
		slot_enter(SLOT_RUNNING, GetCurrentStatementStartTimestamp());
	}
	add_ref(&call_key, REF_CALL, NULL);
	call_running = true;
	if (cb != NULL)
	{
		cb->func = call_message_done;
		cb->arg = NULL;
		MemoryContextRegisterResetCallback(MessageContext, cb);
		call_cb_pending = true;
	}

	/* the budget's statement_timeout counts from admission, as for a run */
	if (slot_limits.statement_timeout_ms > 0 || slot_limits.lock_timeout_ms > 0)
		dbgate_limits_apply_call(&call_limits,
								 Max(slot_admitted_at,
									 GetCurrentStatementStartTimestamp()),
								 slot_limits.statement_timeout_ms,
								 slot_limits.lock_timeout_ms);
}

