/*-------------------------------------------------------------------------
 *
 * admission.c
 *	  Admit, queue, hand off, keep and release slots of a budget.
 *
 * This file owns the queues and the per-backend entries (DbgateProc): every
 * write of a queue list, of 'queued' and of a DbgateProc entry is here.
 * Other files reach them through the functions at the end of this file:
 * configuration install ("this budget is new", "its limits changed", "it
 * was dropped") and the views ("a consistent picture of the queue and the
 * slot holders").
 *
 * Slot life cycle
 * ---------------
 * A client backend holds at most one slot.  It asks for one at the
 * ExecutorStart of an executor run when it holds none: a statement of a DO
 * block or procedure asks on its own, a query run by a function inside an
 * admitted statement runs under the outer slot.  Every executor run
 * started while the slot is held, including the first, is recorded as a
 * *reference* (SlotRef) keyed by its QueryDesc.  A reference goes away:
 *	  - at its ExecutorEnd;
 *	  - when the subtransaction it was started in aborts, or the
 *		subtransaction in which it was running (ExecutorRun/ExecutorFinish)
 *		aborts: in both cases PostgreSQL never calls its ExecutorEnd;
 *	  - at the end of the top-level transaction (no executor run outlives
 *		its transaction: holdable cursors are materialised at commit).
 * A gated utility command (budget field 'utility') is one reference of its
 * own, from dbgate_utility_begin() to dbgate_utility_end(); it survives the
 * transactions that commands such as VACUUM run internally.
 *
 * When the last reference goes, the scope rule decides:
 *	  scope 'statement'		the slot is returned, unless the transaction
 *							holds a transaction ID (it wrote or locked rows,
 *							so others may wait for it): then it is *kept*
 *	  scope 'transaction'	the slot is kept
 * A kept slot is returned when the top-level transaction ends (commit,
 * abort -- also by error, cancel, timeout or terminate --, PREPARE
 * TRANSACTION) or the backend exits: at XACT_EVENT_COMMIT / PREPARE,
 * after the local WAL flush.  A commit or prepare that will wait for a
 * synchronous standby returns it at its start instead (PRE_COMMIT /
 * PRE_PREPARE, when no statement can run any more): the standby is waited
 * for without a slot (dbgate_admission_commit_start()).
 * While kept, further statements of the transaction run under it and
 * never queue: a transaction that holds row locks never waits in a queue
 * behind statements that wait for those locks.  The budget's
 * idle_in_transaction_timeout applies while a slot is kept and the
 * session waits for its client (limits.c), not while it commits.
 *
 * At backend exit a before_shmem_exit callback returns the slot as well.
 * The slot is returned exactly once: release_slot() forgets it
 * (slot_budget = -1) before it touches shared memory, and every path goes
 * through release_slot().
 *
 * Queue
 * -----
 * Admission with B = max_active, Q = max_queued:
 *	  active < B and (queue empty or budget not fair)	-> admitted at once
 *	  queued < Q										-> join the tail
 *	  otherwise											-> ERROR 53300
 * A fair budget hands a released slot directly to the head of the queue:
 * the releasing backend unlinks the head, marks it granted, leaves
 * 'active' unchanged and sets the head's latch after dropping the lock.
 * A non-fair budget decrements 'active' and wakes the head, which takes a
 * slot if one is still free and otherwise stays at the head; a waiter that
 * takes a slot wakes the next head if slots remain free, so no free slot
 * is left unused while someone waits.  Waiters sleep on their latch; nobody
 * polls (a waiter wakes on its own only for its queue timeout and, after
 * deadlock_timeout, to check for lock-holder admission).
 *
 * A waiter's loop has three parts: sleep (latch, timeout, interrupts),
 * decide (under the budget lock, returning what happened and what to do),
 * act (with no lock held: proceed, go on ungated, or raise the timeout
 * error).  A waiter that leaves the queue on error (cancel,
 * statement_timeout) or at exit (terminate, postmaster death) takes the
 * budget lock and looks at its entry: if a slot was granted to it in the
 * meantime it passes the slot on exactly like a normal release, otherwise
 * it unlinks itself.  A queue timeout that races with a grant is resolved
 * in favour of the grant.
 *
 * A statement that joins the queue in READ COMMITTED gives up its
 * snapshot for the wait and takes a new one when it proceeds (waitsnap.c),
 * so a queue never holds back the xmin horizon.
 *
 * Shadow mode (enforce = false): a statement always takes a slot at once,
 * 'active' may exceed B, and what enforcement would have done is counted:
 * with A statements already active, it would have queued if A >= B and
 * A - B < Q, and been rejected if A - B >= Q.  No timeout of the budget is
 * applied.
 *
 * Locks, the state word and the limits
 * ------------------------------------
 * A budget's live counts are one atomic word (tag | active | queued, see
 * dbgate.h).  The queue list, 'queued' and the statistics that are not
 * atomics are protected by the budget's LWLock; 'active' also changes
 * without it:
 *	  - fast admission: a free slot (and, for a fair budget, nobody queued)
 *		is taken by one compare-and-swap of the word;
 *	  - fast release: with nobody queued, one compare-and-swap returns it.
 * Everything else happens under the budget lock, and every change of the
 * word is a compare-and-swap of the whole word (or an atomic add that
 * cannot cross a field), so a decision taken on one reading of the word
 * holds when the swap succeeds.  In particular joining the queue swaps
 * queued+1 against the very word that showed no free slot: a slot
 * returned meanwhile makes the swap fail and the decision is taken again,
 * and once the swap succeeds, whoever returns a slot sees queued > 0 and
 * takes the lock, which the joining backend holds until it is linked.
 *
 * A budget's limits (b->conf) are written only by dbgate_admission_set_limits(),
 * with the budget lock held and inside a sequence counter (conf_seq, odd
 * while a write is under way).  Under the lock they are read directly;
 * without it (the fast path) read_limits() copies them and retries if the
 * counter moved, so one decision always sees one configuration.
 *
 * No ereport() and no allocation happen while a budget lock is held;
 * latches of woken waiters are set after it is released.  The path where
 * no budget is full takes no lock at all, allocates nothing and touches
 * no catalog.
 *
 * A backend's own DbgateProc entry is written by itself (also without the
 * lock, on the fast paths; others read it only for monitoring and as a
 * hint) and, while it is queued, by whoever grants it a slot under the
 * lock: 'granted' is then set last, after a write barrier, so that the
 * waiter can act on it without the lock.  Only the backend itself moves
 * its entry out of IDLE, so it may read its own 'state' and 'budget'
 * without the lock.
 *
 * Counters: 'admitted' counts every admission (at once, after waiting,
 * lock holder, shadow); admissions after waiting are counted by the waiter
 * itself when it proceeds, so that the counters match what clients observe
 * even when a grant and a cancel cross (a waiter canceled at that instant
 * passes the slot on and is counted in canceled_waiting only).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <limits.h>

#include "access/transam.h"
#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/executor.h"
#include "libpq/libpq.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "replication/syncrep.h"
#include "replication/walsender.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "storage/procarray.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/elog.h"
#include "utils/fmgrprotos.h"
#include "utils/memutils.h"
#include "tcop/pquery.h"

#include "compat.h"
#include "dbgate.h"
#include "memgrant.h"

/* ----------
 * Per-backend shared entries
 * ----------
 */
typedef enum DbgateProcState
{
	DBGATE_PROC_IDLE = 0,		/* neither queued nor holding a slot */
	DBGATE_PROC_QUEUED,			/* in a budget's queue */
	DBGATE_PROC_ACTIVE,			/* holds a slot, a statement runs */
	DBGATE_PROC_KEPT			/* holds a slot between statements */
} DbgateProcState;

/*
 * Indexed by proc number.  While state != IDLE every field is protected by
 * the lock of budget 'budget' (see the file header for the exceptions).
 */
typedef struct DbgateProc
{
	int32		budget;			/* budget index, -1 when idle */
	uint32		incarnation;	/* of that budget */
	uint8		state;			/* DbgateProcState */
	bool		granted;		/* queued, and a slot was handed over */
	bool		released;		/* queued, and the budget no longer gates */
	uint8		rule;			/* DbgateRule of the classification */
	Oid			via;			/* DBGATE_BY_MEMBER: the group */
	int32		prev;			/* queue links: proc numbers or -1 */
	int32		next;
	int32		pid;
	Oid			roleid;			/* session user */
	TimestampTz state_since;
} DbgateProc;

typedef union DbgateProcPadded
{
	DbgateProc	d;
	char		pad[DBGATE_LINES(sizeof(DbgateProc))];
} DbgateProcPadded;

static DbgateProcPadded *procs = NULL;	/* [max_procs], in shared memory */

/* The limits one decision needs, copied consistently (read_limits()). */
typedef struct Limits
{
	int32		max_active;
	int32		max_queued;
	int32		queue_timeout_ms;
	int32		statement_timeout_ms;
	int32		lock_timeout_ms;
	int32		idle_timeout_ms;
	int32		scope;
	bool		fair;
	bool		enforce;
	bool		utility;
	int32		max_memory_mb;	/* memgrant.c */
} Limits;

/* ----------
 * Backend-local state
 * ----------
 */

/* One executor run (or gated utility command) that keeps the slot. */
typedef struct SlotRef
{
	QueryDesc  *qd;
	SubTransactionId create_subid;	/* subxact of its ExecutorStart */
	SubTransactionId run_subid; /* subxact of the ExecutorRun/Finish in
								 * progress, or InvalidSubTransactionId */
} SlotRef;

#define INLINE_REFS 8

static SlotRef inline_refs[INLINE_REFS];
static SlotRef *refs = inline_refs;
int			dbgate_nrefs = 0;	/* see dbgate.h */
bool		dbgate_slot_has_limits = false; /* the held slot's budget has
											 * timeouts or max_memory_mb */
static int	maxrefs = INLINE_REFS;
static int	running_refs = 0;	/* refs with run_subid set */

/* The key of a gated utility command's reference. */
static char utility_ref_key;
#define UTILITY_REF ((QueryDesc *) &utility_ref_key)
static bool utility_running = false;

/* The slot held by this backend. */
static int	slot_budget = -1;	/* budget index, -1 when no slot */
static uint32 slot_incarnation;
static TimestampTz slot_admitted_at;
static Limits slot_limits;		/* as of the admission */
static bool slot_kept = false;	/* held with no reference (scope rule) */

/* Per-backend set-up: -1 not yet, 0 never gated, 1 a client backend. */
static int	gateable = -1;
static DbgateProc *my_proc = NULL;
static int	my_procno = -1;

typedef enum AdmitResult
{
	ADMIT_SLOT,					/* holds a slot now */
	ADMIT_NONE,					/* goes on without a slot */
	ADMIT_RETRY					/* the budget changed identity: classify
								 * again */
} AdmitResult;

/* What a waiter's decision step found. */
typedef enum WaitStep
{
	STEP_SLEEP,					/* nothing yet: sleep again */
	STEP_GRANTED,				/* a slot is ours */
	STEP_UNGATED,				/* the budget stopped gating us */
	STEP_TIMED_OUT				/* queue_timeout: out of the queue */
} WaitStep;

/* One wait in a queue. */
typedef struct QueueWait
{
	int			idx;
	uint32		incarnation;
	TimestampTz enqueued;
	TimestampTz deadline;		/* 0 = no queue timeout */
	TimestampTz next_lock_check;
	/* filled by the decision step for the action */
	int			wake;			/* proc number to wake, or -1 */
	bool		same;			/* the budget is still the one we queued in */
	int			waited_ms;
	int			limit_ms;
	char		name[NAMEDATALEN];
} QueueWait;

static void backend_exit(int code, Datum arg);
static void release_slot(void);
static void leave_queue_abnormally(void);

static inline DbgateProc *
proc_entry(int procno)
{
	return &procs[procno].d;
}

static inline DbgateBudget *
budget_entry(int idx)
{
	return &dbgate_shared->budgets[idx].d;
}

static inline uint64
elapsed_us(TimestampTz from, TimestampTz to)
{
	return (to > from) ? (uint64) (to - from) : 0;
}

/*
 * Copy the limits of budget b.  Without the budget lock: the copy is taken
 * again if a writer was at work meanwhile (see the file header).
 */
static inline void
read_limits(DbgateBudget *b, Limits *l)
{
	for (;;)
	{
		uint32		seq = pg_atomic_read_u32(&b->conf_seq);

		if (unlikely(seq & 1))
		{
			pg_spin_delay();
			continue;
		}
		pg_read_barrier();
		l->max_active = b->conf.max_active;
		l->max_queued = b->conf.max_queued;
		l->queue_timeout_ms = b->conf.queue_timeout_ms;
		l->statement_timeout_ms = b->conf.statement_timeout_ms;
		l->lock_timeout_ms = b->conf.lock_timeout_ms;
		l->idle_timeout_ms = b->conf.idle_timeout_ms;
		l->scope = b->conf.scope;
		l->fair = b->conf.fair;
		l->enforce = b->conf.enforce;
		l->utility = b->conf.utility;
		l->max_memory_mb = b->conf.max_memory_mb;
		pg_read_barrier();
		if (likely(pg_atomic_read_u32(&b->conf_seq) == seq))
			return;
	}
}

/* ----------
 * The queue list.  Caller must hold the budget's lock exclusively and
 * change the 'queued' count of the state word along with the list.
 * ----------
 */
static void
list_append(DbgateBudget *b, int procno)
{
	DbgateProc *p = proc_entry(procno);

	p->next = -1;
	p->prev = b->queue_tail;
	if (b->queue_tail >= 0)
		proc_entry(b->queue_tail)->next = procno;
	else
		b->queue_head = procno;
	b->queue_tail = procno;
}

static void
list_unlink(DbgateBudget *b, int procno)
{
	DbgateProc *p = proc_entry(procno);

	if (p->prev >= 0)
		proc_entry(p->prev)->next = p->next;
	else
		b->queue_head = p->next;
	if (p->next >= 0)
		proc_entry(p->next)->prev = p->prev;
	else
		b->queue_tail = p->prev;
	p->prev = p->next = -1;
}

static void
count_admitted_after_wait(DbgateBudget *b, uint64 waited_us)
{
	uint64		max = pg_atomic_read_u64(&b->wait_time_max_us);

	pg_atomic_fetch_add_u64(&b->admitted, 1);
	pg_atomic_fetch_add_u64(&b->admitted_after_wait, 1);
	pg_atomic_fetch_add_u64(&b->wait_time_total_us, waited_us);
	while (waited_us > max &&
		   !pg_atomic_compare_exchange_u64(&b->wait_time_max_us, &max,
										   waited_us))
		;
}

static inline void
note_peak_active(DbgateBudget *b, uint32 active)
{
	uint32		peak = pg_atomic_read_u32(&b->peak_active);

	while (active > peak &&
		   !pg_atomic_compare_exchange_u32(&b->peak_active, &peak, active))
		;
}

/*
 * Leave the queue: unlink and count one fewer queued.  Caller must hold the
 * budget's lock exclusively; procno must be in the queue.
 */
static void
queue_remove(DbgateBudget *b, int procno)
{
	list_unlink(b, procno);
	pg_atomic_fetch_sub_u64(&b->state, DBGATE_ST_ONE_QUEUED);
}

/*
 * Move the queued procno to 'active' if a slot is free (or unconditionally
 * when 'beyond_limit').  Caller must hold the budget's lock exclusively.
 * Returns whether it moved.  The compare-and-swap is needed because a
 * non-fair budget's slots are also taken and returned without the lock.
 */
static bool
queue_promote(DbgateBudget *b, int procno, bool beyond_limit)
{
	uint64		old = pg_atomic_read_u64(&b->state);

	for (;;)
	{
		if (!beyond_limit &&
			dbgate_st_active(old) >= (uint32) b->conf.max_active)
			return false;
		if (pg_atomic_compare_exchange_u64(&b->state, &old,
										   old + DBGATE_ST_ONE_ACTIVE -
										   DBGATE_ST_ONE_QUEUED))
			break;
	}
	list_unlink(b, procno);
	note_peak_active(b, dbgate_st_active(old) + 1);
	return true;
}

/*
 * Is a slot free and somebody queued, so that a non-fair budget should wake
 * its head?  Caller holds the budget's lock.
 */
static inline bool
free_slot_and_waiter(DbgateBudget *b)
{
	uint64		st = pg_atomic_read_u64(&b->state);

	return b->queue_head >= 0 &&
		dbgate_st_active(st) < (uint32) b->conf.max_active;
}

/* Hand a slot to procno, which the caller moved out of the queue. */
static inline void
mark_granted(int procno, TimestampTz now)
{
	proc_entry(procno)->state_since = now;
	pg_write_barrier();			/* the waiter reads 'granted' without the lock */
	proc_entry(procno)->granted = true;
}

/*
 * Grant slots to the head of the queue while the budget has room.  Caller
 * must hold the budget's lock exclusively; latches are set here
 * (configuration changes are rare).
 */
static void
grant_waiters(DbgateBudget *b)
{
	TimestampTz now = GetCurrentTimestamp();

	while (b->queue_head >= 0)
	{
		int			head = b->queue_head;

		if (!queue_promote(b, head, false))
			break;
		mark_granted(head, now);
		SetLatch(&DBGATE_PROC_BY_NUMBER(head)->procLatch);
	}
}

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
	my_procno = procno;
	my_proc = proc_entry(procno);
	my_proc->pid = MyProcPid;
	gateable = 1;
	return true;
}

/* ----------
 * References
 * ----------
 */
static void
ensure_ref_space(void)
{
	if (dbgate_nrefs < maxrefs)
		return;
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
}

/* Caller has called ensure_ref_space(). */
static inline void
add_ref(QueryDesc *qd)
{
	SlotRef    *r = &refs[dbgate_nrefs++];

	r->qd = qd;
	r->create_subid = GetCurrentSubTransactionId();
	r->run_subid = InvalidSubTransactionId;
}

static inline int
find_ref(QueryDesc *qd)
{
	int			i;

	/* newest first: executor runs mostly end in LIFO order */
	for (i = dbgate_nrefs - 1; i >= 0; i--)
	{
		if (refs[i].qd == qd)
			return i;
	}
	return -1;
}

static inline void
remove_ref(int i)
{
	if (refs[i].run_subid != InvalidSubTransactionId)
		running_refs--;
	refs[i] = refs[--dbgate_nrefs];
}

/* ----------
 * Holding a slot
 * ----------
 */

/*
 * Record that this backend now holds a slot of budget idx with limits l
 * (shadow mode: no timeouts).
 */
static inline void
take_slot(int idx, uint32 incarnation, TimestampTz since, const Limits *l)
{
	slot_budget = idx;
	slot_incarnation = incarnation;
	slot_admitted_at = since;
	slot_limits = *l;
	if (!l->enforce)
	{
		slot_limits.statement_timeout_ms = 0;
		slot_limits.lock_timeout_ms = 0;
		slot_limits.idle_timeout_ms = 0;
	}
	slot_kept = false;
	dbgate_slot_has_limits = (slot_limits.statement_timeout_ms > 0 ||
							  slot_limits.lock_timeout_ms > 0 ||
							  slot_limits.idle_timeout_ms > 0);

	/*
	 * memgrant.c: what the slot's memory grants need; ExecutorFinish must
	 * then call dbgate_run_begin() too (after triggers run at the grant's
	 * work_mem).
	 */
	if (unlikely(l->max_memory_mb > 0))
	{
		DbgateGrantChain chain;

		dbgate_slot_has_limits = true;
		chain.nlevels = 1;		/* the statement's budget: no parents yet */
		chain.idx[0] = idx;
		chain.incarnation[0] = incarnation;
		dbgate_memgrant_slot_taken(&chain, l->max_active, l->max_memory_mb,
								   l->enforce);
	}
}

/*
 * The last reference of the slot went away: return it, or keep it until
 * the end of the transaction (see "Slot life cycle").
 */
static void
slot_unreferenced(void)
{
	if (slot_limits.scope == DBGATE_SCOPE_TRANSACTION ||
		TransactionIdIsValid(GetTopTransactionIdIfAny()))
	{
		if (!slot_kept)
		{
			slot_kept = true;
			my_proc->state_since = GetCurrentTimestamp();
			my_proc->state = DBGATE_PROC_KEPT;
		}
		if (slot_limits.idle_timeout_ms > 0)
			dbgate_idle_timeout_arm(slot_limits.idle_timeout_ms);
		return;
	}
	release_slot();
}

/* A statement starts under a kept slot. */
static inline void
slot_resumed(void)
{
	slot_kept = false;
	my_proc->state_since = GetCurrentStatementStartTimestamp();
	my_proc->state = DBGATE_PROC_ACTIVE;
	if (slot_limits.idle_timeout_ms > 0)
		dbgate_idle_timeout_disarm();
}

/* ----------
 * Lock-holder check: the waits-for graph that PostgreSQL's deadlock
 * detector cannot see.
 *
 * Nodes are backends (pids).  Edges: a backend waiting for a heavyweight
 * lock waits for the backends pg_blocking_pids() names; a backend queued in
 * a budget waits for the slot holders of that budget.  If a path leads from
 * our own queue wait back to us, waiting would be waiting for ourselves.
 * Only slot holders that wait for a lock can continue a path (one that is
 * running will return its slot, one that is idle in a transaction waits for
 * its client), which keeps the search tiny; it is bounded anyway.  Runs
 * only in a backend that has been queued for deadlock_timeout.
 * ----------
 */
#define LOCK_CHECK_MAX_NODES 256

typedef struct WaitGraph
{
	int			pids[LOCK_CHECK_MAX_NODES];
	int			n;
} WaitGraph;

static void
graph_add(WaitGraph *g, int pid)
{
	int			k;

	for (k = 0; k < g->n; k++)
	{
		if (g->pids[k] == pid)
			return;
	}
	if (g->n < LOCK_CHECK_MAX_NODES)
		g->pids[g->n++] = pid;
}

/* Add the slot holders of budget idx that wait for a heavyweight lock. */
static void
graph_add_lock_waiting_holders(WaitGraph *g, int idx, uint32 incarnation)
{
	DbgateShared *sh = dbgate_shared;
	int			i;

	LWLockAcquire(dbgate_budget_lock(idx), LW_SHARED);
	for (i = 0; i < sh->max_procs; i++)
	{
		DbgateProc *p = proc_entry(i);

		if ((p->state != DBGATE_PROC_ACTIVE && p->state != DBGATE_PROC_KEPT) ||
			p->budget != idx || p->incarnation != incarnation)
			continue;
		/* unlocked read: only a hint whether the holder waits at all */
		if (DBGATE_PROC_BY_NUMBER(i)->waitLock == NULL)
			continue;
		graph_add(g, p->pid);
	}
	LWLockRelease(dbgate_budget_lock(idx));
}

/* If pid is queued in a budget, add that budget's waiting slot holders. */
static void
graph_follow_queue(WaitGraph *g, int pid)
{
	PGPROC	   *proc = BackendPidGetProc(pid);
	DbgateProc *p;
	int			procno;
	int			idx;
	uint32		incarnation;
	bool		queued;

	if (proc == NULL)
		return;
	procno = DBGATE_PROCNO_OF(proc);
	if (procno < 0 || procno >= dbgate_shared->max_procs)
		return;
	p = proc_entry(procno);
	idx = p->budget;			/* unlocked read, checked below */
	if (idx < 0 || idx >= dbgate_shared->max_budgets)
		return;
	LWLockAcquire(dbgate_budget_lock(idx), LW_SHARED);
	queued = (p->pid == pid && p->budget == idx &&
			  p->state == DBGATE_PROC_QUEUED && !p->granted && !p->released);
	incarnation = p->incarnation;
	LWLockRelease(dbgate_budget_lock(idx));
	if (queued)
		graph_add_lock_waiting_holders(g, idx, incarnation);
}

static bool
blocks_slot_holder(int idx, uint32 incarnation)
{
	MemoryContext cxt,
				old;
	WaitGraph  *g;
	int			next = 0;
	bool		found = false;

	cxt = AllocSetContextCreate(CurrentMemoryContext, "dbgate lock check",
								ALLOCSET_SMALL_SIZES);
	old = MemoryContextSwitchTo(cxt);
	g = palloc(sizeof(WaitGraph));
	g->n = 0;

	/* our own queue wait: the waiting slot holders of our budget */
	graph_add_lock_waiting_holders(g, idx, incarnation);

	/* breadth-first, bounded */
	while (next < g->n && !found)
	{
		int			pid = g->pids[next++];
		ArrayType  *arr;
		Datum	   *elems;
		bool	   *nulls;
		int			nelems;
		int			j;

		/* lock waits */
		arr = DatumGetArrayTypeP(DirectFunctionCall1(pg_blocking_pids,
													 Int32GetDatum(pid)));
		deconstruct_array(arr, INT4OID, sizeof(int32), true, TYPALIGN_INT,
						  &elems, &nulls, &nelems);
		for (j = 0; j < nelems; j++)
		{
			int			blocker;

			if (nulls[j])
				continue;
			blocker = DatumGetInt32(elems[j]);
			if (blocker == MyProcPid)
			{
				found = true;
				break;
			}
			graph_add(g, blocker);
		}

		/* queue waits in other budgets */
		if (!found)
			graph_follow_queue(g, pid);
	}

	MemoryContextSwitchTo(old);
	MemoryContextDelete(cxt);
	return found;
}

/*
 * Lock safety: if a slot holder of our budget waits (directly or through
 * other queues) for a lock we hold, we would wait for ourselves: take a
 * slot beyond the limit.  The next decision step finds the grant.
 */
static void
admit_if_lock_holder(QueueWait *q)
{
	DbgateBudget *b = budget_entry(q->idx);
	LWLock	   *lock = dbgate_budget_lock(q->idx);

	if (!blocks_slot_holder(q->idx, q->incarnation))
		return;
	LWLockAcquire(lock, LW_EXCLUSIVE);
	if (!my_proc->granted && !my_proc->released &&
		b->in_use && b->incarnation == q->incarnation)
	{
		(void) queue_promote(b, my_procno, true);
		b->admitted_lock_holder++;
		mark_granted(my_procno, GetCurrentTimestamp());
	}
	LWLockRelease(lock);
}

/* ----------
 * Waiting in a queue
 * ----------
 */

/*
 * Sleep until our latch is set, the next timed event (queue timeout, lock
 * check) is due, or the client goes away.  Interrupts (cancel, terminate,
 * statement_timeout) are serviced here and end the wait by ERROR/FATAL.
 */
static void
queue_sleep(const QueueWait *q)
{
	TimestampTz now = GetCurrentTimestamp();
	TimestampTz wake_at = q->next_lock_check;
	long		sleep_ms;
	uint32		wait_event = dbgate_shared->wait_event_info;

	if (q->deadline != 0 && q->deadline < wake_at)
		wake_at = q->deadline;
	sleep_ms = (long) ((wake_at - now + 999) / 1000);
	if (sleep_ms < 0)
		sleep_ms = 0;

	if (FeBeWaitSet != NULL && MyProcPort != NULL &&
		WaitEventSetCanReportClosed())
	{
		WaitEvent	events[FeBeWaitSetNEvents];
		int			n,
					k;

		/*
		 * Wait on the backend's client wait set (latch, socket, postmaster
		 * death), as pq_check_connection() does, so that a client that went
		 * away does not keep its queue place: the session ends the way
		 * PostgreSQL ends it when it finds the connection lost (FATAL,
		 * "connection to client lost").
		 */
		ModifyWaitEvent(FeBeWaitSet, FeBeWaitSetSocketPos, WL_SOCKET_CLOSED,
						NULL);
		n = WaitEventSetWait(FeBeWaitSet, sleep_ms, events, lengthof(events),
							 wait_event);
		for (k = 0; k < n; k++)
		{
			if (events[k].events & WL_POSTMASTER_DEATH)
				ereport(FATAL,
						(errcode(ERRCODE_ADMIN_SHUTDOWN),
						 errmsg("terminating connection due to unexpected postmaster exit")));
			if (events[k].events & WL_SOCKET_CLOSED)
			{
				ClientConnectionLost = true;
				InterruptPending = true;
			}
		}
	}
	else
		(void) WaitLatch(MyLatch,
						 WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 sleep_ms, wait_event);
	ResetLatch(MyLatch);

	/* cancel, terminate and statement_timeout end the wait here */
	CHECK_FOR_INTERRUPTS();
}

/*
 * Decide what the wake-up means.  Takes the budget lock unless a slot was
 * handed to us (then the granter already moved us from 'queued' to
 * 'active' and out of the list, and what is left is ours alone).  For
 * STEP_TIMED_OUT we are out of the queue and q says why; for the other
 * results other than STEP_SLEEP our entry is still QUEUED and the action
 * finishes it.
 */
static WaitStep
queue_decide(QueueWait *q, TimestampTz now)
{
	DbgateBudget *b = budget_entry(q->idx);
	LWLock	   *lock = dbgate_budget_lock(q->idx);
	WaitStep	step = STEP_SLEEP;

	q->wake = -1;
	pg_read_barrier();
	if (my_proc->granted)
	{
		q->same = (dbgate_st_tag(pg_atomic_read_u64(&b->state)) ==
				   dbgate_tag_of(q->incarnation));
		return STEP_GRANTED;
	}

	LWLockAcquire(lock, LW_EXCLUSIVE);
	/* a dropped entry may already serve another budget */
	q->same = (b->in_use && b->incarnation == q->incarnation);
	if (my_proc->granted)
		step = STEP_GRANTED;	/* hand-off or raised limit */
	else if (my_proc->released)
		step = STEP_UNGATED;	/* the budget was dropped */
	else if (!pg_atomic_read_u32(&dbgate_shared->enabled))
	{
		/* dbgate.enabled = off lets every waiter through at once */
		queue_remove(b, my_procno);
		step = STEP_UNGATED;
	}
	else if (!b->conf.fair && b->queue_head == my_procno &&
			 queue_promote(b, my_procno, false))
	{
		my_proc->state_since = now;
		step = STEP_GRANTED;
	}
	else if (q->deadline != 0 && now >= q->deadline)
	{
		queue_remove(b, my_procno);
		b->rejected_timeout++;
		my_proc->state = DBGATE_PROC_IDLE;
		my_proc->budget = -1;
		q->waited_ms = (int) ((now - q->enqueued) / 1000);
		q->limit_ms = b->conf.queue_timeout_ms;
		strlcpy(q->name, b->conf.name, NAMEDATALEN);
		step = STEP_TIMED_OUT;
	}

	/* a free slot of a non-fair budget goes on to the next head */
	if (step != STEP_SLEEP && q->same && !b->conf.fair &&
		free_slot_and_waiter(b) && b->queue_head != my_procno)
		q->wake = b->queue_head;
	LWLockRelease(lock);
	return step;
}

/*
 * Sleep in the queue until a slot is ours, the budget stops gating us, or
 * an error ends the wait.  We are linked at the tail already.  Whatever
 * ends the wait, we are out of the queue afterwards.
 */
static WaitStep
queue_wait(QueueWait *q)
{
	volatile WaitStep step = STEP_SLEEP;

	PG_TRY();
	{
		while (step == STEP_SLEEP)
		{
			TimestampTz now;

			queue_sleep(q);
			now = GetCurrentTimestamp();
			step = queue_decide(q, now);
			if (step == STEP_SLEEP && now >= q->next_lock_check)
			{
				admit_if_lock_holder(q);
				q->next_lock_check =
					TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
												Max(DeadlockTimeout, 1));
				SetLatch(MyLatch);	/* decide again at once */
			}
		}
	}
	PG_CATCH();
	{
		leave_queue_abnormally();
		PG_RE_THROW();
	}
	PG_END_TRY();
	return step;
}

/*
 * Act on the end of a wait, with no lock held.  Returns whether we hold a
 * slot; throws the queue timeout error.
 */
static bool
queue_act(QueueWait *q, WaitStep step)
{
	DbgateBudget *b = budget_entry(q->idx);
	uint64		waited_us = elapsed_us(q->enqueued, GetCurrentTimestamp());
	bool		slot = false;

	if (q->wake >= 0)
		SetLatch(&DBGATE_PROC_BY_NUMBER(q->wake)->procLatch);

	switch (step)
	{
		case STEP_GRANTED:
			{
				Limits		l;

				if (q->same)
				{
					count_admitted_after_wait(b, waited_us);
					read_limits(b, &l);
				}
				else
					memset(&l, 0, sizeof(l));	/* dropped meanwhile */
				take_slot(q->idx, q->incarnation, my_proc->state_since, &l);
				my_proc->state = DBGATE_PROC_ACTIVE;
				pg_write_barrier();
				my_proc->granted = false;
				slot = true;
			}
			break;

		case STEP_UNGATED:
			if (q->same)
				count_admitted_after_wait(b, waited_us);
			my_proc->state = DBGATE_PROC_IDLE;
			my_proc->budget = -1;
			my_proc->released = false;
			break;

		case STEP_TIMED_OUT:
			ereport(ERROR,
					(errcode(ERRCODE_TOO_MANY_CONNECTIONS),
					 errmsg("timed out waiting for a slot in budget \"%s\"",
							q->name),
					 errdetail("Waited %d ms in the queue; the queue timeout is %d ms.",
							   q->waited_ms, q->limit_ms)));
			break;

		case STEP_SLEEP:
			Assert(false);
			break;
	}
	return slot;
}

/*
 * Return a slot of budget b whose state word carries 'tag', under the
 * budget's lock: hand it to the head of the queue (fair: 'active' stays as
 * it is), or free it and name the head to wake (non-fair).  A budget over
 * its limit (just lowered, or a lock holder admitted beyond it) only frees.
 * Returns the proc number to wake, or -1.
 */
static int
return_slot_locked(DbgateBudget *b, uint32 tag, TimestampTz now)
{
	uint64		old = pg_atomic_read_u64(&b->state);

	for (;;)
	{
		bool		hand_off;

		if (dbgate_st_tag(old) != tag)
			return -1;			/* dropped meanwhile */
		hand_off = (dbgate_st_queued(old) > 0 &&
					dbgate_st_active(old) <= (uint32) b->conf.max_active);
		if (hand_off && b->conf.fair)
		{
			int			head = b->queue_head;

			/* nothing else changes the word of a fair budget with waiters */
			if (!pg_atomic_compare_exchange_u64(&b->state, &old,
												old - DBGATE_ST_ONE_QUEUED))
				continue;
			list_unlink(b, head);
			mark_granted(head, now);
			return head;
		}
		if (pg_atomic_compare_exchange_u64(&b->state, &old,
										   old - DBGATE_ST_ONE_ACTIVE))
			return hand_off ? b->queue_head : -1;
	}
}

/*
 * Leave the queue because of an error or exit while waiting.  If a slot
 * was granted to us in the meantime, pass it on like a release.
 */
static void
leave_queue_abnormally(void)
{
	DbgateBudget *b;
	LWLock	   *lock;
	int			idx;
	int			wake = -1;

	/* only we move our entry into QUEUED: reading it without the lock is safe */
	if (my_proc == NULL || my_proc->state != DBGATE_PROC_QUEUED)
		return;
	idx = my_proc->budget;
	b = budget_entry(idx);
	lock = dbgate_budget_lock(idx);

	LWLockAcquire(lock, LW_EXCLUSIVE);
	{
		bool		same = (b->in_use && b->incarnation == my_proc->incarnation);

		if (my_proc->granted)
		{
			/* the slot is counted in 'active': hand it on */
			my_proc->granted = false;
			if (same)
				wake = return_slot_locked(b, dbgate_tag_of(my_proc->incarnation),
										  GetCurrentTimestamp());
		}
		else if (!my_proc->released && same)
		{
			queue_remove(b, my_procno);
			if (!b->conf.fair && free_slot_and_waiter(b))
				wake = b->queue_head;
		}
		if (same)
			b->canceled_waiting++;
		my_proc->released = false;
		my_proc->state = DBGATE_PROC_IDLE;
		my_proc->budget = -1;
	}
	LWLockRelease(lock);

	if (wake >= 0)
		SetLatch(&DBGATE_PROC_BY_NUMBER(wake)->procLatch);
}

/* ----------
 * Admission
 * ----------
 */

/*
 * Fill in our shared entry for a budget; the state is set by the caller.
 */
static inline void
describe_me(const DbgateLookup *lk, TimestampTz now)
{
	my_proc->budget = lk->budget;
	my_proc->incarnation = lk->incarnation;
	my_proc->roleid = GetSessionUserId();
	my_proc->rule = (uint8) lk->rule;
	my_proc->via = lk->via;
	my_proc->state_since = now;
	my_proc->granted = false;
	my_proc->released = false;
}

/* Took a slot at once. */
static inline void
admitted_now(DbgateBudget *b, const DbgateLookup *lk, uint32 active_before,
			 TimestampTz now, const Limits *l)
{
	note_peak_active(b, active_before + 1);
	pg_atomic_fetch_add_u64(&b->admitted, 1);
	describe_me(lk, now);
	pg_write_barrier();
	my_proc->state = DBGATE_PROC_ACTIVE;
	take_slot(lk->budget, lk->incarnation, now, l);
}

/*
 * Shadow mode: take a slot whatever the counts, and count what an
 * enforcing budget would have done.
 */
static pg_noinline AdmitResult
admit_shadow(DbgateBudget *b, const DbgateLookup *lk, const Limits *l,
			 TimestampTz now)
{
	uint32		tag = dbgate_tag_of(lk->incarnation);
	uint64		old = pg_atomic_read_u64(&b->state);

	for (;;)
	{
		uint32		active = dbgate_st_active(old);

		if (dbgate_st_tag(old) != tag)
			return ADMIT_RETRY;
		if (active >= DBGATE_ST_MASK)
			return ADMIT_NONE;	/* cannot happen: bounded by backends */
		if (pg_atomic_compare_exchange_u64(&b->state, &old,
										   old + DBGATE_ST_ONE_ACTIVE))
		{
			if (active >= (uint32) l->max_active)
			{
				if (active - (uint32) l->max_active < (uint32) l->max_queued)
					pg_atomic_fetch_add_u64(&b->would_queue, 1);
				else
					pg_atomic_fetch_add_u64(&b->would_reject, 1);
			}
			admitted_now(b, lk, active, now, l);
			return ADMIT_SLOT;
		}
	}
}

/*
 * No free slot at first sight: decide again under the budget lock, where
 * the queue is, and queue or reject.  Throws 53300 when the budget is full.
 */
static pg_noinline AdmitResult
admit_slow(const DbgateLookup *lk, bool utility, QueryDesc *queryDesc,
		   TimestampTz now)
{
	DbgateBudget *b = budget_entry(lk->budget);
	LWLock	   *lock = dbgate_budget_lock(lk->budget);
	Limits		l;
	QueueWait	q;
	uint64		old;
	WaitStep	step;
	bool		proceed;
	bool		snap_released;

	LWLockAcquire(lock, LW_EXCLUSIVE);
	if (unlikely(!b->in_use || b->incarnation != lk->incarnation))
	{
		/* dropped or replaced since our lookup: classify again */
		LWLockRelease(lock);
		return ADMIT_RETRY;
	}
	/* under the lock the limits are the installed ones */
	read_limits(b, &l);
	if ((utility && !l.utility) || !l.enforce)
	{
		LWLockRelease(lock);
		return ADMIT_RETRY;
	}

	describe_me(lk, now);
	old = pg_atomic_read_u64(&b->state);
	for (;;)
	{
		uint32		active = dbgate_st_active(old);
		uint32		queued = dbgate_st_queued(old);

		if (active < (uint32) l.max_active && (queued == 0 || !l.fair))
		{
			/* a slot came free */
			if (!pg_atomic_compare_exchange_u64(&b->state, &old,
												old + DBGATE_ST_ONE_ACTIVE))
				continue;
			note_peak_active(b, active + 1);
			pg_atomic_fetch_add_u64(&b->admitted, 1);
			my_proc->state = DBGATE_PROC_ACTIVE;
			LWLockRelease(lock);
			take_slot(lk->budget, lk->incarnation, now, &l);
			return ADMIT_SLOT;
		}

		if (queued >= (uint32) l.max_queued)
		{
			char		name[NAMEDATALEN];

			b->rejected_full++;
			my_proc->budget = -1;
			strlcpy(name, b->conf.name, NAMEDATALEN);
			LWLockRelease(lock);
			ereport(ERROR,
					(errcode(ERRCODE_TOO_MANY_CONNECTIONS),
					 errmsg("budget \"%s\" is full", name),
					 errdetail("%d of %d statements are active and %d of %d queue places are taken.",
							   (int) active, l.max_active, (int) queued,
							   l.max_queued),
					 errhint("Retry later, or raise max_active or max_queued with dbgate.alter_budget().")));
		}

		/*
		 * Join the tail of the queue.  The swap fails if a slot was returned
		 * meanwhile (then we look again); once it succeeds, whoever returns
		 * a slot sees us queued and comes for the lock we hold.
		 */
		if (pg_atomic_compare_exchange_u64(&b->state, &old,
										   old + DBGATE_ST_ONE_QUEUED))
		{
			if ((int32) queued + 1 > b->peak_queued)
				b->peak_queued = queued + 1;
			break;
		}
	}
	my_proc->state = DBGATE_PROC_QUEUED;
	list_append(b, my_procno);
	LWLockRelease(lock);

	q.idx = lk->budget;
	q.incarnation = lk->incarnation;
	q.enqueued = now;
	q.deadline = (l.queue_timeout_ms > 0) ?
		TimestampTzPlusMilliseconds(now, l.queue_timeout_ms) : 0;
	q.next_lock_check = TimestampTzPlusMilliseconds(now, Max(DeadlockTimeout, 1));
	q.wake = -1;
	q.same = true;

	/* no snapshot held back while we wait (waitsnap.c) */
	snap_released = dbgate_waitsnap_release(queryDesc);
	step = queue_wait(&q);
	proceed = queue_act(&q, step);
	if (snap_released)
		dbgate_waitsnap_retake(queryDesc);
	return proceed ? ADMIT_SLOT : ADMIT_NONE;
}

/*
 * Try to take a slot of the budget lk names for the statement that is
 * starting.  Fast path, without the lock: a free slot (and, for a fair
 * budget, nobody queued) is taken by one compare-and-swap of the state
 * word; otherwise admit_slow().
 */
static inline AdmitResult
admit(const DbgateLookup *lk, bool utility, QueryDesc *queryDesc)
{
	DbgateBudget *b = budget_entry(lk->budget);
	TimestampTz now = GetCurrentTimestamp();
	uint32		tag = dbgate_tag_of(lk->incarnation);
	Limits		l;
	uint64		old;

	read_limits(b, &l);
	if (utility && !l.utility)
		return ADMIT_NONE;
	if (unlikely(!l.enforce))
		return admit_shadow(b, lk, &l, now);

	old = pg_atomic_read_u64(&b->state);
	while (dbgate_st_tag(old) == tag &&
		   dbgate_st_active(old) < (uint32) l.max_active &&
		   (!l.fair || dbgate_st_queued(old) == 0))
	{
		if (pg_atomic_compare_exchange_u64(&b->state, &old,
										   old + DBGATE_ST_ONE_ACTIVE))
		{
			admitted_now(b, lk, dbgate_st_active(old), now, &l);
			return ADMIT_SLOT;
		}
	}
	return admit_slow(lk, utility, queryDesc, now);
}

/*
 * Admit to the budget lk names; a budget replaced between the lookup and
 * the admission is looked up again, so that every statement is gated by
 * the configuration in force.  Returns whether a slot is held.
 */
static pg_noinline bool
gate(const DbgateLookup *lk, bool utility, QueryDesc *queryDesc)
{
	for (;;)
	{
		AdmitResult r;

		if (lk->budget < 0)
			return false;
		ensure_ref_space();
		r = admit(lk, utility, queryDesc);
		if (likely(r != ADMIT_RETRY))
			return r == ADMIT_SLOT;
		dbgate_invalidate_lookup();
		CHECK_FOR_INTERRUPTS();
		lk = dbgate_classify();
	}
}

/*
 * Return the slot this backend holds.  Fast path, without the lock: nobody
 * is queued, one compare-and-swap.  Otherwise under the budget lock, see
 * return_slot_locked().
 */
static void
release_slot(void)
{
	int			idx = slot_budget;
	DbgateBudget *b;
	TimestampTz now;
	uint32		tag;
	uint64		old;
	int			wake = -1;

	if (idx < 0)
		return;
	/* forget first: whatever happens below, never release twice */
	slot_budget = -1;
	slot_kept = false;
	dbgate_slot_has_limits = false;
	/* memgrant.c: the slot's memory grants go with it */
	if (unlikely(dbgate_memgrant_slot))
		dbgate_memgrant_slot_released();
	if (slot_limits.idle_timeout_ms > 0)
		dbgate_idle_timeout_disarm();

	b = budget_entry(idx);
	tag = dbgate_tag_of(slot_incarnation);
	now = GetCurrentTimestamp();

	my_proc->state = DBGATE_PROC_IDLE;
	my_proc->budget = -1;

	old = pg_atomic_read_u64(&b->state);
	for (;;)
	{
		if (dbgate_st_tag(old) != tag)
			return;				/* the budget was dropped */
		if (dbgate_st_queued(old) != 0)
			break;
		if (pg_atomic_compare_exchange_u64(&b->state, &old,
										   old - DBGATE_ST_ONE_ACTIVE))
		{
			pg_atomic_fetch_add_u64(&b->active_time_total_us,
									elapsed_us(slot_admitted_at, now));
			return;
		}
	}

	/* somebody is queued */
	LWLockAcquire(dbgate_budget_lock(idx), LW_EXCLUSIVE);
	if (b->in_use && b->incarnation == slot_incarnation)
	{
		pg_atomic_fetch_add_u64(&b->active_time_total_us,
								elapsed_us(slot_admitted_at, now));
		wake = return_slot_locked(b, tag, now);
	}
	LWLockRelease(dbgate_budget_lock(idx));

	if (wake >= 0)
		SetLatch(&DBGATE_PROC_BY_NUMBER(wake)->procLatch);
}

/* ----------
 * Executor hooks' work
 * ----------
 */

/*
 * ExecutorStart: gate the run if this backend holds no slot.
 */
void
dbgate_executor_start(QueryDesc *queryDesc, int eflags)
{
	const DbgateLookup *lk;

	if (eflags & EXEC_FLAG_EXPLAIN_ONLY)
		return;

	if (slot_budget >= 0)
	{
		/* nested run, another portal, or a kept slot: never queues */
		if (slot_kept)
			slot_resumed();
		ensure_ref_space();
		add_ref(queryDesc);
		return;
	}

	if (!dbgate_enabled || !backend_init())
		return;

	/*
	 * Outside any portal a client backend runs queries only while it
	 * commits: deferred triggers (a deferred foreign-key check, say) fire
	 * from CommitTransaction after the statement's portal is gone.  They
	 * finish work of statements that were admitted; a COMMIT never queues
	 * and never fails because a budget is full.
	 */
	if (ActivePortal == NULL)
		return;

	lk = dbgate_classify();
	if (lk->budget < 0)
		return;
	/* mincost.c: a read cheaper than the budget's min_cost is not gated */
	if (dbgate_mincost_bypass(lk, queryDesc))
		return;
	if (gate(lk, false, queryDesc))
		add_ref(queryDesc);
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
dbgate_run_begin(QueryDesc *queryDesc, DbgateLimitState *st)
{
	int			i;
	bool		outermost;

	st->tracked = false;
	st->applied = false;
	if (likely(dbgate_nrefs == 0))
		return false;
	i = find_ref(queryDesc);
	if (i < 0 || refs[i].run_subid != InvalidSubTransactionId)
		return false;

	if (!dbgate_slot_has_limits)
	{
		SubTransactionId sub = GetCurrentSubTransactionId();

		/*
		 * Without limits to apply, a run only needs marking when it could
		 * die in a subtransaction other than the one it was started in (a
		 * FETCH inside a savepoint): an abort of its own subtransaction
		 * drops the reference anyway.
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
	refs[i].run_subid = GetCurrentSubTransactionId();
	running_refs++;
	st->tracked = true;

	if (outermost && slot_limits.idle_timeout_ms > 0)
	{
		/* a portal of the slot runs again (FETCH, another Execute) */
		dbgate_idle_timeout_disarm();
		my_proc->state = DBGATE_PROC_ACTIVE;
	}
	if (outermost && slot_budget >= 0 &&
		(slot_limits.statement_timeout_ms > 0 || slot_limits.lock_timeout_ms > 0))
	{
		/*
		 * The budget's statement_timeout counts from admission, or from the
		 * start of a later statement that runs under the slot already held.
		 */
		TimestampTz base = Max(slot_admitted_at,
							   GetCurrentStatementStartTimestamp());

		dbgate_limits_apply(st, base, slot_limits.statement_timeout_ms,
							slot_limits.lock_timeout_ms);
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
	if (st->applied)
	{
		dbgate_limits_restore(st, is_error);
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
			 * The run of a portal that stays open (a cursor, a portal of the
			 * extended protocol fetched in parts) ended: the session may
			 * now wait for its client while the portal holds the slot.
			 */
			if (running_refs == 0 && slot_budget >= 0 &&
				slot_limits.idle_timeout_ms > 0 && IsTransactionBlock())
			{
				my_proc->state = DBGATE_PROC_KEPT;
				dbgate_idle_timeout_arm(slot_limits.idle_timeout_ms);
			}
		}
	}
}

/*
 * ExecutorEnd (after the executor has shut down): drop the reference; with
 * the last one the scope rule decides about the slot.
 */
void
dbgate_executor_end(QueryDesc *queryDesc)
{
	int			i;

	if (likely(dbgate_nrefs == 0))
		return;
	i = find_ref(queryDesc);
	if (i < 0)
		return;
	remove_ref(i);
	if (dbgate_nrefs == 0)
		slot_unreferenced();
}

/*
 * Subtransaction abort: drop the references whose runs died in it.  A
 * kept slot stays kept (the transaction goes on).
 */
void
dbgate_admission_subxact_abort(SubTransactionId mySubid)
{
	int			i;

	if (dbgate_nrefs == 0)
	{
		/*
		 * A utility command failed in a savepoint while the slot is kept:
		 * the session goes idle (in an aborted subtransaction) still
		 * keeping it.
		 */
		if (unlikely(slot_kept) && slot_budget >= 0)
		{
			my_proc->state = DBGATE_PROC_KEPT;
			if (slot_limits.idle_timeout_ms > 0)
				dbgate_idle_timeout_arm(slot_limits.idle_timeout_ms);
		}
		return;
	}
	for (i = dbgate_nrefs - 1; i >= 0; i--)
	{
		if (refs[i].qd == UTILITY_REF && utility_running)
			continue;
		if (refs[i].create_subid >= mySubid ||
			(refs[i].run_subid != InvalidSubTransactionId &&
			 refs[i].run_subid >= mySubid))
			remove_ref(i);
	}
	if (dbgate_nrefs == 0 && slot_budget >= 0)
		slot_unreferenced();
}

/*
 * The commit (or prepare) of the top-level transaction starts: its
 * deferred triggers have fired and its portals are closed.  A kept slot
 * stays through the local WAL flush, which is short: returned now, it
 * would admit more work while this transaction still needs the CPU and
 * still locks its rows until the flush is done, and on hot rows that
 * costs more than the flush (README, "What takes a slot", has the
 * figures).  A wait for a synchronous standby is a network round trip or
 * longer, and can last as long as the standby is away: a commit that will
 * wait for one returns its slot now, as SyncRepWaitForLSN() decides
 * whether to wait (a commit with no transaction ID writes no commit record
 * and does not wait; a prepare always writes one).
 */
void
dbgate_admission_commit_start(bool prepare)
{
	if (likely(slot_budget < 0))
		return;
	if (SyncRepRequested() && SyncRepStandbyNames != NULL &&
		SyncRepStandbyNames[0] != '\0' &&
		(prepare || TransactionIdIsValid(GetTopTransactionIdIfAny())))
	{
		dbgate_admission_xact_end();
		return;
	}

	/*
	 * The slot stays for the flush.  The session is committing, not
	 * waiting for its client (the COMMIT statement, or the last statement
	 * of an implicit transaction, has ended and marked the slot kept).
	 */
	if (my_proc->state == DBGATE_PROC_KEPT)
	{
		my_proc->state = DBGATE_PROC_ACTIVE;
		if (slot_limits.idle_timeout_ms > 0)
			dbgate_idle_timeout_disarm();
	}
}

/*
 * End of the top-level transaction (commit, abort, prepare): no executor
 * run survives it, and no slot does either -- except that of a gated
 * utility command that is still running (VACUUM commits transactions of
 * its own).
 */
void
dbgate_admission_xact_end(void)
{
	if (likely(dbgate_nrefs == 0 && slot_budget < 0 && refs == inline_refs))
		return;
	if (utility_running)
		return;
	dbgate_nrefs = 0;
	running_refs = 0;
	if (refs != inline_refs)
	{
		pfree(refs);
		refs = inline_refs;
		maxrefs = INLINE_REFS;
	}
	release_slot();
}

/*
 * A utility command starts or ends while a slot is held between
 * statements (kept by the scope rule, or held by an open cursor): the
 * command runs (the backend shows as active, and waits for locks like
 * one), and the idle timeout counts only after it.  When a top-level
 * command ends inside a transaction block with the slot still held, the
 * session is about to wait for its client holding it.
 */
void
dbgate_admission_utility_start(void)
{
	if (unlikely(slot_budget >= 0) && my_proc->state == DBGATE_PROC_KEPT)
	{
		my_proc->state = DBGATE_PROC_ACTIVE;
		if (slot_limits.idle_timeout_ms > 0)
			dbgate_idle_timeout_disarm();
	}
}

void
dbgate_admission_utility_done(bool toplevel)
{
	if (likely(slot_budget < 0) || !toplevel ||
		!(slot_kept || IsTransactionBlock()))
		return;
	my_proc->state = DBGATE_PROC_KEPT;
	if (slot_limits.idle_timeout_ms > 0)
		dbgate_idle_timeout_arm(slot_limits.idle_timeout_ms);
}

bool
dbgate_utility_begin(void)
{
	if (slot_budget >= 0 || utility_running)
		return false;			/* runs under the slot already held */
	if (!dbgate_enabled || !backend_init() || ActivePortal == NULL)
		return false;
	if (!gate(dbgate_classify(), true, NULL))
		return false;
	add_ref(UTILITY_REF);
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
	i = find_ref(UTILITY_REF);
	if (i >= 0)
		remove_ref(i);
	if (dbgate_nrefs == 0 && slot_budget >= 0)
	{
		/* outside a transaction now (an internal one ended): return it */
		if (!IsTransactionState())
			release_slot();
		else
			slot_unreferenced();
	}
}

/*
 * A session ended by idle_in_transaction_session_timeout while it kept a
 * slot whose budget tightened that timeout: counted in terminated_idle.
 * Called for every message that is reported (emit_log_hook).
 */
void
dbgate_admission_log(ErrorData *edata)
{
	if (likely(edata->elevel != FATAL) ||
		edata->sqlerrcode != ERRCODE_IDLE_IN_TRANSACTION_SESSION_TIMEOUT ||
		slot_budget < 0 || !dbgate_idle_timeout_fired())
		return;
	{
		DbgateBudget *b = budget_entry(slot_budget);

		if (dbgate_st_tag(pg_atomic_read_u64(&b->state)) ==
			dbgate_tag_of(slot_incarnation))
			pg_atomic_fetch_add_u64(&b->terminated_idle, 1);
	}
}

/*
 * Backend exit (before_shmem_exit, so before ProcKill recycles our PGPROC).
 */
static void
backend_exit(int code, Datum arg)
{
	leave_queue_abnormally();
	dbgate_nrefs = 0;
	running_refs = 0;
	utility_running = false;
	release_slot();
}

/* ----------
 * For the configuration install (budgets.c) and the views (status.c)
 * ----------
 */
Size
dbgate_admission_shmem_size(int max_procs)
{
	return mul_size(max_procs, sizeof(DbgateProcPadded));
}

/* At shared memory initialisation: the per-backend entries start at base. */
void
dbgate_admission_shmem_init(void *base, int max_procs)
{
	int			i;

	procs = (DbgateProcPadded *) base;
	for (i = 0; i < max_procs; i++)
	{
		memset(&procs[i], 0, sizeof(DbgateProcPadded));
		procs[i].d.budget = -1;
		procs[i].d.state = DBGATE_PROC_IDLE;
		procs[i].d.prev = -1;
		procs[i].d.next = -1;
	}
}

/* In a backend that attached to existing shared memory (EXEC_BACKEND). */
void
dbgate_admission_shmem_attach(void *base)
{
	procs = (DbgateProcPadded *) base;
}

/*
 * A budget entry starts serving a budget with the configuration conf: an
 * empty queue, and limits installed.  Caller holds the budget's lock
 * exclusively (or is alone at start-up).
 */
void
dbgate_admission_budget_created(DbgateBudget *b, const DbgateBudgetConf *conf)
{
	b->queue_head = -1;
	b->queue_tail = -1;
	dbgate_admission_set_limits(b, conf, false);
}

/*
 * Install new limits of a budget that stays; with 'grant', a raised limit
 * admits waiting statements at once.  Caller holds the budget's lock
 * exclusively.
 */
void
dbgate_admission_set_limits(DbgateBudget *b, const DbgateBudgetConf *conf,
							bool grant)
{
	pg_atomic_fetch_add_u32(&b->conf_seq, 1);	/* odd: writing (a barrier) */
	b->conf = *conf;
	pg_atomic_fetch_add_u32(&b->conf_seq, 1);	/* even again (a barrier) */
	if (grant)
		grant_waiters(b);
}

/*
 * A budget was dropped: its waiters go on ungated at once (they are woken
 * here), and its slot holders finish normally; their releases become
 * no-ops because the caller changes the incarnation.  Caller holds the
 * budget's lock exclusively.
 */
void
dbgate_admission_budget_dropped(DbgateBudget *b)
{
	while (b->queue_head >= 0)
	{
		int			procno = b->queue_head;
		DbgateProc *p = proc_entry(procno);

		b->queue_head = p->next;
		p->prev = p->next = -1;
		p->released = true;
		SetLatch(&DBGATE_PROC_BY_NUMBER(procno)->procLatch);
	}
	b->queue_tail = -1;
}

/*
 * The backends of budget idx for dbgate.backends: queued ones in queue
 * order, then slot holders.  One consistent picture per budget, copied
 * under its lock.  Caller holds config_lock (shared), so that the budget
 * keeps its identity.  Returns the number of rows written (at most
 * maxrows).
 */
int
dbgate_admission_backends(int idx, DbgateBackendRow *rows, int maxrows)
{
	DbgateShared *sh = dbgate_shared;
	DbgateBudget *b = budget_entry(idx);
	int			n = 0;
	int			pos = 0;
	int			p;

	LWLockAcquire(dbgate_budget_lock(idx), LW_SHARED);
	for (p = b->queue_head; p >= 0 && n < maxrows; p = proc_entry(p)->next)
	{
		DbgateProc *e = proc_entry(p);
		DbgateBackendRow *row = &rows[n++];

		row->pid = e->pid;
		row->roleid = e->roleid;
		row->budget = idx;
		row->state = DBGATE_ROW_QUEUED;
		row->since = e->state_since;
		row->position = ++pos;
		row->rule = e->rule;
		row->via = e->via;
	}
	for (p = 0; p < sh->max_procs && n < maxrows; p++)
	{
		DbgateProc *e = proc_entry(p);
		DbgateBackendRow *row;
		uint8		state = e->state;

		if (e->budget != idx || e->incarnation != b->incarnation)
			continue;
		/* a granted waiter already holds its slot */
		if (!(state == DBGATE_PROC_ACTIVE || state == DBGATE_PROC_KEPT ||
			  (state == DBGATE_PROC_QUEUED && e->granted)))
			continue;
		row = &rows[n++];
		row->pid = e->pid;
		row->roleid = e->roleid;
		row->budget = idx;
		row->state = (state == DBGATE_PROC_KEPT) ?
			DBGATE_ROW_IDLE_IN_XACT : DBGATE_ROW_ACTIVE;
		row->since = e->state_since;
		row->position = 0;
		row->rule = e->rule;
		row->via = e->via;
	}
	LWLockRelease(dbgate_budget_lock(idx));
	return n;
}

/*
 * The number of slot holders of budget idx that are idle in a transaction
 * now.  Caller holds config_lock (shared).  A hint: entries are read
 * without their owners' cooperation.
 */
int
dbgate_admission_idle_count(int idx)
{
	DbgateShared *sh = dbgate_shared;
	uint32		incarnation = budget_entry(idx)->incarnation;
	int			n = 0;
	int			p;

	for (p = 0; p < sh->max_procs; p++)
	{
		DbgateProc *e = proc_entry(p);

		if (e->state == DBGATE_PROC_KEPT && e->budget == idx &&
			e->incarnation == incarnation)
			n++;
	}
	return n;
}
