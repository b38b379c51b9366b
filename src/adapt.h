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

/* Length of a period of the controller, and its steps (README.md). */
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

/*
 * The statement path (slot.c): a slot of a chain with an adapting level
 * was returned (taken at 'admitted_at').  Counts the statement at every
 * adapting level and, at most once per period and level, runs the step.
 */
extern void dbgate_adapt_released(const DbgateChain *c, TimestampTz admitted_at);

/*
 * The configuration install (budgets.c, with the tree lock or every lock
 * held, just before it installs the limits of 'conf'): the limit L that
 * budget b uses from now on under 'conf', from what it used before (its
 * old configuration is still in b->conf).  0 when 'conf' does not adapt.
 */
extern int32 dbgate_adapt_install(DbgateBudget *b, const DbgateBudgetConf *conf);

/*
 * The configuration install, once every budget has its limits and the
 * trees their shape (tree lock of 'root', or every lock, held): an
 * adapting parent's L is raised to its children's reservations.
 */
extern void dbgate_adapt_reserved(DbgateBudget *b, int root);

#endif							/* DBGATE_ADAPT_H */
