/*-------------------------------------------------------------------------
 *
 * slot.c
 *	  The life of a backend's slot, as one state machine.
 *
 * A client backend holds at most one slot (of a budget and of each of its
 * ancestors: admission.c).  Where its slot is in its life is slot_state,
 * and every change of it goes through slot_enter(), which also applies
 * what the change means outside this file: the backend's shared entry
 * (admission.c: ACTIVE, HELD or IDLE, since when), the budget's
 * idle_in_transaction_timeout (timeouts.c: armed while the slot is held and
 * nothing runs) and, on the way to NONE, the return of the slot
 * (admission.c).  So "where does a slot change state" is answered by the
 * callers of slot_enter(), all in this file.
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

#include "adapt.h"
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
#include "timeouts.h"
#include "waiting.h"

typedef enum SlotState
{
	SLOT_NONE,
	SLOT_RUNNING,
	SLOT_OPEN,
	SLOT_KEPT
} SlotState;

/* What a reference stands for. */
typedef enum RefKind
{
	REF_RUN,					/* an executor run (key: its QueryDesc) */
	REF_UTILITY,				/* a gated utility command */
	REF_CALL,					/* a fast-path function call */
	REF_PORTAL					/* a portal with statements still to run */
} RefKind;

typedef struct SlotRef
{
	const void *key;			/* QueryDesc, Portal, or &utility_key */
	RefKind		kind;
	PlannedStmt *pstmt;			/* REF_RUN: the statement as started */
	uint64		command_queryid;	/* REF_RUN: the command it started in
									 * (queryid.h) */
	SubTransactionId create_subid;	/* subxact of its start */
	SubTransactionId run_subid; /* subxact of the ExecutorRun/Finish in
								 * progress, or InvalidSubTransactionId */
} SlotRef;

#define INLINE_REFS 8

static SlotRef inline_refs[INLINE_REFS];
static SlotRef *refs = inline_refs;
static int	maxrefs = INLINE_REFS;
int			dbgate_nrefs = 0;	/* see slot.h */
static int	running_refs = 0;	/* refs with run_subid set */
static char utility_key;
static bool utility_running = false;
static const void *portal_ref = NULL;	/* the portal of a REF_PORTAL */

/* A fast-path function call (REF_CALL): see the file header. */
static char call_key;
static bool call_running = false;
static bool call_cb_pending = false;	/* its reset callback is registered */
static DbgateLimitState call_limits;	/* its lock_timeout (limits.c) */

static void call_forget(void);

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
static SlotState slot_state = SLOT_NONE;
static DbgateAdmission slot;

#define slot_chain			(slot.chain)
#define slot_admitted_at	(slot.since)
#define slot_limits			(slot.lim)
bool		dbgate_slot_has_limits = false; /* timeouts to apply */

/*
 * Clocks (see the file header).  block_depth: DO blocks and CALLs in
 * progress.  kept_since: when the slot last became KEPT.  Inside a block:
 * the run that took the slot there (its clock counts from the admission;
 * NULL once an outermost run has begun, or when it ends), and the last
 * outermost ExecutorRun with its start.
 */
static int	block_depth = 0;
static TimestampTz kept_since = 0;
static const QueryDesc *block_taker = NULL;
static const QueryDesc *block_run = NULL;
static TimestampTz block_run_start = 0;

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
static int	gateable = -1;

static void backend_exit(int code, Datum arg);

/* ----------
 * The state machine
 * ----------
 */

static inline void
set_run_work(void)
{
	dbgate_run_work = dbgate_slot_has_limits || dbgate_refs_span_subxacts ||
		slot_state == SLOT_OPEN;
}

/*
 * demote.c: the slot was moved (or may have been): its chain and limits
 * as they are now.
 */
static inline void
slot_adopt(void)
{
	if (likely(!(dbgate_demote_my_flags() & (DBGATE_MV_BUSY | DBGATE_MV_DONE))))
		return;
	dbgate_demote_adopt_slow(&slot);
	dbgate_slot_has_limits = ((slot_limits.limit_flags & DBGATE_LIM_SLOT) != 0 ||
							  dbgate_memgrant_slot);
}

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
 * counted (adapt.c).
 */
static pg_attribute_always_inline void
slot_return_more(void)
{
	if (slot_limits.runaway_demote)
		dbgate_demote_close(&slot);
	slot_return();
	if (slot_limits.adapt_chain)
		dbgate_adapt_released(&slot_chain, slot_admitted_at);
}

/*
 * Move the slot to state 'to' and apply what that means outside this file.
 * 'since' is the time the new state starts for dbgate.backends, or 0 to
 * leave the shown time as it is (a statement bound and then run).
 */
static void
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

/*
 * admitted: the admission filled in 'slot' for queryDesc (NULL: a utility
 * command, a fast-path call).  Inline in both callers.
 */
static pg_attribute_always_inline void
slot_admitted(const QueryDesc *queryDesc)
{
	/*
	 * memgrant.c: what the slot's memory grants need (in shadow mode they
	 * are counted, and lower nothing); ExecutorRun and ExecutorFinish then
	 * have work to do (dbgate_run_begin()).
	 */
	if (unlikely(slot_limits.max_memory_mb > 0))
		dbgate_memgrant_slot_taken(&slot_chain, slot_limits.grant_max_active,
								   slot_limits.max_memory_mb,
								   slot_limits.enforce,
								   slot_limits.runaway_demote &&
								   slot_limits.enforce);
	if (!slot_limits.enforce)
	{
		/* shadow mode applies no limit */
		slot_limits.statement_timeout_ms = 0;
		slot_limits.lock_timeout_ms = 0;
		slot_limits.idle_timeout_ms = 0;
		slot_limits.max_memory_mb = 0;
		/* runaway.c: a shadow budget's runaways are only logged */
		slot_limits.runaway_cancel = false;
		slot_limits.runaway_demote = false;
		slot_limits.limit_flags = dbgate_limit_flags(&slot_limits);
	}
	dbgate_slot_has_limits = ((slot_limits.limit_flags & DBGATE_LIM_SLOT) != 0 ||
							  dbgate_memgrant_slot);
	slot_state = SLOT_RUNNING;
	dbgate_slot_busy = true;
	/* no reference yet, so no subtransaction spans one */
	dbgate_run_work = dbgate_slot_has_limits;
	/* clocks: inside a block, this run counts from the admission */
	if (unlikely(block_depth > 0))
		block_taker = queryDesc;
}

/*
 * unreferenced: the last reference went away; keep the slot to the end of
 * the transaction, or return it.
 */
static void
slot_unreferenced(void)
{
	if (slot_limits.scope == DBGATE_SCOPE_TRANSACTION ||
		TransactionIdIsValid(GetTopTransactionIdIfAny()))
		slot_enter(SLOT_KEPT, GetCurrentTimestamp());
	else
		slot_enter(SLOT_NONE, 0);
}

/* ----------
 * References
 * ----------
 */
static pg_noinline void
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

static inline void
ensure_ref_space(void)
{
	if (unlikely(dbgate_nrefs >= maxrefs))
		grow_refs();
}

/* Caller has called ensure_ref_space(). */
static inline void
add_ref(const void *key, RefKind kind, PlannedStmt *pstmt)
{
	SlotRef    *r = &refs[dbgate_nrefs++];

	r->key = key;
	r->kind = kind;
	r->pstmt = pstmt;
	/* queryid.c: a cursor's FETCHes run under its DECLARE's id */
	r->command_queryid = dbgate_command_queryid;
	r->create_subid = GetCurrentSubTransactionId();
	r->run_subid = InvalidSubTransactionId;
	if (kind == REF_PORTAL)
		portal_ref = key;
}

static inline int
find_ref(const void *key)
{
	int			i;

	/* newest first: executor runs mostly end in LIFO order */
	for (i = dbgate_nrefs - 1; i >= 0; i--)
	{
		if (refs[i].key == key)
			return i;
	}
	return -1;
}

static inline void
remove_ref(int i)
{
	if (refs[i].run_subid != InvalidSubTransactionId)
		running_refs--;
	if (refs[i].kind == REF_PORTAL)
		portal_ref = NULL;
	refs[i] = refs[--dbgate_nrefs];
	if (dbgate_nrefs == 0 && dbgate_refs_span_subxacts)
	{
		dbgate_refs_span_subxacts = false;
		set_run_work();
	}
}

/* Forget every reference (the transaction ended). */
static void
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

/* Is pstmt a statement of the active portal itself (not a nested query)? */
static inline bool
portal_statement(const PlannedStmt *pstmt)
{
	Portal		p = ActivePortal;

	return p != NULL && p->stmts != NIL &&
		((const PlannedStmt *) linitial(p->stmts) == pstmt ||
		 list_member_ptr(p->stmts, pstmt));
}

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

/*
 * A statement of the active portal ended: if it was the portal's last one,
 * the portal's reference goes.
 */
static inline void
portal_statement_done(const PlannedStmt *pstmt)
{
	int			i;

	if (likely(portal_ref == NULL) || ActivePortal != portal_ref ||
		ActivePortal->stmts == NIL ||
		(const PlannedStmt *) llast(ActivePortal->stmts) != pstmt)
		return;
	i = find_ref(portal_ref);
	if (i >= 0)
		remove_ref(i);
}

/* ----------
 * Set-up
 * ----------
 */

/*
 * First use in this backend: find our shared entry and arrange for the
 * slot to be returned at exit.  The outcome is decided here once: a client
 * backend is gated (or this throws, and the next statement tries again),
 * every other process never is.
 */
static bool
backend_init(void)
{
	int			procno;

	if (likely(gateable >= 0))
		return gateable == 1;

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
 * Is the run that starts outside any portal part of the commit?  Deferred
 * triggers fired by COMMIT or PREPARE TRANSACTION run outside any portal
 * and inside a trigger; a query that a parse, plan, bind or fast-path call
 * runs is in no trigger until it has been admitted (the triggers of its
 * writes then run under its slot).  After PRE_COMMIT nothing the client
 * sent runs any more.
 */
static bool
in_commit(void)
{
	LOCAL_FCINFO(fcinfo, 0);

	if (dbgate_xact_committing)
		return true;
	InitFunctionCallInfoData(*fcinfo, NULL, 0, InvalidOid, NULL, NULL);
	return DatumGetInt32(pg_trigger_depth(fcinfo)) > 0;
}

/*
 * Lookups of one admission before it goes on ungated.  A retry follows a
 * configuration change that the lookup raced with, and each one needs
 * another change committed meanwhile; this many in a row mean a
 * configuration that admission cannot take (which the install and the
 * classification never leave: budgets.c, classify.c).  Going on ungated,
 * with a WARNING, beats spinning until statement_timeout.
 */
#define GATE_MAX_RETRIES	1000

/* gate() goes on ungated: say so (a function apart keeps gate() small). */
static pg_noinline void
gate_gave_up(int budget, int retries)
{
	char		name[NAMEDATALEN];

	/* read without a lock: a name, for the message only */
	memcpy(name, dbgate_shared->budgets[budget].d.conf.name, NAMEDATALEN);
	name[NAMEDATALEN - 1] = '\0';
	ereport(WARNING,
			(errmsg("dbgate could not admit a statement to budget \"%s\" after %d attempts",
					name, retries),
			 errdetail("The statement runs ungated.")));
}

/*
 * The rest of gate() after an admission found the lookup out of date:
 * look up and admit again, GATE_MAX_RETRIES times at most (apart from
 * gate(), which stays as small as the statement path needs).
 */
static pg_noinline bool
gate_again(int budget, bool utility, QueryDesc *queryDesc)
{
	int			retries;

	for (retries = 1;; retries++)
	{
		const DbgateLookup *lk;
		DbgateAdmit r;

		if (retries >= GATE_MAX_RETRIES)
		{
			gate_gave_up(budget, retries);
			return false;
		}
		dbgate_invalidate_lookup();
		CHECK_FOR_INTERRUPTS();
		lk = dbgate_classify();
		if (lk->budget < 0)
			return false;
		budget = lk->budget;
		ensure_ref_space();
		r = dbgate_admit(lk, utility, queryDesc, &slot);
		if (r == DBGATE_ADMIT_SLOT)
		{
			slot_admitted(queryDesc);
			return true;
		}
		if (r == DBGATE_ADMIT_NONE)
			return false;
	}
}

/*
 * Admit to the budget lk names; a budget replaced between the lookup and
 * the admission is looked up again, so that every statement is gated by
 * the configuration in force.  Returns whether a slot is held.
 */
static pg_noinline bool
gate(const DbgateLookup *lk, bool utility, QueryDesc *queryDesc)
{
	DbgateAdmit r;

	if (lk->budget < 0)
		return false;
	ensure_ref_space();
	r = dbgate_admit(lk, utility, queryDesc, &slot);
	if (likely(r == DBGATE_ADMIT_SLOT))
	{
		slot_admitted(queryDesc);
		return true;
	}
	if (r == DBGATE_ADMIT_NONE)
		return false;
	return gate_again(lk->budget, utility, queryDesc);
}

/*
 * gate_quarantined()'s retry: the admission found the lookup out of date
 * (its budget dropped, replaced, or changed under it), and it is made
 * again.  The quarantine check counts an arrival, so it is made once per
 * budget: for the same budget as before (src) only where its quarantine
 * sends the statement is looked up again (the runaway_budget, when it sent
 * it there: 'demoted'); another budget (src was dropped or replaced, the
 * session's assignment changed) is a new arrival, checked as such.
 * Returns the lookup to admit to (src or tgt), or NULL: not gated.
 */
static pg_noinline const DbgateLookup *
quarantine_lookup_again(QueryDesc *queryDesc, DbgateLookup *src,
						DbgateLookup *tgt, bool demoted)
{
	const DbgateLookup *lk;
	bool		same;

	dbgate_invalidate_lookup();
	CHECK_FOR_INTERRUPTS();
	lk = dbgate_classify();
	if (lk->budget < 0)
		return NULL;
	same = (lk->budget == src->budget && lk->incarnation == src->incarnation);
	*src = *lk;
	if (same)
		return (demoted && dbgate_demote_quarantine_target(src, tgt)) ?
			tgt : src;
	if (!src->quarantine)
		return src;
	return dbgate_quarantine_check(src, queryDesc, tgt);
}

/*
 * ExecutorStart of a statement whose budget has quarantine entries: the
 * quarantine check, then the gate of the budget it names (the statement's
 * own, or the runaway_budget of a 'demote' budget, whose slot then counts
 * as moved: demote.c).  As gate(), with its own retry: a lookup out of
 * date goes back through the quarantine (quarantine_lookup_again()), so
 * that a quarantined statement is never admitted to its own budget as if
 * it had not been checked, nor left uncounted as moved.
 */
static pg_noinline void
gate_quarantined(const DbgateLookup *lk, QueryDesc *queryDesc)
{
	DbgateLookup src = *lk;		/* *lk is the cache, which a retry rewrites */
	DbgateLookup tgt;
	const DbgateLookup *g = dbgate_quarantine_check(&src, queryDesc, &tgt);
	int			retries;

	if (dbgate_mincost_bypass(g, queryDesc))
		return;
	for (retries = 1;; retries++)
	{
		DbgateAdmit r;

		ensure_ref_space();
		r = dbgate_admit(g, false, queryDesc, &slot);
		if (r == DBGATE_ADMIT_SLOT)
			break;
		if (r == DBGATE_ADMIT_NONE)
			return;
		if (retries >= GATE_MAX_RETRIES)
		{
			gate_gave_up(g->budget, retries);
			return;
		}
		g = quarantine_lookup_again(queryDesc, &src, &tgt, g == &tgt);
		if (g == NULL)
			return;
	}
	slot_admitted(queryDesc);
	add_ref(queryDesc, REF_RUN, queryDesc->plannedstmt);
	if (g == &tgt && slot_chain.idx[0] == tgt.budget &&
		slot_chain.inc[0] == tgt.incarnation)
	{
		dbgate_demote_quarantined(&slot, &src);
		dbgate_slot_has_limits = true;
		set_run_work();
	}
	if (running_refs == 0 && IsTransactionBlock() &&
		portal_statement(queryDesc->plannedstmt))
		slot_enter(SLOT_OPEN, 0);
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
 * more than the flush (README, "What takes a slot", has the figures).  A
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

/*
 * Backend exit (before_shmem_exit, so before ProcKill recycles our PGPROC):
 * leave a queue, return the slot (slot_enter() counts a session ended by
 * the budget's idle_in_transaction_timeout).
 */
static void
backend_exit(int code, Datum arg)
{
	dbgate_admission_leave_queue();
	dbgate_nrefs = 0;
	running_refs = 0;
	utility_running = false;
	call_running = false;
	slot_enter(SLOT_NONE, 0);
}
