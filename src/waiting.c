/*-------------------------------------------------------------------------
 *
 * waiting.c
 *	  A statement that finds no room at once: its admission under the tree
 *	  lock, the wait in its budget's queue, and leaving the queue.
 *
 * One of the admission files (admission.c lists them and has the rules
 * that all of them follow).
 *
 * Under the tree lock (dbgate_admit_slow())
 * ----------------------------------------
 * The statement's chain is looked at again, every level: if there is room
 * at every level (and, in a fair budget, nobody waits in it), it takes its
 * slots and tokens as the fast path would have; if its budget's queue is
 * full, it is rejected (53300, naming the level that holds it back);
 * otherwise it joins the tail of its budget's queue, counted in 'queued'
 * at every level of its chain, and runs the grant step before it lets the
 * lock go (admission.c says why no free slot is then left unused).
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
 * grant is resolved in favour of the grant.  While it waits the statement
 * holds no snapshot (waitsnap.c).
 *
 * Locking: the tree lock is taken to decide (not when a slot was handed
 * over: the granter already moved our counts and unlinked us, and what is
 * left of our entry is ours alone) and to leave; it is never held while
 * sleeping, and every error is raised after it is released, with the
 * names it needs copied out first.
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
#include "waiting.h"
#include "waitsnap.h"

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

/*
 * A statement leaves the gate without a slot (rejected, timed out,
 * ungated, classified again): what its admission dimensions keep for it
 * (a key's hold, dimdefs.h) goes back.
 */
static inline void
dims_leave(void)
{
	if (unlikely(dbgate_my_proc->dim_held != 0))
		dbgate_dims_release(dbgate_my_proc, NULL);
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
		if (*now_ns == 0)
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
	dims_leave();
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
	dims_leave();
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
 * Wait in the queue we joined, with no lock held, until a slot is ours or
 * the budget stops gating us (throws what ends the wait otherwise: the
 * queue timeout, cancel, terminate).  No snapshot is held back meanwhile
 * (waitsnap.c): a query's, the portal's of a gated utility command, or
 * that of a fast-path function call (no query descriptor, not a utility
 * command); it is taken again as the statement goes on, with a slot or
 * ungated.  Returns whether we hold a slot.
 */
static bool
wait_in_queue(const DbgateLookup *lk, bool utility, QueryDesc *queryDesc,
			  TimestampTz now, const DbgateLimits *l, DbgateAdmission *a)
{
	QueueWait	q;
	WaitStep	step;
	bool		proceed;
	bool		snap_released;

	q.idx = lk->budget;
	q.incarnation = lk->incarnation;
	q.enqueued = now;
	q.deadline = (l->queue_timeout_ms > 0) ?
		TimestampTzPlusMilliseconds(now, l->queue_timeout_ms) : 0;
	q.next_lock_check = TimestampTzPlusMilliseconds(now, Max(DeadlockTimeout, 1));
	q.same = true;

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
	return proceed;
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
			if (wait_in_queue(lk, utility, queryDesc, now, &l, a))
				return DBGATE_ADMIT_SLOT;
			dims_leave();
			return DBGATE_ADMIT_NONE;
		case SLOW_UNGATED:
			dims_leave();
			return DBGATE_ADMIT_NONE;
		case SLOW_RETRY:
			break;
	}
	dims_leave();
	return DBGATE_ADMIT_RETRY;
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
		budget_entry(root)->token_waiter == dbgate_my_procno)
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
	if (dbgate_my_proc->granted)
	{
		q->same = (dbgate_st_tag(pg_atomic_read_u64(&b->state)) ==
				   dbgate_tag_of(q->incarnation));
		return STEP_GRANTED;
	}

	w.n = 0;
	root = dbgate_lock_tree(q->idx);
	/* a dropped entry may already serve another budget */
	q->same = (b->in_use && b->incarnation == q->incarnation);
	if (!dbgate_my_proc->granted && !dbgate_my_proc->released)
	{
		if (!pg_atomic_read_u32(&dbgate_shared->enabled))
		{
			/* dbgate.enabled = off lets every waiter through at once */
			dbgate_queue_remove(dbgate_my_procno);
			step = STEP_UNGATED;
			dbgate_grant_tree(root, now, &w);
		}
		else
			dbgate_grant_tree(root, now, &w);	/* our turn (non-fair), a token due */
	}
	if (step == STEP_SLEEP)
	{
		if (dbgate_my_proc->granted)
			step = STEP_GRANTED;
		else if (dbgate_my_proc->released)
			step = STEP_UNGATED;	/* the budget was dropped */
		else if (q->deadline != 0 && now >= q->deadline)
		{
			dbgate_queue_remove(dbgate_my_procno);
			if (budget_entry(root)->token_waiter == dbgate_my_procno)
				budget_entry(root)->token_waiter = -1;
			b->rejected_timeout++;
			dbgate_my_proc->state = DBGATE_PROC_IDLE;
			dbgate_my_proc->budget = -1;
			q->waited_ms = (int) ((now - q->enqueued) / 1000);
			q->limit_ms = b->conf.queue_timeout_ms;
			strlcpy(q->name, b->conf.name, NAMEDATALEN);
			step = STEP_TIMED_OUT;
			dbgate_grant_tree(root, now, &w);	/* we may have held others back */
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

/* ... and in milliseconds, as dbgate.wait_histogram shows them */
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
	bool		granted = false;

	switch (step)
	{
		case STEP_GRANTED:
			{
				int			i;

				if (q->same)
				{
					count_admitted_after_wait(b, waited_us);
					if (dbgate_my_proc->overdue)
						pg_atomic_fetch_add_u64(&b->admitted_overdue, 1);
					for (i = 0; i < dbgate_my_proc->chain.n; i++)
					{
						if (dbgate_my_proc->token_levels & (1 << i))
							pg_atomic_fetch_add_u64(&budget_entry(dbgate_my_proc->chain.idx[i])->rate_limited, 1);
					}
					dbgate_read_limits(b, &a->lim);
				}
				else
					memset(&a->lim, 0, sizeof(a->lim));	/* dropped meanwhile */
				a->chain = dbgate_my_proc->chain;
				a->since = dbgate_my_proc->state_since;
				dbgate_my_proc->state = DBGATE_PROC_ACTIVE;
				pg_write_barrier();
				dbgate_my_proc->granted = false;
				granted = true;
			}
			break;

		case STEP_UNGATED:
			if (q->same)
				count_admitted_after_wait(b, waited_us);
			dbgate_my_proc->state = DBGATE_PROC_IDLE;
			dbgate_my_proc->budget = -1;
			dbgate_my_proc->released = false;
			break;

		case STEP_TIMED_OUT:
			dims_leave();
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
	return granted;
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
	if (dbgate_my_proc == NULL)
		return;
	if (dbgate_my_proc->state != DBGATE_PROC_QUEUED)
	{
		/* an error between the gate's enter and a queue (or exit) */
		if (dbgate_my_proc->state == DBGATE_PROC_IDLE)
			dims_leave();
		return;
	}
	b = budget_entry(dbgate_my_proc->budget);
	w.n = 0;
	root = dbgate_lock_tree(dbgate_my_proc->budget);
	same = (b->in_use && b->incarnation == dbgate_my_proc->incarnation);
	granted = dbgate_my_proc->granted;
	if (!granted && !dbgate_my_proc->released && same)
		dbgate_queue_remove(dbgate_my_procno);
	if (same)
		b->canceled_waiting++;
	if (budget_entry(root)->token_waiter == dbgate_my_procno)
		budget_entry(root)->token_waiter = -1;
	if (!granted)
		dbgate_grant_tree(root, GetCurrentTimestamp(), &w);
	dbgate_my_proc->granted = false;
	dbgate_my_proc->released = false;
	dbgate_my_proc->state = DBGATE_PROC_IDLE;
	dbgate_my_proc->budget = -1;
	unlock_tree(root);
	wake_now(&w);

	/* the slot handed to us in that instant goes on to the next waiter */
	if (granted)
	{
		if (dbgate_my_proc->dim_held != 0)
			dbgate_dims_release(dbgate_my_proc, &dbgate_my_proc->chain);
		dbgate_admission_release(&dbgate_my_proc->chain, 0);
	}
	else
		dims_leave();
}
