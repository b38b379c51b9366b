/*-------------------------------------------------------------------------
 *
 * admission.c
 *	  The shared side of slots: admit, queue, hand off and return the slots
 *	  of budgets and of their trees.
 *
 * This file owns the queues, the state words of the budgets, their token
 * buckets' use (rate.c has the arithmetic) and the per-backend entries
 * (DbgateProc): every write of a queue list, of 'queued' and of a
 * DbgateProc entry is here.  What one backend does with the slot it holds
 * (references, scope, timeouts) is slot.c's; the lock-holder check is
 * lockgraph.c's; the configuration install (budgets.c) and the views
 * (status.c) reach the queues through the functions at the end of this
 * file.
 *
 * Trees
 * -----
 * A budget may have a parent (at most DBGATE_MAX_DEPTH budgets in a
 * chain).  A statement of a budget takes a slot of its own budget (the
 * *leaf* of its chain) and of every ancestor, all at once or not at all,
 * and returns one to exactly the budgets it took them from (the chain is
 * recorded at admission: a later change of 'parent' does not move it).  A
 * budget's 'active' counts the slots taken through it, so a parent's
 * counts its subtree; 'queued' counts the waiters of its subtree.
 * Statements wait only in the queue of their own budget.  Budgets that have
 * children have no statements of their own (no assignment may name them).
 *
 * State word and fast paths
 * -------------------------
 * A budget's live counts are one atomic word (tag | active | queued, see
 * dbgate.h).  Without any lock:
 *	  - admission: a free slot at every level (and, for a fair budget,
 *		nobody queued in it) is taken by one compare-and-swap per level,
 *		bottom-up, and a token per level that has a rate; a level that
 *		turns out full gives back what was taken (as a release: see below)
 *		and the statement goes the slow way;
 *	  - release: a level with nobody queued in its subtree takes its slot
 *		back by one compare-and-swap.
 * Everything else happens under the *tree lock* (the lock of the tree's
 * root, see dbgate.h): joining and leaving queues, handing off, the
 * releases of levels that have waiters.  Every change of a word is a
 * compare-and-swap of the whole word or an atomic add that cannot cross a
 * field, so a decision taken on one reading of a word holds when its swap
 * succeeds.  A backend that joins a queue adds itself to 'queued' at every
 * level of its chain and then, still under the tree lock, runs the grant
 * step below: a slot returned without the lock before its add was counted
 * is seen there (its word changed before ours), and one returned after
 * finds 'queued' > 0 and comes for the lock, which the joining backend
 * holds until it is linked.  So no free slot is left unused while a
 * statement that could take it sleeps.
 *
 * Who gets a slot (the grant step, grant_tree())
 * ----------------------------------------------
 * Under the tree lock, whenever a slot may have become usable (a release
 * with waiters, a waiter that joins or leaves, a raised limit, a token
 * that came due), the tree selects a waiter and gives it a slot at every
 * level, as long as there is one:
 *	  - in a budget with children: among the children that have room
 *		(active < max_active) and a waiter that could take every level
 *		below, the one with the smallest active / weight; ties go to the
 *		candidate that has waited longest (SPEC: Shares);
 *	  - in a budget's own queue: 'fifo' the head (the longest waiter);
 *		'lifo' the head if it has waited overtake_limit or more (the
 *		overdue are a prefix of the queue, which is in arrival order, and
 *		the head is the longest of them), otherwise the tail (the newest);
 *	  - a level with a rate must have a token: a candidate that lacks one
 *		below the level being decided is passed over for its siblings; if
 *		the whole tree waits for a token, the candidate whose token is due
 *		first is the tree's *token waiter*: only it sleeps until then (on a
 *		timer) and decides again; nobody polls.
 * The waiter so chosen in a fair budget is granted at once: its counts
 * move from 'queued' to 'active' at every level, its entry is marked
 * granted (last, after a write barrier, so that it can act without the
 * lock) and its latch is set once the lock is released.  In a non-fair
 * budget the chosen waiter is only woken: it takes the slot itself if it
 * is still free when it runs (a newcomer may take it first), and then
 * goes on granting, so that no free slot stays unused.
 *
 * Shadow mode (enforce = false) and lock holders
 * ----------------------------------------------
 * Only enforcing levels hold a statement back.  A statement of a shadow
 * budget takes a slot at every level whatever the counts (a level may then
 * exceed its max_active) and what enforcement would have done is counted
 * (would_queue, would_reject at the budget; would_queue at every full
 * ancestor, or one without a token), once per statement.  A shadow
 * ancestor counts what it would have held back.  A shadow level's token is
 * taken whether it is due or not, one per admission: an attempt that an
 * enforcing level turns back gives back every token it took and counts
 * nothing.  A shadow budget's statement takes a token of an enforcing
 * ancestor only if one is there: what the ancestor would have held back
 * must not hold back its enforcing statements later.  A
 * budget switched to shadow mode admits its waiters at once.  A
 * lock-holder admission (lockgraph.c) takes a slot at every level beyond
 * any limit and no token.
 *
 * Waiting
 * -------
 * A waiter's loop has three parts: sleep (latch, queue timeout, lock
 * check, its token), decide (under the tree lock: granted, ungated,
 * timed out, or run the grant step), act (without a lock: go on with the
 * slot, go on ungated, or raise the timeout error).  A waiter that leaves
 * the queue on error (cancel, statement_timeout) or at exit (terminate,
 * postmaster death) takes the tree lock and looks at its entry: if a slot
 * was granted meanwhile it returns it like a release, otherwise it unlinks
 * itself; then the grant step runs.  A queue timeout that races with a
 * grant is resolved in favour of the grant.
 *
 * A backend's own DbgateProc entry is written by itself (also without a
 * lock on the fast paths; others read it for monitoring and as hints) and,
 * while it is queued, by whoever grants it a slot under the tree lock.
 * Only the backend itself moves its entry out of IDLE.
 *
 * No ereport() and no allocation happen while a budget lock is held;
 * latches are set after it is released (up to a bounded number per step;
 * the rest under the lock).  The path where no budget is full takes no
 * lock, allocates nothing and touches no catalog.
 *
 * Counters: 'admitted' counts every admission (at once, after waiting,
 * lock holder, shadow) at the statement's own budget; admissions after a
 * wait are counted by the waiter itself when it proceeds, so that the
 * counters match what clients see even when a grant and a cancel cross.
 * A parent counts only 'active', 'queued', their peaks, 'would_queue' and
 * 'rate_limited' for what it held back (or would have).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <limits.h>

#include "libpq/libpq.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "utils/timestamp.h"

#include "compat.h"
#include "dbgate.h"

/* ----------
 * Per-backend shared entries
 * ----------
 */

/*
 * Indexed by proc number.  While state != IDLE the entry belongs to the
 * tree of its 'budget' and, but for the exceptions in the file header, is
 * written under that tree's lock.
 */
typedef struct DbgateProc
{
	int32		budget;			/* leaf budget index, -1 when idle */
	uint32		incarnation;	/* of that budget */
	uint8		state;			/* DBGATE_PROC_* */
	bool		granted;		/* queued, and a slot was handed over */
	bool		released;		/* queued, and the budget no longer gates */
	bool		overdue;		/* granted because it was overdue ('lifo') */
	uint8		token_levels;	/* chain levels that held it back for a token */
	uint8		rule;			/* DbgateRule of the classification */
	Oid			via;			/* DBGATE_BY_MEMBER: the group */
	int32		prev;			/* queue links: proc numbers or -1 */
	int32		next;
	int32		pid;
	Oid			roleid;			/* session user */
	TimestampTz state_since;	/* queued: arrival at the gate */

	/*
	 * Holding a slot: the levels it was taken from.  Queued: the levels
	 * whose 'queued' counts it (the install keeps them current).
	 */
	DbgateChain chain;
	pg_atomic_uint64 memory_kb; /* open memory grants */
} DbgateProc;

typedef union DbgateProcPadded
{
	DbgateProc	d;
	char		pad[DBGATE_LINES(sizeof(DbgateProc))];
} DbgateProcPadded;

static DbgateProcPadded *procs = NULL;	/* [max_procs], in shared memory */
static DbgateProc *my_proc = NULL;
static int	my_procno = -1;

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
 * Latches to set once the tree lock is released.  Beyond the array they
 * are set at once (many at a time only when a configuration change admits
 * a crowd).
 */
#define WAKE_BATCH 16

typedef struct Wakeups
{
	int			n;
	int			procnos[WAKE_BATCH];
} Wakeups;

static inline void
wake_later(Wakeups *w, int procno)
{
	if (procno == my_procno)
		return;
	if (w->n < WAKE_BATCH)
		w->procnos[w->n++] = procno;
	else
		SetLatch(&DBGATE_PROC_BY_NUMBER(procno)->procLatch);
}

static inline void
wake_now(Wakeups *w)
{
	int			i;

	for (i = 0; i < w->n; i++)
		SetLatch(&DBGATE_PROC_BY_NUMBER(w->procnos[i])->procLatch);
	w->n = 0;
}

/* ----------
 * Chains and their limits
 * ----------
 */
typedef struct ChainLimits
{
	DbgateChain c;
	DbgateLimits lim[DBGATE_MAX_DEPTH];
} ChainLimits;

/* What chain_limits() found. */
typedef enum ChainRead
{
	CHAIN_OK,
	CHAIN_CHANGED,				/* a parent is no longer the budget named */
	CHAIN_BROKEN				/* too long, or a parent out of range */
} ChainRead;

/*
 * The chain of budget idx (incarnation inc, limits l already read) up to
 * its root, with the limits of every level.  Without a lock the parents
 * are read as they are now; a level that changed meanwhile shows in its
 * tag when its slot is taken.  CHAIN_CHANGED if a parent is no longer the
 * budget the child named; CHAIN_BROKEN for a chain longer than
 * DBGATE_MAX_DEPTH (a budget on a cycle, or its own parent) or a parent
 * index out of range: read without a lock, that may be a change of shape
 * under way (levels of the old and the new trees mixed); under the tree
 * lock it cannot be.
 */
static ChainRead
chain_limits(int idx, uint32 inc, const DbgateLimits *l, ChainLimits *cl)
{
	int			n = 0;

	cl->c.idx[0] = idx;
	cl->c.inc[0] = inc;
	cl->lim[0] = *l;
	n = 1;
	while (cl->lim[n - 1].parent >= 0)
	{
		int			p = cl->lim[n - 1].parent;
		DbgateBudget *pb;

		if (n >= DBGATE_MAX_DEPTH || p >= dbgate_shared->max_budgets)
			return CHAIN_BROKEN;
		pb = budget_entry(p);
		cl->c.idx[n] = p;
		cl->c.inc[n] = cl->lim[n - 1].parent_incarnation;
		dbgate_read_limits(pb, &cl->lim[n]);
		if (pb->incarnation != cl->c.inc[n])
			return CHAIN_CHANGED;
		n++;
	}
	cl->c.n = n;
	return CHAIN_OK;
}

/* ----------
 * State words
 * ----------
 */

static inline void
note_peak_active(DbgateBudget *b, uint32 active)
{
	uint32		peak = pg_atomic_read_u32(&b->peak_active);

	while (active > peak &&
		   !pg_atomic_compare_exchange_u32(&b->peak_active, &peak, active))
		;
}

/*
 * Take a slot of budget b (its word tagged 'tag') if there is room: with
 * 'check' active must be below max_active, with 'empty' nobody may be
 * queued.  Returns 1 when taken (*before: active before), 0 when there was
 * no room, -1 when the word carries another tag (the budget was dropped).
 */
static inline int
level_take(DbgateBudget *b, uint32 tag, int32 max_active, bool check,
		   bool empty, uint32 *before)
{
	uint64		old = pg_atomic_read_u64(&b->state);

	for (;;)
	{
		uint32		active = dbgate_st_active(old);

		if (dbgate_st_tag(old) != tag)
			return -1;
		if ((check && active >= (uint32) max_active) ||
			(empty && dbgate_st_queued(old) != 0) ||
			active >= DBGATE_ST_MASK)
			return 0;
		if (pg_atomic_compare_exchange_u64(&b->state, &old,
										   old + DBGATE_ST_ONE_ACTIVE))
		{
			*before = active;
			return 1;
		}
	}
}

/*
 * Return a slot of b without the lock if nobody is queued in its subtree.
 * Returns false when somebody is (the tree lock is needed); true when done
 * or when the budget was dropped (nothing to return).
 */
static inline bool
level_return_fast(DbgateBudget *b, uint32 tag)
{
	uint64		old = pg_atomic_read_u64(&b->state);

	for (;;)
	{
		if (dbgate_st_tag(old) != tag)
			return true;
		if (dbgate_st_queued(old) != 0)
			return false;
		if (pg_atomic_compare_exchange_u64(&b->state, &old,
										   old - DBGATE_ST_ONE_ACTIVE))
			return true;
	}
}

/*
 * Add 'dactive' and 'dqueued' to b's word if it carries 'tag'.  Under the
 * tree lock.  Returns false if the tag differs.
 */
static inline bool
level_add(DbgateBudget *b, uint32 tag, int dactive, int dqueued)
{
	uint64		old = pg_atomic_read_u64(&b->state);

	for (;;)
	{
		uint64		new = old;

		if (dbgate_st_tag(old) != tag)
			return false;
		if (dactive > 0)
			new += DBGATE_ST_ONE_ACTIVE;
		else if (dactive < 0 && dbgate_st_active(old) > 0)
			new -= DBGATE_ST_ONE_ACTIVE;
		if (dqueued > 0)
			new += DBGATE_ST_ONE_QUEUED;
		else if (dqueued < 0 && dbgate_st_queued(old) > 0)
			new -= DBGATE_ST_ONE_QUEUED;
		if (pg_atomic_compare_exchange_u64(&b->state, &old, new))
			return true;
	}
}

/* ----------
 * The tree lock
 * ----------
 */

/*
 * Lock the tree that budget idx belongs to and return its root.  The shape
 * of the trees only changes while every budget lock is held, so once the
 * root's lock is ours the root we looked up is still the root.
 */
static int
lock_tree(int idx)
{
	DbgateBudget *b = budget_entry(idx);

	for (;;)
	{
		int			root = b->root;

		if (root < 0 || root >= dbgate_shared->max_budgets)
			root = idx;
		LWLockAcquire(dbgate_budget_lock(root), LW_EXCLUSIVE);
		if (b->root == root || (b->root < 0 && root == idx))
			return root;
		LWLockRelease(dbgate_budget_lock(root));
	}
}

static inline void
unlock_tree(int root)
{
	LWLockRelease(dbgate_budget_lock(root));
}

/* ----------
 * The queue lists.  Caller holds the tree lock and changes the 'queued'
 * counts along with the list.
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

/* Unlink a waiter and take it out of 'queued' at its levels. */
static void
queue_remove(int procno)
{
	DbgateProc *p = proc_entry(procno);
	int			i;

	list_unlink(budget_entry(p->budget), procno);
	for (i = 0; i < p->chain.n; i++)
		(void) level_add(budget_entry(p->chain.idx[i]),
						 dbgate_tag_of(p->chain.inc[i]), 0, -1);
}

/* ----------
 * Choosing the waiter that gets a slot.  Caller holds the tree lock.
 * ----------
 */

/* A candidate of the grant step. */
typedef struct Pick
{
	int			procno;			/* -1: none */
	TimestampTz since;			/* its arrival, for ties */
	bool		overdue;
	int64		due_ns;			/* for a token waiter: when it is due */
	int8		token_level;	/* for a token waiter: the level lacking one */
} Pick;

/* The waiter that a release of budget b's own slot goes to by its order. */
static int
order_pick(DbgateBudget *b, const DbgateLimits *l, TimestampTz now,
		   bool *overdue)
{
	int			head = b->queue_head;

	*overdue = false;
	if (head < 0 || !l->lifo)
		return head;
	if (b->qlim.overtake_ms > 0 &&
		now - proc_entry(head)->state_since >= (int64) b->qlim.overtake_ms * 1000)
	{
		*overdue = true;
		return head;
	}
	return b->queue_tail;
}

/* The depth of budget idx in its chain (0 for a budget without parent). */
static int
depth_of(int idx)
{
	int			d = 0;
	DbgateBudget *b = budget_entry(idx);

	while (b->lim.parent >= 0 && d < DBGATE_MAX_DEPTH)
	{
		b = budget_entry(b->lim.parent);
		d++;
	}
	return d;
}

/*
 * Select a waiter of budget idx's subtree that could take a slot at idx
 * and at every level below it now (room and tokens; idx's own room is the
 * caller's to check).  Returns false if none; *blocked then names the
 * candidate whose missing token is due first (procno -1 if none is
 * missing only a token).  'depth' is idx's level below the root: a tree
 * has at most DBGATE_MAX_DEPTH levels and a list of children at most
 * every budget (build_trees() in budgets.c), so a walk that goes further
 * is on a broken tree and stops rather than going round for ever.
 */
static bool
select_in(int idx, int depth, TimestampTz now, int64 now_ns, Pick *pick,
		  Pick *blocked)
{
	DbgateBudget *b = budget_entry(idx);
	DbgateLimits l;
	bool		found = false;

	pick->procno = -1;
	if (depth >= DBGATE_MAX_DEPTH)
	{
		Assert(false);
		return false;
	}
	dbgate_read_limits(b, &l);

	if (b->first_child < 0)
	{
		/* a budget's own queue */
		if (b->queue_head < 0)
			return false;
		pick->procno = order_pick(b, &l, now, &pick->overdue);
		pick->since = proc_entry(pick->procno)->state_since;
		found = true;
	}
	else
	{
		uint32		best_active = 0;
		int32		best_weight = 1;
		int			siblings = 0;
		int			c;

		for (c = b->first_child; c >= 0; c = budget_entry(c)->next_sibling)
		{
			DbgateBudget *cb = budget_entry(c);
			uint64		st = pg_atomic_read_u64(&cb->state);
			DbgateLimits cl;
			Pick		cand;
			uint32		active = dbgate_st_active(st);
			bool		better;

			if (++siblings > dbgate_shared->max_budgets)
			{
				Assert(false);
				break;
			}
			if (dbgate_st_queued(st) == 0)
				continue;		/* nobody waits below */
			dbgate_read_limits(cb, &cl);
			if (cl.enforce && active >= (uint32) cl.max_active)
				continue;		/* the child is at its own cap */
			if (!select_in(c, depth + 1, now, now_ns, &cand, blocked))
				continue;
			/* smallest active / weight; ties: the longest waiting */
			if (!found)
				better = true;
			else
			{
				int64		lhs = (int64) active * best_weight;
				int64		rhs = (int64) best_active * cb->qlim.weight;

				better = (lhs < rhs || (lhs == rhs && cand.since < pick->since));
			}
			if (better)
			{
				*pick = cand;
				best_active = active;
				best_weight = cb->qlim.weight;
				found = true;
			}
		}
		if (!found)
			return false;
	}

	/* this level's token */
	if (l.rate && l.enforce)
	{
		int64		due = dbgate_token_due(b, now_ns);

		if (due != 0)
		{
			if (blocked->procno < 0 || due < blocked->due_ns)
			{
				*blocked = *pick;
				blocked->due_ns = due;
				blocked->token_level = (int8) depth_of(pick->procno >= 0 ?
													  proc_entry(pick->procno)->budget : idx) - depth_of(idx);
			}
			return false;
		}
	}
	return found;
}

/* Select at the root, whose own room is checked here. */
static bool
select_tree(int root, TimestampTz now, int64 now_ns, Pick *pick,
			Pick *blocked)
{
	DbgateBudget *r = budget_entry(root);
	uint64		st = pg_atomic_read_u64(&r->state);

	blocked->procno = -1;
	if (dbgate_st_queued(st) == 0)
		return false;
	if (r->lim.enforce && dbgate_st_active(st) >= (uint32) r->lim.max_active)
		return false;
	return select_in(root, 0, now, now_ns, pick, blocked);
}

/* ----------
 * Granting
 * ----------
 */

/* Hand a slot to procno, whose counts the caller moved to 'active'. */
static inline void
mark_granted(DbgateProc *p, TimestampTz now)
{
	p->state_since = now;
	pg_write_barrier();			/* the waiter reads 'granted' without the lock */
	p->granted = true;
}

/*
 * Give the queued procno a slot at every level of its chain, and a token
 * where a level has a rate (one there at now_ns, taken as of asof_ns: see
 * rate.c); 'beyond' (lock holders)
 * ignores every limit and takes no token.  Caller holds the tree lock.  Returns false when a level
 * had no room or no token after all (a newcomer took it without the lock,
 * or a budget changed): nothing is then changed.
 */
static bool
promote(int procno, bool beyond, int64 now_ns, int64 asof_ns)
{
	DbgateProc *p = proc_entry(procno);
	DbgateLimits lim[DBGATE_MAX_DEPTH];
	uint32		before[DBGATE_MAX_DEPTH];
	int			n = p->chain.n;
	int			i;
	int			t;

	for (i = 0; i < n; i++)
	{
		DbgateBudget *b = budget_entry(p->chain.idx[i]);
		uint32		tag = dbgate_tag_of(p->chain.inc[i]);
		uint64		old = pg_atomic_read_u64(&b->state);
		bool		ok = false;

		dbgate_read_limits(b, &lim[i]);
		for (;;)
		{
			uint32		active = dbgate_st_active(old);

			if (dbgate_st_tag(old) != tag)
			{
				ok = true;		/* a dropped level: nothing to take */
				before[i] = UINT32_MAX;
				break;
			}
			if (!beyond && lim[i].enforce && active >= (uint32) lim[i].max_active)
				break;
			if (pg_atomic_compare_exchange_u64(&b->state, &old,
											   old + DBGATE_ST_ONE_ACTIVE -
											   (dbgate_st_queued(old) > 0 ?
												DBGATE_ST_ONE_QUEUED : 0)))
			{
				ok = true;
				before[i] = active;
				break;
			}
		}
		if (!ok)
			goto undo;
	}

	if (!beyond)
	{
		uint32		lacked = 0; /* shadow levels without a token due */

		for (t = 0; t < n; t++)
		{
			DbgateBudget *b = budget_entry(p->chain.idx[t]);

			if (!lim[t].rate || before[t] == UINT32_MAX)
				continue;
			if (dbgate_token_take_at(b, now_ns, asof_ns, !lim[t].enforce) != 0)
			{
				if (!lim[t].enforce)
					lacked |= 1 << t;
				else
				{
					/* give back the tokens (shadow levels' too), the slots */
					while (--t >= 0)
					{
						if (lim[t].rate && before[t] != UINT32_MAX)
							dbgate_token_return(budget_entry(p->chain.idx[t]));
					}
					goto undo;
				}
			}
		}
		for (t = 0; lacked != 0 && t < n; t++)
		{
			DbgateBudget *b = budget_entry(p->chain.idx[t]);

			if (lacked & (1 << t))
				pg_atomic_fetch_add_u64(&b->would_queue, 1);
		}
	}

	for (i = 0; i < n; i++)
	{
		if (before[i] != UINT32_MAX)
			note_peak_active(budget_entry(p->chain.idx[i]), before[i] + 1);
	}
	return true;

undo:
	while (--i >= 0)
	{
		if (before[i] != UINT32_MAX)
			(void) level_add(budget_entry(p->chain.idx[i]),
							 dbgate_tag_of(p->chain.inc[i]), -1, 1);
	}
	return false;
}

/*
 * The grant step of a tree (see the file header).  Caller holds the tree
 * lock.  Cannot fail.
 */
static void
grant_tree(int root, TimestampTz now, Wakeups *w)
{
	DbgateBudget *r = budget_entry(root);
	int64		now_ns = 0;
	int64		asof_ns;
	int			races = 0;

	for (;;)
	{
		Pick		pick,
					blocked;
		DbgateProc *p;

		if (now_ns == 0)
			now_ns = dbgate_now_ns();
		if (!select_tree(root, now, now_ns, &pick, &blocked))
		{
			/* wait for a token, or for nothing */
			if (blocked.procno >= 0)
			{
				DbgateProc *bp = proc_entry(blocked.procno);

				bp->token_levels |= (uint8) (1 << blocked.token_level);
				if (r->token_waiter != blocked.procno ||
					r->token_due_ns != blocked.due_ns)
				{
					r->token_waiter = blocked.procno;
					r->token_due_ns = blocked.due_ns;
					wake_later(w, blocked.procno);
				}
			}
			else
				r->token_waiter = -1;
			return;
		}

		p = proc_entry(pick.procno);
		if (!budget_entry(p->budget)->lim.fair && pick.procno != my_procno)
		{
			/* non-fair: the chosen waiter takes the slot itself if still free */
			wake_later(w, pick.procno);
			return;
		}
		/*
		 * A queued statement takes its token as of the time it was due: it
		 * was waiting all along, so the time a wake-up took is no idle time
		 * of the bucket.  The tree's token waiter, however late it woke;
		 * the others granted in the same step, up to
		 * DBGATE_TOKEN_CATCHUP_NS back (rate.c).  Otherwise every wake-up's
		 * delay would be lost, and a busy budget would fall short of its
		 * rate (the more, the higher the rate).
		 */
		asof_ns = now_ns - DBGATE_TOKEN_CATCHUP_NS;
		if (pick.procno == r->token_waiter && r->token_due_ns != 0 &&
			r->token_due_ns < asof_ns)
			asof_ns = r->token_due_ns;
		if (!promote(pick.procno, false, now_ns, asof_ns))
		{
			/* taken meanwhile: choose again (bounded by the newcomers) */
			if (++races > 1000)
				return;
			continue;
		}
		list_unlink(budget_entry(p->budget), pick.procno);
		p->overdue = pick.overdue;
		if (r->token_waiter == pick.procno)
			r->token_waiter = -1;
		mark_granted(p, now);
		wake_later(w, pick.procno);
	}
}

/* ----------
 * Admission
 * ----------
 */

/* Our entry shows what we hold or wait for (the state: the caller's). */
static inline void
show_me(const DbgateLookup *lk, TimestampTz now)
{
	my_proc->budget = lk->budget;
	my_proc->incarnation = lk->incarnation;
	my_proc->roleid = lk->user;
	my_proc->rule = (uint8) lk->rule;
	my_proc->via = lk->via;
	my_proc->state_since = now;
}

/* ... and has nothing left of an earlier wait (before queueing). */
static inline void
describe_me(const DbgateLookup *lk, TimestampTz now)
{
	show_me(lk, now);
	my_proc->granted = false;
	my_proc->released = false;
	my_proc->overdue = false;
	my_proc->token_levels = 0;
}

/*
 * Took the slots of chain a->chain at once: counted at the leaf, and our
 * entry shows them.  (The fields of an entry that only matter while it is
 * queued are left from its last wait.)
 */
static inline void
publish_slot(const DbgateLookup *lk, TimestampTz now, DbgateAdmission *a,
			 bool single)
{
	pg_atomic_fetch_add_u64(&budget_entry(lk->budget)->admitted, 1);
	show_me(lk, now);
	if (single)
	{
		/* the same as the copy below, in fewer instructions */
		my_proc->chain.n = 1;
		my_proc->chain.idx[0] = lk->budget;
		my_proc->chain.inc[0] = lk->incarnation;
	}
	else
		my_proc->chain = a->chain;
	pg_write_barrier();
	my_proc->state = DBGATE_PROC_ACTIVE;
	a->since = now;
}

/* Took the slots of cl at once (the slow and the shadow ways). */
static inline void
admitted_now(const DbgateLookup *lk, const ChainLimits *cl, TimestampTz now,
			 DbgateAdmission *a)
{
	a->chain = cl->c;
	if (&a->lim != &cl->lim[0])
		a->lim = cl->lim[0];
	publish_slot(lk, now, a, false);
}

/*
 * Give back slots taken at levels [0, n) of a chain (an admission that did
 * not happen after all): a release, with the tree lock where somebody
 * queued meanwhile.
 */
static void
return_levels(const DbgateChain *c, int n)
{
	DbgateChain part = *c;

	part.n = n;
	dbgate_admission_release(&part, 0);
}

/*
 * Count at the levels of a chain what a shadow admission would have met:
 * a full level, or one whose bit is set in 'lacked' (no token was due),
 * counts the statement once.
 */
static void
count_shadow(const ChainLimits *cl, const uint32 *before, uint32 lacked)
{
	int			i;

	for (i = 0; i < cl->c.n; i++)
	{
		const DbgateLimits *l = &cl->lim[i];
		DbgateBudget *b = budget_entry(cl->c.idx[i]);
		bool		full = before[i] >= (uint32) l->max_active;

		if (!full && !(lacked & (1 << i)))
			continue;
		if (full && i == 0 && !l->enforce &&
			before[i] - (uint32) l->max_active >= (uint32) l->max_queued)
			pg_atomic_fetch_add_u64(&b->would_reject, 1);
		else
			pg_atomic_fetch_add_u64(&b->would_queue, 1);
	}
}

/*
 * A statement of a budget in shadow mode: a slot at every level, whatever
 * the counts; what enforcement would have done is counted.  Tokens are
 * taken once every slot is (so a failure takes none): a shadow level's
 * whether it is due or not, an enforcing ancestor's only if it is there
 * (SPEC: only enforcing levels hold a statement back; a shadow child's
 * statements count at an enforcing ancestor as far as they use it, and one
 * that the ancestor would have held back takes no token, so that it does
 * not hold back the ancestor's enforcing statements after it).
 */
static pg_noinline DbgateAdmit
admit_shadow(const DbgateLookup *lk, const ChainLimits *cl, TimestampTz now,
			 DbgateAdmission *a)
{
	uint32		before[DBGATE_MAX_DEPTH];
	uint32		lacked = 0;		/* levels without a token due */
	int			i;
	int64		now_ns = 0;

	for (i = 0; i < cl->c.n; i++)
	{
		DbgateBudget *b = budget_entry(cl->c.idx[i]);
		int			r = level_take(b, dbgate_tag_of(cl->c.inc[i]), 0, false,
								   false, &before[i]);

		if (r != 1)
		{
			return_levels(&cl->c, i);
			return r < 0 ? DBGATE_ADMIT_RETRY : DBGATE_ADMIT_NONE;
		}
		note_peak_active(b, before[i] + 1);
	}
	for (i = 0; i < cl->c.n; i++)
	{
		if (!cl->lim[i].rate)
			continue;
		if (now_ns == 0)
			now_ns = dbgate_now_ns();
		if (dbgate_token_take(budget_entry(cl->c.idx[i]), now_ns,
							  !cl->lim[i].enforce) != 0)
			lacked |= 1 << i;
	}
	count_shadow(cl, before, lacked);
	admitted_now(lk, cl, now, a);
	return DBGATE_ADMIT_SLOT;
}

/* The error for a budget that is full. */
static void
reject_full(const char *name, uint32 active, int32 max_active,
			uint32 queued, int32 max_queued, const char *held_by,
			uint32 p_active, int32 p_max, bool token)
{
	if (token)
		ereport(ERROR,
				(errcode(ERRCODE_TOO_MANY_CONNECTIONS),
				 errmsg("budget \"%s\" is full", name),
				 errdetail("No admission is due yet under the rate of budget \"%s\", and %u of %d queue places are taken.",
						   held_by, queued, max_queued),
				 errhint("Retry later, or raise max_rate, rate_burst or max_queued with dbgate.alter_budget().")));
	if (held_by != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_TOO_MANY_CONNECTIONS),
				 errmsg("budget \"%s\" is full", name),
				 errdetail("Its parent budget \"%s\" has %u of %d statements active, and %u of %d queue places are taken.",
						   held_by, p_active, p_max, queued, max_queued),
				 errhint("Retry later, or raise max_active of \"%s\" or max_queued of \"%s\" with dbgate.alter_budget().",
						 held_by, name)));
	ereport(ERROR,
			(errcode(ERRCODE_TOO_MANY_CONNECTIONS),
			 errmsg("budget \"%s\" is full", name),
			 errdetail("%u of %d statements are active and %u of %d queue places are taken.",
					   active, max_active, queued, max_queued),
			 errhint("Retry later, or raise max_active or max_queued with dbgate.alter_budget().")));
}

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
	bool		same;			/* the budget is still the one we queued in */
	int			waited_ms;
	int			limit_ms;
	char		name[NAMEDATALEN];
} QueueWait;

static WaitStep queue_wait(QueueWait *q);
static bool queue_act(QueueWait *q, WaitStep step, DbgateAdmission *a);

/*
 * No room at first sight (or a tree, or a rate): decide under the tree
 * lock, and admit, queue or reject.  Throws 53300 when the budget is full.
 */
static pg_noinline DbgateAdmit
admit_slow(const DbgateLookup *lk, bool utility, QueryDesc *queryDesc,
		   TimestampTz now, DbgateAdmission *a)
{
	DbgateBudget *b = budget_entry(lk->budget);
	uint32		tag = dbgate_tag_of(lk->incarnation);
	ChainLimits cl;
	ChainRead	chain;
	DbgateLimits l;
	Wakeups		w;
	QueueWait	q;
	int			root;
	int64		now_ns = 0;
	WaitStep	step;
	bool		proceed;
	bool		snap_released;

	w.n = 0;
	root = lock_tree(lk->budget);
	if (unlikely(!b->in_use || b->incarnation != lk->incarnation))
	{
		/* dropped or replaced since our lookup: classify again */
		unlock_tree(root);
		return DBGATE_ADMIT_RETRY;
	}
	dbgate_read_limits(b, &l);
	chain = chain_limits(lk->budget, lk->incarnation, &l, &cl);
	if (chain == CHAIN_BROKEN)
	{
		/* cannot be under the tree lock: go on ungated, never round */
		unlock_tree(root);
		Assert(false);
		return DBGATE_ADMIT_NONE;
	}
	if ((utility && !l.utility) || !l.enforce || b->first_child >= 0 ||
		chain != CHAIN_OK)
	{
		/* changed since the lookup (classify.c never gives a parent) */
		unlock_tree(root);
		return DBGATE_ADMIT_RETRY;
	}

	describe_me(lk, now);
	for (;;)
	{
		uint64		st = pg_atomic_read_u64(&b->state);
		uint32		before[DBGATE_MAX_DEPTH];
		const char *held_by = NULL;
		uint32		h_active = 0;
		int32		h_max = 0;
		bool		room = true;
		bool		token_short = false;
		int			i;

		if (dbgate_st_tag(st) != tag)
		{
			unlock_tree(root);
			return DBGATE_ADMIT_RETRY;
		}

		/*
		 * Room at every level (a fair budget: and nobody waiting in it;
		 * looked at last, so that a full ancestor is named when it is the
		 * reason, as for a budget that is not fair)
		 */
		for (i = 0; room && i < cl.c.n; i++)
		{
			DbgateBudget *lb = budget_entry(cl.c.idx[i]);
			uint64		lst = pg_atomic_read_u64(&lb->state);

			if (cl.lim[i].enforce &&
				dbgate_st_active(lst) >= (uint32) cl.lim[i].max_active)
			{
				room = false;
				if (i > 0)
				{
					held_by = lb->conf.name;
					h_active = dbgate_st_active(lst);
					h_max = cl.lim[i].max_active;
				}
			}
		}
		if (l.fair && dbgate_st_queued(st) > 0)
			room = false;

		if (room)
		{
			int			r = 1;
			uint32		lacked = 0; /* shadow levels without a token due */

			for (i = 0; i < cl.c.n && r == 1; i++)
				r = level_take(budget_entry(cl.c.idx[i]),
							   dbgate_tag_of(cl.c.inc[i]),
							   cl.lim[i].max_active, cl.lim[i].enforce,
							   i == 0 && l.fair, &before[i]);
			if (r != 1)
			{
				/* changed under us: look again */
				for (i--; --i >= 0;)
					(void) level_add(budget_entry(cl.c.idx[i]),
									 dbgate_tag_of(cl.c.inc[i]), -1, 0);
				if (r < 0)
				{
					unlock_tree(root);
					return DBGATE_ADMIT_RETRY;
				}
				continue;
			}
			for (i = 0; i < cl.c.n; i++)
			{
				DbgateBudget *lb = budget_entry(cl.c.idx[i]);

				if (!cl.lim[i].rate)
					continue;
				if (now_ns == 0)
					now_ns = dbgate_now_ns();
				if (dbgate_token_take(lb, now_ns,
									  !cl.lim[i].enforce) != 0)
				{
					if (!cl.lim[i].enforce)
					{
						lacked |= 1 << i;	/* counted if admitted */
						continue;
					}
					token_short = true;
					held_by = lb->conf.name;
					break;
				}
			}
			if (!token_short)
			{
				for (i = 0; i < cl.c.n; i++)
					note_peak_active(budget_entry(cl.c.idx[i]), before[i] + 1);
				count_shadow(&cl, before, lacked);
				unlock_tree(root);
				admitted_now(lk, &cl, now, a);
				return DBGATE_ADMIT_SLOT;
			}

			/*
			 * no token: give back the tokens (shadow levels' too: one per
			 * admission, not one per attempt) and slots just taken
			 */
			while (--i >= 0)
			{
				if (cl.lim[i].rate)
					dbgate_token_return(budget_entry(cl.c.idx[i]));
			}
			for (i = 0; i < cl.c.n; i++)
				(void) level_add(budget_entry(cl.c.idx[i]),
								 dbgate_tag_of(cl.c.inc[i]), -1, 0);
		}

		if (dbgate_st_queued(st) >= (uint32) l.max_queued)
		{
			char		name[NAMEDATALEN];
			char		held[NAMEDATALEN];

			b->rejected_full++;
			my_proc->budget = -1;
			strlcpy(name, b->conf.name, NAMEDATALEN);
			if (held_by != NULL)
				strlcpy(held, held_by, NAMEDATALEN);
			grant_tree(root, now, &w);	/* the slots given back above */
			unlock_tree(root);
			wake_now(&w);
			reject_full(name, dbgate_st_active(st), l.max_active,
						dbgate_st_queued(st), l.max_queued,
						held_by ? held : NULL, h_active, h_max, token_short);
		}

		/* join the tail of the queue, counted at every level */
		for (i = 0; i < cl.c.n; i++)
		{
			DbgateBudget *lb = budget_entry(cl.c.idx[i]);

			if (!level_add(lb, dbgate_tag_of(cl.c.inc[i]), 0, 1))
				break;
			{
				uint64		lst = pg_atomic_read_u64(&lb->state);

				if ((int32) dbgate_st_queued(lst) > lb->peak_queued)
					lb->peak_queued = dbgate_st_queued(lst);
			}
		}
		if (i < cl.c.n)
		{
			while (--i >= 0)
				(void) level_add(budget_entry(cl.c.idx[i]),
								 dbgate_tag_of(cl.c.inc[i]), 0, -1);
			unlock_tree(root);
			return DBGATE_ADMIT_RETRY;
		}
		break;
	}
	my_proc->chain = cl.c;
	my_proc->state = DBGATE_PROC_QUEUED;
	list_append(b, my_procno);
	/* a slot returned before we were counted, a token due: see now */
	grant_tree(root, now, &w);
	unlock_tree(root);
	wake_now(&w);

	q.idx = lk->budget;
	q.incarnation = lk->incarnation;
	q.enqueued = now;
	q.deadline = (l.queue_timeout_ms > 0) ?
		TimestampTzPlusMilliseconds(now, l.queue_timeout_ms) : 0;
	q.next_lock_check = TimestampTzPlusMilliseconds(now, Max(DeadlockTimeout, 1));
	q.same = true;

	/*
	 * No snapshot held back while we wait (waitsnap.c): a query's, the
	 * portal's of a gated utility command, or that of a fast-path function
	 * call (no query descriptor, not a utility command); taken again as it
	 * goes on, with a slot or ungated.
	 */
	if (utility)
		snap_released = dbgate_waitsnap_utility_release();
	else if (queryDesc != NULL)
		snap_released = dbgate_waitsnap_release(queryDesc);
	else
		snap_released = dbgate_waitsnap_call_release();
	step = queue_wait(&q);
	proceed = queue_act(&q, step, a);
	if (snap_released && utility)
		dbgate_waitsnap_utility_retake();
	else if (snap_released && queryDesc != NULL)
		dbgate_waitsnap_retake(queryDesc);
	else if (snap_released)
		dbgate_waitsnap_call_retake();
	return proceed ? DBGATE_ADMIT_SLOT : DBGATE_ADMIT_NONE;
}

/*
 * Admission to a budget in shadow mode: its chain with every level's
 * limits, then a slot at every level whatever the counts.  A chain that
 * reads as broken without a lock is looked at again under the tree lock
 * (admit_slow), so that a broken one cannot make the caller retry for
 * ever.
 */
static pg_noinline DbgateAdmit
admit_shadow_leaf(const DbgateLookup *lk, bool utility, QueryDesc *queryDesc,
				  TimestampTz now, DbgateAdmission *a)
{
	ChainLimits cl;

	switch (chain_limits(lk->budget, lk->incarnation, &a->lim, &cl))
	{
		case CHAIN_OK:
			break;
		case CHAIN_CHANGED:
			return DBGATE_ADMIT_RETRY;
		case CHAIN_BROKEN:
			return admit_slow(lk, utility, queryDesc, now, a);
	}
	return admit_shadow(lk, &cl, now, a);
}

/*
 * The rest of a fast admission to an enforcing budget that has a parent or
 * a rate, its own slot already taken ('before0': its active before): a
 * slot of every ancestor, bottom-up, then a token at every level that has
 * a rate, each without a lock.  An ancestor's limits are read as they are
 * now; one that changed meanwhile shows in its tag when its slot is taken.
 * Where a level has no room or no token, what was taken goes back and the
 * statement goes the slow way.
 */
static pg_noinline DbgateAdmit
admit_rest(const DbgateLookup *lk, bool utility, QueryDesc *queryDesc,
		   TimestampTz now, DbgateAdmission *a, uint32 before0)
{
	DbgateChain *c = &a->chain;
	DbgateBudget *lv[DBGATE_MAX_DEPTH];
	uint32		before;
	uint32		rated = a->lim.rate ? 1 : 0;	/* levels with a rate */
	uint32		shadow = 0;		/* levels in shadow mode */
	uint32		full = 0;		/* ... of those, full or without a token */
	int32		parent = a->lim.parent;
	uint32		pinc = a->lim.parent_incarnation;
	int			n = 1;
	int			i;

	c->n = 1;
	c->idx[0] = lk->budget;
	c->inc[0] = lk->incarnation;
	lv[0] = budget_entry(lk->budget);
	if (parent < 0)
	{
		/* a rate and no parent: its token, in fewer steps */
		if (dbgate_token_take(lv[0], dbgate_now_ns(), false) != 0)
		{
			return_levels(c, 1);
			return admit_slow(lk, utility, queryDesc, now, a);
		}
		note_peak_active(lv[0], before0 + 1);
		publish_slot(lk, now, a, true);
		return DBGATE_ADMIT_SLOT;
	}
	note_peak_active(lv[0], before0 + 1);
	while (parent >= 0)
	{
		DbgateLimits pl;
		int			r = 0;

		/* a chain too long or out of range is decided under the lock */
		if (n < DBGATE_MAX_DEPTH && parent < dbgate_shared->max_budgets)
		{
			lv[n] = budget_entry(parent);
			dbgate_read_limits(lv[n], &pl);
			r = -1;
			if (lv[n]->incarnation == pinc)
				r = level_take(lv[n], dbgate_tag_of(pinc), pl.max_active,
							   pl.enforce, false, &before);
		}
		if (r != 1)
		{
			/* no room (or the chain changed: classify again) */
			return_levels(c, n);
			if (r < 0)
				return DBGATE_ADMIT_RETRY;
			return admit_slow(lk, utility, queryDesc, now, a);
		}
		/* (its active did reach that, even if the admission fails) */
		note_peak_active(lv[n], before + 1);
		c->idx[n] = parent;
		c->inc[n] = pinc;
		if (pl.rate)
			rated |= 1 << n;
		if (!pl.enforce)
		{
			shadow |= 1 << n;
			if (before >= (uint32) pl.max_active)
				full |= 1 << n;
		}
		parent = pl.parent;
		pinc = pl.parent_incarnation;
		n++;
	}
	c->n = n;

	if (rated)
	{
		int64		now_ns = dbgate_now_ns();

		for (i = 0; i < n; i++)
		{
			if (!(rated & (1 << i)))
				continue;
			if (dbgate_token_take(lv[i], now_ns, (shadow & (1 << i)) != 0) == 0)
				continue;
			if (shadow & (1 << i))
			{
				full |= 1 << i; /* counted once, like a full level */
				continue;
			}

			/*
			 * no token: give back the tokens (shadow levels' too: one per
			 * admission, not one per attempt) and slots just taken
			 */
			while (--i >= 0)
			{
				if (rated & (1 << i))
					dbgate_token_return(lv[i]);
			}
			return_levels(c, n);
			return admit_slow(lk, utility, queryDesc, now, a);
		}
	}
	for (i = 1; unlikely(full != 0) && i < n; i++)
	{
		if (full & (1 << i))
			pg_atomic_fetch_add_u64(&lv[i]->would_queue, 1);
	}
	publish_slot(lk, now, a, false);
	return DBGATE_ADMIT_SLOT;
}

/*
 * Admit a statement to the budget lk names (the leaf of its chain).  The
 * common case -- a budget without parent and without rate, a free slot
 * and, if it is fair, nobody queued -- is one compare-and-swap; a parent
 * adds one per ancestor, a rate one per level that has it.  Returns
 * DBGATE_ADMIT_SLOT with *a filled in, DBGATE_ADMIT_NONE (goes on without
 * a slot: the budget stopped gating while it waited, or a utility command
 * of a budget without 'utility'), or DBGATE_ADMIT_RETRY (the budget changed
 * identity: classify again).  Throws 53300 (full, timed out), and whatever
 * ends a wait (cancel, terminate).  queryDesc is the executor run's, NULL
 * for a utility command and for a fast-path function call.
 */
DbgateAdmit
dbgate_admit(const DbgateLookup *lk, bool utility, QueryDesc *queryDesc,
			 DbgateAdmission *a)
{
	DbgateBudget *b = budget_entry(lk->budget);
	TimestampTz now = GetCurrentTimestamp();
	uint32		tag = dbgate_tag_of(lk->incarnation);
	uint64		old;

	dbgate_read_limits(b, &a->lim);
	if (utility && !a->lim.utility)
		return DBGATE_ADMIT_NONE;
	if (unlikely(!a->lim.enforce))
		return admit_shadow_leaf(lk, utility, queryDesc, now, a);

	old = pg_atomic_read_u64(&b->state);
	for (;;)
	{
		if (dbgate_st_tag(old) != tag ||
			dbgate_st_active(old) >= (uint32) a->lim.max_active ||
			(a->lim.fair && dbgate_st_queued(old) != 0))
			return admit_slow(lk, utility, queryDesc, now, a);
		if (pg_atomic_compare_exchange_u64(&b->state, &old,
										   old + DBGATE_ST_ONE_ACTIVE))
			break;
	}
	if (unlikely(a->lim.parent >= 0 || a->lim.rate))
		return admit_rest(lk, utility, queryDesc, now, a,
						  dbgate_st_active(old));
	note_peak_active(b, dbgate_st_active(old) + 1);
	a->chain.n = 1;
	a->chain.idx[0] = lk->budget;
	a->chain.inc[0] = lk->incarnation;
	publish_slot(lk, now, a, true);
	return DBGATE_ADMIT_SLOT;
}

/* ----------
 * Waiting in a queue
 * ----------
 */

/*
 * Sleep until our latch is set, the next timed event (queue timeout, lock
 * check, our token) is due, or the client goes away.  Interrupts (cancel,
 * terminate, statement_timeout) are serviced here and end the wait by
 * ERROR/FATAL.
 */
static void
queue_sleep(const QueueWait *q)
{
	TimestampTz now = GetCurrentTimestamp();
	TimestampTz wake_at = q->next_lock_check;
	DbgateBudget *leaf = budget_entry(q->idx);
	long		sleep_ms;
	uint32		wait_event = dbgate_shared->wait_event_info;
	int			root = leaf->root;

	if (q->deadline != 0 && q->deadline < wake_at)
		wake_at = q->deadline;
	/* the tree's token waiter sleeps until its token is due (a hint) */
	if (root >= 0 && root < dbgate_shared->max_budgets &&
		budget_entry(root)->token_waiter == my_procno)
	{
		int64		wait_ns = budget_entry(root)->token_due_ns - dbgate_now_ns();
		TimestampTz due = now + Max(wait_ns, 0) / 1000;

		if (due < wake_at)
			wake_at = due;
	}
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
 * Decide what the wake-up means.  Takes the tree lock unless a slot was
 * handed to us (then the granter already moved our counts and unlinked us,
 * and what is left is ours alone).  For STEP_TIMED_OUT we are out of the
 * queue and q says why; for the other results but STEP_SLEEP our entry is
 * still QUEUED and the action finishes it.
 */
static WaitStep
queue_decide(QueueWait *q, TimestampTz now)
{
	DbgateBudget *b = budget_entry(q->idx);
	WaitStep	step = STEP_SLEEP;
	Wakeups		w;
	int			root;

	pg_read_barrier();
	if (my_proc->granted)
	{
		q->same = (dbgate_st_tag(pg_atomic_read_u64(&b->state)) ==
				   dbgate_tag_of(q->incarnation));
		return STEP_GRANTED;
	}

	w.n = 0;
	root = lock_tree(q->idx);
	/* a dropped entry may already serve another budget */
	q->same = (b->in_use && b->incarnation == q->incarnation);
	if (!my_proc->granted && !my_proc->released)
	{
		if (!pg_atomic_read_u32(&dbgate_shared->enabled))
		{
			/* dbgate.enabled = off lets every waiter through at once */
			queue_remove(my_procno);
			step = STEP_UNGATED;
			grant_tree(root, now, &w);
		}
		else
			grant_tree(root, now, &w);	/* our turn (non-fair), a token due */
	}
	if (step == STEP_SLEEP)
	{
		if (my_proc->granted)
			step = STEP_GRANTED;
		else if (my_proc->released)
			step = STEP_UNGATED;	/* the budget was dropped */
		else if (q->deadline != 0 && now >= q->deadline)
		{
			queue_remove(my_procno);
			if (budget_entry(root)->token_waiter == my_procno)
				budget_entry(root)->token_waiter = -1;
			b->rejected_timeout++;
			my_proc->state = DBGATE_PROC_IDLE;
			my_proc->budget = -1;
			q->waited_ms = (int) ((now - q->enqueued) / 1000);
			q->limit_ms = b->conf.queue_timeout_ms;
			strlcpy(q->name, b->conf.name, NAMEDATALEN);
			step = STEP_TIMED_OUT;
			grant_tree(root, now, &w);	/* we may have held others back */
		}
	}
	unlock_tree(root);
	wake_now(&w);
	return step;
}

/*
 * Sleep in the queue until a slot is ours, the budget stops gating us, or
 * an error ends the wait.  We are linked already.  Whatever ends the wait,
 * we are out of the queue afterwards.
 */
static WaitStep
queue_wait(QueueWait *q)
{
	volatile WaitStep step = STEP_SLEEP;

	PG_TRY();
	{
		/* granted while we joined? */
		step = queue_decide(q, GetCurrentTimestamp());
		while (step == STEP_SLEEP)
		{
			TimestampTz now;

			queue_sleep(q);
			now = GetCurrentTimestamp();
			step = queue_decide(q, now);
			if (step == STEP_SLEEP && now >= q->next_lock_check)
			{
				dbgate_lockgraph_check(q->idx, now);
				q->next_lock_check =
					TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
												Max(DeadlockTimeout, 1));
				SetLatch(MyLatch);	/* decide again at once */
			}
		}
	}
	PG_CATCH();
	{
		dbgate_admission_leave_queue();
		PG_RE_THROW();
	}
	PG_END_TRY();
	return step;
}

/* The bounds of the wait histogram's finite buckets, in microseconds. */
static const uint64 hist_bounds_us[DBGATE_HIST_BUCKETS] = {
	100, 500, 1000, 5000, 10000, 50000, 100000, 500000, 1000000, 5000000,
	10000000
};

const double dbgate_hist_bounds_ms[DBGATE_HIST_BUCKETS] = {
	0.1, 0.5, 1, 5, 10, 50, 100, 500, 1000, 5000, 10000
};

/* Count an admission after a wait of waited_us at the statement's budget. */
static void
count_admitted_after_wait(DbgateBudget *b, uint64 waited_us)
{
	uint64		max = pg_atomic_read_u64(&b->wait_time_max_us);
	int			k;

	pg_atomic_fetch_add_u64(&b->admitted, 1);
	pg_atomic_fetch_add_u64(&b->admitted_after_wait, 1);
	pg_atomic_fetch_add_u64(&b->wait_time_total_us, waited_us);
	while (waited_us > max &&
		   !pg_atomic_compare_exchange_u64(&b->wait_time_max_us, &max,
										   waited_us))
		;
	for (k = 0; k < DBGATE_HIST_BUCKETS; k++)
	{
		if (waited_us <= hist_bounds_us[k])
		{
			pg_atomic_fetch_add_u64(&b->wait_hist[k], 1);
			break;
		}
	}
}

/*
 * Act on the end of a wait, with no lock held.  Returns whether we hold a
 * slot; throws the queue timeout error.
 */
static bool
queue_act(QueueWait *q, WaitStep step, DbgateAdmission *a)
{
	DbgateBudget *b = budget_entry(q->idx);
	uint64		waited_us = elapsed_us(q->enqueued, GetCurrentTimestamp());
	bool		slot = false;

	switch (step)
	{
		case STEP_GRANTED:
			{
				int			i;

				if (q->same)
				{
					count_admitted_after_wait(b, waited_us);
					if (my_proc->overdue)
						pg_atomic_fetch_add_u64(&b->admitted_overdue, 1);
					for (i = 0; i < my_proc->chain.n; i++)
					{
						if (my_proc->token_levels & (1 << i))
							pg_atomic_fetch_add_u64(&budget_entry(my_proc->chain.idx[i])->rate_limited, 1);
					}
					dbgate_read_limits(b, &a->lim);
				}
				else
					memset(&a->lim, 0, sizeof(a->lim));	/* dropped meanwhile */
				a->chain = my_proc->chain;
				a->since = my_proc->state_since;
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
 * Leave the queue because of an error or exit while waiting.  If a slot
 * was granted to us in the meantime, return it like a release.
 */
void
dbgate_admission_leave_queue(void)
{
	DbgateBudget *b;
	Wakeups		w;
	int			root;
	bool		same;
	bool		granted;

	/* only we move our entry into QUEUED: reading it without the lock is safe */
	if (my_proc == NULL || my_proc->state != DBGATE_PROC_QUEUED)
		return;
	b = budget_entry(my_proc->budget);
	w.n = 0;
	root = lock_tree(my_proc->budget);
	same = (b->in_use && b->incarnation == my_proc->incarnation);
	granted = my_proc->granted;
	if (!granted && !my_proc->released && same)
		queue_remove(my_procno);
	if (same)
		b->canceled_waiting++;
	if (budget_entry(root)->token_waiter == my_procno)
		budget_entry(root)->token_waiter = -1;
	if (!granted)
		grant_tree(root, GetCurrentTimestamp(), &w);
	my_proc->granted = false;
	my_proc->released = false;
	my_proc->state = DBGATE_PROC_IDLE;
	my_proc->budget = -1;
	unlock_tree(root);
	wake_now(&w);

	/* the slot handed to us in that instant goes on to the next waiter */
	if (granted)
		dbgate_admission_release(&my_proc->chain, 0);
}

/* ----------
 * Returning a slot
 * ----------
 */

/*
 * The levels of c from 'from' on, level 'from' having waiters: each level
 * with nobody queued takes its slot back by one compare-and-swap, the
 * others are returned under their trees' locks.
 */
static pg_noinline void
release_slow(const DbgateChain *c, int from)
{
	bool		done[DBGATE_MAX_DEPTH];
	int			i;
	int			j;

	done[from] = false;
	for (i = from + 1; i < c->n; i++)
	{
		done[i] = level_return_fast(budget_entry(c->idx[i]),
									dbgate_tag_of(c->inc[i]));
	}

	for (i = from; i < c->n; i++)
	{
		Wakeups		w;
		int			root;

		if (done[i])
			continue;
		/* somebody waits: return it, and the other levels of that tree */
		w.n = 0;
		root = lock_tree(c->idx[i]);
		for (j = i; j < c->n; j++)
		{
			DbgateBudget *lb = budget_entry(c->idx[j]);

			if (done[j] || lb->root != root)
				continue;
			(void) level_add(lb, dbgate_tag_of(c->inc[j]), -1, 0);
			done[j] = true;
		}
		grant_tree(root, GetCurrentTimestamp(), &w);
		unlock_tree(root);
		wake_now(&w);
	}
}

/* The levels of c with nobody queued by one compare-and-swap each. */
static pg_noinline void
release_chain(const DbgateChain *c)
{
	int			i;

	for (i = 0; i < c->n; i++)
	{
		if (!level_return_fast(budget_entry(c->idx[i]),
							   dbgate_tag_of(c->inc[i])))
		{
			release_slow(c, i);
			return;
		}
	}
}

/*
 * Return a slot at every level of chain c (taken at 'admitted_at', for the
 * budget's active_time_total; 0 for none).  Fast: levels with nobody queued
 * take it back by one compare-and-swap each.  A level with waiters is
 * returned under its tree's lock, and the tree's grant step hands the slot
 * on.
 */
void
dbgate_admission_release(const DbgateChain *c, TimestampTz admitted_at)
{
	if (admitted_at != 0 && c->n > 0)
	{
		DbgateBudget *leaf = budget_entry(c->idx[0]);

		if (dbgate_st_tag(pg_atomic_read_u64(&leaf->state)) ==
			dbgate_tag_of(c->inc[0]))
			pg_atomic_fetch_add_u64(&leaf->active_time_total_us,
									elapsed_us(admitted_at,
											   GetCurrentTimestamp()));
	}

	/* a budget without parent and nobody queued: one compare-and-swap */
	if (likely(c->n == 1) &&
		level_return_fast(budget_entry(c->idx[0]), dbgate_tag_of(c->inc[0])))
		return;
	release_chain(c);
}

/*
 * This backend returns the slot it holds: its entry is idle again, then
 * the slot goes back as dbgate_admission_release() says.
 */
void
dbgate_admission_return(const DbgateChain *c, TimestampTz admitted_at)
{
	my_proc->state = DBGATE_PROC_IDLE;
	my_proc->budget = -1;
	dbgate_admission_release(c, admitted_at);
}

/* ----------
 * The backend's own entry (slot.c)
 * ----------
 */

/* A client backend starts using its entry. */
void
dbgate_admission_attach(int procno)
{
	my_procno = procno;
	my_proc = proc_entry(procno);
	my_proc->pid = MyProcPid;
}

/*
 * The slot this backend holds changes state (DBGATE_PROC_ACTIVE: a
 * statement runs under it; DBGATE_PROC_HELD: held while nothing runs),
 * since 'since' (0: the time shown stays).
 */
void
dbgate_admission_mark(uint8 state, TimestampTz since)
{
	if (since != 0)
		my_proc->state_since = since;
	my_proc->state = state;
}

/* This backend's memory grants changed by delta_kb at every level. */
void
dbgate_admission_memory(const DbgateChain *c, int64 delta_kb)
{
	int			i;

	for (i = 0; i < c->n; i++)
	{
		DbgateBudget *lb = budget_entry(c->idx[i]);

		if (dbgate_st_tag(pg_atomic_read_u64(&lb->state)) !=
			dbgate_tag_of(c->inc[i]))
			continue;
		pg_atomic_fetch_add_u64(&lb->memory_kb_active, (uint64) delta_kb);
	}
	pg_atomic_fetch_add_u64(&my_proc->memory_kb, (uint64) delta_kb);
}

/* ----------
 * Lock-holder check (lockgraph.c)
 * ----------
 */

/*
 * Claim the lock-holder check of the tree of budget idx until 'until':
 * only one waiter of a tree looks at a time, and once per
 * deadlock_timeout.  Returns the root, or -1 if another waiter has it.
 */
int
dbgate_admission_claim_lock_check(int idx, TimestampTz now, TimestampTz until)
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
int
dbgate_admission_held_back(int root, DbgateHeldBack *out, int max)
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
int
dbgate_admission_lock_waiting_holders(int idx, uint32 inc, int *pids, int max)
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
 * dbgate_admission_held_back() gives them.  Returns false if it is not.
 */
bool
dbgate_admission_queued_levels(int procno, int pid, DbgateHeldBack *hb)
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
	root = lock_tree(idx);
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
void
dbgate_admission_admit_lock_holder(int procno, int pid)
{
	DbgateProc *e = proc_entry(procno);
	int			idx = e->budget;
	int			root;
	bool		done = false;

	if (idx < 0 || idx >= dbgate_shared->max_budgets)
		return;
	root = lock_tree(idx);
	if (e->pid == pid && e->budget == idx && e->state == DBGATE_PROC_QUEUED &&
		!e->granted && !e->released &&
		promote(procno, true, 0, 0))
	{
		DbgateBudget *r = budget_entry(root);

		list_unlink(budget_entry(idx), procno);
		budget_entry(idx)->admitted_lock_holder++;
		if (r->token_waiter == procno)
			r->token_waiter = -1;
		mark_granted(e, GetCurrentTimestamp());
		done = true;
	}
	unlock_tree(root);
	if (done && procno != my_procno)
		SetLatch(&DBGATE_PROC_BY_NUMBER(procno)->procLatch);
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
		pg_atomic_init_u64(&procs[i].d.memory_kb, 0);
	}
}

/* In a backend that attached to existing shared memory (EXEC_BACKEND). */
void
dbgate_admission_shmem_attach(void *base)
{
	procs = (DbgateProcPadded *) base;
}

/*
 * A budget entry starts serving a budget: an empty queue and a full token
 * bucket.  Caller holds the budget's tree lock (or every lock, or is alone
 * at start-up) and installs the limits next.
 */
void
dbgate_admission_budget_created(DbgateBudget *b)
{
	b->queue_head = -1;
	b->queue_tail = -1;
	b->token_waiter = -1;
	b->token_due_ns = 0;
	pg_atomic_write_u64(&b->lock_check_due, 0);
	/* grants of a dropped budget that used the entry are not released here */
	pg_atomic_write_u64(&b->memory_kb_active, 0);
	dbgate_token_fill(b);
}

/*
 * Install the configuration 'conf' (with its parent resolved to an entry)
 * as b's limits.  A change of the rate or of 'enforce' fills the token
 * bucket.  Caller holds the budget's tree lock, or every budget lock.
 */
void
dbgate_admission_set_limits(DbgateBudget *b, const DbgateBudgetConf *conf,
							int parent, uint32 parent_incarnation)
{
	DbgateLimits l;
	DbgateQueueLimits q;

	memset(&l, 0, sizeof(l));
	memset(&q, 0, sizeof(q));
	l.max_active = conf->max_active;
	l.max_queued = conf->max_queued;
	l.queue_timeout_ms = conf->queue_timeout_ms;
	l.statement_timeout_ms = conf->statement_timeout_ms;
	l.lock_timeout_ms = conf->lock_timeout_ms;
	l.idle_timeout_ms = conf->idle_timeout_ms;
	l.parent = parent;
	l.parent_incarnation = parent_incarnation;
	l.max_memory_mb = conf->max_memory_mb;
	l.scope = conf->scope;
	l.fair = conf->fair;
	l.enforce = conf->enforce;
	l.utility = conf->utility;
	l.lifo = (conf->queue_order == DBGATE_ORDER_LIFO);
	l.rate = (conf->max_rate > 0);
	l.min_cost = conf->min_cost;
	q.overtake_ms = conf->overtake_limit_ms;
	q.weight = Max(conf->weight, 1);
	if (l.rate)
	{
		double		interval = 1e9 / conf->max_rate;

		q.rate_interval_ns = (int64) Max(interval, 1.0);
		q.rate_tolerance_ns = (int64) (Max(conf->rate_burst, 1) - 1) *
			q.rate_interval_ns;
	}

	if (b->conf.max_rate != conf->max_rate ||
		b->conf.rate_burst != conf->rate_burst ||
		b->conf.enforce != conf->enforce)
		dbgate_token_fill(b);

	pg_atomic_fetch_add_u32(&b->conf_seq, 1);	/* odd: writing (a barrier) */
	b->conf = *conf;
	b->lim = l;
	b->qlim = q;
	pg_atomic_fetch_add_u32(&b->conf_seq, 1);	/* even again (a barrier) */
}

/*
 * Let the waiters of budget b go on ungated: it was dropped, or it has
 * children now.  Their 'queued' counts are the caller's (the entry is
 * reset, or every count is recomputed).  Caller holds the tree lock or
 * every budget lock.
 */
void
dbgate_admission_release_waiters(DbgateBudget *b)
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
 * The positions in chain 'to' of the levels of chain 'from' whose bits are
 * set in 'levels' (a waiter's token_levels: bit k for the k-th level from
 * the leaf).  A level that is not in 'to' is forgotten: a token it lacked
 * held back no admission under the new chain.
 */
static uint8
remap_levels(const DbgateChain *from, const DbgateChain *to, uint8 levels)
{
	uint8		out = 0;
	int			k;
	int			j;

	for (k = 0; k < from->n; k++)
	{
		if (!(levels & (1 << k)))
			continue;
		for (j = 0; j < to->n; j++)
		{
			if (to->idx[j] == from->idx[k] && to->inc[j] == from->inc[k])
				out |= (uint8) (1 << j);
		}
	}
	return out;
}

/*
 * After the shape of the trees changed (every budget lock held): count
 * every waiter in 'queued' at the levels of its budget's chain as it is
 * now, and remember those levels in its entry (and which of them it waited
 * for a token of: rate_limited is counted at those levels).
 */
void
dbgate_admission_recount_queued(void)
{
	DbgateShared *sh = dbgate_shared;
	int			i;

	for (i = 0; i < sh->max_budgets; i++)
	{
		DbgateBudget *b = budget_entry(i);
		uint64		old = pg_atomic_read_u64(&b->state);

		if (!b->in_use)
			continue;
		while (!pg_atomic_compare_exchange_u64(&b->state, &old,
											   old & ~(uint64) DBGATE_ST_MASK))
			;
		b->token_waiter = -1;
	}
	for (i = 0; i < sh->max_budgets; i++)
	{
		DbgateBudget *b = budget_entry(i);
		int			p;

		if (!b->in_use)
			continue;
		for (p = b->queue_head; p >= 0; p = proc_entry(p)->next)
		{
			DbgateProc *e = proc_entry(p);
			DbgateChain before = e->chain;
			int			idx = i;
			int			n = 0;

			while (idx >= 0 && n < DBGATE_MAX_DEPTH)
			{
				DbgateBudget *lb = budget_entry(idx);

				e->chain.idx[n] = idx;
				e->chain.inc[n] = lb->incarnation;
				pg_atomic_fetch_add_u64(&lb->state, DBGATE_ST_ONE_QUEUED);
				n++;
				idx = lb->lim.parent;
			}
			e->chain.n = n;
			e->token_levels = remap_levels(&before, &e->chain, e->token_levels);
		}
	}
}

/*
 * A budget in shadow mode holds nobody back: admit its waiters at once,
 * beyond every limit.  Caller holds the tree lock or every budget lock.
 */
void
dbgate_admission_admit_all(DbgateBudget *b)
{
	TimestampTz now = GetCurrentTimestamp();

	while (b->queue_head >= 0)
	{
		int			procno = b->queue_head;
		DbgateProc *p = proc_entry(procno);

		if (!promote(procno, true, 0, 0))
		{
			/* a level was dropped meanwhile: let it go ungated */
			list_unlink(b, procno);
			p->released = true;
		}
		else
		{
			list_unlink(b, procno);
			mark_granted(p, now);
		}
		if (procno != my_procno)
			SetLatch(&DBGATE_PROC_BY_NUMBER(procno)->procLatch);
	}
}

/*
 * Run the grant step of the tree whose root is 'root' (a raised limit, a
 * changed order, weight, rate or shape).  Caller holds the tree lock or
 * every budget lock.
 */
void
dbgate_admission_grant(int root)
{
	Wakeups		w;
	int			i;

	w.n = 0;
	budget_entry(root)->token_waiter = -1;
	grant_tree(root, GetCurrentTimestamp(), &w);
	for (i = 0; i < w.n; i++)
		SetLatch(&DBGATE_PROC_BY_NUMBER(w.procnos[i])->procLatch);
}

/* Lock and unlock a budget's tree (budgets.c, for a single tree). */
int
dbgate_admission_lock_tree(int idx)
{
	return lock_tree(idx);
}

/*
 * The backends of budget idx for dbgate.backends: queued ones in the order
 * they would be served (see SPEC: queue_position), then slot holders.  One
 * consistent picture per budget, copied under its tree lock.  Caller holds
 * config_lock (shared), so that the budget keeps its identity.  Returns the
 * number of rows written (at most maxrows).
 */
int
dbgate_admission_backends(int idx, DbgateBackendRow *rows, int maxrows)
{
	DbgateShared *sh = dbgate_shared;
	DbgateBudget *b = budget_entry(idx);
	TimestampTz now = GetCurrentTimestamp();
	int			n = 0;
	int			root;
	int			p;
	int			nqueued = 0;
	int			overdue = 0;

	root = lock_tree(idx);
	/* in arrival order; 'lifo' serves the overdue prefix, then newest first */
	for (p = b->queue_head; p >= 0; p = proc_entry(p)->next)
	{
		DbgateProc *e = proc_entry(p);

		if (b->lim.lifo && b->qlim.overtake_ms > 0 &&
			now - e->state_since >= (int64) b->qlim.overtake_ms * 1000)
			overdue++;
		nqueued++;
	}
	for (p = b->queue_head; p >= 0 && n < maxrows; p = proc_entry(p)->next)
	{
		DbgateProc *e = proc_entry(p);
		DbgateBackendRow *row = &rows[n];

		row->pid = e->pid;
		row->roleid = e->roleid;
		row->budget = idx;
		row->state = DBGATE_ROW_QUEUED;
		row->since = e->state_since;
		row->rule = e->rule;
		row->via = e->via;
		row->memory_kb = 0;
		/* position by arrival: 1 .. nqueued */
		row->position = n + 1;
		if (b->lim.lifo && n >= overdue)
			row->position = overdue + (nqueued - n);
		n++;
	}
	for (p = 0; p < sh->max_procs && n < maxrows; p++)
	{
		DbgateProc *e = proc_entry(p);
		DbgateBackendRow *row;
		uint8		state = e->state;

		if (e->budget != idx || e->incarnation != b->incarnation)
			continue;
		/* a granted waiter already holds its slot */
		if (!(state == DBGATE_PROC_ACTIVE || state == DBGATE_PROC_HELD ||
			  (state == DBGATE_PROC_QUEUED && e->granted)))
			continue;
		row = &rows[n++];
		row->pid = e->pid;
		row->roleid = e->roleid;
		row->budget = idx;
		row->state = (state == DBGATE_PROC_HELD) ?
			DBGATE_ROW_HELD : DBGATE_ROW_ACTIVE;
		row->since = e->state_since;
		row->position = 0;
		row->rule = e->rule;
		row->via = e->via;
		row->memory_kb = (int64) pg_atomic_read_u64(&e->memory_kb);
	}
	unlock_tree(root);
	return n;
}

/* The arrival of the longest waiter of idx's subtree, 0 if none (tree lock). */
static TimestampTz
oldest_arrival(int idx, int depth)
{
	DbgateBudget *b = budget_entry(idx);
	TimestampTz oldest = 0;
	int			c;

	if (b->queue_head >= 0)
		oldest = proc_entry(b->queue_head)->state_since;
	if (depth >= DBGATE_MAX_DEPTH)
		return oldest;
	for (c = b->first_child; c >= 0; c = budget_entry(c)->next_sibling)
	{
		TimestampTz t = oldest_arrival(c, depth + 1);

		if (t != 0 && (oldest == 0 || t < oldest))
			oldest = t;
	}
	return oldest;
}

/*
 * How long the longest waiter of budget idx's subtree has waited (us), 0
 * if none.  Caller holds config_lock (shared).
 */
uint64
dbgate_admission_oldest_wait(int idx)
{
	TimestampTz oldest;
	int			root;

	root = lock_tree(idx);
	oldest = oldest_arrival(idx, 0);
	unlock_tree(root);
	return oldest == 0 ? 0 : elapsed_us(oldest, GetCurrentTimestamp());
}

/* A session ended by its budget's idle_in_transaction_timeout. */
void
dbgate_admission_count_terminated_idle(const DbgateChain *c)
{
	DbgateBudget *b;

	if (c->n == 0)
		return;
	b = budget_entry(c->idx[0]);
	if (dbgate_st_tag(pg_atomic_read_u64(&b->state)) == dbgate_tag_of(c->inc[0]))
		pg_atomic_fetch_add_u64(&b->terminated_idle, 1);
}

/*
 * The number of slot holders of budget idx whose slot is held while
 * nothing runs under it (shown as idle in transaction).  Caller holds
 * config_lock (shared).  A hint: entries are read without their owners'
 * cooperation.
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

		if (e->state == DBGATE_PROC_HELD && e->budget == idx &&
			e->incarnation == incarnation)
			n++;
	}
	return n;
}
