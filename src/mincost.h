/*-------------------------------------------------------------------------
 *
 * mincost.h
 *	  A budget's min_cost: cheap read-only statements that are not gated
 *	  (mincost.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef DBGATE_MINCOST_H
#define DBGATE_MINCOST_H

#include "executor/execdesc.h"
#include "nodes/parsenodes.h"

#include "classify.h"
#include "shmem.h"

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

#endif							/* DBGATE_MINCOST_H */
