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
 * without a token (admission.c's dbgate_admission_admit_lock_holder), and
 * counted in admitted_lock_holder.
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
 * deadlock_timeout (a claim on the tree's root, admission.c), and it looks
 * on behalf of every queued backend of the tree.  pg_blocking_pids() takes
 * every lock-manager partition lock, so with many waiters each looking for
 * itself the check would cost waiters x holders calls per deadlock_timeout;
 * this way it costs at most one search per full budget.
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

#include "compat.h"
#include "dbgate.h"
#include "lockgraph.h"

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

/* Add the slot holders of level idx that wait for a heavyweight lock. */
static void
graph_add_holders(WaitGraph *g, int idx, uint32 inc)
{
	int			pids[LOCK_CHECK_MAX_NODES];
	int			n;
	int			k;

	n = dbgate_admission_lock_waiting_holders(idx, inc, pids,
											  LOCK_CHECK_MAX_NODES);
	for (k = 0; k < n; k++)
		graph_add(g, pids[k]);
}

/* If pid is queued in a budget, add the holders of its full levels. */
static void
graph_follow_queue(WaitGraph *g, int pid)
{
	PGPROC	   *proc = BackendPidGetProc(pid);
	DbgateHeldBack hb;
	int			k;

	if (proc == NULL)
		return;
	if (!dbgate_admission_queued_levels(DBGATE_PROCNO_OF(proc), pid, &hb))
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
	DbgateHeldBack *held;
	WaitGraph  *g;
	int32	   *done_levels;
	int			nheld;
	int			ndone = 0;
	int			root;
	int			i;

	root = dbgate_admission_claim_lock_check(idx, now,
											 TimestampTzPlusMilliseconds(now, Max(DeadlockTimeout, 1)));
	if (root < 0)
		return;

	cxt = AllocSetContextCreate(CurrentMemoryContext, "dbgate lock check",
								ALLOCSET_SMALL_SIZES);
	old = MemoryContextSwitchTo(cxt);
	held = palloc(sizeof(DbgateHeldBack) * dbgate_shared->max_procs);
	g = palloc(sizeof(WaitGraph));
	done_levels = palloc(sizeof(int32) * dbgate_shared->max_budgets);

	nheld = dbgate_admission_held_back(root, held, dbgate_shared->max_procs);

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
						dbgate_admission_admit_lock_holder(held[j].procno,
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
