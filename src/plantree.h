/*-------------------------------------------------------------------------
 *
 * plantree.h
 *	  The child plans of a plan node, for the plan walks of parallel.c,
 *	  memestimate.c and mincost.c.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DBGATE_PLANTREE_H
#define DBGATE_PLANTREE_H

#include "nodes/plannodes.h"

/*
 * The child plans of a plan node other than lefttree and righttree (the
 * members of an Append, MergeAppend, BitmapAnd, BitmapOr or CustomScan);
 * a SubqueryScan's plan comes back in *subplan.
 */
static inline List *
dbgate_plan_children(Plan *plan, Plan **subplan)
{
	*subplan = NULL;
	switch (nodeTag(plan))
	{
		case T_Append:
			return ((Append *) plan)->appendplans;
		case T_MergeAppend:
			return ((MergeAppend *) plan)->mergeplans;
		case T_BitmapAnd:
			return ((BitmapAnd *) plan)->bitmapplans;
		case T_BitmapOr:
			return ((BitmapOr *) plan)->bitmapplans;
		case T_CustomScan:
			return ((CustomScan *) plan)->custom_plans;
		case T_SubqueryScan:
			*subplan = ((SubqueryScan *) plan)->subplan;
			return NIL;
		default:
			return NIL;
	}
}

#endif							/* DBGATE_PLANTREE_H */
