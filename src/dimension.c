/*-------------------------------------------------------------------------
 *
 * dimension.c
 *	  The table of admission dimensions, and what the core asks of all of
 *	  them at once: the install, the end of a slot, a reset of the
 *	  statistics, their shared memory.
 *
 * Each dimension is one const DbgateDimension in its own file
 * (dimdefs.h says what its callbacks do and when they are called); this
 * table lists them by DbgateDimId, as PostgreSQL's LockMethods[] lists the
 * lock methods.  The statement path reaches them through the inline
 * helpers of dimension.h, only at the levels whose dim_flags has their
 * bit.
 *
 * Locking: none of its own; each helper is called with what its
 * callbacks expect (dimdefs.h): the tree lock for the install, nothing
 * for the release and the reset of the statistics (atomics).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "port/pg_bitutils.h"
#include "storage/ipc.h"
#include "storage/shmem.h"

#include "dimension.h"
#include "keydim.h"
#include "rate.h"

const DbgateDimension *const dbgate_dimensions[DBGATE_NDIMS] = {
	[DBGATE_DIM_RATE] = &dbgate_rate_dimension,
	[DBGATE_DIM_KEY] = &dbgate_key_dimension,
};

/* (the table's entries with enter: keep in step with it) */
const uint8 dbgate_dims_entering = DBGATE_DIM_BIT(DBGATE_DIM_KEY);
const uint8 dbgate_dims_timed = DBGATE_DIM_BIT(DBGATE_DIM_RATE);

uint8
dbgate_dims_one(uint8 dims)
{
	int			d;

	if (dims == 0 || (dims & (dims - 1)) != 0 || (dims & dbgate_dims_timed))
		return 0;
	d = pg_rightmost_one_pos32(dims);
	return dbgate_dimensions[d]->enter_take != NULL ? (uint8) (d + 1) : 0;
}

/*
 * Install 'conf' into budget entry b (b->conf still the old one): every
 * dimension's install.  Returns the bits of the dimensions that b uses
 * under conf (its DbgateLimits.dim_flags); *q gets their queue-side
 * fields.  conf == NULL: b starts serving a new budget (q NULL, 0
 * returned).  Caller holds b's tree lock (or every budget lock, or is
 * alone at start-up).
 */
uint8
dbgate_dims_install(DbgateBudget *b, const DbgateBudgetConf *conf,
					DbgateQueueLimits *q)
{
	uint8		dims = 0;
	int			d;

	for (d = 0; d < DBGATE_NDIMS; d++)
	{
		if (dbgate_dimensions[d]->install(b, conf, q) && conf != NULL)
			dims |= DBGATE_DIM_BIT(d);
	}
	return dims;
}

/* Zero every dimension's counters of budget b. */
void
dbgate_dims_reset_stats(DbgateBudget *b)
{
	int			d;

	for (d = 0; d < DBGATE_NDIMS; d++)
	{
		if (dbgate_dimensions[d]->reset_stats != NULL)
			dbgate_dimensions[d]->reset_stats(b);
	}
}

/*
 * After a configuration install (config_lock exclusive, no tree lock):
 * what the dimensions derive from the whole configuration.
 */
void
dbgate_dims_installed(void)
{
	int			d;

	for (d = 0; d < DBGATE_NDIMS; d++)
	{
		if (dbgate_dimensions[d]->installed != NULL)
			dbgate_dimensions[d]->installed();
	}
}

/* The shared memory of the dimensions that have their own. */
void
dbgate_dims_shmem_request(void)
{
	int			d;

	for (d = 0; d < DBGATE_NDIMS; d++)
	{
		if ((dbgate_dimensions[d]->enter != NULL) !=
			((dbgate_dims_entering & DBGATE_DIM_BIT(d)) != 0))
			elog(FATAL, "dbgate_dims_entering does not match dimension \"%s\"",
				 dbgate_dimensions[d]->name);
		if ((dbgate_dimensions[d]->enter != NULL &&
			 dbgate_dimensions[d]->release == NULL) ||
			(dbgate_dimensions[d]->enter_take != NULL &&
			 dbgate_dimensions[d]->enter == NULL))
			elog(FATAL, "dimension \"%s\" has enter without release, or enter_take without enter",
				 dbgate_dimensions[d]->name);
		if (dbgate_dimensions[d]->shmem_request != NULL)
			dbgate_dimensions[d]->shmem_request();
	}
}

void
dbgate_dims_shmem_init(void)
{
	int			d;

	for (d = 0; d < DBGATE_NDIMS; d++)
	{
		if (dbgate_dimensions[d]->shmem_init != NULL)
			dbgate_dimensions[d]->shmem_init();
	}
}
