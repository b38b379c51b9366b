/*-------------------------------------------------------------------------
 *
 * queue.c
 *	  The queues of a tree of budgets: the tree lock, the queue lists, the
 *	  grant step and the release of a slot that somebody waits for.  What
 *	  a configuration install does to the queues, and what the views read
 *	  of them, is install.c's.
 *
 * One of the admission files (admission.c lists them and has the rules
 * that all of them follow).
 *
 * Locking
 * -------
 * The lock of a tree is the lock of its root (shmem.h): it protects every
 * queue of the tree (the lists, the 'queued' counts, the token waiter), the
 * statistics that are not atomics and the entries of the tree's queued
 * backends.  dbgate_lock_tree() finds the root and locks it: the shape of
 * the trees changes only while every budget lock is held, so once the
 * root's lock is ours the root we looked up is still the root.  Every
 * function here that reads or changes a queue expects the tree lock held,
 * or every budget lock (an install that changes the shape of the trees:
 * budgets.c), and says so; the views take the tree lock themselves, with
 * config_lock held shared by their caller so that the budget keeps its
 * identity.  Never two tree locks at once.
 *
 * Who gets a slot (the grant step, dbgate_grant_tree())
 * -----------------------------------------------------
 * Under the tree lock, whenever a slot may have become usable (a release
 * with waiters, a waiter that joins or leaves, a raised limit, a token
 * that came due), the tree selects a waiter and gives it a slot at every
 * level, as long as there is one.  Which waiter -- shares among children,
 * the queue order, the tokens of levels with a rate, the tree's token
 * waiter -- is trees.c's choice.  The waiter so chosen in a fair budget
 * is granted at once: its counts move from 'queued' to 'active' at every
 * level, its entry is marked granted (last, after a write barrier, so
 * that it can act without the lock) and its latch is set once the lock is
 * released.  In a non-fair budget, and in a fair 'lifo' budget while the
 * chosen waiter is not overdue, it is only woken: it takes the slot itself
 * if it is still free when it runs (a newcomer may take it first), and
 * then goes on granting, so that no free slot stays unused.
 *
 * Slots held for a 'lifo' child
 * -----------------------------
 * In a fair 'lifo' budget with a parent, the slot the grant step chose it
 * for is freed only in the budget itself (SPEC 1.3 Interactions): the
 * grant step takes it at every ancestor and counts it in the budget's
 * 'held' (hold_for()), and wakes the chosen waiter.  The ancestors count a
 * held slot as active, so no sibling can take it; the budget's own level
 * does not, so its woken waiter (dbgate_promote()) or a newcomer
 * (take_chain(), waiting.c) takes it with its own level's slot only.  A
 * held slot is in the budget's 'held' or in some statement's chain, never
 * both and never neither: every path that could leave one unclaimed gives
 * it back to the ancestors (dbgate_held_return()) and runs the grant step
 * -- a waiter of the budget that leaves without a slot
 * (dbgate_queue_remove(): the woken one may be it), more held than
 * waiters after a grant (dbgate_held_settle()), a configuration install
 * that touches the budget, a drop, a change of any chain's shape, the
 * budget switched to shadow mode.  A crash restart starts with none.
 * 'held' and the chain it counts at (held_chain, the budget's chain when
 * the first was taken; a change of shape gives every one back first) are
 * the tree lock's.
 *
 * Reservations
 * ------------
 * A child's 'reserved' r keeps r of its parent's slots for it (SPEC 1.3
 * Reservations).  The parent's state word counts them as active, so that
 * a sibling's statement, which takes a parent slot only while 'active' is
 * below max_active, leaves them free with no check of its own: the
 * reservation costs nothing on the path of a budget that has none.  The
 * child's 'resv' word (shmem.h) says how: r; 'used', its statements that
 * hold a parent slot taken through the word; 'held', the parent slots
 * counted for it without a statement.  A statement of the child takes a
 * held slot if there is one (one compare-and-swap of the word and none of
 * the parent's: resv_take(), admission_internals.h), otherwise a free
 * parent slot as before, counted as used; it records in its chain (bit k
 * of 'resv') that level k was taken so.  Its release keeps the slot held
 * while used + held stay below r, and otherwise returns it to the parent
 * (resv_release()).  So held = max(0, r - used) once the word is set, and
 * the parent counts every slot once, as a statement's or as held.  The
 * grant step and the slow path pass a full parent for a child that holds
 * a slot there (select_in(), chain_has_room()).  The guarantee is the
 * parent's only: a reservation at a middle level covers the level above
 * it in the same way, and only as far as it goes.
 *
 * Only an install changes r and the parent the word counts at
 * (dbgate_admission_set_limits(), under the tree lock or every lock); the
 * word names that parent and changes epoch, so that a statement whose
 * chain goes through another parent, or whose swap races with the
 * install, does not use it (resv_for()).  The install
 * counts the new held slots at the parent before the word says so and
 * takes back what the old word held after, so that the parent's 'active'
 * never goes below the slots really counted there.  A move to another
 * parent starts 'used' at 0 there; a statement taken under the old one
 * returns its slot to the old parent (the parent it was taken from), and
 * so does any release the word cannot account for.  A drop gives the held
 * slots back (dbgate_admission_budget_dropped()), the entry's next use
 * starts a new epoch.  A crash restart sets up shared memory again.
 *
 * Returning a slot
 * ----------------
 * A level with nobody queued in its subtree takes its slot back by one
 * compare-and-swap, without a lock (the statement path of a release); a
 * level with waiters is returned under its tree's lock, and the grant step
 * hands the slot on.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <limits.h>

#include "storage/latch.h"
#include "utils/timestamp.h"

#include "admission_internals.h"
#include "compat.h"
#include "dimension.h"
#include "queue.h"
#include "shmem.h"
#include "trees.h"

/* ----------
 * The tree lock
 * ----------
 */

/*
 * Lock the tree that budget idx belongs to and return its root.  The shape
 * of the trees only changes while every budget lock is held, so once the
 * root's lock is ours the root we looked up is still the root.
 */
int
dbgate_lock_tree(int idx)
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

/* The tree lock, for the configuration install and the views (queue.h). */
int
dbgate_admission_lock_tree(int idx)
{
	return dbgate_lock_tree(idx);
}

/* ----------
 * The queue lists.  Caller holds the tree lock and changes the 'queued'
 * counts along with the list.
 * ----------
 */
void
dbgate_list_append(DbgateBudget *b, int procno)
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

void
dbgate_list_unlink(DbgateBudget *b, int procno)
{
	DbgateProc *p = proc_entry(procno);

	/* a dimension that counts waiters (a key's 'queued') uncounts it */
	if (unlikely(p->dim_held != 0))
		dbgate_dims_unjoin(p);

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

/*
 * Unlink a waiter that leaves without a slot (canceled, timed out,
 * ungated) and take it out of 'queued' at its levels.  The slots held for
 * its budget go back to the ancestors (the waiter woken for one may be
 * this one): the caller runs the grant step, which decides again.
 */
void
dbgate_queue_remove(int procno)
{
	DbgateProc *p = proc_entry(procno);
	DbgateBudget *b = budget_entry(p->budget);
	int			i;

	dbgate_list_unlink(b, procno);
	for (i = 0; i < p->chain.n; i++)
		(void) level_add(budget_entry(p->chain.idx[i]),
						 dbgate_tag_of(p->chain.inc[i]), 0, -1);
	if (unlikely(b->held > 0))
		dbgate_held_return(b, b->held);
}

/* ----------
 * Slots held for a 'lifo' child (see the file header).  Tree lock.
 * ----------
 */

/*
 * Give n of the slots held for budget b back to its ancestors (the levels
 * of held_chain from 1 on; a level dropped meanwhile has nothing to take
 * back).  The caller runs the grant step.
 */
void
dbgate_held_return(DbgateBudget *b, int n)
{
	const DbgateChain *c = &b->held_chain;
	int			j;
	int			k;

	Assert(n <= b->held);
	for (j = 0; j < n; j++)
	{
		for (k = 1; k < c->n; k++)
		{
			/* a level taken through a reservation may stay held by it */
			if ((c->resv & (1 << k)) &&
				resv_release(budget_entry(c->idx[k - 1]),
							 dbgate_tag_of(c->inc[k - 1]), c->idx[k],
							 c->inc[k]))
				continue;
			(void) level_add(budget_entry(c->idx[k]),
							 dbgate_tag_of(c->inc[k]), -1, 0);
		}
	}
	b->held -= n;
}

/*
 * No more slots held for budget b than it has waiters in its queue: a
 * waiter left it by a grant that did not use one.  The caller runs the
 * grant step if this returns true (slots went back).
 */
bool
dbgate_held_settle(DbgateBudget *b)
{
	int			excess = b->held -
		(int) dbgate_st_queued(pg_atomic_read_u64(&b->state));

	if (excess <= 0)
		return false;
	dbgate_held_return(b, Min(excess, b->held));
	return true;
}

/*
 * The grant step chose waiter p of b, a fair 'lifo' child, with nobody
 * overdue: the slot is freed only in b itself, and its ancestors keep it
 * for b (SPEC 1.3 Interactions, 'lifo' in trees), so that p, woken, or a
 * newcomer of b takes it, and no sibling.  Takes a slot at every level of
 * p's chain above b, unless slots held for b already cover its waiters or
 * an ancestor has no room while some are held (p was chosen for one).
 * Returns false when p's chain had no room after all (taken meanwhile).
 */
static bool
hold_for(DbgateBudget *b, DbgateProc *p)
{
	const DbgateChain *c = &p->chain;
	int			how[DBGATE_MAX_DEPTH];
	uint8		bits = 0;
	uint32		before;
	int			k;
	int			r = 1;

	if (b->held > 0 &&
		(uint32) b->held >= dbgate_st_queued(pg_atomic_read_u64(&b->state)))
		return true;
	for (k = 1; k < c->n && r == 1; k++)
	{
		DbgateBudget *lb = budget_entry(c->idx[k]);
		DbgateBudget *x = budget_entry(c->idx[k - 1]);
		uint32		xtag = dbgate_tag_of(c->inc[k - 1]);
		DbgateLimits l;

		how[k] = RESV_NONE;
		if (unlikely(x->lim.resv))
			how[k] = resv_take(x, xtag, c->idx[k], c->inc[k]);
		if (how[k] != RESV_NONE)
			bits |= 1 << k;
		if (how[k] == RESV_HELD)
			continue;
		dbgate_read_limits(lb, &l);
		r = level_take(lb, dbgate_tag_of(c->inc[k]), l.max_active, l.enforce,
					   false, &before);
		if (r == 1)
			note_peak_active(lb, before + 1);
		else if (how[k] == RESV_USED)
			resv_untake(x, xtag, c->idx[k], c->inc[k], false);
	}
	if (r != 1)
	{
		/* no room after all: give back the levels below the one that had none */
		for (k--; --k >= 1;)
		{
			if (how[k] != RESV_HELD)
				(void) level_add(budget_entry(c->idx[k]),
								 dbgate_tag_of(c->inc[k]), -1, 0);
			if (how[k] != RESV_NONE)
				resv_untake(budget_entry(c->idx[k - 1]),
							dbgate_tag_of(c->inc[k - 1]), c->idx[k], c->inc[k],
							how[k] == RESV_HELD);
		}
		return b->held > 0;
	}
	if (b->held == 0)
	{
		b->held_chain = *c;
		b->held_chain.resv = bits;
	}
	b->held++;
	return true;
}

/* How promote_level() took the slot of one level. */
#define TOOK_NONE	0			/* a dropped level: nothing to take */
#define TOOK_SLOT	1			/* a slot */
#define TOOK_RESV	2			/* a slot, counted in the reservation below */
#define TOOK_HELD	3			/* held for the budget ('lifo'): counted */
#define TOOK_RHELD	4			/* held by the reservation below: counted */

/*
 * Take level i of queued p's chain (limits lim[]; 'lifo_held': a slot held
 * for its budget covers the levels above it).  Returns TOOK_*, or -1 when
 * the level has no room (nothing taken).  A level taken through the
 * reservation of the level below sets its bit in p->chain.resv.
 */
static int
promote_level(DbgateProc *p, int i, bool lifo_held, bool beyond,
			  const DbgateLimits *lim, uint32 *before)
{
	DbgateBudget *b = budget_entry(p->chain.idx[i]);
	uint32		tag = dbgate_tag_of(p->chain.inc[i]);
	uint64		old;
	int			rv = RESV_NONE;

	if (i > 0 && lifo_held)
	{
		(void) level_add(b, tag, 0, -1);	/* only out of 'queued' */
		return TOOK_HELD;
	}
	if (i > 0 && unlikely(lim[i - 1].resv))
		rv = resv_take(budget_entry(p->chain.idx[i - 1]),
					   dbgate_tag_of(p->chain.inc[i - 1]), p->chain.idx[i],
					   p->chain.inc[i]);
	if (rv != RESV_NONE)
		p->chain.resv |= 1 << i;
	if (rv == RESV_HELD)
	{
		(void) level_add(b, tag, 0, -1);
		return TOOK_RHELD;
	}
	old = pg_atomic_read_u64(&b->state);
	for (;;)
	{
		uint32		active = dbgate_st_active(old);

		if (dbgate_st_tag(old) != tag)
			return TOOK_NONE;	/* (a reservation of a dropped level: the
								 * release finds it so) */
		if (!beyond && lim[i].enforce && active >= (uint32) lim[i].max_active)
			break;
		if (pg_atomic_compare_exchange_u64(&b->state, &old,
										   old + DBGATE_ST_ONE_ACTIVE -
										   (dbgate_st_queued(old) > 0 ?
											DBGATE_ST_ONE_QUEUED : 0)))
		{
			*before = active;
			return rv == RESV_USED ? TOOK_RESV : TOOK_SLOT;
		}
	}
	if (rv == RESV_USED)
	{
		resv_untake(budget_entry(p->chain.idx[i - 1]),
					dbgate_tag_of(p->chain.inc[i - 1]), p->chain.idx[i],
					p->chain.inc[i], false);
		p->chain.resv &= ~(1 << i);
	}
	return -1;
}

/* Undo promote_level() of level i, which took it as 'took'. */
static void
unpromote_level(DbgateProc *p, int i, int took)
{
	DbgateBudget *b = budget_entry(p->chain.idx[i]);
	uint32		tag = dbgate_tag_of(p->chain.inc[i]);

	if (took == TOOK_NONE)
		return;
	(void) level_add(b, tag, (took == TOOK_SLOT || took == TOOK_RESV) ? -1 : 0,
					 1);
	if (took == TOOK_RESV || took == TOOK_RHELD)
		resv_untake(budget_entry(p->chain.idx[i - 1]),
					dbgate_tag_of(p->chain.inc[i - 1]), p->chain.idx[i],
					p->chain.inc[i], took == TOOK_RHELD);
}

/*
 * The admission dimensions (dimension.h; a token of a rate) at every level
 * of queued p's chain that uses one and was taken (took[]), as promote
 * wants them.  Returns false, with what was taken given back (shadow
 * levels' too), when an enforcing level did not admit.
 */
static bool
promote_dims(DbgateProc *p, const DbgateLimits *lim, const uint8 *took,
			 int64 now_ns, int64 asof_ns)
{
	uint32		lacked = 0;		/* shadow levels without a token due */
	int			n = p->chain.n;
	int			t;

	for (t = 0; t < n; t++)
	{
		DbgateBudget *b = budget_entry(p->chain.idx[t]);

		if (!lim[t].dim_flags || took[t] == TOOK_NONE)
			continue;
		if (dbgate_dims_take(b, lim[t].dim_flags, p, t, now_ns, asof_ns,
							 !lim[t].enforce) == DBGATE_DIM_TAKEN)
			continue;
		if (!lim[t].enforce)
		{
			lacked |= 1 << t;
			continue;
		}
		/* give back what was taken (shadow levels' too) */
		while (--t >= 0)
		{
			if (lim[t].dim_flags && took[t] != TOOK_NONE)
				dbgate_dims_untake(budget_entry(p->chain.idx[t]),
								   lim[t].dim_flags, p, t);
		}
		return false;
	}
	for (t = 0; lacked != 0 && t < n; t++)
	{
		if (lacked & (1 << t))
			pg_atomic_fetch_add_u64(&budget_entry(p->chain.idx[t])->would_queue, 1);
	}
	return true;
}

/*
 * Give the queued procno a slot at every level of its chain, and a token
 * where a level has a rate (the admission dimensions of dimension.h:
 * judged at now_ns, taken as of asof_ns); 'beyond' (lock holders) ignores
 * every limit and takes no token.  A slot held for its budget ('lifo')
 * covers the levels above it; one held by a reservation covers its level.
 * Caller holds the tree lock.
 * Returns false when a level had no room or no token after all (a
 * newcomer took it without the lock, or a budget changed): nothing is
 * then changed.
 */
bool
dbgate_promote(int procno, bool beyond, int64 now_ns, int64 asof_ns)
{
	DbgateProc *p = proc_entry(procno);
	DbgateBudget *leaf = budget_entry(p->budget);
	DbgateLimits lim[DBGATE_MAX_DEPTH];
	uint32		before[DBGATE_MAX_DEPTH];
	uint8		took[DBGATE_MAX_DEPTH];
	int			n = p->chain.n;
	int			i;
	bool		held;

	held = unlikely(leaf->held > 0) && chain_same(&p->chain, &leaf->held_chain);
	p->chain.resv = held ? leaf->held_chain.resv : 0;
	for (i = 0; i < n; i++)
	{
		int			k;

		dbgate_read_limits(budget_entry(p->chain.idx[i]), &lim[i]);
		k = promote_level(p, i, held, beyond, lim, &before[i]);
		if (k < 0)
			goto undo;
		took[i] = (uint8) k;
	}
	if (!beyond && !promote_dims(p, lim, took, now_ns, asof_ns))
		goto undo;
	for (i = 0; i < n; i++)
	{
		if (took[i] == TOOK_SLOT || took[i] == TOOK_RESV)
			note_peak_active(budget_entry(p->chain.idx[i]), before[i] + 1);
	}
	if (held)
		leaf->held--;
	return true;

undo:
	while (--i >= 0)
		unpromote_level(p, i, took[i]);
	p->chain.resv = 0;
	return false;
}

/*
 * Is a slot handed off to the waiter chosen in a budget with limits l
 * (granted directly), rather than left free and the waiter woken?  Handed
 * off in a fair budget; but in a fair 'lifo' budget only to an overdue
 * waiter (SPEC 1.3 Queue order: a newcomer is newer than every waiter, so
 * while nobody is overdue it may take the slot first).  In a 'lifo' child
 * the slot is then freed only in the child: its ancestors hold it for the
 * child (hold_for()).
 */
static inline bool
hands_off(const DbgateLimits *l, bool overdue)
{
	return l->fair && (!l->lifo || overdue);
}

/*
 * The grant step of a tree (see the file header).  Caller holds the tree
 * lock.  Cannot fail.
 */
void
dbgate_grant_tree(int root, TimestampTz now, Wakeups *w)
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
		DbgateBudget *lb;

		if (now_ns == 0)
			now_ns = dbgate_now_ns();
		if (!dbgate_select_tree(root, now, now_ns, &pick, &blocked))
		{
			/* wait for a token, or for nothing */
			if (blocked.procno >= 0)
			{
				DbgateProc *bp = proc_entry(blocked.procno);

				if (blocked.token_level >= 0)
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
		lb = budget_entry(p->budget);
		if (pick.procno != dbgate_my_procno &&
			!hands_off(&lb->lim, pick.overdue))
		{
			/*
			 * The chosen waiter takes the slot itself if still free; in a
			 * fair 'lifo' child, the ancestors hold it for the child.
			 */
			if (lb->lim.fair && lb->lim.parent >= 0 && !hold_for(lb, p))
			{
				if (++races > 1000)
					return;
				continue;
			}
			wake_later(w, pick.procno);
			return;
		}
		/*
		 * A queued statement takes its token as of the time it was due: it
		 * was waiting all along, so the time a wake-up took is no idle time
		 * of the bucket.  The tree's token waiter, however late it woke;
		 * the others granted in the same step, up to
		 * DBGATE_DIM_CATCHUP_NS back (dimdefs.h, rate.c).  Otherwise
		 * every wake-up's delay would be lost, and a busy budget would fall
		 * short of its rate (the more, the higher the rate).
		 */
		asof_ns = now_ns - DBGATE_DIM_CATCHUP_NS;
		if (pick.procno == r->token_waiter && r->token_due_ns != 0 &&
			r->token_due_ns < asof_ns)
			asof_ns = r->token_due_ns;
		if (!dbgate_promote(pick.procno, false, now_ns, asof_ns))
		{
			/* taken meanwhile: choose again (bounded by the newcomers) */
			if (++races > 1000)
				return;
			continue;
		}
		dbgate_list_unlink(lb, pick.procno);
		if (unlikely(lb->held > 0))
			(void) dbgate_held_settle(lb);	/* chosen again below */
		p->overdue = pick.overdue;
		if (r->token_waiter == pick.procno)
			r->token_waiter = -1;
		mark_granted(p, now);
		wake_later(w, pick.procno);
	}
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
release_slow(const DbgateChain *c, int from, uint32 kept)
{
	bool		done[DBGATE_MAX_DEPTH];
	int			i;
	int			j;

	done[from] = false;
	for (i = from + 1; i < c->n; i++)
	{
		done[i] = (kept & (1 << i)) != 0 ||
			level_return_fast(budget_entry(c->idx[i]),
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
		root = dbgate_lock_tree(c->idx[i]);
		for (j = i; j < c->n; j++)
		{
			DbgateBudget *lb = budget_entry(c->idx[j]);

			if (done[j] || lb->root != root)
				continue;
			(void) level_add(lb, dbgate_tag_of(c->inc[j]), -1, 0);
			done[j] = true;
		}
		dbgate_grant_tree(root, GetCurrentTimestamp(), &w);
		unlock_tree(root);
		wake_now(&w);
	}
}

/*
 * The levels of c taken through a reservation (c->resv) that the
 * reservation keeps: their bits (nothing to return there).
 */
static inline uint32
release_reserved(const DbgateChain *c)
{
	uint32		kept = 0;
	int			k;

	for (k = 1; k < c->n; k++)
	{
		if ((c->resv & (1 << k)) &&
			resv_release(budget_entry(c->idx[k - 1]),
						 dbgate_tag_of(c->inc[k - 1]), c->idx[k], c->inc[k]))
			kept |= 1 << k;
	}
	return kept;
}

/*
 * release_chain() for a chain with levels taken through a reservation:
 * those that the reservation keeps are not returned.
 */
static pg_noinline void
release_chain_reserved(const DbgateChain *c)
{
	uint32		kept = release_reserved(c);
	int			i;

	for (i = 0; i < c->n; i++)
	{
		if (kept & (1 << i))
			continue;
		if (!level_return_fast(budget_entry(c->idx[i]),
							   dbgate_tag_of(c->inc[i])))
		{
			release_slow(c, i, kept);
			return;
		}
	}
}

/* The levels of c with nobody queued by one compare-and-swap each. */
static pg_noinline void
release_chain(const DbgateChain *c)
{
	int			i;

	/* (a chain of one level does not keep 'resv') */
	if (unlikely(c->resv != 0) && c->n > 1)
	{
		release_chain_reserved(c);
		return;
	}
	for (i = 0; i < c->n; i++)
	{
		if (!level_return_fast(budget_entry(c->idx[i]),
							   dbgate_tag_of(c->inc[i])))
		{
			release_slow(c, i, 0);
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
