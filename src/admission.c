/*-------------------------------------------------------------------------
 *
 * admission.c
 *	  Admission without a lock: a statement takes its slot, and gives it
 *	  back, by compare-and-swap while there is room; the backend's own
 *	  entry.
 *
 * Admission is six files, one concern each:
 *	  admission.c	the fast path: a slot taken at every level of a chain,
 *					and returned, without a lock; shadow mode; the
 *					backend's own entry (DbgateProc)
 *	  waiting.c		a statement that finds no room: the decision under the
 *					tree lock (admit, reject, queue), the wait in the queue,
 *					leaving it
 *	  queue.c		the queues: the tree lock, the queue lists, the grant
 *					step, the release of a slot that somebody waits for,
 *					what a configuration install does to the queues and
 *					what the views read of them
 *	  trees.c		chains and trees of budgets: the limits of a chain,
 *					what its shadow levels count, and which waiter of a
 *					tree a free slot goes to (shares, queue order, tokens)
 *	  lockgraph.c	the lock-holder check across the queues
 *	  demote.c		the backend's side of a runaway's slot moved to another
 *					budget (1.3)
 *	  move.c		the move itself, made by the runaway worker (1.3)
 * The last two are above the others, which call nothing of them.
 * They share admission_internals.h.  The rest of dbgate sees admission.h
 * (the statement path: slot.c, memgrant.c), waiting.h and queue.h (the
 * configuration install and the views); nothing else.  Together they own
 * the queues, the state words of the budgets, the use of their admission
 * dimensions (a rate's token bucket: reached through the table of
 * dimension.h, whose files have the arithmetic) and the per-backend entries
 * (DbgateProc): every write of a queue list, of 'queued' and of a
 * DbgateProc entry is in one of them.  What one backend does with the
 * slot it holds (references, scope, timeouts) is slot.c's.
 *
 * Rules of every admission file
 * -----------------------------
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
 * State word and fast paths (this file)
 * -------------------------------------
 * A budget's live counts are one atomic word (tag | active | queued, see
 * shmem.h).  Without any lock:
 *	  - admission: a free slot at every level (and, for a fair budget,
 *		nobody queued in it) is taken by one compare-and-swap per level,
 *		bottom-up, and a token per level that has a rate (the admission
 *		dimensions of the levels whose dim_flags has a bit: dimension.h,
 *		one test of that byte for a level that uses none); a level that
 *		turns out full gives back what was taken (as a release: see below)
 *		and the statement goes the slow way (waiting.c);
 *	  - release: a level with nobody queued in its subtree takes its slot
 *		back by one compare-and-swap (queue.c, dbgate_admission_release()).
 * In a chain, a level whose child has a reservation (queue.c) is taken
 * through that child's 'resv' word first: a slot held there takes no
 * swap of the level's own word (take_reserved()); a statement of a budget
 * whose chain has no reservation reads one flag of its limits per level
 * and nothing more.
 * Everything else happens under the *tree lock* (the lock of the tree's
 * root, see shmem.h): joining and leaving queues, handing off, the
 * releases of levels that have waiters.  Every change of a word is a
 * compare-and-swap of the whole word or an atomic add that cannot cross a
 * field, so a decision taken on one reading of a word holds when its swap
 * succeeds.  A backend that joins a queue adds itself to 'queued' at every
 * level of its chain and then, still under the tree lock, runs the grant
 * step (queue.c): a slot returned without the lock before its add was
 * counted is seen there (its word changed before ours), and one returned
 * after finds 'queued' > 0 and comes for the lock, which the joining
 * backend holds until it is linked.  So no free slot is left unused while
 * a statement that could take it sleeps.
 *
 * Shadow mode (enforce = false) and lock holders
 * ----------------------------------------------
 * Only enforcing levels hold a statement back.  A statement of a shadow
 * budget takes a slot at every level whatever the counts (a level may then
 * exceed its max_active) and what enforcement would have done is counted
 * (would_queue, would_reject at the budget; would_queue at every full
 * ancestor, or one without a token: trees.c), once per statement.  A
 * shadow ancestor counts what it would have held back.  A shadow level's
 * token is taken whether it is due or not, one per admission: an attempt
 * that an enforcing level turns back gives back every token it took and
 * counts nothing.  A shadow budget's statement takes a token of an
 * enforcing ancestor only if one is there: what the ancestor would have
 * held back must not hold back its enforcing statements later.  A budget
 * switched to shadow mode admits its waiters at once (queue.c).  A lock-holder admission (lockgraph.c) takes a slot at every
 * level beyond any limit and no token.
 *
 * Counters
 * --------
 * 'admitted' counts every admission (at once, after waiting, lock holder,
 * shadow) at the statement's own budget; admissions after a wait are
 * counted by the waiter itself when it proceeds (waiting.c), so that the
 * counters match what clients see even when a grant and a cancel cross.
 * A parent counts only 'active', 'queued', their peaks, 'would_queue' and
 * 'rate_limited' for what it held back (or would have).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "utils/timestamp.h"

#include "admission.h"
#include "admission_internals.h"
#include "classify.h"
#include "dimension.h"
#include "queue.h"
#include "shmem.h"
#include "trees.h"
#include "waiting.h"

/* ----------
 * Admission
 * ----------
 */

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
admit_shadow(const DbgateLookup *lk, ChainLimits *cl, TimestampTz now,
			 DbgateAdmission *a)
{
	uint32		before[DBGATE_MAX_DEPTH];
	uint32		lacked = 0;		/* levels without a token due */
	int			i;
	int64		now_ns = 0;

	for (i = 0; i < cl->c.n; i++)
	{
		DbgateBudget *b = budget_entry(cl->c.idx[i]);
		int			rv = RESV_NONE;
		int			r;

		/* a shadow statement counts against its reservation too */
		if (i > 0 && unlikely(cl->lim[i - 1].resv))
			rv = resv_take(budget_entry(cl->c.idx[i - 1]),
						   dbgate_tag_of(cl->c.inc[i - 1]), cl->c.idx[i],
						   cl->c.inc[i]);
		if (rv == RESV_HELD)
		{
			cl->c.resv |= 1 << i;
			before[i] = 0;
			continue;
		}
		r = level_take(b, dbgate_tag_of(cl->c.inc[i]), 0, false, false,
					   &before[i]);
		if (r != 1)
		{
			if (rv == RESV_USED)
				resv_untake(budget_entry(cl->c.idx[i - 1]),
							dbgate_tag_of(cl->c.inc[i - 1]), cl->c.idx[i],
							cl->c.inc[i], false);
			return_levels(&cl->c, i);
			return r < 0 ? DBGATE_ADMIT_RETRY : DBGATE_ADMIT_NONE;
		}
		if (rv == RESV_USED)
			cl->c.resv |= 1 << i;
		note_peak_active(b, before[i] + 1);
	}
	for (i = 0; i < cl->c.n; i++)
	{
		if (!cl->lim[i].dim_flags)
			continue;
		if (now_ns == 0 && (cl->lim[i].dim_flags & dbgate_dims_timed))
			now_ns = dbgate_now_ns();
		if (dbgate_dims_enter_take(budget_entry(cl->c.idx[i]),
								   cl->lim[i].dim_flags, dbgate_my_proc, i,
								   now_ns, !cl->lim[i].enforce) !=
			DBGATE_DIM_TAKEN)
			lacked |= 1 << i;
	}
	dbgate_count_shadow(cl, before, lacked);
	admitted_now(lk, cl, now, a);
	return DBGATE_ADMIT_SLOT;
}

/*
 * Admission to a budget in shadow mode: its chain with every level's
 * limits, then a slot at every level whatever the counts.  A chain that
 * reads as broken without a lock is looked at again under the tree lock
 * (dbgate_admit_slow()), so that a broken one cannot make the caller retry
 * for ever.
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
			return dbgate_admit_slow(lk, utility, queryDesc, now, a);
	}
	return admit_shadow(lk, &cl, now, a);
}

/*
 * The admission dimensions (dimension.h; a token of a rate) at levels
 * [0, n) of a chain whose budgets are lv and whose levels use dims[] (the
 * bits of 'rated': the levels that use any, of 'shadow': those in shadow
 * mode, which take whatever the bucket holds and, when it did not admit,
 * set their bit in *full: counted once, like a full level).  Returns false,
 * with what was taken given back (shadow levels' too: one per admission,
 * not one per attempt), when an enforcing level does not admit.
 */
static pg_attribute_always_inline bool
take_dims(DbgateBudget **lv, const uint8 *dims, int n, uint32 rated,
		  uint32 shadow, uint32 *full)
{
	DbgateProc *me = dbgate_my_proc;
	int64		now_ns = 0;
	int			i;

	for (i = 0; i < n; i++)
	{
		if (!(rated & (1 << i)))
			continue;
		if (now_ns == 0 && (dims[i] & dbgate_dims_timed))
			now_ns = dbgate_now_ns();
		if (dbgate_dims_enter_take(lv[i], dims[i], me, i, now_ns,
								   (shadow & (1 << i)) != 0) ==
			DBGATE_DIM_TAKEN)
			continue;
		if (shadow & (1 << i))
		{
			*full |= 1 << i;	/* counted once, like a full level */
			continue;
		}
		/* not admitted: give back what was just taken, shadow levels' too */
		while (--i >= 0)
		{
			if (rated & (1 << i))
				dbgate_dims_untake(lv[i], dims[i], me, i);
		}
		return false;
	}
	return true;
}

/*
 * admit_leaf_dims() where a dimension did not admit: the slot goes back and
 * the statement goes the slow way (out of line: the chain's copy would
 * give admit_leaf_dims() a stack protector).
 */
static pg_noinline DbgateAdmit
leaf_dims_refused(const DbgateLookup *lk, bool utility, QueryDesc *queryDesc,
				  TimestampTz now, DbgateAdmission *a)
{
	return_levels(&a->chain, 1);
	return dbgate_admit_slow(lk, utility, queryDesc, now, a);
}

/*
 * The rest of a fast admission to an enforcing budget without parent that
 * uses an admission dimension (a rate's token, a key), its slot already
 * taken ('before0': its active before): its chain of one level, then the
 * dimensions; where one of them does not admit, the slot goes back and
 * the statement goes the slow way.  A function of its own, not a case of
 * admit_rest_body(): it needs none of that one's frame.  A level with
 * dim_one calls that dimension alone (dimension.h).
 */
static pg_noinline DbgateAdmit
admit_leaf_dims(const DbgateLookup *lk, bool utility, QueryDesc *queryDesc,
				TimestampTz now, DbgateAdmission *a, uint32 before0)
{
	DbgateBudget *b = budget_entry(lk->budget);
	int64		r;

	a->chain.n = 1;
	a->chain.idx[0] = lk->budget;
	a->chain.inc[0] = lk->incarnation;
	a->chain.resv = 0;
	/* (its active did reach that, even if a dimension refuses) */
	note_peak_active(b, before0 + 1);
	if (a->lim.dim_one != 0)
		r = dbgate_dim_one_enter_take(a->lim.dim_one, b, dbgate_my_proc, 0,
									  false);
	else
	{
		int64		now_ns = 0;

		if (a->lim.dim_flags & dbgate_dims_timed)
			now_ns = dbgate_now_ns();
		r = dbgate_dims_enter_take(b, a->lim.dim_flags, dbgate_my_proc, 0,
								   now_ns, false);
	}
	if (r != DBGATE_DIM_TAKEN)
		return leaf_dims_refused(lk, utility, queryDesc, now, a);
	publish_slot(lk, now, a, true);
	return DBGATE_ADMIT_SLOT;
}

/*
 * The slot of level n (budget p, incarnation pinc, limits pl, its entry
 * lv[n]) for a statement whose level n - 1 has a reservation there: one
 * that level holds, or, counted as used, a free one (if none is free, the
 * count is undone).  Returns as level_take() does (*before: 0 for a held
 * slot, which is no new peak); sets the level's bit in c->resv when
 * taken through the reservation.
 */
static inline int
take_reserved(DbgateChain *c, DbgateBudget **lv, int n, int32 p,
			  uint32 pinc, const DbgateLimits *pl, uint32 *before)
{
	uint32		xtag = dbgate_tag_of(c->inc[n - 1]);
	int			rv = resv_take(lv[n - 1], xtag, p, pinc);
	int			r;

	if (rv == RESV_HELD)
	{
		c->resv |= 1 << n;
		*before = 0;
		return 1;
	}
	r = level_take(lv[n], dbgate_tag_of(pinc), pl->max_active, pl->enforce,
				   false, before);
	if (rv == RESV_USED)
	{
		if (r == 1)
			c->resv |= 1 << n;
		else
			resv_untake(lv[n - 1], xtag, p, pinc, false);
	}
	return r;
}

/*
 * The rest of a fast admission to an enforcing budget that has a parent
 * (and maybe admission dimensions), its own slot already taken ('before0':
 * its active before): a slot of every ancestor, bottom-up, then the
 * dimensions of every level that uses one (a token of a rate), each
 * without a lock.  An ancestor's limits are read as they are now; one
 * that changed meanwhile shows in its tag when its slot is taken.  Where a
 * level has no room or no token, what was taken goes back and the
 * statement goes the slow way.
 */
static pg_attribute_always_inline DbgateAdmit
admit_rest_body(const DbgateLookup *lk, bool utility, QueryDesc *queryDesc,
				TimestampTz now, DbgateAdmission *a, uint32 before0,
				const bool reserves)
{
	DbgateChain *c = &a->chain;
	DbgateBudget *lv[DBGATE_MAX_DEPTH];
	uint32		before;
	uint8		dims[DBGATE_MAX_DEPTH];	/* dim_flags of the rated levels */
	uint32		rated = 0;		/* levels that use any dimension */
	uint32		shadow = 0;		/* levels in shadow mode */
	uint32		full = 0;		/* ... of those, full or without a token */
	int32		parent = a->lim.parent;
	uint32		pinc = a->lim.parent_incarnation;
	bool		xresv = reserves && a->lim.resv;	/* the level below has a
													 * reservation */
	int			n = 1;
	int			i;

	Assert(parent >= 0);		/* (without one: admit_leaf_dims()) */
	c->n = 1;
	c->idx[0] = lk->budget;
	c->inc[0] = lk->incarnation;
	c->resv = 0;
	lv[0] = budget_entry(lk->budget);
	note_peak_active(lv[0], before0 + 1);
	if (a->lim.dim_flags)
	{
		rated = 1;
		dims[0] = a->lim.dim_flags;
	}
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
			{
				if (reserves && xresv)
					r = take_reserved(c, lv, n, parent, pinc, &pl, &before);
				else
					r = level_take(lv[n], dbgate_tag_of(pinc), pl.max_active,
								   pl.enforce, false, &before);
			}
		}
		if (r != 1)
		{
			/* no room (or the chain changed: classify again) */
			return_levels(c, n);
			if (r < 0)
				return DBGATE_ADMIT_RETRY;
			return dbgate_admit_slow(lk, utility, queryDesc, now, a);
		}
		/* (its active did reach that, even if the admission fails) */
		note_peak_active(lv[n], before + 1);
		c->idx[n] = parent;
		c->inc[n] = pinc;
		if (pl.dim_flags)
		{
			rated |= 1 << n;
			dims[n] = pl.dim_flags;
		}
		if (!pl.enforce)
		{
			shadow |= 1 << n;
			if (before >= (uint32) pl.max_active)
				full |= 1 << n;
		}
		parent = pl.parent;
		pinc = pl.parent_incarnation;
		xresv = reserves && pl.resv;
		n++;
	}
	c->n = n;

	if (rated && !take_dims(lv, dims, n, rated, shadow, &full))
	{
		/* not admitted (no token): give back the slots just taken */
		return_levels(c, n);
		return dbgate_admit_slow(lk, utility, queryDesc, now, a);
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
 * admit_rest_body() for a chain without reservations (exactly the way
 * 1.2 went: a statement whose chain uses none pays for none) and for one
 * whose levels may take their parents' slots through reservations (the
 * classification says which; a stale answer costs only the guarantee of
 * this admission, never a slot: the chain records how each level was
 * taken).
 */
static pg_noinline DbgateAdmit
admit_rest(const DbgateLookup *lk, bool utility, QueryDesc *queryDesc,
		   TimestampTz now, DbgateAdmission *a, uint32 before0)
{
	return admit_rest_body(lk, utility, queryDesc, now, a, before0, false);
}

static pg_noinline DbgateAdmit
admit_rest_reserved(const DbgateLookup *lk, bool utility,
					QueryDesc *queryDesc, TimestampTz now, DbgateAdmission *a,
					uint32 before0)
{
	return admit_rest_body(lk, utility, queryDesc, now, a, before0, true);
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
			return dbgate_admit_slow(lk, utility, queryDesc, now, a);
		if (pg_atomic_compare_exchange_u64(&b->state, &old,
										   old + DBGATE_ST_ONE_ACTIVE))
			break;
	}
	if (unlikely(a->lim.parent >= 0 || a->lim.dim_flags))
	{
		if (a->lim.parent < 0)
			return admit_leaf_dims(lk, utility, queryDesc, now, a,
								   dbgate_st_active(old));
		if (unlikely(lk->reserves))
			return admit_rest_reserved(lk, utility, queryDesc, now, a,
									   dbgate_st_active(old));
		return admit_rest(lk, utility, queryDesc, now, a,
						  dbgate_st_active(old));
	}
	note_peak_active(b, dbgate_st_active(old) + 1);
	a->chain.n = 1;
	a->chain.idx[0] = lk->budget;
	a->chain.inc[0] = lk->incarnation;
	publish_slot(lk, now, a, true);
	return DBGATE_ADMIT_SLOT;
}

/* ----------
 * This backend's entry (slot.c, memgrant.c)
 * ----------
 */

/*
 * dbgate_admission_return() of a slot for which admission dimensions keep
 * per-statement state (dimension.h): that goes first.
 */
static pg_noinline void
return_with_dims(DbgateProc *me, const DbgateChain *c,
				 TimestampTz admitted_at)
{
	dbgate_dims_release(me, c);
	me->state = DBGATE_PROC_IDLE;
	me->budget = -1;
	dbgate_admission_release(c, admitted_at);
}

/*
 * This backend returns the slot it holds: its entry is idle again, then
 * the slot goes back as dbgate_admission_release() (queue.c) says.
 */
void
dbgate_admission_return(const DbgateChain *c, TimestampTz admitted_at)
{
	DbgateProc *me = dbgate_my_proc;

	if (unlikely(me->dim_held != 0))
	{
		return_with_dims(me, c, admitted_at);
		return;
	}
	me->state = DBGATE_PROC_IDLE;
	me->budget = -1;
	dbgate_admission_release(c, admitted_at);
}

/* A client backend starts using its entry. */
void
dbgate_admission_attach(int procno)
{
	dbgate_my_procno = procno;
	dbgate_my_proc = proc_entry(procno);
	dbgate_my_proc->pid = MyProcPid;
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
		dbgate_my_proc->state_since = since;
	dbgate_my_proc->state = state;
}

/*
 * This backend's memory grants changed by delta_kb at every level of its
 * chain (a slot whose budget demotes, which may be moved meanwhile, goes
 * through dbgate_demote_memory() instead: memgrant.c).
 */
void
dbgate_admission_memory(int64 delta_kb)
{
	memory_add(dbgate_my_proc, delta_kb);
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
