/*-------------------------------------------------------------------------
 *
 * waiting.c
 *	  A statement that finds no room at once: its admission under the tree
 *	  lock -- admitted, rejected, or queued.  The wait in the queue and
 *	  leaving it are queuewait.c's.
 *
 * One of the admission files (admission.c lists them and has the rules
 * that all of them follow).
 *
 * Under the tree lock (dbgate_admit_slow())
 * ----------------------------------------
 * The statement's chain is looked at again, every level: if there is room
 * at every level (and, in a fair budget, nobody waits in it), it takes its
 * slots and tokens as the fast path would have; if its budget's queue is
 * full, it is rejected (53300, naming the level that holds it back; a
 * dimension that can say why, a key, gives the DETAIL); a dimension that
 * limits waiters (a key's max_queued) may refuse it a queue place;
 * otherwise it joins the tail of its budget's queue, counted in 'queued'
 * at every level of its chain, and runs the grant step before it lets the
 * lock go (admission.c says why no free slot is then left unused).  What
 * only the statement's process can learn for a dimension (its key) is
 * learnt before the tree lock (dbgate_dims_enter()), and given back on
 * every way out without a slot (dbgate_leave_dims()).
 *
 * Locking: every error is raised after the tree lock is released, with
 * the names it needs copied out first.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "libpq/libpq.h"
#include "miscadmin.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "utils/timestamp.h"

#include "admission.h"
#include "admission_internals.h"
#include "classify.h"
#include "dimension.h"
#include "lockgraph.h"
#include "queue.h"
#include "shmem.h"
#include "trees.h"
#include "queuewait.h"
#include "waiting.h"

/*
 * Our entry shows what we wait for and has nothing left of an earlier wait
 * (before queueing).
 */
static inline void
describe_me(const DbgateLookup *lk, TimestampTz now)
{
	show_me(dbgate_my_proc, lk, now);
	dbgate_my_proc->granted = false;
	dbgate_my_proc->released = false;
	dbgate_my_proc->overdue = false;
	dbgate_my_proc->token_levels = 0;
}

/* The error for a budget that is full. */
static void
reject_full(const char *name, uint32 active, int32 max_active,
			int32 configured, uint32 queued, int32 max_queued,
			const char *held_by, uint32 p_active, int32 p_max, bool token,
			const char *dim_detail)
{
	if (dim_detail != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_TOO_MANY_CONNECTIONS),
				 errmsg("budget \"%s\" is full", name),
				 errdetail("%s, and %u of %d queue places are taken.",
						   dim_detail, queued, max_queued),
				 errhint("Retry later, or raise the key's limits (key_max_active, key_max_rate with dbgate.alter_budget(), or its own with dbgate.set_key_limit()) or max_queued.")));
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
	if (max_active != configured)
		ereport(ERROR,
				(errcode(ERRCODE_TOO_MANY_CONNECTIONS),
				 errmsg("budget \"%s\" is full", name),
				 errdetail("%u of %d statements are active (its adaptive limit; max_active is %d) and %u of %d queue places are taken.",
						   active, max_active, configured, queued, max_queued),
				 errhint("Retry later, or raise adapt_min or max_queued with dbgate.alter_budget().")));
	ereport(ERROR,
			(errcode(ERRCODE_TOO_MANY_CONNECTIONS),
			 errmsg("budget \"%s\" is full", name),
			 errdetail("%u of %d statements are active and %u of %d queue places are taken.",
					   active, max_active, queued, max_queued),
			 errhint("Retry later, or raise max_active or max_queued with dbgate.alter_budget().")));
}

/* ----------
 * Admission under the tree lock
 * ----------
 */

/* What holds a statement back that found no room (for its 53300). */
typedef struct HeldBy
{
	const char *name;			/* the level that is full or has no token;
								 * NULL: the statement's own budget */
	uint32		active;			/* a full ancestor's active, max_active */
	int32		max_active;
	bool		token;			/* a level without a token */
	bool		dim;			/* ... a dimension of the statement's own
								 * level that can say why (a key) */
	char		detail[256];	/* what it says */
} HeldBy;

/* What a try to take the slots of a chain came to (take_chain()). */
typedef enum TakeResult
{
	TAKE_DONE,					/* a slot (and a token) at every level */
	TAKE_NO_TOKEN,				/* a level had no token: nothing is taken */
	TAKE_AGAIN,					/* a word changed under us: look again */
	TAKE_RETRY					/* a level was dropped: classify again */
} TakeResult;

/* What the decision under the tree lock came to (decide_slow()). */
typedef enum SlowDecision
{
	SLOW_ADMITTED,				/* slots taken at every level */
	SLOW_QUEUED,				/* linked into the budget's queue */
	SLOW_RETRY,					/* the budget changed: classify again */
	SLOW_UNGATED				/* a broken chain: go on without a slot */
} SlowDecision;

/*
 * Lock the tree of lk's budget and read the budget's limits (*l) and its
 * chain's (*cl).  Returns CHAIN_OK with the lock held.  Otherwise the
 * lock is released: CHAIN_CHANGED when the budget is not the one of the
 * lookup any more (dropped or replaced, children now) or does not gate
 * this statement (shadow mode, a utility command of a budget without
 * 'utility'), and the caller classifies again; CHAIN_BROKEN for a chain
 * that cannot be under the tree lock, and the statement goes on ungated
 * rather than round for ever.
 */
static ChainRead
lock_chain(const DbgateLookup *lk, bool utility, int *root, DbgateLimits *l,
		   ChainLimits *cl)
{
	DbgateBudget *b = budget_entry(lk->budget);
	ChainRead	chain;

	*root = dbgate_lock_tree(lk->budget);
	if (unlikely(!b->in_use || b->incarnation != lk->incarnation))
	{
		/* dropped or replaced since our lookup: classify again */
		unlock_tree(*root);
		return CHAIN_CHANGED;
	}
	dbgate_read_limits(b, l);
	chain = chain_limits(lk->budget, lk->incarnation, l, cl);
	if (chain == CHAIN_BROKEN)
	{
		/* cannot be under the tree lock: go on ungated, never round */
		unlock_tree(*root);
		Assert(false);
		return CHAIN_BROKEN;
	}
	if ((utility && !l->utility) || !l->enforce || b->first_child >= 0 ||
		chain != CHAIN_OK)
	{
		/* changed since the lookup (classify.c never gives a parent) */
		unlock_tree(*root);
		return CHAIN_CHANGED;
	}
	return CHAIN_OK;
}

/*
 * Must a newcomer of budget b (limits l) queue behind its waiters even
 * where a slot is free?  In a fair budget it must while anyone waits --
 * except in a 'lifo' budget (SPEC 1.3 Queue order): a newcomer is newer
 * than every waiter, so it queues only behind an overdue one.  The queue
 * is in arrival order, so its head is the longest waiter.  In a 'lifo'
 * child the slot it may take is one its ancestors hold for the budget
 * (queue.c), or one free at every level.  Caller holds the tree lock.
 */
static bool
newcomer_waits(DbgateBudget *b, const DbgateLimits *l, TimestampTz now)
{
	if (!l->fair || dbgate_st_queued(pg_atomic_read_u64(&b->state)) == 0)
		return false;
	if (unlikely(l->dim_flags != 0) &&
		dbgate_dims_orderer(l->dim_flags) >= 0)
		return dbgate_dims_newcomer_waits(b, l, dbgate_my_proc, now);
	if (!l->lifo)
		return true;
	return dbgate_lifo_overdue(b, now);
}

/*
 * Does a slot held for the budget of cl (queue.c) cover every level of cl
 * above it?  Caller holds the tree lock.
 */
static inline bool
chain_held(const ChainLimits *cl)
{
	DbgateBudget *b = budget_entry(cl->c.idx[0]);

	return unlikely(b->held > 0) &&
		chain_same(&b->held_chain, &cl->c);
}

/*
 * Is there room at every level of cl (with 'covered', a slot held for the
 * budget: at its own level)?  With 'waits' (newcomer_waits()) also nobody
 * may wait in the budget; that is looked at last, so that a full ancestor
 * is named when it is the reason, as for a budget that is not fair.  A
 * full ancestor goes into *held.  Caller holds the tree lock.
 */
static bool
chain_has_room(const ChainLimits *cl, bool waits, bool covered, HeldBy *held)
{
	int			i;

	for (i = 0; i < (covered ? 1 : cl->c.n); i++)
	{
		DbgateBudget *lb = budget_entry(cl->c.idx[i]);
		uint64		lst = pg_atomic_read_u64(&lb->state);

		/* a slot that the reservation of the level below holds covers it */
		if (i > 0 && unlikely(cl->lim[i - 1].resv) &&
			resv_has_held(budget_entry(cl->c.idx[i - 1])))
			continue;
		if (cl->lim[i].enforce &&
			dbgate_st_active(lst) >= (uint32) cl->lim[i].max_active)
		{
			if (i > 0)
			{
				held->name = lb->conf.name;
				held->active = dbgate_st_active(lst);
				held->max_active = cl->lim[i].max_active;
			}
			return false;
		}
	}
	return !waits;
}

/*
 * The admission dimensions (dimension.h; a token of a rate) at every level
 * of cl that uses one (a shadow level takes whatever the bucket holds, and
 * sets its bit in *lacked when it did not admit: counted if the statement
 * is admitted).  Returns false, with what was taken given back (shadow
 * levels' too: one per admission, not one per attempt) and *held naming
 * the level, when an enforcing level does not admit.
 */
static bool
take_dims(const ChainLimits *cl, HeldBy *held, int64 *now_ns,
		  uint32 *lacked)
{
	int			i;

	for (i = 0; i < cl->c.n; i++)
	{
		DbgateBudget *lb = budget_entry(cl->c.idx[i]);

		if (!cl->lim[i].dim_flags)
			continue;
		if (*now_ns == 0 && (cl->lim[i].dim_flags & dbgate_dims_timed))
			*now_ns = dbgate_now_ns();
		if (dbgate_dims_take(lb, cl->lim[i].dim_flags, dbgate_my_proc, i,
							 *now_ns, *now_ns, !cl->lim[i].enforce) ==
			DBGATE_DIM_TAKEN)
			continue;
		if (!cl->lim[i].enforce)
		{
			*lacked |= 1 << i;	/* counted if admitted */
			continue;
		}
		held->token = true;
		held->name = lb->conf.name;
		if (i == 0)
			held->dim = dbgate_dims_explain(lb, cl->lim[i].dim_flags,
											dbgate_my_proc, held->detail,
											sizeof(held->detail));
		/* give back what was just taken, shadow levels' too */
		while (--i >= 0)
		{
			if (cl->lim[i].dim_flags)
				dbgate_dims_untake(budget_entry(cl->c.idx[i]),
								   cl->lim[i].dim_flags, dbgate_my_proc, i);
		}
		return false;
	}
	return true;
}

/*
 * Take level i of cl (as level_take() returns): a slot that the
 * reservation of level i - 1 holds there, or a free one (*how: RESV_*, its
 * bit set in cl->c.resv when through the reservation; *before: 0 for a
 * held slot).
 */
static int
take_level(ChainLimits *cl, int i, bool waits, int *how, uint32 *before)
{
	DbgateBudget *x = i > 0 ? budget_entry(cl->c.idx[i - 1]) : NULL;
	int			r;

	*how = RESV_NONE;
	if (i > 0 && unlikely(cl->lim[i - 1].resv))
		*how = resv_take(x, dbgate_tag_of(cl->c.inc[i - 1]), cl->c.idx[i],
						 cl->c.inc[i]);
	if (*how != RESV_NONE)
		cl->c.resv |= 1 << i;
	if (*how == RESV_HELD)
	{
		*before = 0;
		return 1;
	}
	r = level_take(budget_entry(cl->c.idx[i]), dbgate_tag_of(cl->c.inc[i]),
				   cl->lim[i].max_active, cl->lim[i].enforce, i == 0 && waits,
				   before);
	if (r != 1 && *how == RESV_USED)
	{
		resv_untake(x, dbgate_tag_of(cl->c.inc[i - 1]), cl->c.idx[i],
					cl->c.inc[i], false);
		cl->c.resv &= ~(1 << i);
		*how = RESV_NONE;
	}
	return r;
}

/* Give back levels [0, n) that take_level() took as how[] says. */
static void
untake_levels(ChainLimits *cl, const int *how, int n)
{
	int			i;

	for (i = n - 1; i >= 0; i--)
	{
		if (how[i] != RESV_HELD)
			(void) level_add(budget_entry(cl->c.idx[i]),
							 dbgate_tag_of(cl->c.inc[i]), -1, 0);
		if (how[i] != RESV_NONE)
			resv_untake(budget_entry(cl->c.idx[i - 1]),
						dbgate_tag_of(cl->c.inc[i - 1]), cl->c.idx[i],
						cl->c.inc[i], how[i] == RESV_HELD);
	}
	cl->c.resv = 0;
}

/*
 * Take a slot at every level of cl, where chain_has_room() saw room, and
 * a token at every level with a rate; on success the levels' peaks and
 * what shadow levels would have met are counted.  Anything but TAKE_DONE
 * leaves nothing taken.  Caller holds the tree lock.
 */
static TakeResult
take_chain(ChainLimits *cl, bool waits, bool covered, HeldBy *held,
		   int64 *now_ns)
{
	uint32		before[DBGATE_MAX_DEPTH];
	int			how[DBGATE_MAX_DEPTH];	/* RESV_*: through a reservation */
	uint32		lacked = 0;		/* shadow levels without a token due */
	int			n = covered ? 1 : cl->c.n;	/* the levels to take */
	int			r = 1;
	int			i;

	cl->c.resv = covered ? budget_entry(cl->c.idx[0])->held_chain.resv : 0;
	for (i = 0; i < n && r == 1; i++)
		r = take_level(cl, i, waits, &how[i], &before[i]);
	if (r != 1)
	{
		/* changed under us (a slot taken without the lock, a drop) */
		untake_levels(cl, how, i - 1);
		return r < 0 ? TAKE_RETRY : TAKE_AGAIN;
	}
	if (!take_dims(cl, held, now_ns, &lacked))
	{
		/* no token: give back the slots just taken */
		untake_levels(cl, how, n);
		return TAKE_NO_TOKEN;
	}
	for (i = 0; i < n; i++)
	{
		if (how[i] != RESV_HELD)
			note_peak_active(budget_entry(cl->c.idx[i]), before[i] + 1);
	}
	if (covered)
	{
		/* the held slot is ours: its levels above count it already */
		budget_entry(cl->c.idx[0])->held--;
		for (i = 1; i < cl->c.n; i++)
			before[i] = 0;		/* nothing for a shadow level to count */
	}
	dbgate_count_shadow(cl, before, lacked);
	return TAKE_DONE;
}

/*
 * The queue of budget b is full: count the rejection, hand on what was
 * given back (the grant step), let the tree lock go and throw 53300,
 * naming what held the statement back.  The names are copied out of
 * shared memory before the lock goes.
 */
static void
reject(DbgateBudget *b, int root, uint64 st, const DbgateLimits *l,
	   const HeldBy *held, TimestampTz now)
{
	char		name[NAMEDATALEN];
	char		held_name[NAMEDATALEN];
	Wakeups		w;

	w.n = 0;
	b->rejected_full++;
	dbgate_my_proc->budget = -1;
	strlcpy(name, b->conf.name, NAMEDATALEN);
	if (held->name != NULL)
		strlcpy(held_name, held->name, NAMEDATALEN);
	dbgate_grant_tree(root, now, &w);	/* slots take_chain() gave back */
	unlock_tree(root);
	wake_now(&w);
	dbgate_leave_dims();
	reject_full(name, dbgate_st_active(st), l->max_active,
				l->grant_max_active, dbgate_st_queued(st), l->max_queued,
				held->name ? held_name : NULL, held->active,
				held->max_active, held->token,
				held->dim ? held->detail : NULL);
}

/*
 * A dimension of budget b refuses the statement a queue place (join: a
 * key at its max_queued): counted as a rejection of the budget, and 53300
 * with the dimension's DETAIL.  As reject().
 */
static void
reject_dim(DbgateBudget *b, int root, const char *detail)
{
	char		name[NAMEDATALEN];
	char		why[256];
	Wakeups		w;

	w.n = 0;
	b->rejected_full++;
	dbgate_my_proc->budget = -1;
	strlcpy(name, b->conf.name, NAMEDATALEN);
	strlcpy(why, detail, sizeof(why));
	dbgate_grant_tree(root, GetCurrentTimestamp(), &w);
	unlock_tree(root);
	wake_now(&w);
	dbgate_leave_dims();
	ereport(ERROR,
			(errcode(ERRCODE_TOO_MANY_CONNECTIONS),
			 errmsg("budget \"%s\" is full", name),
			 errdetail_internal("%s", why),
			 errhint("Retry later, or raise key_max_queued with dbgate.alter_budget() or the key's max_queued with dbgate.set_key_limit().")));
}

/*
 * Count us in 'queued' at every level of cl (and in the levels' peaks).
 * Returns false, with nothing left counted, when a level changed
 * identity.  Caller holds the tree lock.
 */
static bool
join_chain(const ChainLimits *cl)
{
	int			i;

	for (i = 0; i < cl->c.n; i++)
	{
		DbgateBudget *lb = budget_entry(cl->c.idx[i]);
		uint64		lst;

		if (!level_add(lb, dbgate_tag_of(cl->c.inc[i]), 0, 1))
		{
			while (--i >= 0)
				(void) level_add(budget_entry(cl->c.idx[i]),
								 dbgate_tag_of(cl->c.inc[i]), 0, -1);
			return false;
		}
		lst = pg_atomic_read_u64(&lb->state);
		if ((int32) dbgate_st_queued(lst) > lb->peak_queued)
			lb->peak_queued = dbgate_st_queued(lst);
	}
	return true;
}

/*
 * Link our entry, counted at every level of cl already, at the tail of
 * budget b's queue, run the grant step (a slot returned before we were
 * counted, a token due: see admission.c) and let the tree lock go.
 *
 * The entry's state_since is stamped here, under the tree lock, not at
 * the statement's arrival: the list is in the order of joining, and a
 * backend that read the clock first may take the lock after another one
 * (preempted between the two, or passed over by the LWLock), so only a
 * stamp taken under the lock keeps state_since in the queue's order --
 * which 'fifo' serves, the overdue test of 'lifo' reads and the views
 * show.  The wait itself is measured from the arrival (the caller's).
 */
static void
enqueue(DbgateBudget *b, const ChainLimits *cl, int root)
{
	Wakeups		w;
	TimestampTz now = GetCurrentTimestamp();

	w.n = 0;
	dbgate_my_proc->state_since = now;
	dbgate_my_proc->chain = cl->c;
	dbgate_my_proc->state = DBGATE_PROC_QUEUED;
	dbgate_list_append(b, dbgate_my_procno);
	dbgate_grant_tree(root, now, &w);
	unlock_tree(root);
	wake_now(&w);
}

/*
 * The decision under the tree lock: take the slots of lk's chain if every
 * level has room, reject the statement if its budget's queue is full
 * (throws 53300), or join the queue.  Returns with the tree lock released;
 * *l and *cl are the limits read under it.
 */
static SlowDecision
decide_slow(const DbgateLookup *lk, bool utility, TimestampTz now,
			DbgateLimits *l, ChainLimits *cl)
{
	DbgateBudget *b = budget_entry(lk->budget);
	int64		now_ns = 0;
	int			root;

	switch (lock_chain(lk, utility, &root, l, cl))
	{
		case CHAIN_OK:
			break;
		case CHAIN_CHANGED:
			return SLOW_RETRY;
		case CHAIN_BROKEN:
			return SLOW_UNGATED;
	}
	describe_me(lk, now);
	for (;;)
	{
		uint64		st = pg_atomic_read_u64(&b->state);
		HeldBy		held;
		TakeResult	r = TAKE_NO_TOKEN;
		bool		waits;
		bool		covered;

		if (dbgate_st_tag(st) != dbgate_tag_of(lk->incarnation))
			break;
		held.name = NULL;
		held.token = held.dim = false;
		waits = newcomer_waits(b, l, now);
		covered = chain_held(cl);
		if (chain_has_room(cl, waits, covered, &held))
		{
			r = take_chain(cl, waits, covered, &held, &now_ns);
			if (r == TAKE_AGAIN)
				continue;
			if (r == TAKE_RETRY)
				break;
			if (r == TAKE_DONE)
			{
				unlock_tree(root);
				return SLOW_ADMITTED;
			}
		}
		if (dbgate_st_queued(st) >= (uint32) l->max_queued)
			reject(b, root, st, l, &held, now);
		if (unlikely(l->dim_flags != 0) &&
			!dbgate_dims_join(b, l->dim_flags, dbgate_my_proc, held.detail,
							  sizeof(held.detail)))
			reject_dim(b, root, held.detail);
		if (!join_chain(cl))
		{
			dbgate_dims_unjoin(dbgate_my_proc);
			break;
		}
		enqueue(b, cl, root);
		return SLOW_QUEUED;
	}
	unlock_tree(root);
	return SLOW_RETRY;
}

/*
 * No room at first sight (or a tree, or a rate): decide under the tree
 * lock, and admit, queue or reject.  Throws 53300 when the budget is full,
 * and whatever ends a wait.
 */
pg_noinline DbgateAdmit
dbgate_admit_slow(const DbgateLookup *lk, bool utility, QueryDesc *queryDesc,
				  TimestampTz now, DbgateAdmission *a)
{
	ChainLimits cl;
	DbgateLimits l;

	/* what only our process can learn (a key), before any lock */
	if (unlikely(a->lim.dim_flags != 0))
		dbgate_dims_enter(budget_entry(lk->budget), a->lim.dim_flags,
						  dbgate_my_proc, 0);
	switch (decide_slow(lk, utility, now, &l, &cl))
	{
		case SLOW_ADMITTED:
			admitted_now(lk, &cl, now, a);
			return DBGATE_ADMIT_SLOT;
		case SLOW_QUEUED:
			if (dbgate_wait_in_queue(lk, utility, queryDesc, now, &l, a))
				return DBGATE_ADMIT_SLOT;
			dbgate_leave_dims();
			return DBGATE_ADMIT_NONE;
		case SLOW_UNGATED:
			dbgate_leave_dims();
			return DBGATE_ADMIT_NONE;
		case SLOW_RETRY:
			break;
	}
	dbgate_leave_dims();
	return DBGATE_ADMIT_RETRY;
}

