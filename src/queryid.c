/*-------------------------------------------------------------------------
 *
 * queryid.c
 *	  Query ids (1.3): computed only for the statements of the budgets that
 *	  need them, and one id per statement for the quarantine and the
 *	  runaway timer.
 *
 * Which statements get one
 * ------------------------
 * A budget needs query ids while it has runaway_after (a runaway's LOG
 * line and its quarantine entry name the query) or live quarantine
 * entries (its statements are looked up by id): DbgateLookup.queryid in
 * the cached classification (classify.c), renewed by every configuration
 * change and whenever a budget gets its first entry or loses its last.
 * The adaptive limit needs none (adapt.c).
 *
 * PostgreSQL computes query ids for every statement when compute_query_id
 * is on, or when it is 'auto' (the default) and a module asked for them
 * (pg_stat_statements): then the query already has its id when
 * post_parse_analyze_hook sees it, and nothing is done here.  With 'auto'
 * and nobody asking, a statement of a budget that needs ids is jumbled
 * here, by PostgreSQL's own JumbleQuery(), in the hook that runs right
 * after the place where PostgreSQL would have done it (parse analysis of
 * a statement, of the query of EXPLAIN, of a statement that a function or
 * DO block prepares): the same id, the same JumbleState for the hooks
 * after ours, and PostgreSQL shows it in pg_stat_activity.query_id as its
 * own.  Statements of every other budget, and of sessions that are not
 * gated, are not jumbled: that is the cost that made 1.3's first
 * dbgate.max_quarantine default 0.  With compute_query_id = off nothing
 * is computed, and query ids stay 0: no quarantine.
 *
 * A statement parsed before its budget needed ids (a prepared statement,
 * a plan that PL/pgSQL cached) has none: when the cached classification
 * of a backend starts to need them, classify.c marks the backend's cached
 * plans invalid (ResetPlanCache()), so that each is parsed again, with an
 * id, at its next use.
 *
 * JumbleQuery() asserts that query ids are enabled: query_id_enabled is
 * set for the call only (and put back on every exit).
 *
 * The id of a statement: dbgate_statement_queryid() (queryid.h) has the
 * rule; dbgate_command_queryid is the command around the run, kept by
 * dbgate.c's ProcessUtility hook for the commands that run a query of
 * their own (dbgate_queryid_command()), put back on every exit.
 *
 * Nothing here takes a lock, allocates outside the jumbling or reads a
 * clock; the state is the backend's (no shared memory is written).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"

#include "classify.h"
#include "compat.h"
#include "queryid.h"
#include "shmem.h"

uint64		dbgate_command_queryid = UINT64CONST(0);

/* PostgreSQL's jumbling of query, with query ids enabled for the call. */
static JumbleState *
jumble(ParseState *pstate, Query *query)
{
	JumbleState *volatile js = NULL;
	bool		saved = query_id_enabled;

	query_id_enabled = true;
	PG_TRY();
	{
		js = DBGATE_JUMBLE_QUERY(query, pstate->p_sourcetext);
	}
	PG_FINALLY();
	{
		query_id_enabled = saved;
	}
	PG_END_TRY();
	return js;
}

/*
 * post_parse_analyze_hook (dbgate.c) for a query that
 * dbgate_queryid_unwanted() could not rule out: its id, if its budget
 * needs one; returns the JumbleState for the next hook.  Classifies only
 * where the planner would (a client backend, in a transaction: a ROLLBACK
 * is parsed in an aborted one).
 */
JumbleState *
dbgate_queryid_compute(ParseState *pstate, Query *query, JumbleState *jstate)
{
	const DbgateLookup *lk;

	if (!dbgate_enabled || dbgate_shared == NULL || !IsTransactionState() ||
		!dbgate_is_client_backend())
		return jstate;
	lk = dbgate_classify();
	if (lk->budget < 0 || !lk->queryid)
		return jstate;
	return jumble(pstate, query);
}
