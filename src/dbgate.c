/*-------------------------------------------------------------------------
 *
 * dbgate.c
 *	  Module entry: GUCs, hooks and transaction callbacks.
 *
 * dbgate must be loaded with shared_preload_libraries: it needs shared
 * memory and executor hooks in every backend.  Loaded any other way it
 * installs nothing, and every SQL function says so (SQLSTATE 55000).
 *
 * Every hook calls the previous hook or the standard function.
 *
 * The settings are defined here, their variables where they are used:
 * dbgate.enabled, dbgate.max_budgets, dbgate.max_roles and
 * dbgate.max_quarantine in shmem.c, dbgate.max_key_limits in keylimits.c,
 * dbgate.max_keys in keytab.c,
 * dbgate.default_budget in classify.c.  This file is the top of dbgate:
 * it wires the statement path (slot.c and below) and the configuration
 * side (config.c, wal.c) into PostgreSQL, and nothing calls into it.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/objectaccess.h"
#include "catalog/pg_authid.h"
#include "commands/dbcommands.h"
#include "commands/user.h"
#include "executor/executor.h"
#include "miscadmin.h"
#include "nodes/parsenodes.h"
#include "parser/analyze.h"
#include "storage/ipc.h"
#include "tcop/pquery.h"
#include "tcop/tcopprot.h"
#include "tcop/utility.h"
#include "utils/acl.h"
#include "utils/guc.h"
#include "utils/memutils.h"

#include "adapt.h"
#include "budgets.h"
#include "classify.h"
#include "compat.h"
#include "config.h"
#include "dbgate.h"
#include "demote.h"
#include "dimension.h"
#include "memgrant.h"
#include "mincost.h"
#include "parallel.h"
#include "planner.h"
#include "keylimits.h"
#include "keytab.h"
#include "quarantine.h"
#include "queryid.h"
#include "runaway.h"
#include "shmem.h"
#include "slot.h"
#include "timeouts.h"
#include "utility.h"
#include "wal.h"

DBGATE_MODULE_MAGIC("dbgate", "1.2");

/* saved hook values */
static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;
static ExecutorStart_hook_type prev_ExecutorStart = NULL;
static ExecutorRun_hook_type prev_ExecutorRun = NULL;
static ExecutorFinish_hook_type prev_ExecutorFinish = NULL;
static ExecutorEnd_hook_type prev_ExecutorEnd = NULL;
static ProcessUtility_hook_type prev_ProcessUtility = NULL;
static object_access_hook_type prev_object_access_hook = NULL;
static post_parse_analyze_hook_type prev_post_parse_analyze = NULL;


static void dbgate_shmem_request_hook(void);
static void dbgate_shmem_startup_hook(void);
static void dbgate_ExecutorStart(QueryDesc *queryDesc, int eflags);
static void dbgate_ExecutorRun(DBGATE_EXECUTOR_RUN_ARGS);
static void dbgate_ExecutorFinish(QueryDesc *queryDesc);
static void dbgate_ExecutorEnd(QueryDesc *queryDesc);
static void dbgate_ProcessUtility(PlannedStmt *pstmt, const char *queryString,
								  bool readOnlyTree,
								  ProcessUtilityContext context,
								  ParamListInfo params,
								  QueryEnvironment *queryEnv,
								  DestReceiver *dest, QueryCompletion *qc);
static void dbgate_object_access(ObjectAccessType access, Oid classId,
								 Oid objectId, int subId, void *arg);
static void dbgate_post_parse_analyze(ParseState *pstate, Query *query,
									  JumbleState *jstate);
static void dbgate_xact_callback(XactEvent event, void *arg);
static void dbgate_subxact_callback(SubXactEvent event,
									SubTransactionId mySubid,
									SubTransactionId parentSubid, void *arg);

static bool
check_default_budget(char **newval, void **extra, GucSource source)
{
	if (*newval != NULL && strlen(*newval) >= NAMEDATALEN)
	{
		GUC_check_errcode(ERRCODE_INVALID_PARAMETER_VALUE);
		GUC_check_errdetail("Budget names are at most %d bytes.", NAMEDATALEN - 1);
		return false;
	}
	return true;
}

static void
assign_default_budget(const char *newval, void *extra)
{
	dbgate_invalidate_lookup();
}

/*
 * The postmaster publishes dbgate.enabled for every backend, which must
 * not reload the configuration file in the middle of a statement: it
 * reloads before it signals its children, a signalled waiter wakes on its
 * latch and reads the shared value, and the gate reads it for every
 * statement (dbgate_gating()), so that a statement that starts before its
 * backend has read the file is treated as the waiters are.
 */
static void
assign_enabled(bool newval, void *extra)
{
	if (!IsUnderPostmaster && dbgate_shared != NULL)
		pg_atomic_write_u32(&dbgate_shared->enabled, newval ? 1 : 0);
}

/* The settings (their variables live where they are used: see above). */
static void
define_settings(void)
{
	DefineCustomBoolVariable("dbgate.enabled",
							 "Enables admission control by dbgate.",
							 "When off, no statement is gated and every queued statement is admitted at once.",
							 &dbgate_enabled,
							 true,
							 PGC_SIGHUP,
							 0,
							 NULL, assign_enabled, NULL);

	DefineCustomIntVariable("dbgate.max_budgets",
							"Maximum number of budgets.",
							"Sizes the shared budget table.",
							&dbgate_max_budgets,
							64,
							1, DBGATE_MAX_BUDGETS_LIMIT,
							PGC_POSTMASTER,
							0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("dbgate.max_roles",
							"Maximum number of role assignments, and of database assignments.",
							"Sizes the shared role map and database map.",
							&dbgate_max_roles,
							1024,
							1, DBGATE_MAX_ROLES_LIMIT,
							PGC_POSTMASTER,
							0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("dbgate.max_quarantine",
							"Maximum number of quarantined queries.",
							"Sizes the shared quarantine table; 0 means no quarantine.",
							&dbgate_max_quarantine,
							1000,
							0, DBGATE_MAX_QUARANTINE_LIMIT,
							PGC_POSTMASTER,
							0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("dbgate.max_key_limits",
							"Maximum number of key limits (set_key_limit), all budgets together.",
							"Sizes the shared table of key limits.",
							&dbgate_max_key_limits,
							1000,
							0, DBGATE_MAX_KEY_LIMITS_LIMIT,
							PGC_POSTMASTER,
							0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("dbgate.max_keys",
							"Capacity of the table of live keys (key_by), all budgets together.",
							"A key that finds no room is counted under its budget's overflow key.",
							&dbgate_max_keys,
							10000,
							0, DBGATE_MAX_KEYS_LIMIT,
							PGC_POSTMASTER,
							0,
							NULL, NULL, NULL);

	DefineCustomStringVariable("dbgate.default_budget",
							   "Budget for roles that have no assignment.",
							   "Empty means that such roles are not gated.",
							   &dbgate_default_budget,
							   "",
							   PGC_SUSET,
							   0,
							   check_default_budget, assign_default_budget, NULL);
}

void
_PG_init(void)
{
	if (!process_shared_preload_libraries_in_progress)
		return;

	define_settings();
	MarkGUCPrefixReserved("dbgate");

	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = dbgate_shmem_request_hook;
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = dbgate_shmem_startup_hook;
	prev_ExecutorStart = ExecutorStart_hook;
	ExecutorStart_hook = dbgate_ExecutorStart;
	prev_ExecutorRun = ExecutorRun_hook;
	ExecutorRun_hook = dbgate_ExecutorRun;
	prev_ExecutorFinish = ExecutorFinish_hook;
	ExecutorFinish_hook = dbgate_ExecutorFinish;
	prev_ExecutorEnd = ExecutorEnd_hook;
	ExecutorEnd_hook = dbgate_ExecutorEnd;
	prev_ProcessUtility = ProcessUtility_hook;
	ProcessUtility_hook = dbgate_ProcessUtility;
	prev_object_access_hook = object_access_hook;
	object_access_hook = dbgate_object_access;
	/*
	 * queryid.c: query ids for the statements of budgets that need them,
	 * not EnableQueryId(), which would have every statement jumbled
	 */
	prev_post_parse_analyze = post_parse_analyze_hook;
	post_parse_analyze_hook = dbgate_post_parse_analyze;
	/* planner_hook: planner.c */
	dbgate_planner_init();

	/* configuration changes travel with the WAL */
	dbgate_wal_init();

	RegisterXactCallback(dbgate_xact_callback, NULL);
	RegisterSubXactCallback(dbgate_subxact_callback, NULL);

	/* runaway statements are counted, logged and acted on by a worker */
	dbgate_runaway_register_worker();
}

static void
dbgate_shmem_request_hook(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	dbgate_shmem_request();
	dbgate_adapt_shmem_request();
	dbgate_runaway_shmem_request();
	dbgate_quarantine_shmem_request();
	dbgate_dims_shmem_request();
	dbgate_keylimits_shmem_request();
}

static void
dbgate_shmem_startup_hook(void)
{
	bool		new_segment;

	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();
	/*
	 * The shared memory, then each module's own; a new segment (server
	 * start, crash restart): the state file's budgets.
	 */
	new_segment = dbgate_shmem_init();
	dbgate_adapt_shmem_init();
	dbgate_runaway_shmem_init();
	dbgate_quarantine_shmem_init();
	dbgate_dims_shmem_init();
	dbgate_keylimits_shmem_init();
	if (new_segment)
		dbgate_install_initial();
	/* once, here, so that no backend has a step left that could fail */
	if (!IsUnderPostmaster)
		dbgate_shared->wait_event_info = dbgate_queue_wait_event();
}

/* ----------
 * Executor hooks
 * ----------
 */
static inline void
next_ExecutorStart(QueryDesc *queryDesc, int eflags)
{
	if (prev_ExecutorStart)
		prev_ExecutorStart(queryDesc, eflags);
	else
		standard_ExecutorStart(queryDesc, eflags);
}

/* memgrant.c: the plan is initialised at the run's granted work_mem */
static pg_noinline void
granted_ExecutorStart(QueryDesc *queryDesc, int eflags)
{
	DbgateMemStretch st;

	dbgate_memgrant_start(queryDesc, &st);
	PG_TRY();
	{
		next_ExecutorStart(queryDesc, eflags);
	}
	PG_CATCH();
	{
		dbgate_memgrant_leave(queryDesc, &st, true);
		PG_RE_THROW();
	}
	PG_END_TRY();
	dbgate_memgrant_leave(queryDesc, &st, false);
}

static void
dbgate_ExecutorStart(QueryDesc *queryDesc, int eflags)
{
	dbgate_slot_executor_start(queryDesc, eflags);
	dbgate_parallel_executor_start(queryDesc);

	/* memgrant.c: a run under a slot with max_memory_mb gets a grant */
	if (unlikely(dbgate_memgrant_slot) && !(eflags & EXEC_FLAG_EXPLAIN_ONLY))
	{
		granted_ExecutorStart(queryDesc, eflags);
		return;
	}
	next_ExecutorStart(queryDesc, eflags);
}

/* the next hook in the chain, or the standard executor */
static inline void
next_ExecutorRun(DBGATE_EXECUTOR_RUN_ARGS)
{
	if (prev_ExecutorRun)
		DBGATE_EXECUTOR_RUN_CALL(prev_ExecutorRun);
	else
		DBGATE_EXECUTOR_RUN_CALL(standard_ExecutorRun);
}

static inline void
next_ExecutorFinish(QueryDesc *queryDesc)
{
	if (prev_ExecutorFinish)
		prev_ExecutorFinish(queryDesc);
	else
		standard_ExecutorFinish(queryDesc);
}

/*
 * ExecutorRun of a run that has work to do here (dbgate_run_work): apart,
 * so that the hook itself needs no stack frame for the PG_TRY block and
 * passes every other run on with a jump.
 */
static pg_noinline void
tracked_ExecutorRun(DBGATE_EXECUTOR_RUN_ARGS)
{
	DbgateLimitState st;

	if (!dbgate_run_begin(queryDesc, &st, false))
	{
		next_ExecutorRun(DBGATE_EXECUTOR_RUN_CALL_ARGS);
		dbgate_run_end(queryDesc, &st, false);
		return;
	}

	/* budget limits are applied: undo them on every exit */
	PG_TRY();
	{
		next_ExecutorRun(DBGATE_EXECUTOR_RUN_CALL_ARGS);
	}
	PG_CATCH();
	{
		dbgate_run_end(queryDesc, &st, true);
		/*
		 * runaway.c: the cancel of a runaway names its budget; demote.c: a
		 * demoted statement's cancel for its new budget's timeouts
		 */
		if (unlikely(dbgate_runaway_cancel_fired) ||
			unlikely(dbgate_demote_cancel_pending()))
			dbgate_runaway_rethrow();
		PG_RE_THROW();
	}
	PG_END_TRY();
	dbgate_run_end(queryDesc, &st, false);
}

static void
dbgate_ExecutorRun(DBGATE_EXECUTOR_RUN_ARGS)
{
	/*
	 * Nothing to do without a slot (every ungated run), nor with a slot
	 * that has no limits to apply, is not OPEN and whose runs cannot end in
	 * another subtransaction than the one they started in (slot.c).
	 */
	if (likely(dbgate_nrefs == 0) || likely(!dbgate_run_work))
		next_ExecutorRun(DBGATE_EXECUTOR_RUN_CALL_ARGS);
	else
		tracked_ExecutorRun(DBGATE_EXECUTOR_RUN_CALL_ARGS);
}

/* ExecutorFinish of a run with work to do here, as tracked_ExecutorRun() */
static pg_noinline void
tracked_ExecutorFinish(QueryDesc *queryDesc)
{
	DbgateLimitState st;

	if (!dbgate_run_begin(queryDesc, &st, true))
	{
		next_ExecutorFinish(queryDesc);
		dbgate_run_end(queryDesc, &st, false);
		return;
	}

	PG_TRY();
	{
		next_ExecutorFinish(queryDesc);
	}
	PG_CATCH();
	{
		dbgate_run_end(queryDesc, &st, true);
		/*
		 * runaway.c: the cancel of a runaway names its budget; demote.c: a
		 * demoted statement's cancel for its new budget's timeouts
		 */
		if (unlikely(dbgate_runaway_cancel_fired) ||
			unlikely(dbgate_demote_cancel_pending()))
			dbgate_runaway_rethrow();
		PG_RE_THROW();
	}
	PG_END_TRY();
	dbgate_run_end(queryDesc, &st, false);
}

static void
dbgate_ExecutorFinish(QueryDesc *queryDesc)
{
	/*
	 * As ExecutorRun: budget limits apply here too (after triggers run
	 * here), and a CLOSE of a cursor inside a savepoint runs it in another
	 * subtransaction than the cursor's.  A plain SELECT has nothing left to
	 * do here (no ModifyTable to finish, no trigger queued by it): its
	 * limits are not applied again -- that would only arm and disarm the
	 * timers once more -- unless a subtransaction started under the slot.
	 */
	if (likely(dbgate_nrefs == 0) || likely(!dbgate_run_work) ||
		(queryDesc->operation == CMD_SELECT &&
		 !queryDesc->plannedstmt->hasModifyingCTE &&
		 !dbgate_refs_span_subxacts))
		next_ExecutorFinish(queryDesc);
	else
		tracked_ExecutorFinish(queryDesc);
}

static void
dbgate_ExecutorEnd(QueryDesc *queryDesc)
{
	if (prev_ExecutorEnd)
		prev_ExecutorEnd(queryDesc);
	else
		standard_ExecutorEnd(queryDesc);

	if (dbgate_nrefs > 0)
	{
		/* memgrant.c: the run's grant goes back */
		if (unlikely(dbgate_memgrant_nrecs > 0))
			dbgate_memgrant_end(queryDesc);
		dbgate_slot_executor_end(queryDesc);
	}
}

/* the next hook in the chain, or the standard function */
static inline void
next_ProcessUtility(PlannedStmt *pstmt, const char *queryString,
					bool readOnlyTree, ProcessUtilityContext context,
					ParamListInfo params, QueryEnvironment *queryEnv,
					DestReceiver *dest, QueryCompletion *qc)
{
	ProcessUtility_hook_type next = prev_ProcessUtility ?
		prev_ProcessUtility : standard_ProcessUtility;

	/* a budget's parallel_workers caps parallel maintenance (parallel.c) */
	if (dbgate_shared != NULL)
		dbgate_parallel_utility(next, pstmt, queryString, readOnlyTree,
								context, params, queryEnv, dest, qc);
	else
		next(pstmt, queryString, readOnlyTree, context, params, queryEnv,
			 dest, qc);
}

/* a command that holds a slot: return it on every exit */
static void
gated_ProcessUtility(PlannedStmt *pstmt, const char *queryString,
					 bool readOnlyTree, ProcessUtilityContext context,
					 ParamListInfo params, QueryEnvironment *queryEnv,
					 DestReceiver *dest, QueryCompletion *qc)
{
	PG_TRY();
	{
		next_ProcessUtility(pstmt, queryString, readOnlyTree, context,
							params, queryEnv, dest, qc);
	}
	PG_CATCH();
	{
		dbgate_utility_end();
		PG_RE_THROW();
	}
	PG_END_TRY();
	dbgate_utility_end();
}

/* a gated command, or the next hook */
static void
gate_ProcessUtility(PlannedStmt *pstmt, const char *queryString,
					bool readOnlyTree, ProcessUtilityContext context,
					ParamListInfo params, QueryEnvironment *queryEnv,
					DestReceiver *dest, QueryCompletion *qc)
{
	if (dbgate_shared != NULL && dbgate_utility_takes_slot(pstmt, context) &&
		dbgate_utility_begin())
		gated_ProcessUtility(pstmt, queryString, readOnlyTree, context,
							 params, queryEnv, dest, qc);
	else
		next_ProcessUtility(pstmt, queryString, readOnlyTree, context,
							params, queryEnv, dest, qc);
}

/*
 * mincost.c: the query of CREATE TABLE AS, SELECT INTO, CREATE
 * MATERIALIZED VIEW and REFRESH MATERIALIZED VIEW writes a table: it is
 * never let through as a cheap read.
 */
static pg_noinline void
writer_ProcessUtility(PlannedStmt *pstmt, const char *queryString,
					  bool readOnlyTree, ProcessUtilityContext context,
					  ParamListInfo params, QueryEnvironment *queryEnv,
					  DestReceiver *dest, QueryCompletion *qc)
{
	dbgate_mincost_writer_depth++;
	PG_TRY();
	{
		gate_ProcessUtility(pstmt, queryString, readOnlyTree, context,
							params, queryEnv, dest, qc);
	}
	PG_FINALLY();
	{
		dbgate_mincost_writer_depth--;
	}
	PG_END_TRY();
}

/*
 * slot.c: the statements of a DO block or a procedure are statements of
 * their own, each with its own clock under a slot already held.
 */
static pg_noinline void
block_ProcessUtility(PlannedStmt *pstmt, const char *queryString,
					 bool readOnlyTree, ProcessUtilityContext context,
					 ParamListInfo params, QueryEnvironment *queryEnv,
					 DestReceiver *dest, QueryCompletion *qc)
{
	dbgate_slot_block_begin();
	PG_TRY();
	{
		gate_ProcessUtility(pstmt, queryString, readOnlyTree, context,
							params, queryEnv, dest, qc);
	}
	PG_FINALLY();
	{
		dbgate_slot_block_end();
	}
	PG_END_TRY();
}

/*
 * queryid.c: a command that runs a query of its own (DECLARE CURSOR, CREATE
 * TABLE AS, REFRESH MATERIALIZED VIEW): its query runs under the command's
 * query id; mincost.c: the query of the last two writes a table
 */
static pg_noinline void
command_ProcessUtility(PlannedStmt *pstmt, const char *queryString,
					   bool readOnlyTree, ProcessUtilityContext context,
					   ParamListInfo params, QueryEnvironment *queryEnv,
					   DestReceiver *dest, QueryCompletion *qc)
{
	uint64		outer = dbgate_command_queryid;

	dbgate_command_queryid = pstmt->queryId;
	PG_TRY();
	{
		if (dbgate_mincost_writer_command(pstmt->utilityStmt))
			writer_ProcessUtility(pstmt, queryString, readOnlyTree, context,
								  params, queryEnv, dest, qc);
		else
			gate_ProcessUtility(pstmt, queryString, readOnlyTree, context,
								params, queryEnv, dest, qc);
	}
	PG_FINALLY();
	{
		dbgate_command_queryid = outer;
	}
	PG_END_TRY();
}

/*
 * ProcessUtility: DROP ROLE and DROP DATABASE also remove the dropped
 * objects' assignments, in the same transaction.  Heavy utility commands
 * (utility.c) of a budget with utility = true take a slot for the whole
 * command.  DO and CALL are counted while they run (slot.c's clocks).
 */
static void
dbgate_ProcessUtility(PlannedStmt *pstmt, const char *queryString,
					  bool readOnlyTree,
					  ProcessUtilityContext context,
					  ParamListInfo params,
					  QueryEnvironment *queryEnv,
					  DestReceiver *dest, QueryCompletion *qc)
{
	Node	   *parsetree = pstmt->utilityStmt;
	List	   *dropped = NIL;
	Oid			dropped_db = InvalidOid;

	if (dbgate_shared != NULL && IsA(parsetree, DropRoleStmt))
	{
		DropRoleStmt *stmt = (DropRoleStmt *) parsetree;
		ListCell   *lc;

		foreach(lc, stmt->roles)
		{
			RoleSpec   *rolspec = lfirst(lc);
			Oid			roleid;

			if (rolspec->roletype != ROLESPEC_CSTRING)
				continue;
			roleid = get_role_oid(rolspec->rolename, true);
			if (OidIsValid(roleid))
				dropped = lappend_oid(dropped, roleid);
		}
	}
	if (dbgate_shared != NULL && IsA(parsetree, DropdbStmt))
		dropped_db = get_database_oid(((DropdbStmt *) parsetree)->dbname, true);

	if (dbgate_shared != NULL)
		dbgate_slot_utility_start();
	if (dbgate_shared != NULL && dbgate_queryid_command(parsetree))
		command_ProcessUtility(pstmt, queryString, readOnlyTree, context,
							   params, queryEnv, dest, qc);
	else if (dbgate_shared != NULL &&
			 (IsA(parsetree, DoStmt) || IsA(parsetree, CallStmt)))
		block_ProcessUtility(pstmt, queryString, readOnlyTree, context,
							 params, queryEnv, dest, qc);
	else
		gate_ProcessUtility(pstmt, queryString, readOnlyTree, context,
							params, queryEnv, dest, qc);
	if (dbgate_shared != NULL)
		dbgate_slot_utility_done(pstmt, context == PROCESS_UTILITY_TOPLEVEL);

	if (dropped != NIL)
	{
		ListCell   *lc;

		foreach(lc, dropped)
			dbgate_config_role_dropped(lfirst_oid(lc));
		list_free(dropped);
	}
	if (OidIsValid(dropped_db))
		dbgate_config_database_dropped(dropped_db);
}

/* ----------
 * Fast-path function calls
 * ----------
 */

/*
 * object_access_hook.  A fast-path function call (the protocol's
 * FunctionCall message, libpq's PQfn: its large-object functions and
 * drivers that use them) runs one function with no query around it, so
 * no executor hook sees it.  HandleFunctionRequest() invokes
 * OAT_FUNCTION_EXECUTE for the function once it has checked the
 * privileges, before it reads the arguments and calls it: the call is
 * gated there (slot.c).
 *
 * OAT_FUNCTION_EXECUTE is also invoked for every function of an
 * expression when the expression is prepared -- by the executor, the
 * planner, a domain check, a utility command, PL/pgSQL -- so the call is
 * recognised by what holds there together (PostgreSQL 15 to 18):
 *	  - debug_query_string is NULL: postgres.c sets it for every message
 *		that carries SQL (Query, Parse, Bind, Execute) until that message
 *		is done or has failed, and a FunctionCall message carries none (so
 *		this alone tells the call from whatever a statement prepares);
 *	  - no portal runs (ActivePortal is NULL);
 *	  - the current memory context is MessageContext, to which postgres.c
 *		switches just before HandleFunctionRequest(), which switches to no
 *		other before the hook, while the executor, the planner and
 *		PL/pgSQL prepare expressions in contexts of their own (the queries
 *		of a function called so, a login event trigger's PL/pgSQL).
 * The first two tests are all that every other event, and every function
 * of an ordinary statement's plans, costs: a comparison or two, no call.
 * Should work of a commit pass them all (the deferred triggers that the
 * COMMIT of a Sync message fires prepare their expressions in contexts of
 * their own), slot.c turns it away as it does the commit's executor runs.
 * The previous hook runs first, so that a call it refuses takes no slot.
 */
static void
dbgate_object_access(ObjectAccessType access, Oid classId, Oid objectId,
					 int subId, void *arg)
{
	if (prev_object_access_hook)
		prev_object_access_hook(access, classId, objectId, subId, arg);

	if (unlikely(access == OAT_FUNCTION_EXECUTE) &&
		debug_query_string == NULL && ActivePortal == NULL &&
		CurrentMemoryContext == MessageContext)
		dbgate_slot_call_start();
}

/* ----------
 * Parse analysis
 * ----------
 */

/*
 * post_parse_analyze_hook: queryid.c gives a query id to the statements of
 * budgets that need one, where PostgreSQL computed none; the next hook
 * sees the query with it, and the JumbleState.  Apart, so that the hook
 * itself, for every other statement, needs no stack frame and passes the
 * query on with a jump.
 */
static pg_noinline void
queryid_post_parse_analyze(ParseState *pstate, Query *query,
						   JumbleState *jstate)
{
	jstate = dbgate_queryid_compute(pstate, query, jstate);
	if (prev_post_parse_analyze)
		prev_post_parse_analyze(pstate, query, jstate);
}

static void
dbgate_post_parse_analyze(ParseState *pstate, Query *query,
						  JumbleState *jstate)
{
	if (unlikely(!dbgate_queryid_unwanted(query)))
		queryid_post_parse_analyze(pstate, query, jstate);
	else if (prev_post_parse_analyze)
		prev_post_parse_analyze(pstate, query, jstate);
}

/* ----------
 * Transaction callbacks
 * ----------
 */
static void
dbgate_xact_callback(XactEvent event, void *arg)
{
	if (dbgate_shared == NULL)
		return;

	if (dbgate_config_busy)
		dbgate_config_xact_callback(event);

	/*
	 * A kept slot goes back when the transaction ends.  A commit (or
	 * prepare) that will wait for a synchronous standby returns it at its
	 * start instead, when nothing of the transaction can run any more
	 * (slot.c says why).
	 */
	switch (event)
	{
		case XACT_EVENT_PRE_COMMIT:
			dbgate_xact_committing = true;
			if (unlikely(dbgate_slot_busy))
				dbgate_slot_commit_start(false);
			break;
		case XACT_EVENT_PRE_PREPARE:
			dbgate_xact_committing = true;
			if (unlikely(dbgate_slot_busy))
				dbgate_slot_commit_start(true);
			break;
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PREPARE:
			dbgate_xact_committing = false;
			if (unlikely(dbgate_slot_busy))
				dbgate_slot_xact_end();
			break;
		default:
			break;
	}
}

static void
dbgate_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
						SubTransactionId parentSubid, void *arg)
{
	if (dbgate_shared == NULL)
		return;

	if (dbgate_config_busy)
		dbgate_config_subxact_callback(event, mySubid, parentSubid);

	if (event == SUBXACT_EVENT_START_SUB)
		dbgate_slot_subxact_start();
	else if (event == SUBXACT_EVENT_ABORT_SUB)
		dbgate_slot_subxact_abort(mySubid);
}
