/*-------------------------------------------------------------------------
 *
 * queryid.h
 *	  Query ids (queryid.c): computed for the statements of the budgets
 *	  that need them, and the one id of a statement that the quarantine
 *	  check and the runaway timer both use.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DBGATE_QUERYID_H
#define DBGATE_QUERYID_H

#include "nodes/parsenodes.h"
#include "nodes/plannodes.h"
#include "parser/parse_node.h"
#include "utils/backend_status.h"

#include "classify.h"
#include "compat.h"
#include "shmem.h"

/*
 * The query id of the command that runs a query of its own (DECLARE
 * CURSOR, CREATE TABLE AS, SELECT INTO, CREATE and REFRESH MATERIALIZED
 * VIEW) while it runs, else 0: set by dbgate.c's ProcessUtility hook.
 */
extern uint64 dbgate_command_queryid;

extern JumbleState *dbgate_queryid_compute(ParseState *pstate, Query *query,
										   JumbleState *jstate);

/*
 * post_parse_analyze_hook (dbgate.c): does the query certainly need no id
 * from dbgate_queryid_compute()?  Yes if the cached classification, still
 * valid, says that its budget needs none (DbgateLookup.queryid): read as
 * dbgate_classify() reads it, for a session whose session user cannot
 * change (user_fixed: then the comparison with it, a call, is not needed;
 * other sessions ask dbgate_queryid_compute()); or if it has PostgreSQL's
 * own, or none may be computed (compute_query_id = off).  A few tests: no
 * lock, no allocation, no clock, no call.
 */
static inline bool
dbgate_queryid_unwanted(const Query *query)
{
	const DbgateLookupCache *c = &dbgate_lookup_cache;

	/* the common case first: a budget without runaway_after, or none */
	if (c->valid && c->user_fixed && !c->result.queryid &&
		c->generation == pg_atomic_read_u64(&dbgate_shared->generation))
		return true;
	return query->queryId != UINT64CONST(0) ||
		compute_query_id == COMPUTE_QUERY_ID_OFF;
}

/*
 * The query id of a statement that starts its run (ExecutorStart) with
 * command_id the id of the command around it (dbgate_command_queryid):
 *	  - in a command that runs a query of its own, the command's id (the
 *		plan of its query has none on 15 to 17, where PostgreSQL jumbles
 *		only the command, and a cursor's rows are fetched by later
 *		statements, FETCH, that have ids of their own): the id that
 *		pg_stat_activity.query_id shows for DECLARE or CREATE TABLE AS,
 *		and that FETCH then runs under, on every version;
 *	  - otherwise the id of the plan (a statement, a statement of a
 *		function or DO block, the query of EXPLAIN ANALYZE: the id under
 *		which pg_stat_statements counts it);
 *	  - a plan without one: the id that pg_stat_activity.query_id shows
 *		for the session's statement, or 0.
 * The quarantine check (quarantine.c) and the runaway timer (runaway.c,
 * through slot.c, which keeps command_id with each run) both take it from
 * here, so that an entry made by a runaway is the one its repeats are
 * looked up by.
 */
static inline uint64
dbgate_statement_queryid(uint64 command_id, const PlannedStmt *pstmt)
{
	if (command_id != UINT64CONST(0))
		return command_id;
	if (pstmt != NULL && pstmt->queryId != UINT64CONST(0))
		return pstmt->queryId;
	return MyBEEntry != NULL ? MyBEEntry->st_query_id : UINT64CONST(0);
}

/* ProcessUtility (dbgate.c): does the command run a query of its own? */
static inline bool
dbgate_queryid_command(const Node *parsetree)
{
	return IsA(parsetree, DeclareCursorStmt) ||
		IsA(parsetree, CreateTableAsStmt) ||
		IsA(parsetree, RefreshMatViewStmt);
}

#endif							/* DBGATE_QUERYID_H */
