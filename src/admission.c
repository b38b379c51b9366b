/*-------------------------------------------------------------------------
 *
 * admission.c
 *	  Admit, queue, hand off and release slots of a budget.
 *
 * Slot life cycle
 * ---------------
 * A client backend holds at most one slot.  It asks for one at the
 * ExecutorStart of an executor run when it holds none ("top-level" in the
 * sense of SPEC: a statement of a DO block or procedure is top-level, a
 * query run by a function inside an admitted statement is not).  Every
 * executor run started while the slot is held, including the first, is
 * recorded as a *reference* (SlotRef) keyed by its QueryDesc.  A reference
 * goes away:
 *	  - at its ExecutorEnd;
 *	  - when the subtransaction it was started in aborts, or the
 *		subtransaction in which it was running (ExecutorRun/ExecutorFinish)
 *		aborts: in both cases PostgreSQL never calls its ExecutorEnd;
 *	  - at the end of the top-level transaction (no executor run outlives
 *		its transaction: holdable cursors are materialised at commit).
 * When the last reference goes, the slot is returned.  At backend exit a
 * before_shmem_exit callback returns it as well.  The slot is returned
 * exactly once: release_slot() forgets it (slot_budget = -1) before it
 * touches shared memory, and every path goes through release_slot().
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
 * A waiter that leaves the queue on error (cancel, statement_timeout) or at
 * exit (terminate, postmaster death) takes the budget lock and looks at its
 * entry: if a slot was granted to it in the meantime it passes the slot on
 * exactly like a normal release, otherwise it unlinks itself.  A queue
 * timeout that races with a grant is resolved in favour of the grant.
 *
 * Locks and the state word
 * ------------------------
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
 * No ereport() and no allocation happen while the lock is held; latches of
 * woken waiters are set after it is released.  The path where no budget
 * is full takes no lock at all, allocates nothing and touches no catalog.
 *
 * A backend's own DbgateProc entry is written by itself (also without the
 * lock, on the fast paths; others read it only for monitoring and as a
 * hint) and, while it is queued, by whoever grants it a slot under the
 * lock: 'granted' is then set last, after a write barrier, so that the
 * waiter can act on it without the lock.
 *
 * Counters: 'admitted' counts every admission (at once, after waiting,
 * lock holder); admissions after waiting are counted by the waiter itself
 * when it proceeds, so that the counters match what clients observe even
 * when a grant and a cancel cross (a waiter canceled at that instant
 * passes the slot on and is counted in canceled_waiting only).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <limits.h>

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/executor.h"
#include "libpq/libpq.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "storage/procarray.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/fmgrprotos.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "tcop/pquery.h"

#include "compat.h"
#include "dbgate.h"

/* One executor run that keeps the slot. */
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
											 * timeouts */
static int	maxrefs = INLINE_REFS;
static int	running_refs = 0;	/* refs with run_subid set */

/* The slot held by this backend. */
static int	slot_budget = -1;	/* budget index, -1 when no slot */
static uint32 slot_incarnation;
static TimestampTz slot_admitted_at;
static int	slot_statement_timeout_ms;
static int	slot_lock_timeout_ms;

/* Queue membership of this backend (only while inside wait_in_queue). */
static bool in_queue = false;
static int	queue_budget = -1;
static uint32 queue_incarnation;
static TimestampTz queue_since;

/* Per-backend set-up. */
static int	gateable = -1;		/* -1 unknown, 0 never gated, 1 client */
static DbgateProc *my_proc = NULL;
static int	my_procno = -1;

typedef enum WaitOutcome
{
	WAIT_GRANTED,				/* holds a slot now */
	WAIT_UNGATED				/* proceeds without a slot */
} WaitOutcome;

static void backend_exit(int code, Datum arg);
static void release_slot(void);
static void leave_queue_abnormally(void);

static inline DbgateProc *
proc_entry(int procno)
{
	return &dbgate_shared->procs[procno].d;
}

/*
 * The queue list.  Caller must hold the budget's lock exclusively and change
 * the 'queued' count of the state word along with the list.
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

static inline uint64
elapsed_us(TimestampTz from, TimestampTz to)
{
	return (to > from) ? (uint64) (to - from) : 0;
}

/*
 * Grant slots to the head of the queue while the budget has room.  Used
 * when limits are raised.  Caller must hold the budget's lock exclusively;
 * latches are set here (configuration changes are rare).  Returns whether
 * anybody was granted a slot.
 */
bool
dbgate_grant_waiters(DbgateBudget *b, int idx)
{
	bool		any = false;
	TimestampTz now = GetCurrentTimestamp();

	while (b->queue_head >= 0)
	{
		int			head = b->queue_head;
		DbgateProc *p = proc_entry(head);

		if (!queue_promote(b, head, false))
			break;
		p->state_since = now;
		pg_write_barrier();		/* the waiter reads 'granted' without the lock */
		p->granted = true;
		SetLatch(&DBGATE_PROC_BY_NUMBER(head)->procLatch);
		any = true;
	}
	return any;
}

/*
 * First use in this backend: find our shared entry and arrange for the
 * slot to be returned at exit.
 */
static bool
backend_init(void)
{
	if (likely(gateable >= 0))
		return gateable == 1;

	gateable = 0;
	if (dbgate_shared == NULL || !dbgate_is_client_backend() || MyProc == NULL)
		return false;
	my_procno = DBGATE_MY_PROCNO();
	if (my_procno < 0 || my_procno >= dbgate_shared->max_procs)
	{
		elog(WARNING, "dbgate: proc number %d out of range, backend is not gated",
			 my_procno);
		return false;
	}
	my_proc = proc_entry(my_procno);
	my_proc->pid = MyProcPid;
	dbgate_wait_event_info = dbgate_register_wait_event("DbgateQueue");
	before_shmem_exit(backend_exit, (Datum) 0);
	gateable = 1;
	return true;
}

void
dbgate_admission_init(void)
{
	(void) backend_init();
}

bool
dbgate_holds_slot(void)
{
	return slot_budget >= 0;
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
 * Admission
 * ----------
 */

/*
 * Record that this backend now holds a slot of budget idx.
 */
static void
take_slot(int idx, uint32 incarnation, TimestampTz since,
		  int statement_timeout_ms, int lock_timeout_ms)
{
	slot_budget = idx;
	slot_incarnation = incarnation;
	slot_admitted_at = since;
	slot_statement_timeout_ms = statement_timeout_ms;
	slot_lock_timeout_ms = lock_timeout_ms;
	dbgate_slot_has_limits = (statement_timeout_ms > 0 || lock_timeout_ms > 0);
}

/*
 * Lock-holder check: the waits-for graph that PostgreSQL's deadlock detector
 * cannot see.
 *
 * Nodes are backends (pids).  Edges: a backend waiting for a heavyweight
 * lock waits for the backends pg_blocking_pids() names; a backend queued in
 * a budget waits for the slot holders of that budget.  If a path leads from
 * our own queue wait back to us, waiting would be waiting for ourselves.
 * Only slot holders that wait for a lock can continue a path (one that is
 * running will return its slot), which keeps the search tiny; it is bounded
 * anyway.  Runs only in a backend that has been queued for deadlock_timeout.
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
		DbgateProc *p = &sh->procs[i].d;

		if (p->state != DBGATE_PROC_ACTIVE || p->budget != idx ||
			p->incarnation != incarnation)
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
 * Go on with the slot this queued backend was given: count the wait (when
 * the budget is still the one we queued in) and take the slot with the
 * budget's limits.  Works with or without the budget lock held: the granter
 * already moved us out of the queue and into 'active'.
 */
static WaitOutcome
proceed_with_slot(DbgateBudget *b, int idx, uint32 incarnation, bool same,
				  uint64 waited_us)
{
	if (same)
		count_admitted_after_wait(b, waited_us);
	take_slot(idx, incarnation, my_proc->state_since,
			  same ? b->conf.statement_timeout_ms : 0,
			  same ? b->conf.lock_timeout_ms : 0);
	my_proc->state = DBGATE_PROC_ACTIVE;
	pg_write_barrier();
	my_proc->granted = false;
	in_queue = false;
	return WAIT_GRANTED;
}

static WaitOutcome
wait_loop(int idx, uint32 incarnation, TimestampTz enqueued,
		  int queue_timeout_ms)
{
	DbgateShared *sh = dbgate_shared;
	DbgateBudget *b = &sh->budgets[idx].d;
	LWLock	   *lock = dbgate_budget_lock(idx);
	TimestampTz deadline = 0;
	TimestampTz next_lock_check;
	WaitOutcome outcome = WAIT_UNGATED;
	bool		done = false;
	/* notice a client disconnect while queued, where the platform can */
	bool		watch_client = (FeBeWaitSet != NULL && MyProcPort != NULL &&
								WaitEventSetCanReportClosed());

	if (queue_timeout_ms > 0)
		deadline = TimestampTzPlusMilliseconds(enqueued, queue_timeout_ms);
	next_lock_check = TimestampTzPlusMilliseconds(enqueued,
												  Max(DeadlockTimeout, 1));

	{
		while (!done)
		{
			TimestampTz now = GetCurrentTimestamp();
			TimestampTz wake_at = next_lock_check;
			long		sleep_ms;
			bool		lock_check_due;
			int			wake = -1;

			if (deadline != 0 && deadline < wake_at)
				wake_at = deadline;
			sleep_ms = (long) ((wake_at - now + 999) / 1000);
			if (sleep_ms < 0)
				sleep_ms = 0;

			if (watch_client)
			{
				WaitEvent	events[FeBeWaitSetNEvents];
				int			n,
							k;

				/*
				 * Wait on the backend's client wait set (latch, socket,
				 * postmaster death), as pq_check_connection() does, so that a
				 * client that went away does not keep its queue place: the
				 * session ends the way PostgreSQL ends it when it finds the
				 * connection lost (FATAL, "connection to client lost").
				 */
				ModifyWaitEvent(FeBeWaitSet, FeBeWaitSetSocketPos,
								WL_SOCKET_CLOSED, NULL);
				n = WaitEventSetWait(FeBeWaitSet, sleep_ms, events,
									 lengthof(events), dbgate_wait_event_info);
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
								 sleep_ms, dbgate_wait_event_info);
			ResetLatch(MyLatch);

			/* cancel, terminate and statement_timeout end the wait here */
			CHECK_FOR_INTERRUPTS();

			/* dbgate.enabled = off takes effect for waiters at once */
			if (ConfigReloadPending)
			{
				ConfigReloadPending = false;
				ProcessConfigFile(PGC_SIGHUP);
			}

			now = GetCurrentTimestamp();
			lock_check_due = (now >= next_lock_check);

			/*
			 * A slot handed to us: the granter already moved us from 'queued'
			 * to 'active' and out of the list, under its lock; what is left
			 * is ours alone, so the common wake-up takes no lock.
			 */
			pg_read_barrier();
			if (my_proc->granted)
				return proceed_with_slot(b, idx, incarnation,
										 dbgate_st_tag(pg_atomic_read_u64(&b->state)) ==
										 dbgate_tag_of(incarnation),
										 elapsed_us(enqueued, now));

			LWLockAcquire(lock, LW_EXCLUSIVE);
			if (my_proc->granted)
			{
				/* a slot was handed to us (hand-off, raised limit) */
				outcome = WAIT_GRANTED;
				done = true;
			}
			else if (my_proc->released)
			{
				/* the budget was dropped: nothing gates us any more */
				outcome = WAIT_UNGATED;
				done = true;
			}
			else if (!dbgate_enabled)
			{
				queue_remove(b, my_procno);
				outcome = WAIT_UNGATED;
				done = true;
			}
			else if (!b->conf.fair && b->queue_head == my_procno &&
					 queue_promote(b, my_procno, false))
			{
				my_proc->state_since = now;
				outcome = WAIT_GRANTED;
				done = true;
			}
			else if (deadline != 0 && now >= deadline)
			{
				char		name[NAMEDATALEN];
				int			waited = (int) ((now - enqueued) / 1000);
				int			limit = b->conf.queue_timeout_ms;

				queue_remove(b, my_procno);
				b->rejected_timeout++;
				my_proc->state = DBGATE_PROC_IDLE;
				my_proc->budget = -1;
				/* a free slot of a non-fair budget goes to the next head */
				if (!b->conf.fair && free_slot_and_waiter(b))
					wake = b->queue_head;
				strlcpy(name, b->conf.name, NAMEDATALEN);
				LWLockRelease(lock);
				in_queue = false;
				if (wake >= 0)
					SetLatch(&DBGATE_PROC_BY_NUMBER(wake)->procLatch);
				ereport(ERROR,
						(errcode(ERRCODE_TOO_MANY_CONNECTIONS),
						 errmsg("timed out waiting for a slot in budget \"%s\"",
								name),
						 errdetail("Waited %d ms in the queue; the queue timeout is %d ms.",
								   waited, limit)));
			}

			if (done)
			{
				/* a dropped entry may already serve another budget */
				bool		same = (b->in_use && b->incarnation == incarnation);
				uint64		waited = elapsed_us(enqueued, now);

				if (outcome == WAIT_GRANTED)
				{
					(void) proceed_with_slot(b, idx, incarnation, same, waited);
					/* non-fair: pass a remaining free slot on */
					if (same && !b->conf.fair && free_slot_and_waiter(b))
						wake = b->queue_head;
				}
				else
				{
					if (same)
						count_admitted_after_wait(b, waited);
					my_proc->state = DBGATE_PROC_IDLE;
					my_proc->budget = -1;
					my_proc->released = false;
					in_queue = false;
				}
				LWLockRelease(lock);
				if (wake >= 0)
					SetLatch(&DBGATE_PROC_BY_NUMBER(wake)->procLatch);
				break;
			}
			LWLockRelease(lock);

			/*
			 * Lock safety: if a slot holder of this budget waits for a lock
			 * we hold, we would wait for ourselves.  Admit beyond the limit.
			 */
			if (lock_check_due)
			{
				bool		holder = blocks_slot_holder(idx, incarnation);

				next_lock_check = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
															  Max(DeadlockTimeout, 1));
				if (holder)
				{
					LWLockAcquire(lock, LW_EXCLUSIVE);
					if (!my_proc->granted && !my_proc->released)
					{
						now = GetCurrentTimestamp();
						(void) queue_promote(b, my_procno, true);
						b->admitted_lock_holder++;
						my_proc->state_since = now;
						my_proc->granted = true;
					}
					LWLockRelease(lock);
					/* the next iteration finds the grant and proceeds */
					SetLatch(MyLatch);
				}
			}
		}
	}
	return outcome;
}

/*
 * Sleep in the queue of budget idx until a slot is ours, the budget stops
 * gating us, or an error ends the wait.  We are linked at the tail already.
 * Whatever ends the wait, we are out of the queue afterwards.
 */
static WaitOutcome
wait_in_queue(int idx, uint32 incarnation, TimestampTz enqueued,
			  int queue_timeout_ms)
{
	volatile WaitOutcome outcome = WAIT_UNGATED;

	in_queue = true;
	queue_budget = idx;
	queue_incarnation = incarnation;
	queue_since = enqueued;

	PG_TRY();
	{
		outcome = wait_loop(idx, incarnation, enqueued, queue_timeout_ms);
	}
	PG_CATCH();
	{
		leave_queue_abnormally();
		PG_RE_THROW();
	}
	PG_END_TRY();

	return outcome;
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
			proc_entry(head)->state_since = now;
			pg_write_barrier();	/* the waiter reads 'granted' without the lock */
			proc_entry(head)->granted = true;
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
	int			wake = -1;

	if (!in_queue)
		return;
	in_queue = false;

	b = &dbgate_shared->budgets[queue_budget].d;
	lock = dbgate_budget_lock(queue_budget);

	LWLockAcquire(lock, LW_EXCLUSIVE);
	if (my_proc->state == DBGATE_PROC_QUEUED)
	{
		bool		same = (b->in_use && b->incarnation == queue_incarnation);

		if (my_proc->granted)
		{
			/* the slot is counted in 'active': hand it on */
			my_proc->granted = false;
			if (same)
				wake = return_slot_locked(b, dbgate_tag_of(queue_incarnation),
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

/*
 * Fill in our shared entry for budget idx; the state is set by the caller.
 */
static inline void
describe_me(int idx, uint32 incarnation, TimestampTz now)
{
	my_proc->budget = idx;
	my_proc->incarnation = incarnation;
	my_proc->roleid = GetSessionUserId();
	my_proc->state_since = now;
	my_proc->granted = false;
	my_proc->released = false;
}

/*
 * Try to take a slot of budget idx for the executor run that is starting.
 * Returns true when this backend now holds a slot, false when the run goes
 * ungated.  Throws 53300 when the budget is full.
 *
 * Fast path, without the lock: a free slot (and, for a fair budget, nobody
 * queued) is taken by one compare-and-swap of the state word.  Otherwise
 * the decision is taken again under the budget lock, where the queue is.
 */
static bool
admit(int idx, uint32 incarnation)
{
	DbgateShared *sh = dbgate_shared;
	DbgateBudget *b = &sh->budgets[idx].d;
	LWLock	   *lock = dbgate_budget_lock(idx);
	TimestampTz now = GetCurrentTimestamp();
	uint32		tag = dbgate_tag_of(incarnation);
	int32		max_active = b->conf.max_active;
	bool		fair = b->conf.fair;
	int			queue_timeout_ms;
	uint64		old;

	old = pg_atomic_read_u64(&b->state);
	while (dbgate_st_tag(old) == tag &&
		   dbgate_st_active(old) < (uint32) max_active &&
		   (!fair || dbgate_st_queued(old) == 0))
	{
		if (pg_atomic_compare_exchange_u64(&b->state, &old,
										   old + DBGATE_ST_ONE_ACTIVE))
		{
			note_peak_active(b, dbgate_st_active(old) + 1);
			pg_atomic_fetch_add_u64(&b->admitted, 1);
			describe_me(idx, incarnation, now);
			pg_write_barrier();
			my_proc->state = DBGATE_PROC_ACTIVE;
			take_slot(idx, incarnation, now, b->conf.statement_timeout_ms,
					  b->conf.lock_timeout_ms);
			return true;
		}
	}

	LWLockAcquire(lock, LW_EXCLUSIVE);
	if (unlikely(!b->in_use || b->incarnation != incarnation))
	{
		/* dropped or replaced since our lookup: look again next time */
		LWLockRelease(lock);
		dbgate_invalidate_lookup();
		return false;
	}

	describe_me(idx, incarnation, now);
	old = pg_atomic_read_u64(&b->state);
	for (;;)
	{
		uint32		active = dbgate_st_active(old);
		uint32		queued = dbgate_st_queued(old);

		if (active < (uint32) b->conf.max_active &&
			(queued == 0 || !b->conf.fair))
		{
			/* a slot came free */
			if (!pg_atomic_compare_exchange_u64(&b->state, &old,
												old + DBGATE_ST_ONE_ACTIVE))
				continue;
			note_peak_active(b, active + 1);
			pg_atomic_fetch_add_u64(&b->admitted, 1);
			my_proc->state = DBGATE_PROC_ACTIVE;
			LWLockRelease(lock);
			take_slot(idx, incarnation, now, b->conf.statement_timeout_ms,
					  b->conf.lock_timeout_ms);
			return true;
		}

		if (queued >= (uint32) b->conf.max_queued)
		{
			char		name[NAMEDATALEN];
			int			max_active_now = b->conf.max_active;
			int			max_queued = b->conf.max_queued;

			b->rejected_full++;
			my_proc->budget = -1;
			strlcpy(name, b->conf.name, NAMEDATALEN);
			LWLockRelease(lock);
			ereport(ERROR,
					(errcode(ERRCODE_TOO_MANY_CONNECTIONS),
					 errmsg("budget \"%s\" is full", name),
					 errdetail("%d of %d statements are active and %d of %d queue places are taken.",
							   (int) active, max_active_now, (int) queued,
							   max_queued),
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
	queue_timeout_ms = b->conf.queue_timeout_ms;
	LWLockRelease(lock);

	return wait_in_queue(idx, incarnation, now, queue_timeout_ms) == WAIT_GRANTED;
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

	b = &dbgate_shared->budgets[idx].d;
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
		/* nested run, or another portal: never queues */
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

	ensure_ref_space();
	if (admit(lk->budget, lk->incarnation))
		add_ref(queryDesc);
}

/*
 * ExecutorRun/ExecutorFinish begin.  Returns true when budget limits were
 * applied; the caller must then call dbgate_run_end() on every exit,
 * including errors.  Without limits dbgate_run_end() is still needed on
 * normal exit to mark the run finished (on error the mark stays, which is
 * how a subtransaction abort recognises a run that died in it).
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

	if (outermost && slot_budget >= 0 &&
		(slot_statement_timeout_ms > 0 || slot_lock_timeout_ms > 0))
	{
		/*
		 * The budget's statement_timeout counts from admission, or from the
		 * start of a later statement that runs under the slot already held.
		 */
		TimestampTz base = Max(slot_admitted_at,
							   GetCurrentStatementStartTimestamp());

		dbgate_limits_apply(st, base, slot_statement_timeout_ms,
							slot_lock_timeout_ms);
	}
	return st->applied;
}

void
dbgate_run_end(QueryDesc *queryDesc, DbgateLimitState *st, bool is_error)
{
	if (st->applied)
		dbgate_limits_restore(st, is_error);
	if (st->tracked && !is_error)
	{
		int			i = find_ref(queryDesc);

		if (i >= 0 && refs[i].run_subid != InvalidSubTransactionId)
		{
			refs[i].run_subid = InvalidSubTransactionId;
			running_refs--;
		}
	}
}

/*
 * ExecutorEnd (after the executor has shut down): drop the reference and
 * return the slot with the last one.
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
		release_slot();
}

/*
 * Subtransaction abort: drop the references whose runs died in it.
 */
void
dbgate_admission_subxact_abort(SubTransactionId mySubid)
{
	int			i;

	if (dbgate_nrefs == 0)
		return;
	for (i = dbgate_nrefs - 1; i >= 0; i--)
	{
		if (refs[i].create_subid >= mySubid ||
			(refs[i].run_subid != InvalidSubTransactionId &&
			 refs[i].run_subid >= mySubid))
			remove_ref(i);
	}
	if (dbgate_nrefs == 0)
		release_slot();
}

/*
 * End of the top-level transaction (commit, abort, prepare): no executor
 * run survives it, so no slot does either.
 */
void
dbgate_admission_xact_end(void)
{
	if (likely(dbgate_nrefs == 0 && slot_budget < 0 && refs == inline_refs))
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
 * Backend exit (before_shmem_exit, so before ProcKill recycles our PGPROC).
 */
static void
backend_exit(int code, Datum arg)
{
	leave_queue_abnormally();
	dbgate_nrefs = 0;
	running_refs = 0;
	release_slot();
}
