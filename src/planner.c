/*-------------------------------------------------------------------------
 *
 * planner.c
 *	  The planner hook: a statement of a gated session is planned under its
 *	  budget's parallel_workers cap and, with max_memory_mb, so that its
 *	  plan fits the working memory of a slot.
 *
 * Parallel cap (parallel.c has the rule): while the statement is planned,
 * max_parallel_workers_per_gather holds the cap.
 *
 * Memory (memgrant.c has the rule): a slot of a budget with
 * max_memory_mb = M and max_active = B may use S = M / B, less what the
 * backend's open grants already use (a cursor's).  The statement is
 * planned at the session's work_mem; if the plan's estimate (memestimate.c)
 * is over S, work_mem will be lowered for its execution to
 * w = floor(S / units), and a plan made for the session's work_mem may
 * then be the wrong one (a hash aggregate sized for memory it will not
 * have, where a sort would spill less).  So the statement is planned again
 * at w, and the second plan is the one used -- but only when it can
 * differ: when some memory-using node of the first plan is planned to need
 * more than w (its rows x width, as the planner estimated them).  When
 * every node fits in w, the planner's choices at w are the same ones.
 * docs/benchmarks.md ("Memory and cheap statements") gives the cost of the
 * second planning as measured.
 * The second planning needs the statement's Query as it was (planning
 * changes it in place): it is copied before the first planning, unless
 * the Query cannot produce a memory-using node worth planning for (one
 * table, no sort, grouping, window, DISTINCT, set operation, sublink, CTE,
 * function in FROM): see may_need_memory().
 *
 * Not planned again: statements of shadow-mode budgets (they lower
 * nothing), and queries planned while a granted run is in progress (they
 * are nested: they run at the outer run's work_mem, which is in force
 * while they are planned too).  The ExecutorStart grant is computed anew
 * in any case (memgrant.c), for every plan, however it was made.
 *
 * Both settings are changed without the GUC machinery and put back on
 * every exit (gucvar.c), so SHOW afterwards shows the session's values.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "miscadmin.h"
#include "nodes/parsenodes.h"
#include "optimizer/cost.h"
#include "optimizer/planner.h"
#include "utils/guc.h"
#include "utils/guc_tables.h"

#include "classify.h"
#include "compat.h"
#include "gucvar.h"
#include "memestimate.h"
#include "memgrant.h"
#include "parallel.h"
#include "planner.h"
#include "shmem.h"

static planner_hook_type prev_planner = NULL;
static struct config_generic *workers_rec = NULL;

static PlannedStmt *dbgate_planner(Query *parse, const char *query_string,
								   int cursorOptions,
								   ParamListInfo boundParams);

void
dbgate_planner_init(void)
{
	prev_planner = planner_hook;
	planner_hook = dbgate_planner;
}

static inline PlannedStmt *
next_planner(Query *parse, const char *query_string, int cursorOptions,
			 ParamListInfo boundParams)
{
	if (prev_planner)
		return prev_planner(parse, query_string, cursorOptions, boundParams);
	return standard_planner(parse, query_string, cursorOptions, boundParams);
}

/*
 * The budget that gates this backend's statements, or NULL (the cached
 * classification: see classify.c).
 */
static inline DbgateBudget *
planner_budget(void)
{
	const DbgateLookup *lk;

	if (!dbgate_gating())
		return NULL;
	lk = dbgate_classify();
	if (lk->budget < 0 || !dbgate_is_client_backend())
		return NULL;
	return &dbgate_shared->budgets[lk->budget].d;
}

/*
 * What a slot of budget b has left for the statement being planned (kB),
 * or 0 when memory does not shape its plan (see the file header).  The
 * budget's fields are read consistently without its lock.
 */
static double
memory_share(DbgateBudget *b)
{
	int32		max_active;
	int32		max_memory_mb;
	bool		enforce;

	if (dbgate_memgrant_nested())
		return 0;
	for (;;)
	{
		uint32		seq = pg_atomic_read_u32(&b->conf_seq);

		if (unlikely(seq & 1))
		{
			pg_spin_delay();
			continue;
		}
		pg_read_barrier();
		max_active = b->conf.max_active;
		max_memory_mb = b->conf.max_memory_mb;
		enforce = b->conf.enforce;
		pg_read_barrier();
		if (likely(pg_atomic_read_u32(&b->conf_seq) == seq))
			break;
	}
	if (!enforce || max_memory_mb <= 0 || max_active <= 0)
		return 0;
	return Max((double) max_memory_mb * 1024.0 / max_active -
			   dbgate_memgrant_open_kb(), 1.0);
}

/*
 * Can the plan of this Query hold a memory-using node that a lower
 * work_mem would plan differently?  No for a scan of one table without
 * sort, grouping, aggregates, window functions, DISTINCT, set operations,
 * sublinks, CTEs or functions in FROM (the OLTP reads and writes).
 */
static bool
may_need_memory(Query *parse)
{
	ListCell   *lc;
	int			nrels = 0;

	if (parse->commandType == CMD_UTILITY)
		return false;
	if (parse->sortClause != NIL || parse->groupClause != NIL ||
		parse->groupingSets != NIL || parse->distinctClause != NIL ||
		parse->windowClause != NIL || parse->setOperations != NULL ||
		parse->cteList != NIL || parse->hasAggs || parse->hasWindowFuncs ||
		parse->hasSubLinks || parse->hasTargetSRFs)
		return true;
	foreach(lc, parse->rtable)
	{
		RangeTblEntry *rte = (RangeTblEntry *) lfirst(lc);

		switch (rte->rtekind)
		{
			case RTE_RELATION:
				if (++nrels > 1)
					return true;
				break;
			case RTE_RESULT:
			case RTE_JOIN:
			case RTE_VALUES:
				break;
			default:
				/* subqueries, functions, CTEs, table functions, ... */
				return true;
		}
	}
	return false;
}

/*
 * Plan the copy 'again' at a lower work_mem if the first plan does not fit
 * the share (see the file header); returns the plan to use.
 */
static PlannedStmt *
plan_to_fit(PlannedStmt *first, Query *again, const char *query_string,
			int cursorOptions, ParamListInfo boundParams, double share)
{
	DbgateMemEstimate est;
	double		units;
	double		w;
	DbgateGucOverride o;
	PlannedStmt *result;

	dbgate_mem_estimate(first, &est);
	units = dbgate_mem_units(&est);
	if (units <= 0 || units * work_mem <= share)
		return first;
	w = Max(floor(share / units), DBGATE_MIN_WORK_MEM);
	if (w >= work_mem || est.need_kb <= w)
		return first;

	dbgate_memgrant_lower_work_mem(&o, (int) w, false);
	PG_TRY();
	{
		result = next_planner(again, query_string, cursorOptions, boundParams);
	}
	PG_CATCH();
	{
		if (o.applied)
			dbgate_guc_override_restore(&o);
		PG_RE_THROW();
	}
	PG_END_TRY();
	if (o.applied)
		dbgate_guc_override_restore(&o);
	return result;
}

/*
 * Plan under budget b's parallel_workers cap (when it caps) and, with
 * max_memory_mb, to fit a slot's memory.
 */
static pg_noinline PlannedStmt *
planner_budgeted(Query *parse, const char *query_string, int cursorOptions,
				 ParamListInfo boundParams, DbgateBudget *b)
{
	PlannedStmt *result;
	DbgateGucOverride o;
	Query	   *volatile again = NULL;
	int			cap = dbgate_parallel_cap();
	double		share = (b->conf.max_memory_mb != 0) ? memory_share(b) : 0;

	o.applied = false;
	if (cap >= 0 && cap < max_parallel_workers_per_gather)
	{
		if (workers_rec == NULL)
			workers_rec = dbgate_find_guc("max_parallel_workers_per_gather");
		if (workers_rec != NULL)
			dbgate_guc_override_apply(&o, workers_rec,
									  &max_parallel_workers_per_gather, cap);
	}
	if (share > 0 && work_mem > DBGATE_MIN_WORK_MEM && may_need_memory(parse))
		again = copyObject(parse);

	PG_TRY();
	{
		result = next_planner(parse, query_string, cursorOptions, boundParams);
		if (again != NULL)
			result = plan_to_fit(result, again, query_string, cursorOptions,
								 boundParams, share);
	}
	PG_CATCH();
	{
		if (o.applied)
			dbgate_guc_override_restore(&o);
		PG_RE_THROW();
	}
	PG_END_TRY();
	if (o.applied)
		dbgate_guc_override_restore(&o);

	return result;
}

/*
 * The hook.  Cost for a budget with neither a parallel_workers cap below
 * the session's setting nor max_memory_mb: the cached classification and
 * three fields of the budget (unlocked reads of single fields: a statement
 * planned at the very moment its budget changes may use either value).
 */
static PlannedStmt *
dbgate_planner(Query *parse, const char *query_string, int cursorOptions,
			   ParamListInfo boundParams)
{
	DbgateBudget *b = planner_budget();

	if (likely(b == NULL ||
			   ((b->conf.parallel_workers < 0 || !b->conf.enforce ||
				 b->conf.parallel_workers >= max_parallel_workers_per_gather) &&
				b->conf.max_memory_mb == 0)))
		return next_planner(parse, query_string, cursorOptions, boundParams);
	return planner_budgeted(parse, query_string, cursorOptions, boundParams,
							b);
}
