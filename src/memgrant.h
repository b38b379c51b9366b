/*-------------------------------------------------------------------------
 *
 * memgrant.h
 *	  A budget's max_memory_mb and min_cost: declarations of memestimate.c,
 *	  memgrant.c, mincost.c and planner.c.
 *
 *	  memestimate.c	how much working memory a plan may use (units of
 *					work_mem)
 *	  memgrant.c	a statement's grant: the work_mem it runs with, the
 *					accounting in shared memory, the release
 *	  mincost.c		cheap read-only statements that are not gated
 *	  planner.c		the planner hook: the parallel_workers cap and
 *					planning so that a plan fits its slot's memory
 *
 *-------------------------------------------------------------------------
 */
#ifndef DBGATE_MEMGRANT_H
#define DBGATE_MEMGRANT_H

#include "postgres.h"

#include "executor/execdesc.h"
#include "nodes/plannodes.h"

#include "dbgate.h"

/* The smallest work_mem (kB) a grant lowers to: work_mem's own minimum. */
#define DBGATE_MIN_WORK_MEM		64

/* ----------
 * memestimate.c
 * ----------
 */
typedef struct DbgateMemEstimate
{
	double		work_units;		/* places that may hold work_mem */
	double		hash_units;		/* places that may hold hash_mem */
	double		need_kb;		/* the largest planned need of one of them,
								 * in kB of work_mem (rows x width) */
} DbgateMemEstimate;

extern void dbgate_mem_estimate(PlannedStmt *pstmt, DbgateMemEstimate *est);

/* units such that the estimate at a work_mem of w kB is units * w kB */
static inline double
dbgate_mem_units(const DbgateMemEstimate *est)
{
	return est->work_units + est->hash_units * hash_mem_multiplier;
}

/* ----------
 * memgrant.c
 * ----------
 */

/*
 * True while this backend holds a slot of a budget with max_memory_mb > 0
 * (the ExecutorStart hook's test); the number of open grants (the
 * ExecutorRun / ExecutorFinish / ExecutorEnd hooks' test).
 */
extern PGDLLIMPORT bool dbgate_memgrant_slot;
extern PGDLLIMPORT int dbgate_memgrant_nrecs;

extern void dbgate_memgrant_slot_taken(const DbgateChain *chain,
									   int max_active, int max_memory_mb,
									   bool enforce);
extern void dbgate_memgrant_slot_released(void);
extern void dbgate_memgrant_start(QueryDesc *queryDesc, DbgateMemStretch *st);
extern void dbgate_memgrant_enter(QueryDesc *queryDesc, DbgateMemStretch *st);
extern void dbgate_memgrant_leave(QueryDesc *queryDesc, DbgateMemStretch *st,
								  bool is_error);
extern void dbgate_memgrant_end(QueryDesc *queryDesc);
extern void dbgate_memgrant_subxact_abort(SubTransactionId mySubid);
extern bool dbgate_memgrant_nested(void);
extern double dbgate_memgrant_open_kb(void);
extern void dbgate_memgrant_lower_work_mem(DbgateGucOverride *o, int kb,
										   bool to_workers);

/* ----------
 * mincost.c
 * ----------
 */
extern int	dbgate_mincost_writer_depth;
extern bool dbgate_mincost_bypass_slow(DbgateBudget *b, QueryDesc *queryDesc);

/*
 * ExecutorStart, before admission, while the backend holds no slot: is the
 * statement a read cheaper than its budget's min_cost?  Then it is not
 * gated (and counted in 'bypassed').  Without min_cost: one field test of
 * the cached classification (which every configuration change renews);
 * the slow path reads the budget's min_cost itself.
 */
static inline bool
dbgate_mincost_bypass(const DbgateLookup *lk, QueryDesc *queryDesc)
{
	if (likely(!lk->min_cost))
		return false;
	return dbgate_mincost_bypass_slow(&dbgate_shared->budgets[lk->budget].d,
									  queryDesc);
}

/* ProcessUtility: the commands whose query writes a table it creates. */
static inline bool
dbgate_mincost_writer_command(Node *parsetree)
{
	return IsA(parsetree, CreateTableAsStmt) ||
		IsA(parsetree, RefreshMatViewStmt);
}

/* ----------
 * planner.c
 * ----------
 */
extern void dbgate_planner_init(void);

#endif							/* DBGATE_MEMGRANT_H */
