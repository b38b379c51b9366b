/*-------------------------------------------------------------------------
 *
 * admission_internals.h
 *	  What the files of admission share among themselves: the per-backend
 *	  entries and the state words of the budgets as they are read and
 *	  written.
 *
 * Only admission.c, waiting.c, queue.c, trees.c, lockgraph.c, demote.c and
 * move.c include this header (admission.c lists them and has the rules that all
 * of them follow); the rest of dbgate uses admission.h, waiting.h and queue.h.
 * It includes only lower headers (shmem.h, budgetdefs.h, admitdefs.h,
 * classify.h, compat.h): the functions that each file gives the others
 * are declared in that file's header (queue.h, trees.h, waiting.h,
 * lockgraph.h), in a part marked for the files of admission only.
 *
 * The helpers below are static inline, as they were when these files
 * were one: the statement path uses them (admission.c) and must compile
 * to the same instructions.  The functions and variables the files share
 * are hidden from outside the library (DBGATE_HIDDEN, shmem.h): they are reached
 * directly, not through the library's PLT or GOT, as the static ones of
 * one file are, so that a call from one file to another costs the
 * statement path nothing more than it did.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DBGATE_ADMISSION_INTERNALS_H
#define DBGATE_ADMISSION_INTERNALS_H

#include "executor/execdesc.h"
#include "storage/latch.h"

#include "admitdefs.h"
#include "classify.h"
#include "compat.h"
#include "dimension.h"
#include "shmem.h"

/* ----------
 * The shared entries (shmem.h has proc_entry() and budget_entry())
 * ----------
 */
static inline uint64
elapsed_us(TimestampTz from, TimestampTz to)
{
	return (to > from) ? (uint64) (to - from) : 0;
}

/* ----------
 * Wake-ups
 * ----------
 */

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
	if (procno == dbgate_my_procno)
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

/* A chain with the limits of every level. */
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
static inline ChainRead
chain_limits(int idx, uint32 inc, const DbgateLimits *l, ChainLimits *cl)
{
	int			n = 0;

	cl->c.idx[0] = idx;
	cl->c.inc[0] = inc;
	cl->c.resv = 0;
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

/* Are a and b the same levels (budgets and incarnations)? */
static inline bool
chain_same(const DbgateChain *a, const DbgateChain *b)
{
	int			i;

	if (a->n != b->n)
		return false;
	for (i = 0; i < a->n; i++)
	{
		if (a->idx[i] != b->idx[i] || a->inc[i] != b->inc[i])
			return false;
	}
	return true;
}

/* ----------
 * Reservations: the 'resv' word of a budget (shmem.h; queue.c has the
 * rules).  x below is the budget at level k - 1 of a chain, its parent
 * the level k whose slot is taken or returned through x's reservation.
 * ----------
 */
#define RESV_BITS			16
#define RESV_MASK			((UINT64CONST(1) << RESV_BITS) - 1)
#define RESV_ONE_HELD		UINT64CONST(1)
#define RESV_ONE_USED		(UINT64CONST(1) << RESV_BITS)
#define RESV_R_SHIFT		(2 * RESV_BITS)
#define RESV_EPOCH_SHIFT	(3 * RESV_BITS)
#define RESV_EPOCH_MASK		UINT64CONST(3)
#define RESV_PARENT_SHIFT	(3 * RESV_BITS + 2)

static inline uint32
resv_held(uint64 w)
{
	return (uint32) (w & RESV_MASK);
}

static inline uint32
resv_used(uint64 w)
{
	return (uint32) ((w >> RESV_BITS) & RESV_MASK);
}

static inline uint32
resv_r(uint64 w)
{
	return (uint32) ((w >> RESV_R_SHIFT) & RESV_MASK);
}

/* The parent the word counts at, -1: none. */
static inline int32
resv_parent(uint64 w)
{
	return (int32) (w >> RESV_PARENT_SHIFT) - 1;
}

/* What resv_take() did. */
#define RESV_NONE	0			/* not through the reservation: as without one */
#define RESV_USED	1			/* counted as used; the parent's slot is the
								 * caller's to take */
#define RESV_HELD	2			/* a held slot: nothing to take at the parent */

/*
 * Is x's word w for a reservation at the parent (p, pinc) of the chain?
 * The word names the parent it counts at (an install sets it, and r,
 * with a new epoch), so a word of another install fails the caller's
 * compare-and-swap; x must still be the budget of the chain (xtag: a
 * dropped entry's word is not ours), and p the one of the chain (pinc:
 * an entry dropped and used again keeps its index).
 */
static inline bool
resv_for(DbgateBudget *x, uint32 xtag, uint64 w, int32 p, uint32 pinc)
{
	return resv_parent(w) == p && resv_r(w) > 0 &&
		dbgate_st_tag(pg_atomic_read_u64(&x->state)) == xtag &&
		dbgate_st_tag(pg_atomic_read_u64(&budget_entry(p)->state)) ==
		dbgate_tag_of(pinc);
}

/*
 * A statement through x takes a slot of x's parent (p, pinc) under x's
 * reservation: one that x holds if there is one (RESV_HELD), otherwise it
 * is counted as used and the caller takes the parent's slot (RESV_USED:
 * if it cannot, resv_unuse()).
 */
static inline int
resv_take(DbgateBudget *x, uint32 xtag, int32 p, uint32 pinc)
{
	uint64		old = pg_atomic_read_u64(&x->resv);

	for (;;)
	{
		uint64		new = old + RESV_ONE_USED;

		if (!resv_for(x, xtag, old, p, pinc) || resv_used(old) == RESV_MASK)
			return RESV_NONE;
		if (resv_held(old) > 0)
			new -= RESV_ONE_HELD;
		if (pg_atomic_compare_exchange_u64(&x->resv, &old, new))
			return resv_held(old) > 0 ? RESV_HELD : RESV_USED;
	}
}

/*
 * Undo resv_take(): 'held' the slot was a held one (it is held again: only
 * under the tree lock, where the parent cannot change), otherwise it was
 * counted as used and the parent's slot was not taken.
 */
static inline void
resv_untake(DbgateBudget *x, uint32 xtag, int32 p, uint32 pinc, bool held)
{
	uint64		old = pg_atomic_read_u64(&x->resv);

	for (;;)
	{
		uint64		new = old - RESV_ONE_USED + (held ? RESV_ONE_HELD : 0);

		if (resv_used(old) == 0 || !resv_for(x, xtag, old, p, pinc))
			return;				/* counted no more (an install since) */
		if (pg_atomic_compare_exchange_u64(&x->resv, &old, new))
			return;
	}
}

/*
 * A slot of x's parent (p, pinc) taken through x's reservation is given
 * up.  Kept for x (held: returns true, nothing to return at the parent)
 * while x then uses and holds fewer than r there; otherwise the caller
 * returns the parent's slot.  The parent counts every slot once, as a
 * statement's or as held, whatever 'used' says: an install that moves x
 * starts it at 0, and a slot of an earlier parent, or one that the count
 * has lost, is simply returned to the parent it was taken from.
 */
static inline bool
resv_release(DbgateBudget *x, uint32 xtag, int32 p, uint32 pinc)
{
	uint64		old = pg_atomic_read_u64(&x->resv);

	for (;;)
	{
		uint64		new;
		bool		keep;

		if (resv_used(old) == 0 || !resv_for(x, xtag, old, p, pinc))
			return false;
		new = old - RESV_ONE_USED;
		keep = resv_used(new) + resv_held(new) < resv_r(new);
		if (keep)
			new += RESV_ONE_HELD;
		if (pg_atomic_compare_exchange_u64(&x->resv, &old, new))
			return keep;
	}
}

/* Does x hold a slot of its parent for itself (tree lock: a hint else)? */
static inline bool
resv_has_held(DbgateBudget *x)
{
	return x->lim.resv && resv_held(pg_atomic_read_u64(&x->resv)) > 0;
}

/* ----------
 * State words (the tag, active and queued of budgetdefs.h)
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

/*
 * The memory grants of backend entry e change by delta_kb at every level
 * of its chain (a level dropped meanwhile is left alone) and in its sum.
 */
static inline void
memory_add(DbgateProc *e, int64 delta_kb)
{
	int			i;

	for (i = 0; i < e->chain.n; i++)
	{
		DbgateBudget *lb = budget_entry(e->chain.idx[i]);

		if (dbgate_st_tag(pg_atomic_read_u64(&lb->state)) !=
			dbgate_tag_of(e->chain.inc[i]))
			continue;
		pg_atomic_fetch_add_u64(&lb->memory_kb_active, (uint64) delta_kb);
	}
	pg_atomic_fetch_add_u64(&e->memory_kb, (uint64) delta_kb);
}

/* ----------
 * The tree lock (queue.c takes it) and granting
 * ----------
 */
static inline void
unlock_tree(int root)
{
	LWLockRelease(dbgate_budget_lock(root));
}

/* Hand a slot to procno, whose counts the caller moved to 'active'. */
static inline void
mark_granted(DbgateProc *p, TimestampTz now)
{
	p->state_since = now;
	pg_write_barrier();			/* the waiter reads 'granted' without the lock */
	p->granted = true;
}

/* ----------
 * A slot taken at once (admission.c, waiting.c)
 * ----------
 */

/*
 * Our entry 'me' (dbgate_my_proc, read once by the caller: a global that
 * the compiler cannot tell apart from the entry's fields would be read
 * again after every store) shows what we hold or wait for (the state: the
 * caller's).
 */
static inline void
show_me(DbgateProc *me, const DbgateLookup *lk, TimestampTz now)
{
	me->budget = lk->budget;
	me->incarnation = lk->incarnation;
	me->roleid = lk->user;
	me->rule = (uint8) lk->rule;
	me->via = lk->via;
	me->state_since = now;
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
	DbgateProc *me = dbgate_my_proc;

	pg_atomic_fetch_add_u64(&budget_entry(lk->budget)->admitted, 1);
	show_me(me, lk, now);
	if (single)
	{
		/* the same as the copy below, in fewer instructions */
		me->chain.n = 1;
		me->chain.idx[0] = lk->budget;
		me->chain.inc[0] = lk->incarnation;
	}
	else
		me->chain = a->chain;
	pg_write_barrier();
	me->state = DBGATE_PROC_ACTIVE;
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
 * This backend's statement leaves the gate without a slot (rejected,
 * timed out, canceled while queued, ungated, classified again): what its
 * admission dimensions keep for it (a key's hold, dimdefs.h) goes back.
 */
static inline void
dbgate_leave_dims(void)
{
	if (unlikely(dbgate_my_proc->dim_held != 0))
		dbgate_dims_release(dbgate_my_proc, NULL);
}

#endif							/* DBGATE_ADMISSION_INTERNALS_H */
