/*-------------------------------------------------------------------------
 *
 * lockgraph.c
 *	  Lock safety: the waits-for graph that PostgreSQL's deadlock detector
 *	  cannot see.
 *
 * A statement queued in a budget waits for the slot holders of every full
 * level of its chain (its budget or an ancestor at max_active).  If one of
 * those holders waits -- directly or through a chain of lock waits and
 * other queues -- for a lock that the queued backend holds, the queued
 * backend waits for itself: it is admitted at once, beyond every limit and
 * without a token (admit_lock_holder() below), and counted in
 * admitted_lock_holder.
 *
 * Nodes are backends (pids).  Edges: a backend waiting for a heavyweight
 * lock waits for the backends pg_blocking_pids() names; a backend queued in
 * a budget waits for the slot holders of its full levels.  Only holders
 * that wait for a lock can continue a path (one that runs will return its
 * slot, one idle in a transaction waits for its client), which keeps the
 * search small; it is bounded anyway (LOCK_CHECK_MAX_NODES per level).
 *
 * Who looks, and how often: a backend that has been queued for
 * deadlock_timeout asks, and again every deadlock_timeout after that; but
 * per tree of budgets only one of them looks at a time, at most once per
 * deadlock_timeout (a claim on the tree's root), and it looks on behalf
 * of every queued backend of the tree.  pg_blocking_pids() takes
 * every lock-manager partition lock, so with many waiters each looking for
 * itself the check would cost waiters x holders calls per deadlock_timeout;
 * this way it costs at most one search per full budget.
 *
 * One of the admission files (admission.c lists them and has the rules
 * that all of them follow).  Locking: the claim is a compare-and-swap of
 * the root's lock_check_due; the waiters held back are read under the
 * root's lock (shared), a queued backend's levels and its admission under
 * its tree's lock (exclusive); the slot holders that wait for a lock are
 * read without a lock (a hint: the search is repeated every
 * deadlock_timeout).  pg_blocking_pids() runs with no budget lock held.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "miscadmin.h"
#include "storage/proc.h"
#include "storage/procarray.h"
#include "utils/array.h"
#include "utils/fmgrprotos.h"
#include "utils/memutils.h"

#include "admission_internals.h"
#include "compat.h"
#include "lockgraph.h"
#include "queue.h"
#include "shmem.h"

#define LOCK_CHECK_MAX_NODES 256

/* A queued backend that full levels of its chain hold back. */
typedef struct HeldBack
{
	int			pid;
	int			procno;
	int			nlevels;		/* full enforcing levels of its chain */
	int32		levels[DBGATE_MAX_DEPTH];
	uint32		incs[DBGATE_MAX_DEPTH];
} HeldBack;

/* ----------
 * What the check reads and does in the queues
 * ----------
 */

/*
 * Claim the lock-holder check of the tree of budget idx until 'until':
 * only one waiter of a tree looks at a time, and once per
 * deadlock_timeout.  Returns the root, or -1 if another waiter has it.
 */
static int
claim_check(int idx, TimestampTz now, TimestampTz until)
{
	int			root = budget_entry(idx)->root;
	DbgateBudget *r;
	uint64		due;

	if (root < 0 || root >= dbgate_shared->max_budgets)
		root = idx;
	r = budget_entry(root);
	due = pg_atomic_read_u64(&r->lock_check_due);
	if ((TimestampTz) due > now)
		return -1;
	if (!pg_atomic_compare_exchange_u64(&r->lock_check_due, &due, (uint64) until))
		return -1;
	return root;
}

/*
 * The queued backends of the tree of 'root' that some full level holds
 * back, with the levels: for each, the pid and the full enforcing levels
 * of its chain (budget index, incarnation).  Returns the number written.
 */
static int
held_back(int root, HeldBack *out, int max)
{
	DbgateShared *sh = dbgate_shared;
	int			n = 0;
	int			p;

	LWLockAcquire(dbgate_budget_lock(root), LW_SHARED);
	for (p = 0; p < sh->max_procs && n < max; p++)
	{
		DbgateProc *e = proc_entry(p);
		int			i;
		int			k = 0;

		if (e->state != DBGATE_PROC_QUEUED || e->granted || e->released ||
			e->budget < 0 || budget_entry(e->budget)->root != root)
			continue;
		for (i = 0; i < e->chain.n; i++)
		{
			DbgateBudget *lb = budget_entry(e->chain.idx[i]);
			uint64		st = pg_atomic_read_u64(&lb->state);

			if (lb->lim.enforce &&
				dbgate_st_active(st) >= (uint32) lb->lim.max_active)
			{
				out[n].levels[k] = e->chain.idx[i];
				out[n].incs[k] = e->chain.inc[i];
				k++;
			}
		}
		if (k == 0)
			continue;
		out[n].pid = e->pid;
		out[n].procno = p;
		out[n].nlevels = k;
		n++;
	}
	LWLockRelease(dbgate_budget_lock(root));
	return n;
}

/*
 * The pids of the slot holders that took a slot of budget idx
 * (incarnation inc) and now wait for a heavyweight lock (an unlocked read
 * of their PGPROC: a hint).  Returns the number written.
 */
static int
lock_waiting_holders(int idx, uint32 inc, int *pids, int max)
{
	DbgateShared *sh = dbgate_shared;
	int			n = 0;
	int			p;

	for (p = 0; p < sh->max_procs && n < max; p++)
	{
		DbgateProc *e = proc_entry(p);
		uint8		state = e->state;
		int			i;

		if (state != DBGATE_PROC_ACTIVE && state != DBGATE_PROC_HELD)
			continue;
		if (DBGATE_PROC_BY_NUMBER(p)->waitLock == NULL)
			continue;
		for (i = 0; i < e->chain.n && i < DBGATE_MAX_DEPTH; i++)
		{
			if (e->chain.idx[i] == idx && e->chain.inc[i] == inc)
			{
				pids[n++] = e->pid;
				break;
			}
		}
	}
	return n;
}

/*
 * If pid is queued (not yet granted), the full levels holding it back, as
 * held_back() gives them.  Returns false if it is not.
 */
static bool
queued_levels(int procno, int pid, HeldBack *hb)
{
	DbgateProc *e;
	int			idx;
	int			root;
	int			i;
	int			k = 0;

	if (procno < 0 || procno >= dbgate_shared->max_procs)
		return false;
	e = proc_entry(procno);
	idx = e->budget;			/* unlocked read, checked below */
	if (idx < 0 || idx >= dbgate_shared->max_budgets)
		return false;
	root = dbgate_lock_tree(idx);
	if (e->pid == pid && e->budget == idx && e->state == DBGATE_PROC_QUEUED &&
		!e->granted && !e->released)
	{
		for (i = 0; i < e->chain.n; i++)
		{
			DbgateBudget *lb = budget_entry(e->chain.idx[i]);
			uint64		st = pg_atomic_read_u64(&lb->state);

			if (lb->lim.enforce &&
				dbgate_st_active(st) >= (uint32) lb->lim.max_active)
			{
				hb->levels[k] = e->chain.idx[i];
				hb->incs[k] = e->chain.inc[i];
				k++;
			}
		}
	}
	unlock_tree(root);
	hb->pid = pid;
	hb->procno = procno;
	hb->nlevels = k;
	return k > 0;
}

/*
 * Admit the queued procno (pid) at once beyond every limit: it holds a
 * lock that a slot holder it waits for waits for.  Counted in
 * admitted_lock_holder.
 */
static void
admit_lock_holder(int procno, int pid)
{
	DbgateProc *e = proc_entry(procno);
	int			idx = e->budget;
	int			root;
	bool		done = false;
	Wakeups		w;

	if (idx < 0 || idx >= dbgate_shared->max_budgets)
		return;
	w.n = 0;
	root = dbgate_lock_tree(idx);
	if (e->pid == pid && e->budget == idx && e->state == DBGATE_PROC_QUEUED &&
		!e->granted && !e->released &&
		dbgate_promote(procno, true, 0, 0))
	{
		DbgateBudget *r = budget_entry(root);

		dbgate_list_unlink(budget_entry(idx), procno);
		budget_entry(idx)->admitted_lock_holder++;
		if (r->token_waiter == procno)
			r->token_waiter = -1;
		mark_granted(e, GetCurrentTimestamp());
		done = true;
		/* slots held for the budget beyond its waiters go back (queue.c) */
		if (dbgate_held_settle(budget_entry(idx)))
			dbgate_grant_tree(root, GetCurrentTimestamp(), &w);
	}
	unlock_tree(root);
	wake_now(&w);
	if (done && procno != dbgate_my_procno)
		SetLatch(&DBGATE_PROC_BY_NUMBER(procno)->procLatch);
}

/* ----------
 * The graph
 * ----------
 */

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

/* Add the slot holders of level idx that wait for a heavyweight lock. */
static void
graph_add_holders(WaitGraph *g, int idx, uint32 inc)
{
	int			pids[LOCK_CHECK_MAX_NODES];
	int			n;
	int			k;

	n = lock_waiting_holders(idx, inc, pids,
											  LOCK_CHECK_MAX_NODES);
	for (k = 0; k < n; k++)
		graph_add(g, pids[k]);
}

/* If pid is queued in a budget, add the holders of its full levels. */
static void
graph_follow_queue(WaitGraph *g, int pid)
{
	PGPROC	   *proc = BackendPidGetProc(pid);
	HeldBack hb;
	int			k;

	if (proc == NULL)
		return;
	if (!queued_levels(DBGATE_PROCNO_OF(proc), pid, &hb))
		return;
	for (k = 0; k < hb.nlevels; k++)
		graph_add_holders(g, hb.levels[k], hb.incs[k]);
}

/*
 * Everything that the lock-waiting slot holders of level idx wait for,
 * directly or transitively (breadth-first, bounded).
 */
static void
closure_of(WaitGraph *g, int idx, uint32 inc)
{
	int			next = 0;

	g->n = 0;
	graph_add_holders(g, idx, inc);
	while (next < g->n)
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
			if (!nulls[j])
				graph_add(g, DatumGetInt32(elems[j]));
		}
		/* queue waits in other budgets */
		graph_follow_queue(g, pid);
	}
}

static bool
graph_has(const WaitGraph *g, int pid)
{
	int			k;

	for (k = 0; k < g->n; k++)
	{
		if (g->pids[k] == pid)
			return true;
	}
	return false;
}

/*
 * Called by a backend queued in budget idx for deadlock_timeout or more:
 * if the check of its tree is due and nobody else does it, admit every
 * queued backend of the tree that waits for itself.
 */
void
dbgate_lockgraph_check(int idx, TimestampTz now)
{
	MemoryContext cxt,
				old;
	HeldBack *held;
	WaitGraph  *g;
	int32	   *done_levels;
	int			nheld;
	int			ndone = 0;
	int			root;
	int			i;

	root = claim_check(idx, now,
											 TimestampTzPlusMilliseconds(now, Max(DeadlockTimeout, 1)));
	if (root < 0)
		return;

	cxt = AllocSetContextCreate(CurrentMemoryContext, "dbgate lock check",
								ALLOCSET_SMALL_SIZES);
	old = MemoryContextSwitchTo(cxt);
	held = palloc(sizeof(HeldBack) * dbgate_shared->max_procs);
	g = palloc(sizeof(WaitGraph));
	done_levels = palloc(sizeof(int32) * dbgate_shared->max_budgets);

	nheld = held_back(root, held, dbgate_shared->max_procs);

	/* one search per full level, for every waiter held back by it */
	for (i = 0; i < nheld; i++)
	{
		int			k;

		for (k = 0; k < held[i].nlevels; k++)
		{
			int			level = held[i].levels[k];
			uint32		inc = held[i].incs[k];
			int			d;
			int			j;

			for (d = 0; d < ndone; d++)
			{
				if (done_levels[d] == level)
					break;
			}
			if (d < ndone)
				continue;
			done_levels[ndone++] = level;

			closure_of(g, level, inc);
			if (g->n == 0)
				continue;
			for (j = 0; j < nheld; j++)
			{
				int			m;

				if (held[j].pid == 0)
					continue;
				for (m = 0; m < held[j].nlevels; m++)
				{
					if (held[j].levels[m] == level &&
						graph_has(g, held[j].pid))
					{
						admit_lock_holder(held[j].procno,
														   held[j].pid);
						held[j].pid = 0;	/* done with it */
						break;
					}
				}
			}
		}
	}

	MemoryContextSwitchTo(old);
	MemoryContextDelete(cxt);
}
