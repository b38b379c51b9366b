/*-------------------------------------------------------------------------
 *
 * adapt.h
 *	  The adaptive limit of a budget (adapt.c): the controller that finds
 *	  the knee of a budget's throughput curve and follows it.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DBGATE_ADAPT_H
#define DBGATE_ADAPT_H

#include "shmem.h"

/* Length of a period of the controller, and its steps (docs/design.md). */
#define DBGATE_ADAPT_PERIOD_MS	250

/*
 * The memory of a budget's adaptive-limit controller (adapt.c), written by
 * the one process that runs a step, under the tree lock: one per budget
 * entry, in adapt.c's own shared memory (dbgate.c's shared-memory hooks
 * call dbgate_adapt_shmem_request() and _init()).
 */
typedef struct DbgateAdaptState
{
	TimestampTz period_start;	/* 0: no period measured yet */
	uint64		done0;			/* the counters when the period started */
	uint64		busy0;
	uint64		waits0;
	uint64		tokens0;
	uint64		above0;			/* held_above */
	double		runnable;		/* averages over periods: backends on a CPU */
	double		own_cpu;		/* the budget's statements on a CPU */
	double		own_lock;		/* the budget's statements waiting for a lock */
	double		x_avg;			/* throughput, averaged over busy periods */
	double		x_before;		/* x_avg before the last decrease (0: too
								 * few periods in it to check against) */
	int32		x_periods;		/* busy periods in x_avg, counted to 4 */
	int32		l_before;		/* L before it (0: none to check) */
	int32		hold;			/* periods left without a decrease */
	bool		sampled;		/* the averages hold a sample */
} DbgateAdaptState;

extern void dbgate_adapt_shmem_request(void);
extern void dbgate_adapt_shmem_init(void);

/* One period of the controller, in microseconds */
#define DBGATE_ADAPT_PERIOD_US	((uint64) DBGATE_ADAPT_PERIOD_MS * 1000)

/*
 * The statement path (install.c's dbgate_admission_adapt_released(), from
 * slot.c): a slot of chain c with an adapting level was returned at 'now'
 * (taken at 'admitted_at').  Counts the statement at every adapting level.
 * Returns the levels whose period has ended (bit i: level i), each claimed
 * for this backend by compare-and-swap: the caller runs their steps.
 * Inline, as the loop was in the release.
 */
static inline uint32
dbgate_adapt_count(const DbgateChain *c, TimestampTz admitted_at,
				   TimestampTz now)
{
	uint64		busy = (admitted_at > 0 && now > admitted_at) ?
		(uint64) (now - admitted_at) : 0;
	uint32		due_levels = 0;
	int			i;

	for (i = 0; i < c->n; i++)
	{
		DbgateBudget *b = budget_entry(c->idx[i]);
		uint64		due;

		if (pg_atomic_read_u32(&b->adapt_limit) == 0 ||
			dbgate_st_tag(pg_atomic_read_u64(&b->state)) != dbgate_tag_of(c->inc[i]))
			continue;
		pg_atomic_fetch_add_u64(&b->adapt_done, 1);
		pg_atomic_fetch_add_u64(&b->adapt_busy_us, busy);
		due = pg_atomic_read_u64(&b->adapt_due_us);
		if ((uint64) now < due ||
			!pg_atomic_compare_exchange_u64(&b->adapt_due_us, &due,
											(uint64) now + DBGATE_ADAPT_PERIOD_US))
			continue;
		due_levels |= 1U << i;
	}
	return due_levels;
}

/*
 * The step of budget idx (incarnation inc) at 'now', its period over.
 * Caller holds the budget's tree lock (install.c).  Returns true when L
 * changed to *l and the budget admits by it (adapt = 'on'): the caller
 * applies it (dbgate_admission_set_adaptive()).
 */
extern bool dbgate_adapt_step(int idx, uint32 inc, TimestampTz now, int32 *l);

/*
 * The configuration install (install.c's dbgate_admission_set_limits(),
 * with the tree lock or every lock held, just before it installs the
 * limits of 'conf'): the limit L that budget b uses from now on under
 * 'conf', from what it used before (its old configuration is still in
 * b->conf).  0 when 'conf' does not adapt.
 */
extern int32 dbgate_adapt_install(DbgateBudget *b, const DbgateBudgetConf *conf);

/*
 * The configuration install, once every budget has its limits and the
 * trees their shape (tree lock of b's tree, or every lock, held): an
 * adapting parent's L is raised to its children's reservations.  Returns
 * true when L was raised to *l and the budget admits by it: the caller
 * applies it (install.c).
 */
extern bool dbgate_adapt_reserved(DbgateBudget *b, int32 *l);

#endif							/* DBGATE_ADAPT_H */
