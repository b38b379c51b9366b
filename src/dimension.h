/*-------------------------------------------------------------------------
 *
 * dimension.h
 *	  The table of admission dimensions (dimension.c) and the helpers
 *	  through which the files of admission reach them.
 *
 * The files of admission (admission.c, waiting.c, queue.c, trees.c,
 * install.c) name no dimension: they call the helpers below for the bits
 * of a level's DbgateLimits.dim_flags, and the helpers call each
 * dimension through its entry of dbgate_dimensions[], as PostgreSQL's
 * lock manager calls a lock method through LockMethods[].  dimdefs.h has
 * what a dimension is and the rules of its callbacks.
 *
 * A new dimension is one file with its header (its const
 * DbgateDimension, as rate.c's), one constant of DbgateDimId (dimdefs.h)
 * and one entry of dbgate_dimensions[] (dimension.c); then its fields
 * (fields.c and DbgateBudgetConf, src/README's recipe), its state (a word
 * of the budget entry, shmem.h, or its own shared memory through
 * shmem_request and shmem_init; per-statement state in a field of
 * DbgateProc) and the upgrade script.
 *
 * A dimension with per-statement state (a key) uses the callbacks so:
 * take gets the statement's backend entry e and writes what it took (the
 * key entry) into a field of its own there, setting its bit in
 * e->dim_held; untake (the same level, a moment later) and release (the
 * slot's end: dbgate_dims_release(), before the levels are returned) read
 * it there and clear it.  dimdefs.h has the rules and the keys' sketch.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DBGATE_DIMENSION_H
#define DBGATE_DIMENSION_H

#include "dimdefs.h"
#include "shmem.h"

/* The dimensions, indexed by DbgateDimId. */
extern DBGATE_HIDDEN const DbgateDimension *const
			dbgate_dimensions[DBGATE_NDIMS];

/* The bits of the dimensions that have an enter callback. */
extern DBGATE_HIDDEN const uint8 dbgate_dims_entering;

/*
 * The bits of the dimensions whose take always needs the clock (a rate).
 * The fast paths read the clock only for them and otherwise pass 0 as
 * now_ns and asof_ns: a take that needs it then (a key with a rate)
 * reads it itself.
 */
extern DBGATE_HIDDEN const uint8 dbgate_dims_timed;

/*
 * dbgate_dims_take(), and with 'enter' dbgate_dims_enter_take(): the
 * dimensions of dims one after the other, each entered
 * first if 'enter' (by its enter_take where it has one).
 */
static pg_attribute_always_inline int64
dims_take_body(DbgateBudget *b, uint8 dims, DbgateProc *e, int level,
			   int64 now_ns, int64 asof_ns, bool force, const bool enter)
{
	int64		res = DBGATE_DIM_TAKEN;
	int			d;

	for (d = 0; d < DBGATE_NDIMS; d++)
	{
		const DbgateDimension *dim = dbgate_dimensions[d];
		int64		r;

		if (!(dims & DBGATE_DIM_BIT(d)))
			continue;
		if (enter && dim->enter_take != NULL)
			r = dim->enter_take(b, e, level, now_ns, force);
		else
		{
			if (enter && dim->enter != NULL)
				dim->enter(b, e, level);
			r = dim->take(b, e, level, now_ns, asof_ns, force);
		}
		if (r == DBGATE_DIM_TAKEN)
			continue;
		if (!force)
		{
			while (--d >= 0)
			{
				if (dims & DBGATE_DIM_BIT(d))
					dbgate_dimensions[d]->untake(b, e, level);
			}
			return r;
		}
		if (res == DBGATE_DIM_TAKEN)
			res = r;
	}
	return res;
}

/*
 * Take the dimensions 'dims' at level 'level' of e's statement (budget
 * entry b): as a DbgateDimension's take answers (the first answer that is
 * not DBGATE_DIM_TAKEN).  Without 'force', a dimension that does not
 * admit leaves nothing taken (the ones taken before it at this level are
 * given back); with it, every one is taken.
 */
static inline int64
dbgate_dims_take(DbgateBudget *b, uint8 dims, DbgateProc *e, int level,
				 int64 now_ns, int64 asof_ns, bool force)
{
	return dims_take_body(b, dims, e, level, now_ns, asof_ns, force, false);
}

/*
 * dbgate_dims_enter() then dbgate_dims_take() with now_ns as asof_ns, for
 * the fast paths (e == dbgate_my_proc, no lock): one call per dimension
 * where it has enter_take.
 */
static inline int64
dbgate_dims_enter_take(DbgateBudget *b, uint8 dims, DbgateProc *e,
					   int level, int64 now_ns, bool force)
{
	if (likely((dims & dbgate_dims_entering) == 0))	/* (a rate alone) */
		return dims_take_body(b, dims, e, level, now_ns, now_ns, force,
							  false);
	return dims_take_body(b, dims, e, level, now_ns, now_ns, force, true);
}

/* Give back what dbgate_dims_take() took at level 'level'. */
static inline void
dbgate_dims_untake(DbgateBudget *b, uint8 dims, DbgateProc *e, int level)
{
	int			d;

	for (d = DBGATE_NDIMS - 1; d >= 0; d--)
	{
		if (dims & DBGATE_DIM_BIT(d))
			dbgate_dimensions[d]->untake(b, e, level);
	}
}

/*
 * Would the dimensions 'dims' admit e's statement at level 'level' now?
 * DBGATE_DIM_TAKEN if so; DBGATE_DIM_UNTIL_RELEASE if one of them will
 * not before a release; otherwise the time when all of them are due.
 * Under the tree lock (the grant step's choice, trees.c).
 */
static inline int64
dbgate_dims_due(DbgateBudget *b, uint8 dims, DbgateProc *e, int level,
				int64 now_ns)
{
	int64		due = DBGATE_DIM_TAKEN;
	int			d;

	for (d = 0; d < DBGATE_NDIMS; d++)
	{
		int64		r;

		if (!(dims & DBGATE_DIM_BIT(d)))
			continue;
		r = dbgate_dimensions[d]->due(b, e, level, now_ns);
		if (r == DBGATE_DIM_UNTIL_RELEASE)
			return r;
		if (r > due)
			due = r;
	}
	return due;
}

/*
 * A statement enters level 'level' (budget entry b, dimensions 'dims') in
 * its own process, with no lock held: the dimensions that keep what only
 * its process can learn take it (enter).
 */
static inline void
dbgate_dims_enter(DbgateBudget *b, uint8 dims, DbgateProc *e, int level)
{
	int			d;

	if (likely((dims & dbgate_dims_entering) == 0))
		return;					/* (a rate alone: one test) */
	for (d = 0; d < DBGATE_NDIMS; d++)
	{
		if ((dims & DBGATE_DIM_BIT(d)) && dbgate_dimensions[d]->enter != NULL)
			dbgate_dimensions[d]->enter(b, e, level);
	}
}

/*
 * Under the tree lock, e's statement is about to join b's queue: may it
 * (join of each dimension of dims that limits waiters)?  false: a DETAIL
 * for its 53300 is in detail, and nothing is counted.
 */
static inline bool
dbgate_dims_join(DbgateBudget *b, uint8 dims, DbgateProc *e, char *detail,
				 int len)
{
	int			d;

	for (d = 0; d < DBGATE_NDIMS; d++)
	{
		if (!(dims & DBGATE_DIM_BIT(d)) || dbgate_dimensions[d]->join == NULL)
			continue;
		if (!dbgate_dimensions[d]->join(b, e, detail, len))
		{
			while (--d >= 0)
			{
				if ((dims & DBGATE_DIM_BIT(d)) &&
					dbgate_dimensions[d]->unjoin != NULL)
					dbgate_dimensions[d]->unjoin(e);
			}
			return false;
		}
	}
	return true;
}

/* e left its queue (tree lock): the dimensions of e->dim_held uncount it. */
static inline void
dbgate_dims_unjoin(DbgateProc *e)
{
	int			d;

	for (d = 0; d < DBGATE_NDIMS; d++)
	{
		if ((e->dim_held & DBGATE_DIM_BIT(d)) &&
			dbgate_dimensions[d]->unjoin != NULL)
			dbgate_dimensions[d]->unjoin(e);
	}
}

/*
 * The dimension of dims that orders budget b's queue (pick), or -1 (the
 * queue order alone).
 */
static inline int
dbgate_dims_orderer(uint8 dims)
{
	int			d;

	for (d = 0; dims != 0 && d < DBGATE_NDIMS; d++)
	{
		if ((dims & DBGATE_DIM_BIT(d)) && dbgate_dimensions[d]->pick != NULL)
			return d;
	}
	return -1;
}

/* newcomer_waits of the dimension that orders b's queue (there is one). */
static inline bool
dbgate_dims_newcomer_waits(DbgateBudget *b, const DbgateLimits *l,
						   DbgateProc *e, TimestampTz now)
{
	return dbgate_dimensions[dbgate_dims_orderer(l->dim_flags)]->newcomer_waits(b, l, e, now);
}

/*
 * Why did the dimensions 'dims' of level 0 not admit e's statement?  The
 * first that can say, into detail; false if none can.
 */
static inline bool
dbgate_dims_explain(DbgateBudget *b, uint8 dims, DbgateProc *e, char *detail,
					int len)
{
	int			d;

	for (d = 0; d < DBGATE_NDIMS; d++)
	{
		if ((dims & DBGATE_DIM_BIT(d)) && dbgate_dimensions[d]->explain != NULL &&
			dbgate_dimensions[d]->explain(b, e, detail, len))
			return true;
	}
	return false;
}

/*
 * For DbgateLimits.dim_one: the dimension of dims + 1 if it is the only one,
 * has an enter_take and needs no clock (not in dbgate_dims_timed), else 0.
 */
extern DBGATE_HIDDEN uint8 dbgate_dims_one(uint8 dims);

/*
 * dbgate_dims_enter_take() of a level whose dim_one is set (the fast
 * paths): that one dimension's enter_take by one call, without a loop or
 * a test of the others (now_ns 0: it needs no clock).
 */
static inline int64
dbgate_dim_one_enter_take(uint8 one, DbgateBudget *b, DbgateProc *e,
						  int level, bool force)
{
	return dbgate_dimensions[one - 1]->enter_take(b, e, level, 0, force);
}

extern DBGATE_HIDDEN uint8 dbgate_dims_install(DbgateBudget *b,
											   const DbgateBudgetConf *conf,
											   DbgateQueueLimits *q);

/*
 * The slot of backend entry e, held along chain c, ends: the release of
 * every dimension whose per-statement state e holds (e->dim_held), before
 * the slot's levels are returned.
 */
static inline void
dbgate_dims_release(DbgateProc *e, const DbgateChain *c)
{
	int			d;

	for (d = 0; d < DBGATE_NDIMS; d++)
	{
		/* (a dimension that sets its bit enters, and so has a release) */
		if (e->dim_held & DBGATE_DIM_BIT(d))
			dbgate_dimensions[d]->release(e, c);
	}
	e->dim_held = 0;
}

extern void dbgate_dims_reset_stats(DbgateBudget *b);
extern void dbgate_dims_installed(void);
extern void dbgate_dims_shmem_request(void);
extern void dbgate_dims_shmem_init(void);

#endif							/* DBGATE_DIMENSION_H */
