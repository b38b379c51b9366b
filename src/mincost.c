/*-------------------------------------------------------------------------
 *
 * mincost.c
 *	  A budget's min_cost: cheap read-only statements are not gated.
 *
 * Rule
 * ----
 * A statement of a budget with min_cost = c > 0 that starts while the
 * backend holds no slot (not under a kept slot, not nested in an admitted
 * statement) is not gated when
 *	  - its plan is read-only: command type SELECT, no row marks (FOR
 *		UPDATE / SHARE and the like), no data-modifying CTE;
 *	  - it does not run for a command that writes its result into a table:
 *		CREATE TABLE AS, SELECT INTO, CREATE MATERIALIZED VIEW, REFRESH
 *		MATERIALIZED VIEW (see below how they are told apart);
 *	  - the total cost of its top plan node, as EXPLAIN prints it, is below c;
 *	  - (1.3) its plan calls no function that may write (see below).
 * Such a statement takes no slot and never queues; it is counted in the
 * budget's 'bypassed'.  Queries that it runs itself (functions it calls)
 * start without a slot and are gated as top-level runs, each of which may
 * be bypassed in turn.  Budgets in shadow mode bypass the same way.
 *
 * Functions that may write: a SELECT plan writes through the functions it
 * calls (lo_from_bytea(), nextval(), a user function that inserts).  The
 * test is PostgreSQL's own notion, the one contain_volatile_functions()
 * applies: a function marked volatile (provolatile 'v', the default of
 * CREATE FUNCTION), and NextValueExpr (a sequence's next value).  Beyond
 * it, two things that PostgreSQL does not count as volatile but that
 * write: txid_current() and pg_current_xact_id(), marked stable (the value
 * is fixed within a transaction) though their first call assigns the
 * transaction an ID; and the support functions of a user-defined
 * aggregate (CREATE AGGREGATE makes the aggregate's own pg_proc entry
 * immutable, whatever its transition function does; the built-in
 * aggregates have no volatile ones).  A function mislabelled stable or
 * immutable is trusted.  The walk (expr_may_write) is that of
 * contain_volatile_functions() with these additions, in one pass (a
 * finished plan holds no Query, RestrictInfo or PathTarget, the other
 * nodes that function looks into), and the answer per function comes
 * from a small cache in front of the syscache that every invalidation of
 * pg_proc empties.
 *
 * The walk covers every node of the final PlannedStmt: the plan tree
 * (through the same list of child plans as the walks of parallel.c and
 * memestimate.c), every entry of pstmt->subplans (SubPlans, initplans and
 * CTEs, each once) and, of each node, every expression the executor may
 * evaluate.  A node type not listed here counts as writing: a plan that
 * this file does not understand is gated.  It runs only for a statement
 * that passed every other test (budgets without min_cost never get here),
 * and at most once per plan: the answer is kept beside the plan (a
 * PlanMark, see cached_may_write), so a prepared statement or a cached
 * plan of PL/pgSQL is walked once however often it runs.
 *
 * Telling the table-writing commands apart: their query is a plain SELECT
 * plan.  CREATE TABLE AS (and SELECT INTO, CREATE MATERIALIZED VIEW) and
 * EXPLAIN ANALYZE of it give the executor a DestIntoRel receiver, REFRESH
 * MATERIALIZED VIEW a DestTransientRel one, on PostgreSQL 15 to 18.  But
 * CREATE TABLE AS EXECUTE runs the prepared statement through a portal
 * whose QueryDesc still has no receiver at ExecutorStart (PortalStart
 * makes it with None_Receiver; the receiver comes with PortalRun).  So the
 * ProcessUtility hook also counts the commands of this kind in progress
 * (dbgate_mincost_writer_depth, around the command, undone on error): no
 * run started during one is bypassed.  A run started during one while no
 * slot is held is the command's own query: the queries of functions it
 * calls start under that run's slot.
 *
 * min_cost is read without the budget lock.  The statement path tests a
 * flag of the backend's cached classification (classify.c sets it from the
 * budget; every configuration change makes the backend classify again):
 * no min_cost, nothing more is done.  Here the field itself is read
 * consistently with the budget's configuration sequence counter (as
 * admission.c reads limits), so that a torn read of a double being changed
 * is never acted on.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/transam.h"
#include "catalog/pg_aggregate.h"
#include "catalog/pg_proc.h"
#include "miscadmin.h"
#include "nodes/nodeFuncs.h"
#include "nodes/plannodes.h"
#include "tcop/dest.h"
#include "utils/fmgroids.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/syscache.h"

#include "mincost.h"
#include "plantree.h"
#include "shmem.h"

int			dbgate_mincost_writer_depth = 0;

/* b->conf.min_cost, read consistently without the budget lock. */
static double
read_min_cost(DbgateBudget *b)
{
	for (;;)
	{
		uint32		seq = pg_atomic_read_u32(&b->conf_seq);
		double		c;

		if (unlikely(seq & 1))
		{
			pg_spin_delay();
			continue;
		}
		pg_read_barrier();
		c = b->conf.min_cost;
		pg_read_barrier();
		if (likely(pg_atomic_read_u32(&b->conf_seq) == seq))
			return c;
	}
}

/* Does the statement only read? */
static bool
read_only(QueryDesc *queryDesc)
{
	PlannedStmt *pstmt = queryDesc->plannedstmt;
	CommandDest dest = queryDesc->dest ? queryDesc->dest->mydest : DestNone;

	if (pstmt->commandType != CMD_SELECT || pstmt->rowMarks != NIL ||
		pstmt->hasModifyingCTE)
		return false;
	/* CREATE TABLE AS, REFRESH MATERIALIZED VIEW: see the file header */
	if (dest == DestIntoRel || dest == DestTransientRel ||
		dbgate_mincost_writer_depth > 0)
		return false;
	return true;
}

/* ----------
 * Functions that may write (see the file header)
 * ----------
 */

/*
 * The answer by function OID, in a small direct-mapped cache in front of
 * the syscache (a lookup there costs some 450 instructions, the statement
 * path of a bypassed read some 300): emptied by every invalidation of
 * pg_proc, so it is never staler than the syscache itself.  An entry whose
 * fn is InvalidOid is empty.
 */
#define FN_CACHE_SIZE	64

typedef struct FnEntry
{
	Oid			fn;
	bool		may_write;
} FnEntry;

static FnEntry fn_cache[FN_CACHE_SIZE];
static bool fn_cache_registered = false;

static void
fn_cache_reset(Datum arg, int cacheid, uint32 hashvalue)
{
	memset(fn_cache, 0, sizeof(fn_cache));
}

/* check_functions_in_node() callback: may the function write? */
static bool
function_may_write(Oid funcid, void *context)
{
	FnEntry    *e = &fn_cache[funcid % FN_CACHE_SIZE];
	bool		may_write;

	if (likely(e->fn == funcid && OidIsValid(funcid)))
		return e->may_write;
	if (!fn_cache_registered)
	{
		CacheRegisterSyscacheCallback(PROCOID, fn_cache_reset, (Datum) 0);
		fn_cache_registered = true;
	}
	/* txid_current() and its new name: stable, but assign an ID */
	may_write = funcid == F_TXID_CURRENT || funcid == F_PG_CURRENT_XACT_ID ||
		func_volatile(funcid) == PROVOLATILE_VOLATILE;
	e->fn = funcid;
	e->may_write = may_write;
	return may_write;
}

/*
 * May a user-defined aggregate's support functions write?  Its own
 * pg_proc entry, which check_functions_in_node() tests, is immutable.
 */
static bool
aggregate_may_write(Oid aggfnoid)
{
	HeapTuple	tup;
	Form_pg_aggregate agg;
	Oid			fns[8];
	int			i;

	if (aggfnoid < FirstNormalObjectId)
		return false;			/* built in: none is volatile */
	tup = SearchSysCache1(AGGFNOID, ObjectIdGetDatum(aggfnoid));
	if (!HeapTupleIsValid(tup))
		return false;			/* a window function, not an aggregate */
	agg = (Form_pg_aggregate) GETSTRUCT(tup);
	fns[0] = agg->aggtransfn;
	fns[1] = agg->aggfinalfn;
	fns[2] = agg->aggcombinefn;
	fns[3] = agg->aggserialfn;
	fns[4] = agg->aggdeserialfn;
	fns[5] = agg->aggmtransfn;
	fns[6] = agg->aggminvtransfn;
	fns[7] = agg->aggmfinalfn;
	ReleaseSysCache(tup);
	for (i = 0; i < lengthof(fns); i++)
		if (OidIsValid(fns[i]) && function_may_write(fns[i], NULL))
			return true;
	return false;
}

/*
 * Does the expression call a function that may write?  The walker of
 * contain_volatile_functions() plus the aggregates' support functions and
 * the stable functions that assign a transaction ID.  The commonest nodes
 * (leaves, lists, target entries, function and operator calls) are taken
 * here without the generic walkers; the rest go through them.  A
 * SubPlan's arguments and test are walked here, its plan with
 * pstmt->subplans.
 */
static bool
expr_may_write(Node *node, void *context)
{
	ListCell   *lc;

	if (node == NULL)
		return false;
	switch (nodeTag(node))
	{
		case T_Var:
		case T_Const:
		case T_Param:
		case T_CaseTestExpr:
			return false;
		case T_List:
			foreach(lc, (List *) node)
				if (expr_may_write((Node *) lfirst(lc), context))
					return true;
			return false;
		case T_TargetEntry:
			return expr_may_write((Node *) ((TargetEntry *) node)->expr,
								  context);
		case T_FuncExpr:
			check_stack_depth();
			return function_may_write(((FuncExpr *) node)->funcid, context) ||
				expr_may_write((Node *) ((FuncExpr *) node)->args, context);
		case T_OpExpr:
			check_stack_depth();
			set_opfuncid((OpExpr *) node);
			return function_may_write(((OpExpr *) node)->opfuncid, context) ||
				expr_may_write((Node *) ((OpExpr *) node)->args, context);
		case T_NextValueExpr:
			return true;
		case T_Aggref:
			if (aggregate_may_write(((Aggref *) node)->aggfnoid))
				return true;
			break;
		case T_WindowFunc:
			if (((WindowFunc *) node)->winagg &&
				aggregate_may_write(((WindowFunc *) node)->winfnoid))
				return true;
			break;
		default:
			break;
	}
	if (check_functions_in_node(node, function_may_write, context))
		return true;
	return expression_tree_walker(node, expr_may_write, context);
}

#define EXPR_MAY_WRITE(expr)	expr_may_write((Node *) (expr), NULL)

/*
 * node_may_write() for the expressions that a node of plan's type has
 * besides its target list, qual and initplans.
 */
static bool
node_type_may_write(Plan *plan)
{
	switch (nodeTag(plan))
	{
		case T_SeqScan:
		case T_SubqueryScan:
		case T_CteScan:
		case T_NamedTuplestoreScan:
		case T_WorkTableScan:
		case T_ProjectSet:
		case T_RecursiveUnion:
		case T_BitmapAnd:
		case T_BitmapOr:
		case T_Material:
		case T_Sort:
		case T_IncrementalSort:
		case T_Group:
		case T_Unique:
		case T_Gather:
		case T_GatherMerge:
		case T_SetOp:
			/* the target list and qual only */
			return false;
		case T_Append:
		case T_MergeAppend:
			/*
			 * Run-time partition pruning evaluates copies of quals that
			 * the children have, and never volatile ones (partprune.c).
			 */
		case T_Agg:
			/*
			 * Its aggregates are in its target list and qual; the Agg
			 * nodes of a grouping-sets chain have neither.
			 */
			return false;
		case T_Result:
			return EXPR_MAY_WRITE(((Result *) plan)->resconstantqual);
		case T_SampleScan:
			return EXPR_MAY_WRITE(((SampleScan *) plan)->tablesample);
		case T_IndexScan:
			return EXPR_MAY_WRITE(((IndexScan *) plan)->indexqual) ||
				EXPR_MAY_WRITE(((IndexScan *) plan)->indexqualorig) ||
				EXPR_MAY_WRITE(((IndexScan *) plan)->indexorderby) ||
				EXPR_MAY_WRITE(((IndexScan *) plan)->indexorderbyorig);
		case T_IndexOnlyScan:
			return EXPR_MAY_WRITE(((IndexOnlyScan *) plan)->indexqual) ||
				EXPR_MAY_WRITE(((IndexOnlyScan *) plan)->recheckqual) ||
				EXPR_MAY_WRITE(((IndexOnlyScan *) plan)->indexorderby);
		case T_BitmapIndexScan:
			return EXPR_MAY_WRITE(((BitmapIndexScan *) plan)->indexqual) ||
				EXPR_MAY_WRITE(((BitmapIndexScan *) plan)->indexqualorig);
		case T_BitmapHeapScan:
			return EXPR_MAY_WRITE(((BitmapHeapScan *) plan)->bitmapqualorig);
		case T_TidScan:
			return EXPR_MAY_WRITE(((TidScan *) plan)->tidquals);
		case T_TidRangeScan:
			return EXPR_MAY_WRITE(((TidRangeScan *) plan)->tidrangequals);
		case T_FunctionScan:
			return EXPR_MAY_WRITE(((FunctionScan *) plan)->functions);
		case T_ValuesScan:
			return EXPR_MAY_WRITE(((ValuesScan *) plan)->values_lists);
		case T_TableFuncScan:
			return EXPR_MAY_WRITE(((TableFuncScan *) plan)->tablefunc);
		case T_ForeignScan:
			return EXPR_MAY_WRITE(((ForeignScan *) plan)->fdw_exprs) ||
				EXPR_MAY_WRITE(((ForeignScan *) plan)->fdw_scan_tlist) ||
				EXPR_MAY_WRITE(((ForeignScan *) plan)->fdw_recheck_quals);
		case T_CustomScan:
			return EXPR_MAY_WRITE(((CustomScan *) plan)->custom_exprs) ||
				EXPR_MAY_WRITE(((CustomScan *) plan)->custom_scan_tlist);
		case T_NestLoop:
			/* nestParams are plain Vars of the outer side */
			return EXPR_MAY_WRITE(((Join *) plan)->joinqual);
		case T_MergeJoin:
			return EXPR_MAY_WRITE(((Join *) plan)->joinqual) ||
				EXPR_MAY_WRITE(((MergeJoin *) plan)->mergeclauses);
		case T_HashJoin:
			return EXPR_MAY_WRITE(((Join *) plan)->joinqual) ||
				EXPR_MAY_WRITE(((HashJoin *) plan)->hashclauses) ||
				EXPR_MAY_WRITE(((HashJoin *) plan)->hashkeys);
		case T_Hash:
			return EXPR_MAY_WRITE(((Hash *) plan)->hashkeys);
		case T_Memoize:
			return EXPR_MAY_WRITE(((Memoize *) plan)->param_exprs);
		case T_WindowAgg:
			return EXPR_MAY_WRITE(((WindowAgg *) plan)->startOffset) ||
				EXPR_MAY_WRITE(((WindowAgg *) plan)->endOffset) ||
				EXPR_MAY_WRITE(((WindowAgg *) plan)->runCondition);
		case T_Limit:
			return EXPR_MAY_WRITE(((Limit *) plan)->limitOffset) ||
				EXPR_MAY_WRITE(((Limit *) plan)->limitCount);
		case T_ModifyTable:
		case T_LockRows:
			/* a write, a row lock (read_only() has seen them already) */
			return true;
		default:
			/* a node type this file does not know: fail closed */
			return true;
	}
}

/*
 * Does an expression of the plan node (not of its children) call a
 * function that may write?  Every expression the executor may evaluate
 * for the node, as set_plan_refs() lists them; copies kept for EXPLAIN
 * only (runConditionOrig) are skipped, those used for rechecks are not.
 * An unknown node type counts as writing.
 */
static bool
node_may_write(Plan *plan)
{
	if (EXPR_MAY_WRITE(plan->targetlist) ||
		EXPR_MAY_WRITE(plan->qual) ||
		EXPR_MAY_WRITE(plan->initPlan))
		return true;
	return node_type_may_write(plan);
}

/* Does the plan tree call a function that may write? */
static bool
plan_may_write(Plan *plan)
{
	List	   *children;
	Plan	   *subplan;
	ListCell   *lc;

	if (plan == NULL)
		return false;
	check_stack_depth();
	if (node_may_write(plan))
		return true;
	children = dbgate_plan_children(plan, &subplan);
	if (plan_may_write(subplan))
		return true;
	foreach(lc, children)
		if (plan_may_write((Plan *) lfirst(lc)))
			return true;
	return plan_may_write(plan->lefttree) ||
		plan_may_write(plan->righttree);
}

/* Does the statement call a function that may write? */
static bool
stmt_may_write(PlannedStmt *pstmt)
{
	ListCell   *lc;

	if (plan_may_write(pstmt->planTree))
		return true;
	/* SubPlans, initplans and CTEs: each once (an unused one is NULL) */
	foreach(lc, pstmt->subplans)
		if (plan_may_write((Plan *) lfirst(lc)))
			return true;
	return false;
}

/*
 * The answer for a plan, kept beside it: a reset callback registered on
 * the memory context that holds the PlannedStmt, which does nothing but
 * mark the context.  It goes with the plan's memory (PostgreSQL frees
 * plans by resetting or deleting their context: a message's, a cached
 * plan's, SPI's), so a PlannedStmt made later at the same address (every
 * statement of the simple protocol is planned into the same, reset,
 * MessageContext) never finds the mark of another.  A lookup reads the
 * context's list of callbacks: no allocation, no lock; a plan not yet
 * marked gets its mark (one allocation, in its own context).  Only the
 * first PLAN_MARK_SCAN callbacks of a context are looked at, and no mark is
 * added to a context with more, so a context that holds many plans (a SQL
 * function's) has at most that many marks however its plans alternate:
 * plans beyond them are walked at each run.
 */
typedef struct PlanMark
{
	MemoryContextCallback cb;
	const PlannedStmt *pstmt;
	bool		may_write;
} PlanMark;

#define PLAN_MARK_SCAN	16

static void
plan_mark_gone(void *arg)
{
	/* nothing to undo: the mark itself is the context's memory */
}

/* out of line: dbgate_mincost_bypass_slow() stays small for the others */
static pg_noinline bool
cached_may_write(PlannedStmt *pstmt)
{
	MemoryContext cxt = GetMemoryChunkContext(pstmt);
	MemoryContextCallback *cb = cxt->reset_cbs;
	PlanMark   *mark;
	bool		may_write;
	int			n;

	for (n = 0; cb != NULL && n < PLAN_MARK_SCAN; cb = cb->next, n++)
	{
		if (cb->func == plan_mark_gone &&
			((PlanMark *) cb->arg)->pstmt == pstmt)
			return ((PlanMark *) cb->arg)->may_write;
	}

	may_write = stmt_may_write(pstmt);
	if (cb == NULL)
	{
		/* every callback of the context was seen: the plan has no mark */
		mark = (PlanMark *) MemoryContextAlloc(cxt, sizeof(PlanMark));
		mark->cb.func = plan_mark_gone;
		mark->cb.arg = mark;
		mark->pstmt = pstmt;
		mark->may_write = may_write;
		MemoryContextRegisterResetCallback(cxt, &mark->cb);
	}
	return may_write;
}

/*
 * The slow part of dbgate_mincost_bypass(): min_cost is set.  Counts the
 * statement in 'bypassed' when it is not gated.
 */
bool
dbgate_mincost_bypass_slow(DbgateBudget *b, QueryDesc *queryDesc)
{
	double		min_cost = read_min_cost(b);
	Plan	   *top = queryDesc->plannedstmt->planTree;

	if (!(min_cost > 0) || top == NULL || !read_only(queryDesc))
		return false;
	if (!(top->total_cost < min_cost))
		return false;
	/* last, as it is the costliest test: at most once per plan */
	if (cached_may_write(queryDesc->plannedstmt))
		return false;
	pg_atomic_fetch_add_u64(&b->bypassed, 1);
	return true;
}
