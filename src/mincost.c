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
 *	  - the total cost of its top plan node, as EXPLAIN prints it, is below c.
 * Such a statement takes no slot and never queues; it is counted in the
 * budget's 'bypassed'.  Queries that it runs itself (functions it calls)
 * start without a slot and are gated as top-level runs, each of which may
 * be bypassed in turn.  Budgets in shadow mode bypass the same way.
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

#include "nodes/plannodes.h"
#include "tcop/dest.h"

#include "dbgate.h"
#include "mincost.h"

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
	pg_atomic_fetch_add_u64(&b->bypassed, 1);
	return true;
}
