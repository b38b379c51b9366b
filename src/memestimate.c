/*-------------------------------------------------------------------------
 *
 * memestimate.c
 *	  How much working memory a plan may use, in units of work_mem.
 *
 * A plan's estimate counts every place in it that may hold up to work_mem
 * (or hash_mem = work_mem * hash_mem_multiplier, for hash tables) at the
 * same time as the others.  The result is a number of units such that the
 * plan's estimate at a work_mem of w kB is units * w kB; memgrant.c turns
 * it into a grant and a lowered work_mem, planner.c into a second planning.
 *
 * What is counted (docs/design.md, "The memory estimate", lists the same
 * with the reasons):
 *	  Sort, Incremental Sort	one tuplesort each (an incremental sort's
 *							small full-sort batch holds at most a few dozen
 *							tuples while its prefix sort fills)
 *	  Material, WindowAgg		one tuplestore each
 *	  Agg					hashed or mixed: the hash tables of all its
 *							grouping sets share one hash_mem; sorted rollups
 *							(the 'chain'): at most two tuplesorts at once
 *							(the phase's input and the next phase's output);
 *							each aggregate with ORDER BY or DISTINCT that the
 *							input does not deliver presorted, and each
 *							ordered-set aggregate: one tuplesort per
 *							grouping set of the phase
 *	  Hash					the hash join's table: hash_mem
 *	  Memoize				its cache: hash_mem
 *	  SetOp (hashed)		hash_mem
 *	  RecursiveUnion		two tuplestores (working and intermediate
 *							table), plus hash_mem for UNION without ALL
 *	  CteScan				the CTE's tuplestore, once per CTE however many
 *							scans read it
 *	  FunctionScan			one tuplestore per function (the executor
 *							materialises every function result in FROM)
 *	  ProjectSet			one per set-returning function of its target
 *							list (a function that returns its set in
 *							materialise mode builds a tuplestore; which ones
 *							do is not visible in the plan)
 *	  TableFuncScan			one tuplestore
 *	  Bitmap Heap Scan		the TID bitmaps its bitmap tree holds at once:
 *							a Bitmap Index Scan's, plus one for each BitmapAnd
 *							or BitmapOr level that combines a child's bitmap
 *							into its own
 *	  hashed SubPlan		its hash tables: hash_mem
 * Subplans (SubPlan expressions, initplans) are walked where they are
 * referenced, each once.
 *
 * Parallel query: every node below a Gather or Gather Merge is counted
 * 1 + num_workers times (each participant runs its own copy; the shared
 * table of a Parallel Hash may use the hash_mem of every participant,
 * which is the same number).  A parallel-aware Bitmap Heap Scan builds one
 * shared bitmap, so its bitmap tree counts once.  num_workers is the
 * planned number after the budget's parallel_workers cap (parallel.c runs
 * first); fewer workers may be launched.
 *
 * Not counted: nodes whose memory is not bounded by work_mem
 * (docs/design.md says which), ForeignScan and CustomScan nodes
 * themselves (their children are walked), and trigger transition tables
 * of ModifyTable (decided when the node is initialised, from the
 * relation's triggers).
 *
 * Versions: the executor nodes above use work_mem and hash_mem the same way
 * in PostgreSQL 15, 17 and 18 (read in their sources).  What differs is
 * plan structure, in compat.h: Aggref.aggpresorted (16+: the planner sorts
 * the input of an ORDER BY / DISTINCT aggregate, which then needs no sort
 * of its own) and ModifyTable.mergeJoinConditions (17+).  In 18 a sorted
 * SetOp reads two sorted inputs (Sort nodes of their own, counted as such)
 * and a hashed one still builds one hash table.
 *
 * The walk allocates two small arrays (per subplan) in the current memory
 * context; it reads the plan only.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "nodes/nodeFuncs.h"
#include "nodes/plannodes.h"

#include "compat.h"
#include "memestimate.h"
#include "plantree.h"

/* Bytes a sorted or stored tuple costs beyond its width (a rough figure). */
#define TUPLE_OVERHEAD	48

typedef struct Walk
{
	PlannedStmt *pstmt;
	DbgateMemEstimate *est;
	int			nsubplans;
	double	   *sub_mult;		/* [nsubplans]: multiplier walked with */
	double	   *cte_mult;		/* [nsubplans]: CTE tuplestore counted with */
} Walk;

/* State of the expression walk of one plan node. */
typedef struct ExprWalk
{
	Walk	   *w;
	double		mult;
	bool		in_agg;			/* count ordered aggregates */
	int			ordered_aggs;
} ExprWalk;

static void walk_plan(Walk *w, Plan *plan, double mult);

/* The planned need of a node of rows x width, in kB. */
static inline double
need_kb(Plan *plan)
{
	return plan->plan_rows * (MAXALIGN(Max(plan->plan_width, 0)) +
							  TUPLE_OVERHEAD) / 1024.0;
}

static inline void
count_work(Walk *w, double units, double need)
{
	w->est->work_units += units;
	if (need > w->est->need_kb)
		w->est->need_kb = need;
}

static inline void
count_hash(Walk *w, double units, double need)
{
	w->est->hash_units += units;
	/* compared with work_mem, as a hash table may use hash_mem */
	need /= Max(hash_mem_multiplier, 1.0);
	if (need > w->est->need_kb)
		w->est->need_kb = need;
}

/*
 * Walk subplan plan_id (1-based) where it is referenced.  Out of line: a
 * SubPlan is rare, and inlined here it would make the walk of every other
 * node heavier.
 */
static pg_noinline void
visit_subplan(Walk *w, int plan_id, double mult)
{
	Plan	   *plan;

	if (plan_id < 1 || plan_id > w->nsubplans)
		return;
	/*
	 * Each subplan once, with the largest multiplier that reaches it (a
	 * subplan reached again with a larger one is walked again: rare, and
	 * it only overcounts).
	 */
	if (w->sub_mult[plan_id - 1] >= mult)
		return;
	w->sub_mult[plan_id - 1] = mult;
	plan = (Plan *) list_nth(w->pstmt->subplans, plan_id - 1);
	walk_plan(w, plan, mult);
}

static bool
expr_walker(Node *node, ExprWalk *ew)
{
	if (node == NULL)
		return false;
	if (IsA(node, SubPlan))
	{
		SubPlan    *sp = (SubPlan *) node;

		/* a hashed SubPlan keeps its hash tables (and its nulls table) */
		if (sp->useHashTable)
			count_hash(ew->w, ew->mult, 0);
		visit_subplan(ew->w, sp->plan_id, ew->mult);
		/* its arguments and test expression are walked below */
	}
	else if (ew->in_agg && IsA(node, Aggref))
	{
		Aggref	   *a = (Aggref *) node;

		if ((a->aggorder != NIL || a->aggdistinct != NIL) &&
			!DBGATE_AGGREF_PRESORTED(a))
			ew->ordered_aggs++;
	}
	return expression_tree_walker(node, expr_walker, (void *) ew);
}

static inline void
walk_expr(ExprWalk *ew, void *expr)
{
	if (expr != NULL)
		(void) expr_walker((Node *) expr, ew);
}

/*
 * The expressions of a plan node that may hold SubPlans (and, for Agg,
 * Aggrefs).  Copies kept for EXPLAIN or rechecks (indexqualorig and the
 * like) are skipped: they hold the same SubPlans again.
 */
static void
walk_node_exprs(ExprWalk *ew, Plan *plan)
{
	walk_expr(ew, plan->targetlist);
	walk_expr(ew, plan->qual);

	switch (nodeTag(plan))
	{
		case T_Result:
			walk_expr(ew, ((Result *) plan)->resconstantqual);
			break;
		case T_ModifyTable:
			{
				ModifyTable *mt = (ModifyTable *) plan;

				walk_expr(ew, mt->withCheckOptionLists);
				walk_expr(ew, mt->returningLists);
				walk_expr(ew, mt->onConflictSet);
				walk_expr(ew, mt->onConflictWhere);
				walk_expr(ew, mt->mergeActionLists);
				walk_expr(ew, DBGATE_MERGE_JOIN_CONDITIONS(mt));
			}
			break;
		case T_IndexScan:
			walk_expr(ew, ((IndexScan *) plan)->indexqual);
			walk_expr(ew, ((IndexScan *) plan)->indexorderby);
			break;
		case T_IndexOnlyScan:
			walk_expr(ew, ((IndexOnlyScan *) plan)->indexqual);
			walk_expr(ew, ((IndexOnlyScan *) plan)->indexorderby);
			break;
		case T_BitmapIndexScan:
			walk_expr(ew, ((BitmapIndexScan *) plan)->indexqual);
			break;
		case T_TidScan:
			walk_expr(ew, ((TidScan *) plan)->tidquals);
			break;
		case T_TidRangeScan:
			walk_expr(ew, ((TidRangeScan *) plan)->tidrangequals);
			break;
		case T_FunctionScan:
			walk_expr(ew, ((FunctionScan *) plan)->functions);
			break;
		case T_ValuesScan:
			walk_expr(ew, ((ValuesScan *) plan)->values_lists);
			break;
		case T_TableFuncScan:
			walk_expr(ew, ((TableFuncScan *) plan)->tablefunc);
			break;
		case T_SampleScan:
			walk_expr(ew, ((SampleScan *) plan)->tablesample);
			break;
		case T_ForeignScan:
			walk_expr(ew, ((ForeignScan *) plan)->fdw_exprs);
			walk_expr(ew, ((ForeignScan *) plan)->fdw_recheck_quals);
			break;
		case T_CustomScan:
			walk_expr(ew, ((CustomScan *) plan)->custom_exprs);
			break;
		case T_NestLoop:
			walk_expr(ew, ((Join *) plan)->joinqual);
			break;
		case T_MergeJoin:
			walk_expr(ew, ((Join *) plan)->joinqual);
			walk_expr(ew, ((MergeJoin *) plan)->mergeclauses);
			break;
		case T_HashJoin:
			walk_expr(ew, ((Join *) plan)->joinqual);
			walk_expr(ew, ((HashJoin *) plan)->hashclauses);
			walk_expr(ew, ((HashJoin *) plan)->hashkeys);
			break;
		case T_Hash:
			walk_expr(ew, ((Hash *) plan)->hashkeys);
			break;
		case T_Memoize:
			walk_expr(ew, ((Memoize *) plan)->param_exprs);
			break;
		case T_WindowAgg:
			walk_expr(ew, ((WindowAgg *) plan)->startOffset);
			walk_expr(ew, ((WindowAgg *) plan)->endOffset);
			walk_expr(ew, ((WindowAgg *) plan)->runCondition);
			break;
		case T_Limit:
			walk_expr(ew, ((Limit *) plan)->limitOffset);
			walk_expr(ew, ((Limit *) plan)->limitCount);
			break;
		default:
			break;
	}
}

/*
 * The most TID bitmaps a bitmap tree holds at once (see the file header):
 * a BitmapAnd keeps its result while each further child builds one; a
 * BitmapOr makes one result that its Bitmap Index Scan children add to
 * directly, and keeps it while any other child builds one.
 */
static int
bitmap_peak(Plan *plan)
{
	List	   *children;
	ListCell   *lc;
	int			peak = 0;

	if (plan == NULL)
		return 0;
	check_stack_depth();
	switch (nodeTag(plan))
	{
		case T_BitmapIndexScan:
			return 1;
		case T_BitmapAnd:
			children = ((BitmapAnd *) plan)->bitmapplans;
			break;
		case T_BitmapOr:
			children = ((BitmapOr *) plan)->bitmapplans;
			break;
		default:
			return 1;
	}
	foreach(lc, children)
	{
		Plan	   *child = (Plan *) lfirst(lc);
		int			p;

		if (IsA(plan, BitmapOr) && IsA(child, BitmapIndexScan))
			p = 0;				/* adds to the BitmapOr's own result */
		else
			p = bitmap_peak(child);
		peak = Max(peak, p);
	}
	return 1 + peak;
}

/* The tuplesorts one Agg node may hold at once. */
static void
count_agg(Walk *w, Agg *agg, double mult, int ordered_aggs)
{
	ListCell   *lc;
	int			sorted_phases = 0;
	int			sets = Max(list_length(agg->groupingSets), 1);
	bool		hashed = (agg->aggstrategy == AGG_HASHED ||
						  agg->aggstrategy == AGG_MIXED);

	foreach(lc, agg->chain)
	{
		Agg		   *c = (Agg *) lfirst(lc);

		if (!IsA(c, Agg))
			continue;
		if (c->aggstrategy == AGG_SORTED)
			sorted_phases++;
		else if (c->aggstrategy == AGG_HASHED)
			hashed = true;
		sets = Max(sets, list_length(c->groupingSets));
	}

	/* all hash tables of the node share one hash_mem */
	if (hashed)
		count_hash(w, mult, need_kb(&agg->plan));
	/* a sorted rollup's input sort and the next one's output sort */
	if (sorted_phases > 0)
		count_work(w, mult * Min(sorted_phases, 2),
				   need_kb(outerPlan(&agg->plan) ? outerPlan(&agg->plan) :
						   &agg->plan));
	/* one sort per ordered aggregate and grouping set of the phase */
	if (ordered_aggs > 0)
		count_work(w, mult * ordered_aggs * sets, 0);
}

/* How many entries of a ProjectSet's target list return sets. */
static int
count_srfs(List *tlist)
{
	ListCell   *lc;
	int			n = 0;

	foreach(lc, tlist)
	{
		TargetEntry *tle = (TargetEntry *) lfirst(lc);

		if (expression_returns_set((Node *) tle->expr))
			n++;
	}
	return n;
}

/*
 * Count what plan node 'plan' itself may hold (run 'mult' times at once;
 * an Agg's ordered aggregates were found by the walk of its expressions,
 * 'ew').  Returns the multiplier of its children: a Gather's run in every
 * participant.
 */
static double
count_node(Walk *w, Plan *plan, double mult, const ExprWalk *ew)
{
	double		child_mult = mult;

	switch (nodeTag(plan))
	{
		case T_Sort:
		case T_IncrementalSort:
		case T_Material:
		case T_WindowAgg:
		case T_TableFuncScan:
			count_work(w, mult, need_kb(plan));
			break;
		case T_FunctionScan:
			count_work(w, mult * list_length(((FunctionScan *) plan)->functions),
					   need_kb(plan));
			break;
		case T_ProjectSet:
			count_work(w, mult * count_srfs(plan->targetlist), 0);
			break;
		case T_Agg:
			count_agg(w, (Agg *) plan, mult, ew->ordered_aggs);
			break;
		case T_Hash:
		case T_Memoize:
			count_hash(w, mult, need_kb(plan));
			break;
		case T_SetOp:
			if (((SetOp *) plan)->strategy == SETOP_HASHED)
				count_hash(w, mult, need_kb(plan));
			break;
		case T_RecursiveUnion:
			count_work(w, 2 * mult, need_kb(plan));
			if (((RecursiveUnion *) plan)->numCols > 0)
				count_hash(w, mult, need_kb(plan));
			break;
		case T_CteScan:
			{
				int			id = ((CteScan *) plan)->ctePlanId;

				/* one tuplestore per CTE, made by whichever scan starts first */
				if (id >= 1 && id <= w->nsubplans && w->cte_mult[id - 1] < mult)
				{
					count_work(w, mult - w->cte_mult[id - 1], need_kb(plan));
					w->cte_mult[id - 1] = mult;
				}
			}
			break;
		case T_BitmapHeapScan:
			/* one shared bitmap for a parallel-aware scan, built once */
			count_work(w, (plan->parallel_aware ? 1 : mult) *
					   bitmap_peak(outerPlan(plan)), 0);
			break;
		case T_Gather:
			child_mult = mult * (1 + Max(((Gather *) plan)->num_workers, 0));
			break;
		case T_GatherMerge:
			child_mult = mult * (1 + Max(((GatherMerge *) plan)->num_workers, 0));
			break;
		default:
			break;
	}
	return child_mult;
}

static void
walk_plan(Walk *w, Plan *plan, double mult)
{
	ExprWalk	ew;
	List	   *children;
	Plan	   *subplan;
	double		child_mult;
	ListCell   *lc;

	if (plan == NULL)
		return;
	check_stack_depth();

	/*
	 * Expressions first: SubPlans, and an Agg's ordered aggregates.  A
	 * statement without subplans has no SubPlan anywhere (each refers to
	 * one of pstmt->subplans), so only an Agg's are looked at then.
	 */
	ew.w = w;
	ew.mult = mult;
	ew.in_agg = IsA(plan, Agg);
	ew.ordered_aggs = 0;
	if (w->pstmt->subplans != NIL || ew.in_agg)
		walk_node_exprs(&ew, plan);

	/* initplans run once per execution of the node they are attached to */
	foreach(lc, plan->initPlan)
	{
		SubPlan    *sp = (SubPlan *) lfirst(lc);

		if (IsA(sp, SubPlan))
			visit_subplan(w, sp->plan_id, mult);
	}

	child_mult = count_node(w, plan, mult, &ew);

	children = dbgate_plan_children(plan, &subplan);
	if (subplan != NULL)
		walk_plan(w, subplan, mult);

	/*
	 * Children run concurrently or leave their memory in place until the
	 * end of the statement (a finished sort keeps its tuples for a rescan),
	 * so everything below adds up.
	 */
	foreach(lc, children)
		walk_plan(w, (Plan *) lfirst(lc), child_mult);
	walk_plan(w, plan->lefttree, child_mult);
	walk_plan(w, plan->righttree, child_mult);
}

/*
 * The estimate of a plan: see the file header.
 */
void
dbgate_mem_estimate(PlannedStmt *pstmt, DbgateMemEstimate *est)
{
	Walk		w;

	est->work_units = 0;
	est->hash_units = 0;
	est->need_kb = 0;
	if (pstmt == NULL || pstmt->commandType == CMD_UTILITY)
		return;

	w.pstmt = pstmt;
	w.est = est;
	w.nsubplans = list_length(pstmt->subplans);
	w.sub_mult = NULL;
	w.cte_mult = NULL;
	if (w.nsubplans > 0)
	{
		w.sub_mult = palloc0(sizeof(double) * w.nsubplans);
		w.cte_mult = palloc0(sizeof(double) * w.nsubplans);
	}
	walk_plan(&w, pstmt->planTree, 1);
	if (w.nsubplans > 0)
	{
		pfree(w.sub_mult);
		pfree(w.cte_mult);
	}
}
