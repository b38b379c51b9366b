/*-------------------------------------------------------------------------
 *
 * trees.c
 *	  Trees of budgets: what the shadow levels of a chain count, and which
 *	  waiter of a tree a free slot goes to.
 *
 * One of the admission files (admission.c lists them and has the rules
 * that all of them follow).
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
 * Which waiter gets a slot (for the grant step of queue.c)
 * --------------------------------------------------------
 *	  - in a budget with children: among the children that have room
 *		(active < max_active) and a waiter that could take every level
 *		below, the one with the smallest active / weight (slots held for a
 *		'lifo' child count as its own, queue.c); ties go to the candidate
 *		that has waited longest (SPEC: Shares).  A level without room is
 *		passed only by a child that holds a slot there for its
 *		reservation, or by a budget that slots are held for at every
 *		level above ('lifo'; queue.c has both);
 *	  - in a budget's own queue: 'fifo' the head (the longest waiter);
 *		'lifo' the head if it has waited overtake_limit or more (the
 *		overdue are a prefix of the queue, which is in arrival order, and
 *		the head is the longest of them), otherwise the tail (the newest);
 *		how the slot reaches the waiter chosen (handed off, or freed and
 *		the waiter woken) is the grant step's rule (queue.c);
 *	  - a level with a rate must have a token: a candidate that lacks one
 *		below the level being decided is passed over for its siblings; if
 *		the whole tree waits for a token, the candidate whose token is due
 *		first is the tree's *token waiter*: only it sleeps until then (on a
 *		timer) and decides again; nobody polls;
 *	  - a waiter that had room at every level from its budget up to some
 *		budget, passed over because a level above that one is full, is
 *		counted in held_above of the adapting budgets on the way: adapt.c
 *		leaves L alone in a period in which a budget waited for an
 *		ancestor's slots (SPEC), and cannot tell that from its own counts
 *		at the step (a parent's 'queued' counts its children's waiters at
 *		their own limits too, and a slot just freed for a woken waiter
 *		looks free).
 *
 * Locking: the choice reads the queues of a tree, so its caller holds the
 * tree lock.  A chain's limits (chain_limits(), admission_internals.h) are
 * read without a lock, each level's consistently (dbgate_read_limits()):
 * a level that changed meanwhile shows in its tag when its slot is taken.
 * What shadow levels count are atomic additions; held_above is the tree
 * lock's.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "admission_internals.h"
#include "dimension.h"
#include "shmem.h"
#include "trees.h"

/* ----------
 * Shadow levels
 * ----------
 */

/*
 * Count at the levels of a chain what a shadow admission would have met:
 * a full level, or one whose bit is set in 'lacked' (no token was due),
 * counts the statement once.
 */
void
dbgate_count_shadow(const ChainLimits *cl, const uint32 *before,
					uint32 lacked)
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

/* ----------
 * Choosing the waiter that gets a slot.  Caller holds the tree lock.
 * ----------
 */

/*
 * Has the longest waiter of 'lifo' budget b waited overtake_limit or more?
 * (The queue is in arrival order: its head is the longest waiter.)
 */
bool
dbgate_lifo_overdue(DbgateBudget *b, TimestampTz now)
{
	int			head = b->queue_head;

	return head >= 0 && b->qlim.overtake_ms > 0 &&
		now - proc_entry(head)->state_since >= (int64) b->qlim.overtake_ms * 1000;
}

/* The waiter that a release of budget b's own slot goes to by its order. */
static int
order_pick(DbgateBudget *b, const DbgateLimits *l, TimestampTz now,
		   int64 now_ns, bool *overdue)
{
	int			head = b->queue_head;

	*overdue = false;
	if (unlikely(l->dim_flags != 0) && head >= 0)
	{
		int			d = dbgate_dims_orderer(l->dim_flags);

		/* a dimension that partitions the queue (keys) orders it */
		if (d >= 0)
			return dbgate_dimensions[d]->pick(b, l, now, now_ns, overdue);
	}
	if (head < 0 || !l->lifo)
		return head;
	if (dbgate_lifo_overdue(b, now))
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
 * A waiter of budget b's subtree, with room at every level from its own
 * budget up to b, was passed over because a level above b is full: b
 * waited for an ancestor's slots (adapt.c: such a period leaves L as it
 * is).  Counted only while b adapts.
 */
static inline void
note_held_above(DbgateBudget *b)
{
	if (pg_atomic_read_u32(&b->adapt_limit) != 0)
		b->held_above++;
}

/*
 * Level idx (budget b, using the admission dimensions 'dims': a rate) does
 * not admit the pick now (no token): the pick becomes the blocked
 * candidate if what it lacks is due first (with the level that lacks it),
 * and the level is passed over.  A dimension that admits nothing before a
 * release of its own (DBGATE_DIM_UNTIL_RELEASE) passes the level over
 * without a due time: that release runs the grant step.  Returns false
 * when the level admits the pick.
 */
static bool
dims_block(DbgateBudget *b, int idx, uint8 dims, int64 now_ns,
		   const Pick *pick, Pick *blocked)
{
	DbgateProc *e = proc_entry(pick->procno);
	int			level = depth_of(e->budget) - depth_of(idx);
	int64		due = dbgate_dims_due(b, dims, e, level, now_ns);

	if (due == DBGATE_DIM_TAKEN)
		return false;
	if (due == DBGATE_DIM_UNTIL_RELEASE)
		return true;
	if (blocked->procno < 0 || due < blocked->due_ns)
	{
		*blocked = *pick;
		blocked->due_ns = due;
		/*
		 * the level's rate_limited counts a wait for its own bucket (a
		 * dimension of dbgate_dims_timed), not one for a key's, which the
		 * key counts (SPEC 1.3: Key tokens)
		 */
		blocked->token_level = (int8) level;
		if (!(dims & dbgate_dims_timed) ||
			dbgate_dims_due(b, dims & dbgate_dims_timed, e, level,
							now_ns) == DBGATE_DIM_TAKEN)
			blocked->token_level = -1;
	}
	return true;
}

/*
 * Select a waiter of budget idx's subtree that could take a slot at every
 * level from idx down now (room and tokens).  'blocked_above': a level
 * above idx is full (and what the path holds does not cover it), so only
 * a budget with slots held for it can be chosen.  Returns false if none;
 * *blocked then names the candidate whose missing token is due first
 * (procno -1 if none is missing only a token).  *passed (never reset
 * here): a waiter with room up to idx was passed over only because a
 * level above idx is full (counted in held_above of idx and of the levels
 * below it on the way).  'depth' is idx's level below the root: a tree
 * has at most DBGATE_MAX_DEPTH levels and a list of children at most
 * every budget (build_trees() in budgets.c), so a walk that goes further
 * is on a broken tree and stops rather than going round for ever.
 */
static bool
select_in(int idx, int depth, bool blocked_above, TimestampTz now,
		  int64 now_ns, Pick *pick, Pick *blocked, bool *passed)
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
		uint64		st = pg_atomic_read_u64(&b->state);

		/* a budget's own queue: its own room, and room above or held */
		if (b->queue_head < 0 ||
			(l.enforce && dbgate_st_active(st) >= (uint32) l.max_active))
			return false;
		if (blocked_above && b->held == 0)
		{
			note_held_above(b);
			*passed = true;
			return false;
		}
		pick->procno = order_pick(b, &l, now, now_ns, &pick->overdue);
		if (pick->procno < 0)
			return false;		/* no waiter's key could take it */
		pick->since = proc_entry(pick->procno)->state_since;
		found = true;
	}
	else
	{
		uint64		st = pg_atomic_read_u64(&b->state);
		bool		full = l.enforce &&
			dbgate_st_active(st) >= (uint32) l.max_active;
		uint32		best_active = 0;
		int32		best_weight = 1;
		int			siblings = 0;
		bool		passed_below = false;
		int			c;

		for (c = b->first_child; c >= 0; c = budget_entry(c)->next_sibling)
		{
			DbgateBudget *cb = budget_entry(c);
			uint64		cst = pg_atomic_read_u64(&cb->state);
			Pick		cand;
			uint32		active;
			bool		better;

			if (++siblings > dbgate_shared->max_budgets)
				break;			/* a broken list (cannot be) */
			if (dbgate_st_queued(cst) == 0)
				continue;		/* nobody waits below */
			/* a slot that c's reservation holds here covers this level */
			if (!select_in(c, depth + 1,
						   blocked_above || (full && !resv_has_held(cb)),
						   now, now_ns, &cand, blocked, &passed_below))
				continue;
			/* smallest active / weight (slots held for it count); ties: the
			 * longest waiting */
			active = dbgate_st_active(cst) + (uint32) cb->held;
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
		/* passed over for a level above this one, which has room itself */
		if (passed_below && blocked_above && !full)
		{
			note_held_above(b);
			*passed = true;
		}
		if (!found)
			return false;
	}

	/* this level's admission dimensions (its token) */
	if (l.dim_flags && l.enforce &&
		dims_block(b, idx, l.dim_flags, now_ns, pick, blocked))
		return false;
	return found;
}

/*
 * Select at the root.  A full root can still serve a budget that slots are
 * held for (queue.c), so the walk goes on where the root has children.
 */
bool
dbgate_select_tree(int root, TimestampTz now, int64 now_ns, Pick *pick,
				   Pick *blocked)
{
	DbgateBudget *r = budget_entry(root);
	uint64		st = pg_atomic_read_u64(&r->state);
	bool		passed = false;

	blocked->procno = -1;
	if (dbgate_st_queued(st) == 0)
		return false;
	if (r->first_child < 0 && r->lim.enforce &&
		dbgate_st_active(st) >= (uint32) r->lim.max_active)
		return false;
	return select_in(root, 0, false, now, now_ns, pick, blocked, &passed);
}
