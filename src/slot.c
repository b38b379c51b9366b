/*-------------------------------------------------------------------------
 *
 * slot.c
 *	  The life of a backend's slot, as one state machine: its states and
 *	  their changes, its references, the backend's set-up and exit.
 *
 * The files of the slot: this one (the state machine), slotrun.c (the
 * executor hooks' work and the clocks: the statement path), gate.c (the
 * admission that gives a slot) and slotxact.c (the transaction's edges,
 * utility commands and fast-path calls).  They share slot_internals.h;
 * the rules of all four are here.  slot.c is the lowest of them: it calls
 * none of the other three.
 *
 * A client backend holds at most one slot (of a budget and of each of its
 * ancestors: admission.c).  Where its slot is in its life is slot_state,
 * and every change of it goes through slot_enter(), which also applies
 * what the change means outside the slot's files: the backend's shared entry
 * (admission.c: ACTIVE, HELD or IDLE, since when), the budget's
 * idle_in_transaction_timeout (timeouts.c: armed while the slot is held and
 * nothing runs) and, on the way to NONE, the return of the slot
 * (admission.c).  So "where does a slot change state" is answered by the
 * callers of slot_enter(), all in the slot's files.
 *
 * States
 *	  NONE		no slot (also while a statement waits in a queue: the
 *				shared entry says QUEUED then)
 *	  RUNNING	a slot, and something runs under it: an executor run, a
 *				gated utility command, or the commit that keeps it
 *	  OPEN		a slot that executor runs reference, none of them running:
 *				a portal bound (Bind) and not yet executed, a cursor between
 *				FETCHes, a portal of the extended protocol fetched in parts
 *	  KEPT		a slot that no executor run references, kept to the end of
 *				the transaction by the scope rule
 *
 * Events (the function that handles each)
 *	  admitted	  NONE -> RUNNING	   ExecutorStart, gated utility command,
 *									   fast-path function call
 *	  resumed	  OPEN/KEPT -> RUNNING  ExecutorStart, a utility command or a
 *									   fast-path call under a slot held, the
 *									   outermost ExecutorRun/ExecutorFinish
 *									   of a run
 *	  bound		  RUNNING -> OPEN	   ExecutorStart of a top-level run in
 *									   a transaction block of a budget with
 *									   an idle timeout (Bind may be followed
 *									   by a wait for the client)
 *	  paused	  RUNNING -> OPEN	   the outermost run ends, references
 *									   remain (idle timeout budgets only)
 *	  unreferenced RUNNING/OPEN ->	   the last reference goes: the scope
 *				  KEPT or NONE		   rule decides
 *	  committing  KEPT -> RUNNING	   commit start: the slot stays for the
 *				  or -> NONE		   local flush, or goes at once for a
 *									   commit that waits for a standby
 *	  ended		  any -> NONE		   transaction end, backend exit
 *
 * References
 * ----------
 * Every executor run started while the slot is held, including the one
 * that took it, is a *reference* (SlotRef) keyed by its QueryDesc; so is a
 * gated utility command (from dbgate_utility_begin() to _end(); it
 * survives the transactions that VACUUM runs internally), a fast-path
 * function call (from its admission to the end of its protocol message,
 * see below) and a *portal*
 * whose statements have not all run yet (the actions of a rule: the runs of
 * one portal are one admission, SPEC §4 Classification).  A reference
 * goes away at its ExecutorEnd, when the subtransaction it was started in
 * aborts or the one its run (ExecutorRun/ExecutorFinish) was in aborts
 * (PostgreSQL never calls ExecutorEnd then), or at the end of the
 * top-level transaction.  When the last one goes, the scope rule decides:
 *	  scope 'statement'		return the slot, unless the transaction holds
 *							a transaction ID (it wrote or locked rows, so
 *							others may wait for it): then keep it
 *	  scope 'transaction'	keep it
 * A kept slot is returned when the top-level transaction ends: at
 * XACT_EVENT_COMMIT / PREPARE, after the local WAL flush, or at commit
 * start for a commit that will wait for a synchronous standby (it is
 * waited for without a slot); at abort; at backend exit.  The slot is
 * returned exactly once: slot_enter(NONE) forgets it before it touches
 * shared memory.
 *
 * What is gated
 * -------------
 * Every executor run of a gated session that starts while no slot is
 * held: a statement's own run (in a portal), and also one started while a
 * statement is parsed, planned or bound (functions the planner evaluates,
 * domain checks of bound parameters), which run outside any portal.  Only
 * runs of the commit itself are not gated (a COMMIT never queues):
 * deferred triggers fired by COMMIT or PREPARE TRANSACTION (they run
 * outside any portal, inside a trigger, and before the commit's
 * XACT_EVENT_PRE_COMMIT), and anything after that event.
 *
 * Clocks
 * ------
 * The budget's statement_timeout and runaway_after count from when a
 * statement starts under the slot (dbgate_run_begin(), the outermost
 * ExecutorRun or ExecutorFinish of a run):
 *	  the statement took the slot	its admission
 *	  a client's statement under	its own start: PostgreSQL's
 *	  a slot held before it			statement_timestamp(), or, for a later
 *									statement of the same Query message,
 *									when the one before it left the slot
 *									kept (kept_since)
 *	  a statement of a DO block or	its own start: the clock when its run
 *	  procedure under a slot held	begins (ExecutorFinish goes on with
 *	  before it						its ExecutorRun's)
 * A statement of a DO block or procedure (between dbgate.c's calls of
 * dbgate_slot_block_begin() and _end()) is a statement of its own: it is
 * gated on its own, and each of its runs under the slot held has a clock
 * of its own, where statement_timestamp() is the block's start.  A
 * function's queries are nested in the run of the statement that called
 * it and are part of that statement: only the outermost run is timed.  A
 * statement with a clock of its own has a start no other statement
 * shares, so that the runaway timer (runaway.c), which does not arm again
 * for a start that already ran away, watches every statement that follows
 * a runaway.
 *
 * Fast-path function calls are gated like statements of their own:
 * slotxact.c has how.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/transam.h"
#include "access/xact.h"
#include "executor/executor.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "replication/syncrep.h"
#include "storage/ipc.h"
#include "tcop/pquery.h"
#include "utils/fmgrprotos.h"
#include "utils/memutils.h"
#include "utils/portal.h"

#include "install.h"
#include "admission.h"
#include "classify.h"
#include "compat.h"
#include "demote.h"
#include "memgrant.h"
#include "mincost.h"
#include "quarantine.h"
#include "queryid.h"
#include "runaway.h"
#include "shmem.h"
#include "slot.h"
#include "slot_internals.h"
#include "timeouts.h"
#include "queuewait.h"


/* References (slot_internals.h) */
SlotRef		inline_refs[INLINE_REFS];
SlotRef    *refs = inline_refs;
int			maxrefs = INLINE_REFS;
int			dbgate_nrefs = 0;	/* see slot.h */
int			running_refs = 0;	/* refs with run_subid set */
char		utility_key;
bool		utility_running = false;
const void *portal_ref = NULL;	/* the portal of a REF_PORTAL */

/*
 * A subtransaction started while references exist: a run may then end in
 * a subtransaction other than the one it started in, and ExecutorRun and
 * ExecutorFinish must mark it (see dbgate_run_begin()).
 */
bool		dbgate_refs_span_subxacts = false;

/*
 * ExecutorRun and ExecutorFinish of a run under the slot have work to do:
 * limits to apply, a subtransaction to mark, or the slot is OPEN (set in
 * one place, slot_enter(), and where the two flags above change).
 */
bool		dbgate_run_work = false;

/* the slot: what its admission gave (chain, the budget's limits, when) */
SlotState	slot_state = SLOT_NONE;
DbgateAdmission slot;

bool		dbgate_slot_has_limits = false; /* timeouts to apply */

/*
 * Clocks (see the file header).  block_depth: DO blocks and CALLs in
 * progress.  kept_since: when the slot last became KEPT.  Inside a block:
 * the run that took the slot there (its clock counts from the admission;
 * NULL once an outermost run has begun, or when it ends); the last
 * outermost ExecutorRun with its start are slotrun.c's.
 */
int			block_depth = 0;
TimestampTz kept_since = 0;
const QueryDesc *block_taker = NULL;

/*
 * Between XACT_EVENT_PRE_COMMIT (or PRE_PREPARE) and the transaction's end
 * (set by dbgate.c's transaction callback).
 */
bool		dbgate_xact_committing = false;

/*
 * The transaction's end has work to do here: a slot is held, references
 * exist, or their array grew (dbgate.c looks before it calls in).
 */
bool		dbgate_slot_busy = false;

/* Per-backend set-up: -1 not yet, 0 never gated, 1 a client backend. */
int			gateable = -1;

/* A fast-path function call runs under the slot (slotxact.c) */
bool		call_running = false;

/* ----------
 * The state machine
 * ----------
 */

/* The slot goes back (slot_enter(SLOT_NONE) has forgotten it). */
static pg_attribute_always_inline void
slot_return(void)
{
	/*
	 * The backend exits because the budget's idle timeout ended it (the
	 * transaction is aborted here, or in an exit callback that runs before
	 * ours, such as the one that drops temporary tables; whether the FATAL
	 * was logged does not matter).
	 */
	if (unlikely(proc_exit_inprogress) && dbgate_idle_timeout_fired())
		dbgate_admission_count_terminated_idle(&slot_chain);
	/* memgrant.c: the slot's memory grants go with it */
	if (unlikely(dbgate_memgrant_slot))
		dbgate_memgrant_slot_released();
	dbgate_admission_return(&slot_chain, slot_admitted_at);
}

/*
 * slot_return() of a slot whose release has more to do (DBGATE_LIM_RELEASE):
 * a slot that may have been moved is returned where it is now, and no
 * move starts any more (demote.c); a statement of an adapting budget is
 * counted for adapt.c (install.c applies what it computes).
 */
static pg_attribute_always_inline void
slot_return_more(void)
{
	if (slot_limits.runaway_demote)
		dbgate_demote_close(&slot);
	slot_return();
	if (slot_limits.adapt_chain)
		dbgate_admission_adapt_released(&slot_chain, slot_admitted_at);
}

/*
 * Move the slot to state 'to' and apply what that means outside this file.
 * 'since' is the time the new state starts for dbgate.backends, or 0 to
 * leave the shown time as it is (a statement bound and then run).
 */
void
slot_enter(SlotState to, TimestampTz since)
{
	SlotState	from = slot_state;
	bool		idle_timer = (slot_limits.idle_timeout_ms > 0);

	switch (to)
	{
		case SLOT_NONE:
			if (from == SLOT_NONE)
				return;
			/* forget first: whatever happens below, never release twice */
			slot_state = SLOT_NONE;
			dbgate_slot_has_limits = false;
			block_taker = NULL;
			if (idle_timer)
				dbgate_idle_timeout_disarm();
			if (unlikely(slot_limits.limit_flags & DBGATE_LIM_RELEASE))
				slot_return_more();
			else
				slot_return();
			/* nothing left for the transaction's end */
			if (dbgate_nrefs == 0 && refs == inline_refs && !utility_running)
				dbgate_slot_busy = false;
			dbgate_run_work = dbgate_refs_span_subxacts;
			return;

		case SLOT_RUNNING:
			slot_state = to;
			if (from == SLOT_OPEN || from == SLOT_KEPT)
			{
				dbgate_admission_mark(DBGATE_PROC_ACTIVE, since);
				if (idle_timer)
					dbgate_idle_timeout_disarm();
			}
			if (unlikely(slot_limits.runaway_demote))
				slot_adopt();
			break;

		case SLOT_OPEN:
		case SLOT_KEPT:
			slot_state = to;
			if (from == SLOT_RUNNING)
				dbgate_admission_mark(DBGATE_PROC_HELD, since);
			/* clocks: no statement runs under a kept slot */
			if (to == SLOT_KEPT)
			{
				if (since != 0)
					kept_since = since;
				block_taker = NULL;
			}
			/* demote.c: the statement that was moved has ended */
			if (unlikely(slot_limits.runaway_demote))
				slot_adopt();
			/* (re)start the idle clock */
			if (slot_limits.idle_timeout_ms > 0)
				dbgate_idle_timeout_arm(slot_limits.idle_timeout_ms);
			break;
	}
	set_run_work();
}

/* ----------
 * References (the inline helpers: slot_internals.h)
 * ----------
 */
pg_noinline void
grow_refs(void)
{
	if (refs == inline_refs)
	{
		SlotRef    *n = MemoryContextAlloc(TopMemoryContext,
										   sizeof(SlotRef) * maxrefs * 2);

		memcpy(n, inline_refs, sizeof(SlotRef) * dbgate_nrefs);
		refs = n;
	}
	else
		refs = repalloc(refs, sizeof(SlotRef) * maxrefs * 2);
	maxrefs *= 2;
	dbgate_slot_busy = true;
}

/* ----------
 * Set-up
 * ----------
 */

/*
 * First use in this backend (backend_init(), slot_internals.h): find our
 * shared entry and arrange for the slot to be returned at exit.  The
 * outcome is decided here once: a client backend is gated (or this
 * throws, and the next statement tries again), every other process never
 * is.
 */
pg_noinline bool
backend_init_slow(void)
{
	int			procno;

	if (dbgate_shared == NULL || !dbgate_is_client_backend() || MyProc == NULL)
	{
		gateable = 0;
		return false;
	}
	procno = DBGATE_MY_PROCNO();
	if (procno < 0 || procno >= dbgate_shared->max_procs)
		elog(ERROR, "proc number %d is out of range 0..%d",
			 procno, dbgate_shared->max_procs - 1);

	/* fails only with FATAL (too many exit callbacks): never fails open */
	before_shmem_exit(backend_exit, (Datum) 0);
	dbgate_admission_attach(procno);
	gateable = 1;
	return true;
}

/*
 * Backend exit (before_shmem_exit, so before ProcKill recycles our PGPROC):
 * leave a queue, return the slot (slot_enter() counts a session ended by
 * the budget's idle_in_transaction_timeout).
 */
void
backend_exit(int code, Datum arg)
{
	dbgate_admission_leave_queue();
	dbgate_nrefs = 0;
	running_refs = 0;
	utility_running = false;
	call_running = false;
	slot_enter(SLOT_NONE, 0);
}
