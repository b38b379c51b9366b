/*-------------------------------------------------------------------------
 *
 * parallel.h
 *	  A budget's parallel_workers: the cap, for plans, executor runs and
 *	  maintenance commands (parallel.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef DBGATE_PARALLEL_H
#define DBGATE_PARALLEL_H

#include "executor/execdesc.h"
#include "tcop/utility.h"

extern int	dbgate_parallel_cap(void);
extern void dbgate_parallel_executor_start_slow(QueryDesc *queryDesc);
extern void dbgate_parallel_utility(ProcessUtility_hook_type next,
									PlannedStmt *pstmt,
									const char *queryString,
									bool readOnlyTree,
									ProcessUtilityContext context,
									ParamListInfo params,
									QueryEnvironment *queryEnv,
									DestReceiver *dest, QueryCompletion *qc);

/* ExecutorStart: cap a plan made before the budget's cap was in force. */
static inline void
dbgate_parallel_executor_start(QueryDesc *queryDesc)
{
	/* a plan without Gather or Gather Merge needs no parallel mode */
	if (unlikely(queryDesc->plannedstmt->parallelModeNeeded))
		dbgate_parallel_executor_start_slow(queryDesc);
}

#endif							/* DBGATE_PARALLEL_H */
