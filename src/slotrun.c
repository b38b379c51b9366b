/*-------------------------------------------------------------------------
 *
 * slotrun.c
 *	  This backend's slot and the executor: the work of the executor hooks
 *	  (ExecutorStart gates a run that starts with no slot held, a run
 *	  begins and ends under the slot's limits, ExecutorEnd drops its
 *	  reference), and the clocks that the budget's statement_timeout and
 *	  runaway_after count from.
 *
 * One of the files of this backend's slot (slot_internals.h; slot.c's
 * header has the rules: the states, the references, what is gated and
 * the clocks).  The statement path: dbgate.c's executor hooks call here
 * for every statement; the state machine is slot.c's, the gate gate.c's.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "executor/executor.h"
#include "miscadmin.h"
#include "tcop/pquery.h"
#include "utils/portal.h"

#include "admission.h"
#include "classify.h"
#include "compat.h"
#include "demote.h"
#include "memgrant.h"
#include "mincost.h"
#include "queryid.h"
#include "runaway.h"
#include "shmem.h"
#include "slot.h"
#include "slot_internals.h"
#include "timeouts.h"

/* Clocks: the last outermost ExecutorRun inside a block, with its start */
static const QueryDesc *block_run = NULL;
static TimestampTz block_run_start = 0;

/*
 * Does the active portal have statements left to run after pstmt (the
 * actions of a rule, run one by one by PortalRunMulti)?
 */
static inline bool
portal_continues(const PlannedStmt *pstmt)
{
	Portal		p = ActivePortal;

	return p != NULL && list_length(p->stmts) > 1 && pstmt != NULL &&
		(const PlannedStmt *) llast(p->stmts) != pstmt &&
		list_member_ptr(p->stmts, pstmt);
}

/* ----------
 * Clocks (see the file header)
 * ----------
 */

/*
 * The start of the clocks of an outermost run inside a DO block or
 * procedure: the admission for the run that took the slot there, the
 * run's ExecutorRun's for its ExecutorFinish, otherwise now.  Apart from
 * run_clock_start(): only blocks come here.
 */
static pg_noinline TimestampTz
block_clock_start(const QueryDesc *queryDesc, bool finish)
{
	TimestampTz start;

	if (finish && queryDesc == block_run)
		start = block_run_start;
	else if (queryDesc == block_taker)
		start = slot_admitted_at;
	else
		start = GetCurrentTimestamp();
	block_taker = NULL;
	if (!finish)
	{
		block_run = queryDesc;
		block_run_start = start;
	}
	/* a slot moved meanwhile counts from the move (demote.c) */
	return Max(slot_admitted_at, start);
}

/*
 * Where the budget's statement_timeout and runaway_after of an outermost
 * run count from (finish: its ExecutorFinish).
 */
static inline TimestampTz
run_clock_start(const QueryDesc *queryDesc, bool finish)
{
	if (unlikely(block_depth > 0))
		return block_clock_start(queryDesc, finish);
	return Max(slot_admitted_at,
			   Max(GetCurrentStatementStartTimestamp(), kept_since));
}

void
dbgate_slot_block_begin(void)
{
	block_depth++;
}

/* The block ended, normally or by error: its runs ended or go on elsewhere. */
void
dbgate_slot_block_end(void)
{
	if (--block_depth == 0)
	{
		block_taker = NULL;
		block_run = NULL;
	}
}

/* ----------
 * Executor hooks' work
 * ----------
 */

/*
 * ExecutorStart: gate the run if this backend holds no slot; a run under
 * a slot already held never queues.
 */
void
dbgate_slot_executor_start(QueryDesc *queryDesc, int eflags)
{
	const DbgateLookup *lk;

	if (eflags & EXEC_FLAG_EXPLAIN_ONLY)
		return;

	if (slot_state != SLOT_NONE)
	{
		/* nested run, another portal, a kept slot, the next rule action */
		if (slot_state != SLOT_RUNNING)
			slot_enter(SLOT_RUNNING, slot_state == SLOT_KEPT ?
					   GetCurrentStatementStartTimestamp() : 0);
		ensure_ref_space();
		add_ref(queryDesc, REF_RUN, queryDesc->plannedstmt);
	}
	else
	{
		if (!dbgate_gating() || !backend_init())
			return;
		if (ActivePortal == NULL && in_commit())
			return;
		lk = dbgate_classify();
		if (lk->budget < 0)
			return;
		/*
		 * quarantine.c: a quarantined query is counted, refused, or gated
		 * by the runaway_budget instead (demote.c)
		 */
		if (unlikely(lk->quarantine))
		{
			gate_quarantined(lk, queryDesc);
			return;
		}
		/* mincost.c: a read cheaper than the budget's min_cost is not gated */
		if (dbgate_mincost_bypass(lk, queryDesc))
			return;
		if (!gate(lk, false, queryDesc))
			return;
		add_ref(queryDesc, REF_RUN, queryDesc->plannedstmt);
	}

	/*
	 * bound: in a transaction block the client may now wait before it asks
	 * for the rows of a statement of its own (Bind without Execute): the
	 * slot is held with nothing running until the run begins, and the idle
	 * timeout counts meanwhile.
	 */
	if (running_refs == 0 && IsTransactionBlock() &&
		portal_statement(queryDesc->plannedstmt))
		slot_enter(SLOT_OPEN, 0);
}

/*
 * ExecutorRun/ExecutorFinish begin.  Returns true when budget limits were
 * applied (or a memory grant's work_mem, memgrant.c); the caller must then
 * call dbgate_run_end() on every exit, including errors.  Without limits
 * dbgate_run_end() is still needed on normal exit to mark the run finished
 * (on error the mark stays, which is how a subtransaction abort recognises
 * a run that died in it).
 */
bool
dbgate_run_begin(QueryDesc *queryDesc, DbgateLimitState *st, bool finish)
{
	int			i;
	bool		outermost;
	SubTransactionId sub;

	st->tracked = false;
	st->applied = false;
	if (likely(dbgate_nrefs == 0))
		return false;
	i = find_ref(queryDesc);
	if (i < 0 || refs[i].run_subid != InvalidSubTransactionId)
		return false;

	if (slot_state == SLOT_OPEN && running_refs == 0)
		slot_enter(SLOT_RUNNING, 0);	/* a bound statement runs */

	sub = GetCurrentSubTransactionId();
	if (!dbgate_slot_has_limits)
	{
		/*
		 * Without limits to apply, a run only needs marking when it could
		 * die in a subtransaction other than the one it was started in (a
		 * FETCH or CLOSE inside a savepoint): an abort of its own
		 * subtransaction drops the reference anyway.
		 */
		if (refs[i].create_subid != sub)
		{
			refs[i].run_subid = sub;
			running_refs++;
			st->tracked = true;
		}
		return false;
	}

	outermost = (running_refs == 0);
	refs[i].run_subid = sub;
	running_refs++;
	st->tracked = true;

	if (outermost && slot_state != SLOT_RUNNING && slot_state != SLOT_NONE)
		slot_enter(SLOT_RUNNING, GetCurrentStatementStartTimestamp());	/* resumed */
	if (outermost && slot_state != SLOT_NONE &&
		(slot_limits.limit_flags & DBGATE_LIM_RUN))
	{
		/*
		 * The budget's statement_timeout and runaway_after count from
		 * admission, or from the start of a later statement that runs under
		 * the slot already held (the file header's "Clocks").
		 */
		TimestampTz base;
		TimestampTz runaway_at = 0;

		/* demote.c: a moved slot runs its next run under the target's limits */
		if (unlikely(slot_limits.runaway_demote))
			slot_adopt();
		base = run_clock_start(queryDesc, finish);

		/*
		 * runaway.c: 0 for a statement that ran away already; the handler
		 * records the query id the statement had at its start (queryid.h)
		 */
		if (unlikely(slot_limits.runaway_after_ms > 0))
			runaway_at = dbgate_runaway_prepare(base, &slot_chain, &slot_limits,
												dbgate_statement_queryid(refs[i].command_queryid,
																		 refs[i].pstmt));
		dbgate_limits_apply(st, base, slot_limits.statement_timeout_ms,
							slot_limits.lock_timeout_ms, runaway_at);
	}

	/*
	 * memgrant.c: a run with a memory grant runs at its work_mem (a slot
	 * of a budget with max_memory_mb counts as one with limits).
	 */
	st->mem.entered = false;
	if (unlikely(dbgate_memgrant_nrecs > 0))
	{
		if (!st->applied)
		{
			st->stmt_armed = false;
			st->lock.applied = false;
		}
		dbgate_memgrant_enter(queryDesc, &st->mem);
		st->applied |= st->mem.entered;
	}
	return st->applied;
}

void
dbgate_run_end(QueryDesc *queryDesc, DbgateLimitState *st, bool is_error)
{
	bool		fired = false;

	if (st->applied)
	{
		fired = dbgate_limits_restore(st, is_error);
		/* memgrant.c */
		if (st->mem.entered)
			dbgate_memgrant_leave(queryDesc, &st->mem, is_error);
	}
	if (st->tracked && !is_error)
	{
		int			i = find_ref(queryDesc);

		if (i >= 0 && refs[i].run_subid != InvalidSubTransactionId)
		{
			refs[i].run_subid = InvalidSubTransactionId;
			running_refs--;

			/*
			 * paused: the run of a portal that stays open ended; the session
			 * may now wait for its client while the portal holds the slot
			 * (not while a fast-path call whose query this was still runs).
			 */
			if (running_refs == 0 && slot_state == SLOT_RUNNING &&
				slot_limits.idle_timeout_ms > 0 && IsTransactionBlock() &&
				!call_running)
				slot_enter(SLOT_OPEN, GetCurrentTimestamp());
		}
	}
	/*
	 * The budget's statement timeout fired, or the runaway timer asked for
	 * a cancel (runaway.c: raised with its own message): the cancel, now
	 * that all is undone.
	 */
	if (fired)
	{
		dbgate_runaway_report_cancel();
		CHECK_FOR_INTERRUPTS();
	}
}

/*
 * ExecutorEnd (after the executor has shut down): drop the reference; with
 * the last one the scope rule decides about the slot, unless the portal
 * has statements left to run under it.
 */
void
dbgate_slot_executor_end(QueryDesc *queryDesc)
{
	PlannedStmt *pstmt;
	int			i;

	i = find_ref(queryDesc);
	if (i < 0)
		return;
	/* clocks: a run of a block ends (its descriptor's memory may be reused) */
	if (unlikely(block_depth > 0))
	{
		if (queryDesc == block_taker)
			block_taker = NULL;
		if (queryDesc == block_run)
			block_run = NULL;
	}
	pstmt = refs[i].pstmt;
	remove_ref(i);
	portal_statement_done(pstmt);
	if (dbgate_nrefs > 0)
		return;
	if (unlikely(portal_continues(pstmt)))
	{
		/* one admission for the whole portal: hold the slot for the next */
		add_ref(ActivePortal, REF_PORTAL, NULL);
		return;
	}
	slot_unreferenced();
}
