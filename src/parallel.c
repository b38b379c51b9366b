/*-------------------------------------------------------------------------
 *
 * parallel.c
 *	  A budget's parallel_workers: the most parallel workers one statement
 *	  of its sessions may use.
 *
 * A budget with parallel_workers = N >= 0 caps, for its sessions,
 * max_parallel_workers_per_gather at N (it only tightens: a session that
 * asks for fewer keeps its own value).  Like max_parallel_workers_per_gather
 * the cap applies to each Gather and Gather Merge node.  N = 0 means no
 * parallel query.  Budgets in shadow mode (enforce = false) cap nothing.
 * Superusers and ungated sessions are never capped; parallel workers are
 * never gated at all.
 *
 * Two places apply it:
 *	  - Planning (planner.c's planner hook): while the statement is planned
 *		the variable behind max_parallel_workers_per_gather holds the cap,
 *		and the session's value is put back when planning returns, normally
 *		or by error, without the GUC machinery and keeping what planning
 *		itself does to the setting (gucvar.c, as for the budget's
 *		lock_timeout).  So `SHOW max_parallel_workers_per_gather` afterwards
 *		shows the session's own value.
 *	  - Execution (ExecutorStart): a plan made earlier, before the budget
 *		was changed or the session was classified into it (a prepared
 *		statement, a cached PL/pgSQL plan), may ask for more workers.  Its
 *		PlannedStmt is then copied (a cached plan is shared and must not
 *		change) and the num_workers of each Gather and Gather Merge above
 *		the cap is lowered to it.  The executor launches num_workers workers
 *		at most; with 0 the leader runs the plan below the Gather alone, as
 *		it does whenever no worker can be launched.  The copy lives in the
 *		memory context current at ExecutorStart, which outlives the
 *		executor state (that is created as its child).
 *
 *	  - Maintenance (ProcessUtility): CREATE INDEX, REINDEX, CLUSTER,
 *		VACUUM and the commands that build indexes on the way (VACUUM FULL,
 *		REFRESH MATERIALIZED VIEW, ALTER TABLE adding a key or rewriting
 *		the table) size their parallel workers by
 *		max_parallel_maintenance_workers, which a session may raise and a
 *		table's parallel_workers storage parameter does not bypass.  While
 *		such a command runs, the variable behind it holds the cap, set and
 *		undone as for planning (gucvar.c): the command reads it when it
 *		decides how many workers to launch (plan_create_index_workers(),
 *		parallel_vacuum_compute_workers(); the same in 15 to 18).  Only
 *		tightens; `SHOW max_parallel_maintenance_workers` afterwards shows
 *		the session's value.  A command nested in a capped one finds the
 *		cap already in force and changes nothing.  So the footprint
 *		max_active x (1 + parallel_workers) holds for the gated utility
 *		commands (utility.c) too; the cap applies to the budget's sessions
 *		whether or not the budget gates utility commands.
 *
 * Cost when nothing is capped: planning pays one classification lookup
 * (cached, see classify.c); ExecutorStart looks at one flag of the plan
 * (parallelModeNeeded, which every plan with a Gather or Gather Merge has);
 * a utility command a switch on its node tag, and one cached lookup for
 * the commands listed above.
 *
 * The budget's parallel_workers and enforce fields are read without the
 * budget lock: each is a single aligned field written under the lock, so a
 * reader sees the old or the new value; a statement planned or started at
 * the very moment its budget changes may use either.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "nodes/nodes.h"
#include "nodes/parsenodes.h"
#include "nodes/plannodes.h"
#include "optimizer/cost.h"
#include "utils/guc.h"
#include "utils/guc_tables.h"

#include "classify.h"
#include "compat.h"
#include "gucvar.h"
#include "parallel.h"
#include "plantree.h"
#include "shmem.h"

static struct config_generic *maintenance_rec = NULL;

/*
 * The cap for this backend's statements, or -1 for none.
 */
int
dbgate_parallel_cap(void)
{
	const DbgateLookup *lk;
	const DbgateBudget *b;

	if (!dbgate_gating())
		return -1;
	lk = dbgate_classify();
	if (lk->budget < 0 || !dbgate_is_client_backend())
		return -1;
	b = &dbgate_shared->budgets[lk->budget].d;
	/* unlocked reads, see the file header */
	if (!b->conf.enforce)
		return -1;
	return b->conf.parallel_workers;
}

/* ----------
 * Execution
 * ----------
 */

/*
 * Does the plan tree below 'plan' have a Gather or Gather Merge with more
 * than 'cap' workers?  With 'apply', lower every such num_workers to 'cap'
 * (and look at the whole tree).
 */
static bool
plan_over_cap(Plan *plan, int cap, bool apply)
{
	List	   *children;
	Plan	   *subplan;
	bool		over = false;
	ListCell   *lc;

	if (plan == NULL)
		return false;
	check_stack_depth();

	switch (nodeTag(plan))
	{
		case T_Gather:
			{
				Gather	   *g = (Gather *) plan;

				if (g->num_workers > cap)
				{
					over = true;
					if (apply)
						g->num_workers = cap;
				}
			}
			break;
		case T_GatherMerge:
			{
				GatherMerge *gm = (GatherMerge *) plan;

				if (gm->num_workers > cap)
				{
					over = true;
					if (apply)
						gm->num_workers = cap;
				}
			}
			break;
		default:
			break;
	}

	children = dbgate_plan_children(plan, &subplan);
	if (subplan != NULL)
		over |= plan_over_cap(subplan, cap, apply);
	foreach(lc, children)
	{
		if (over && !apply)
			break;
		over |= plan_over_cap((Plan *) lfirst(lc), cap, apply);
	}
	if (!over || apply)
		over |= plan_over_cap(plan->lefttree, cap, apply);
	if (!over || apply)
		over |= plan_over_cap(plan->righttree, cap, apply);
	return over;
}

static bool
stmt_over_cap(PlannedStmt *pstmt, int cap, bool apply)
{
	bool		over = plan_over_cap(pstmt->planTree, cap, apply);
	ListCell   *lc;

	/* subplans of SubPlan expressions and CTEs; unused ones are NULL */
	foreach(lc, pstmt->subplans)
	{
		if (over && !apply)
			break;
		over |= plan_over_cap((Plan *) lfirst(lc), cap, apply);
	}
	return over;
}

/*
 * ExecutorStart: hold a plan made before to the cap of the budget now.
 */
void
dbgate_parallel_executor_start_slow(QueryDesc *queryDesc)
{
	PlannedStmt *pstmt = queryDesc->plannedstmt;
	int			cap;

	cap = dbgate_parallel_cap();
	if (cap < 0 || !stmt_over_cap(pstmt, cap, false))
		return;

	/* a cached plan is shared: change a copy */
	pstmt = copyObject(pstmt);
	(void) stmt_over_cap(pstmt, cap, true);
	queryDesc->plannedstmt = pstmt;
}

/* ----------
 * Maintenance commands
 * ----------
 */

/* Can the utility command launch parallel maintenance workers? */
static inline bool
uses_maintenance_workers(Node *parsetree)
{
	switch (nodeTag(parsetree))
	{
		case T_IndexStmt:		/* also CONCURRENTLY */
		case T_ReindexStmt:
		case T_ClusterStmt:
		case T_VacuumStmt:		/* parallel index vacuuming; FULL rebuilds */
		case T_RefreshMatViewStmt:	/* rebuilds the view's indexes */
		case T_AlterTableStmt:	/* a new key's index, a rewrite's rebuild */
			return true;
		default:
			return false;
	}
}

/* Run the command with the cap applied, and undo it on every exit. */
static pg_noinline void
utility_capped(ProcessUtility_hook_type next, int cap, PlannedStmt *pstmt,
			   const char *queryString, bool readOnlyTree,
			   ProcessUtilityContext context, ParamListInfo params,
			   QueryEnvironment *queryEnv, DestReceiver *dest,
			   QueryCompletion *qc)
{
	DbgateGucOverride o;

	if (maintenance_rec == NULL)
		maintenance_rec = dbgate_find_guc("max_parallel_maintenance_workers");
	if (maintenance_rec == NULL)
	{
		next(pstmt, queryString, readOnlyTree, context, params, queryEnv,
			 dest, qc);
		return;
	}
	dbgate_guc_override_apply(&o, maintenance_rec,
							  &max_parallel_maintenance_workers, cap);
	PG_TRY();
	{
		next(pstmt, queryString, readOnlyTree, context, params, queryEnv,
			 dest, qc);
	}
	PG_CATCH();
	{
		dbgate_guc_override_restore(&o);
		PG_RE_THROW();
	}
	PG_END_TRY();
	dbgate_guc_override_restore(&o);
}

/*
 * ProcessUtility: run the command by 'next' (the next hook or the
 * standard function), under the budget's cap if it is one that launches
 * maintenance workers and the cap is below the session's setting.
 */
void
dbgate_parallel_utility(ProcessUtility_hook_type next, PlannedStmt *pstmt,
						const char *queryString, bool readOnlyTree,
						ProcessUtilityContext context, ParamListInfo params,
						QueryEnvironment *queryEnv, DestReceiver *dest,
						QueryCompletion *qc)
{
	int			cap;

	if (likely(!uses_maintenance_workers(pstmt->utilityStmt)) ||
		(cap = dbgate_parallel_cap()) < 0 || cap >= max_parallel_maintenance_workers)
	{
		next(pstmt, queryString, readOnlyTree, context, params, queryEnv,
			 dest, qc);
		return;
	}
	utility_capped(next, cap, pstmt, queryString, readOnlyTree, context,
				   params, queryEnv, dest, qc);
}
