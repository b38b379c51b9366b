/*-------------------------------------------------------------------------
 *
 * compat.h
 *	  Differences between PostgreSQL major versions, in one place.
 *
 * The logic files use only the names defined here, so they read as if there
 * were a single PostgreSQL version.  Supported: 15, 16, 17, 18 (tested: 15,
 * 17 and 18).  dbgate keeps nothing in resource owners, so the ResourceOwner
 * API of 17 (ResourceOwnerDesc) has no counterpart here.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DBGATE_COMPAT_H
#define DBGATE_COMPAT_H

#include "postgres.h"

#include "access/transam.h"
#include "executor/executor.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "postmaster/autovacuum.h"
#include "postmaster/bgworker.h"
#include "replication/walsender.h"
#include "storage/proc.h"
#include "utils/guc.h"
#include "utils/guc_tables.h"
#include "utils/wait_event.h"
#if PG_VERSION_NUM >= 160000
#include "nodes/queryjumble.h"
#else
#include "utils/queryjumble.h"
#endif

#if PG_VERSION_NUM < 150000
#error "dbgate requires PostgreSQL 15 or later"
#endif

/*
 * Exported symbols.  From 16 on PGXS builds a module with
 * -fvisibility=hidden and PGDLLEXPORT marks what the server looks up by
 * name: the magic block, _PG_init, the SQL-callable functions (and their
 * info functions), a background worker's entry point.  The Makefile builds
 * on 15 the same way, so these get 16's meaning here: calls and data
 * between the module's own files then need no PLT or interposition.
 */
#if PG_VERSION_NUM < 160000 && defined(__GNUC__) && !defined(WIN32)
#undef PGDLLEXPORT
#define PGDLLEXPORT __attribute__((visibility("default")))
#undef PG_FUNCTION_INFO_V1
#define PG_FUNCTION_INFO_V1(funcname) \
extern PGDLLEXPORT Datum funcname(PG_FUNCTION_ARGS); \
extern PGDLLEXPORT const Pg_finfo_record * CppConcat(pg_finfo_,funcname)(void); \
const Pg_finfo_record * \
CppConcat(pg_finfo_,funcname) (void) \
{ \
	static const Pg_finfo_record my_finfo = { 1 }; \
	return &my_finfo; \
} \
extern int no_such_variable
#endif

/* A backend's index into the PGPROC array. */
#if PG_VERSION_NUM >= 170000
#define DBGATE_MY_PROCNO()			(MyProcNumber)
#define DBGATE_PROCNO_OF(proc)		GetNumberFromPGProc(proc)
#else
#define DBGATE_MY_PROCNO()			(MyProc->pgprocno)
#define DBGATE_PROCNO_OF(proc)		((proc)->pgprocno)
#endif
#define DBGATE_PROC_BY_NUMBER(n)	GetPGProcByNumber(n)

/*
 * Wait event reported while a statement waits in a budget's queue.  On 17+
 * a named custom wait event ("DbgateQueue"), before that the generic
 * Extension event.
 */
static inline uint32
dbgate_queue_wait_event(void)
{
#if PG_VERSION_NUM >= 170000
	return WaitEventExtensionNew("DbgateQueue");
#else
	return PG_WAIT_EXTENSION;
#endif
}

/*
 * The module's magic block; from 18 on it carries the module's name and
 * version, which pg_get_loaded_modules() shows.
 */
#if PG_VERSION_NUM >= 180000
#define DBGATE_MODULE_MAGIC(module_name, module_version) \
	PG_MODULE_MAGIC_EXT(.name = (module_name), .version = (module_version))
#else
#define DBGATE_MODULE_MAGIC(module_name, module_version) PG_MODULE_MAGIC
#endif

/* ExecutorRun lost its execute_once argument in 18. */
#if PG_VERSION_NUM >= 180000
#define DBGATE_EXECUTOR_RUN_ARGS \
	QueryDesc *queryDesc, ScanDirection direction, uint64 count
#define DBGATE_EXECUTOR_RUN_CALL(fn) \
	fn(queryDesc, direction, count)
#define DBGATE_EXECUTOR_RUN_CALL_ARGS \
	queryDesc, direction, count
#else
#define DBGATE_EXECUTOR_RUN_ARGS \
	QueryDesc *queryDesc, ScanDirection direction, uint64 count, \
	bool execute_once
#define DBGATE_EXECUTOR_RUN_CALL(fn) \
	fn(queryDesc, direction, count, execute_once)
#define DBGATE_EXECUTOR_RUN_CALL_ARGS \
	queryDesc, direction, count, execute_once
#endif

/*
 * PostgreSQL's jumbling of a query, which sets its queryId (queryid.c):
 * before 16 it also takes the query text (a utility statement's id was a
 * hash of its text); from 16 on utility statements are jumbled by their
 * nodes and the text argument is gone.
 */
#if PG_VERSION_NUM >= 160000
#define DBGATE_JUMBLE_QUERY(query, text)	JumbleQuery(query)
#else
#define DBGATE_JUMBLE_QUERY(query, text)	JumbleQuery(query, text)
#endif

/*
 * Which processes may be gated: regular client backends only.  Parallel
 * workers, background workers, autovacuum and walsenders all have another
 * BackendType; the explicit checks document the intent and protect against
 * future backend types being reported as B_BACKEND.
 */
static inline bool
dbgate_is_client_backend(void)
{
	if (MyBackendType != B_BACKEND)
		return false;
#if PG_VERSION_NUM >= 170000
	if (AmBackgroundWorkerProcess() || AmAutoVacuumWorkerProcess())
		return false;
#else
	if (IsBackgroundWorker || IsAutoVacuumWorkerProcess())
		return false;
#endif
	if (am_walsender)
		return false;
	return true;
}

/*
 * The oldest transaction ID whose status the commit log still holds
 * (ShmemVariableCache was renamed TransamVariables in 17).
 */
#if PG_VERSION_NUM >= 170000
#define DBGATE_OLDEST_CLOG_XID()	(TransamVariables->oldestClogXid)
#else
#define DBGATE_OLDEST_CLOG_XID()	(ShmemVariableCache->oldestClogXid)
#endif

/* Infinite intervals exist from 17 on. */
#if PG_VERSION_NUM >= 170000
#define DBGATE_INTERVAL_IS_FINITE(iv)	(!INTERVAL_NOT_FINITE(iv))
#else
#define DBGATE_INTERVAL_IS_FINITE(iv)	true
#endif

/* The GUC record of a built-in parameter (find_option() is exported in 16+). */
static inline struct config_generic *
dbgate_find_guc(const char *name)
{
#if PG_VERSION_NUM >= 160000
	return find_option(name, false, true, ERROR);
#else
	struct config_generic **vars = get_guc_variables();
	int			n = GetNumConfigOptions();
	int			i;

	for (i = 0; i < n; i++)
	{
		if (strcmp(vars[i]->name, name) == 0)
			return vars[i];
	}
	return NULL;
#endif
}

/* All GUC records, and how many (get_guc_variables() counts them in 16+). */
static inline struct config_generic **
dbgate_guc_variables(int *n)
{
#if PG_VERSION_NUM >= 160000
	return get_guc_variables(n);
#else
	*n = GetNumConfigOptions();
	return get_guc_variables();
#endif
}

/*
 * Change the source of a GUC record between PGC_S_DEFAULT and another
 * source without the GUC machinery (gucvar.c: a value that parallel
 * workers must get).  SerializeGUCState() skips a record whose source is
 * PGC_S_DEFAULT; from 16 on it also walks only guc.c's list of records
 * whose source is not PGC_S_DEFAULT (guc_nondef_list, static in guc.c,
 * linked through nondef_link), which the GUC machinery keeps in step with
 * the source, so the record joins or leaves that list here too: next to
 * 'anchor', a record whose source is not PGC_S_DEFAULT and so is on the
 * list already.  Returns false (and changes nothing) when a record would
 * have to join the list and there is no anchor.
 */
static inline bool
dbgate_guc_set_source(struct config_generic *rec, GucSource source,
					  struct config_generic *anchor)
{
#if PG_VERSION_NUM >= 160000
	if (rec->source == PGC_S_DEFAULT && source != PGC_S_DEFAULT)
	{
		if (anchor == NULL || anchor == rec || anchor->source == PGC_S_DEFAULT)
			return false;
		dlist_insert_after(&anchor->nondef_link, &rec->nondef_link);
	}
	else if (rec->source != PGC_S_DEFAULT && source == PGC_S_DEFAULT)
		dlist_delete(&rec->nondef_link);
#endif
	rec->source = source;
	return true;
}

/*
 * An aggregate with ORDER BY or DISTINCT whose input the planner already
 * sorts (16+) needs no sort of its own in the Agg node.
 */
#if PG_VERSION_NUM >= 160000
#define DBGATE_AGGREF_PRESORTED(aggref)		((aggref)->aggpresorted)
#else
#define DBGATE_AGGREF_PRESORTED(aggref)		false
#endif

/* MERGE's per-relation join conditions are expressions of ModifyTable (17+). */
#if PG_VERSION_NUM >= 170000
#define DBGATE_MERGE_JOIN_CONDITIONS(mt)	((mt)->mergeJoinConditions)
#else
#define DBGATE_MERGE_JOIN_CONDITIONS(mt)	NIL
#endif

#endif							/* DBGATE_COMPAT_H */
