/*-------------------------------------------------------------------------
 *
 * utility.c
 *	  Which utility commands take a slot like a query.
 *
 * In a budget with utility = true these commands of the budget's sessions
 * take a slot for the whole command, exactly like a query (admission,
 * queue, rejection with 53300; see slot.c, dbgate_utility_begin()):
 *	  COPY ... FROM (COPY ... TO a file or the client runs no plan that
 *		takes time, and COPY (query) TO runs its query through the executor,
 *		which is gated anyway)
 *	  CREATE INDEX, except CREATE INDEX CONCURRENTLY
 *	  REINDEX, except REINDEX (CONCURRENTLY)
 *	  CLUSTER
 *	  VACUUM (also VACUUM FULL) and ANALYZE
 *	  REFRESH MATERIALIZED VIEW, except ... CONCURRENTLY
 * The CONCURRENTLY forms are left alone: they are built to run beside the
 * workload, for a long time, without blocking it.
 *
 * The command must be one the client (or a DO block, a procedure, a
 * function) asked for: a subcommand that PostgreSQL generates itself (the
 * CREATE INDEX behind a PRIMARY KEY of CREATE TABLE) is part of its parent
 * command, which is not gated.  Inside an admitted statement (a function
 * running CREATE INDEX) the command runs under the slot already held:
 * dbgate_utility_begin() returns false then.
 *
 * The decision looks at the parse tree only (no catalog access): the
 * command's tag first, so that every other utility command costs a switch.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "commands/defrem.h"
#include "nodes/parsenodes.h"
#include "tcop/utility.h"

#include "utility.h"

/* Does a REINDEX option list ask for CONCURRENTLY? */
static bool
reindex_concurrently(List *params)
{
	ListCell   *lc;

	foreach(lc, params)
	{
		DefElem    *opt = (DefElem *) lfirst(lc);

		/* a value that is no boolean fails in REINDEX itself */
		if (strcmp(opt->defname, "concurrently") == 0)
			return opt->arg == NULL || defGetBoolean(opt);
	}
	return false;
}

/*
 * Is this a heavy utility command, which takes a slot in a budget with
 * utility = true?
 */
bool
dbgate_utility_takes_slot(PlannedStmt *pstmt, ProcessUtilityContext context)
{
	Node	   *parsetree = pstmt->utilityStmt;
	bool		heavy;

	switch (nodeTag(parsetree))
	{
		case T_CopyStmt:
			heavy = ((CopyStmt *) parsetree)->is_from;
			break;
		case T_IndexStmt:
			heavy = !((IndexStmt *) parsetree)->concurrent;
			break;
		case T_ReindexStmt:
			heavy = !reindex_concurrently(((ReindexStmt *) parsetree)->params);
			break;
		case T_ClusterStmt:
		case T_VacuumStmt:
			heavy = true;
			break;
		case T_RefreshMatViewStmt:
			heavy = !((RefreshMatViewStmt *) parsetree)->concurrent;
			break;
		default:
			return false;
	}
	return heavy && context != PROCESS_UTILITY_SUBCOMMAND;
}
