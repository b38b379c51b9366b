/*-------------------------------------------------------------------------
 *
 * sqlfuncs.c
 *	  SQL-callable functions and the functions behind the views.
 *
 * Input is validated completely before anything is recorded: bad input
 * gets an ERROR with its documented SQLSTATE and changes nothing.
 *
 * Functions whose signature or result columns changed in version 1.1 of
 * the SQL objects have a C symbol per version (suffix _1_1), so that this
 * library still serves a database whose objects are those of 1.0.
 * Configuration changes are recorded as pending operations of the
 * transaction (config.c) and take effect at COMMIT.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "access/htup_details.h"
#include "catalog/pg_authid.h"
#include "catalog/pg_database.h"
#include "catalog/pg_type.h"
#include "commands/dbcommands.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "tcop/utility.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "lib/stringinfo.h"
#include "utils/datetime.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"

#include "compat.h"
#include "dbgate.h"

PG_FUNCTION_INFO_V1(dbgate_create_budget);
PG_FUNCTION_INFO_V1(dbgate_create_budget_1_1);
PG_FUNCTION_INFO_V1(dbgate_alter_budget);
PG_FUNCTION_INFO_V1(dbgate_alter_budget_1_1);
PG_FUNCTION_INFO_V1(dbgate_drop_budget);
PG_FUNCTION_INFO_V1(dbgate_assign_role);
PG_FUNCTION_INFO_V1(dbgate_unassign_role);
PG_FUNCTION_INFO_V1(dbgate_assign_database);
PG_FUNCTION_INFO_V1(dbgate_unassign_database);
PG_FUNCTION_INFO_V1(dbgate_reset_stats);
PG_FUNCTION_INFO_V1(dbgate_budget_config);
PG_FUNCTION_INFO_V1(dbgate_budget_config_1_1);
PG_FUNCTION_INFO_V1(dbgate_config_script);

/* columns of budget_config(): 1.0, and 1.1 with six more */
#define BUDGET_CONFIG_COLS_1_0	8
#define BUDGET_CONFIG_COLS		14

/*
 * Mutating functions: like any write, refused during recovery (a standby
 * follows its primary's configuration through WAL).
 */
static void
check_writable(const char *funcname)
{
	dbgate_check_loaded();
	PreventCommandDuringRecovery(funcname);
}

/* ----------
 * Argument checking
 * ----------
 */
static void
require_arg(FunctionCallInfo fcinfo, int argno, const char *argname)
{
	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must not be null", argname)));
}

/* A budget name: 1..63 bytes, taken as it is (case-sensitive). */
static void
budget_name_arg(FunctionCallInfo fcinfo, int argno, char *dest)
{
	text	   *t;
	int			len;

	require_arg(fcinfo, argno, "budget name");
	t = PG_GETARG_TEXT_PP(argno);
	len = VARSIZE_ANY_EXHDR(t);
	if (len == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("budget name must not be empty")));
	if (len >= NAMEDATALEN)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("budget name is too long"),
				 errdetail("The name has %d bytes; budget names are at most %d bytes.",
						   len, NAMEDATALEN - 1)));
	if (memchr(VARDATA_ANY(t), '\0', len) != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("budget name must not contain a zero byte")));
	memcpy(dest, VARDATA_ANY(t), len);
	dest[len] = '\0';
}

static int32
max_active_arg(FunctionCallInfo fcinfo, int argno)
{
	int32		v;

	require_arg(fcinfo, argno, "max_active");
	v = PG_GETARG_INT32(argno);
	if (v < 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("max_active must be at least 1"),
				 errdetail("The value given is %d.", v)));
	return v;
}

static int32
max_queued_arg(FunctionCallInfo fcinfo, int argno)
{
	int32		v;

	require_arg(fcinfo, argno, "max_queued");
	v = PG_GETARG_INT32(argno);
	if (v < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("max_queued must not be negative"),
				 errdetail("The value given is %d.", v)));
	return v;
}

/*
 * A duration in milliseconds.  Months count 30 days and days 24 hours, as
 * in interval comparison.  A non-zero duration under one millisecond
 * becomes one millisecond (rounding it to zero would mean "no limit").
 */
static int32
duration_arg(FunctionCallInfo fcinfo, int argno, const char *argname)
{
	Interval   *iv;
	double		ms;

	require_arg(fcinfo, argno, argname);
	iv = PG_GETARG_INTERVAL_P(argno);
	if (!DBGATE_INTERVAL_IS_FINITE(iv))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must be finite", argname)));
	ms = (double) iv->time / 1000.0 +
		((double) iv->day + (double) iv->month * DAYS_PER_MONTH) *
		((double) SECS_PER_DAY * 1000.0);
	if (ms < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must not be negative", argname)));
	if (ms > 0 && ms < 1)
		ms = 1;
	ms = rint(ms);
	if (ms > (double) DBGATE_MAX_TIMEOUT_MS)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s is too long", argname),
				 errdetail("The longest duration accepted is %d milliseconds.",
						   DBGATE_MAX_TIMEOUT_MS)));
	return (int32) ms;
}

static bool
bool_arg(FunctionCallInfo fcinfo, int argno, const char *argname)
{
	require_arg(fcinfo, argno, argname);
	return PG_GETARG_BOOL(argno);
}

static int32
scope_arg(FunctionCallInfo fcinfo, int argno)
{
	char	   *v;

	require_arg(fcinfo, argno, "scope");
	v = text_to_cstring(PG_GETARG_TEXT_PP(argno));
	if (strcmp(v, "statement") == 0)
		return DBGATE_SCOPE_STATEMENT;
	if (strcmp(v, "transaction") == 0)
		return DBGATE_SCOPE_TRANSACTION;
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("invalid value for scope: \"%s\"", v),
			 errhint("Valid values are \"statement\" and \"transaction\".")));
	return 0;					/* keep compiler quiet */
}

static int32
parallel_workers_arg(FunctionCallInfo fcinfo, int argno)
{
	int32		v;

	require_arg(fcinfo, argno, "parallel_workers");
	v = PG_GETARG_INT32(argno);
	if (v < -1 || v > DBGATE_MAX_PARALLEL_WORKERS)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("parallel_workers must be between -1 and %d",
						DBGATE_MAX_PARALLEL_WORKERS),
				 errdetail("The value given is %d.", v)));
	return v;
}

/*
 * A role argument: the role must exist; lock it against a concurrent DROP
 * ROLE until the end of the transaction (as GRANT does), so that no
 * assignment can outlive its role.
 */
static Oid
role_arg(FunctionCallInfo fcinfo, int argno)
{
	Oid			roleid;

	require_arg(fcinfo, argno, "role");
	roleid = PG_GETARG_OID(argno);
	LockSharedObject(AuthIdRelationId, roleid, 0, AccessShareLock);
	if (!SearchSysCacheExists1(AUTHOID, ObjectIdGetDatum(roleid)))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("role with OID %u does not exist", roleid)));
	return roleid;
}

/*
 * A database argument: as for roles, the database must exist and is locked
 * against a concurrent DROP DATABASE until the end of the transaction.
 */
static Oid
database_arg(FunctionCallInfo fcinfo, int argno)
{
	const char *name;
	Oid			dbid;

	require_arg(fcinfo, argno, "database");
	name = NameStr(*PG_GETARG_NAME(argno));
	dbid = get_database_oid(name, true);
	if (OidIsValid(dbid))
	{
		LockSharedObject(DatabaseRelationId, dbid, 0, AccessShareLock);
		/* dropped while we waited for the lock? */
		if (!SearchSysCacheExists1(DATABASEOID, ObjectIdGetDatum(dbid)))
			dbid = InvalidOid;
	}
	if (!OidIsValid(dbid))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("database \"%s\" does not exist", name)));
	return dbid;
}

/* ----------
 * Configuration functions
 * ----------
 */
/*
 * create_budget: arguments 0 to 6 in both versions, 7 to 11 (scope,
 * idle_in_transaction_timeout, parallel_workers, utility, enforce) in 1.1
 * only; 1.0 calls get their defaults.
 */
static void
create_budget(FunctionCallInfo fcinfo, bool v1_1)
{
	DbgateBudgetConf conf;

	check_writable("create_budget()");
	memset(&conf, 0, sizeof(conf));
	budget_name_arg(fcinfo, 0, conf.name);
	conf.max_active = max_active_arg(fcinfo, 1);
	conf.max_queued = max_queued_arg(fcinfo, 2);
	conf.queue_timeout_ms = duration_arg(fcinfo, 3, "queue_timeout");
	conf.statement_timeout_ms = duration_arg(fcinfo, 4, "statement_timeout");
	conf.lock_timeout_ms = duration_arg(fcinfo, 5, "lock_timeout");
	conf.fair = bool_arg(fcinfo, 6, "fair");
	if (v1_1)
	{
		conf.scope = scope_arg(fcinfo, 7);
		conf.idle_timeout_ms = duration_arg(fcinfo, 8,
											"idle_in_transaction_timeout");
		conf.parallel_workers = parallel_workers_arg(fcinfo, 9);
		conf.utility = bool_arg(fcinfo, 10, "utility");
		conf.enforce = bool_arg(fcinfo, 11, "enforce");
	}
	else
	{
		conf.scope = DBGATE_SCOPE_STATEMENT;
		conf.idle_timeout_ms = 0;
		conf.parallel_workers = -1;
		conf.utility = false;
		conf.enforce = true;
	}

	dbgate_config_add_create(&conf);
}

Datum
dbgate_create_budget(PG_FUNCTION_ARGS)
{
	create_budget(fcinfo, false);
	PG_RETURN_VOID();
}

Datum
dbgate_create_budget_1_1(PG_FUNCTION_ARGS)
{
	create_budget(fcinfo, true);
	PG_RETURN_VOID();
}

/* alter_budget: the arguments as for create_budget; NULL keeps a field */
static void
alter_budget(FunctionCallInfo fcinfo, bool v1_1)
{
	char		name[NAMEDATALEN];
	DbgateBudgetConf values;
	uint32		mask = 0;

	check_writable("alter_budget()");
	memset(&values, 0, sizeof(values));
	budget_name_arg(fcinfo, 0, name);
	if (!PG_ARGISNULL(1))
	{
		values.max_active = max_active_arg(fcinfo, 1);
		mask |= DBGATE_ALTER_MAX_ACTIVE;
	}
	if (!PG_ARGISNULL(2))
	{
		values.max_queued = max_queued_arg(fcinfo, 2);
		mask |= DBGATE_ALTER_MAX_QUEUED;
	}
	if (!PG_ARGISNULL(3))
	{
		values.queue_timeout_ms = duration_arg(fcinfo, 3, "queue_timeout");
		mask |= DBGATE_ALTER_QUEUE_TIMEOUT;
	}
	if (!PG_ARGISNULL(4))
	{
		values.statement_timeout_ms = duration_arg(fcinfo, 4, "statement_timeout");
		mask |= DBGATE_ALTER_STMT_TIMEOUT;
	}
	if (!PG_ARGISNULL(5))
	{
		values.lock_timeout_ms = duration_arg(fcinfo, 5, "lock_timeout");
		mask |= DBGATE_ALTER_LOCK_TIMEOUT;
	}
	if (!PG_ARGISNULL(6))
	{
		values.fair = PG_GETARG_BOOL(6);
		mask |= DBGATE_ALTER_FAIR;
	}
	if (v1_1)
	{
		if (!PG_ARGISNULL(7))
		{
			values.scope = scope_arg(fcinfo, 7);
			mask |= DBGATE_ALTER_SCOPE;
		}
		if (!PG_ARGISNULL(8))
		{
			values.idle_timeout_ms = duration_arg(fcinfo, 8,
												  "idle_in_transaction_timeout");
			mask |= DBGATE_ALTER_IDLE_TIMEOUT;
		}
		if (!PG_ARGISNULL(9))
		{
			values.parallel_workers = parallel_workers_arg(fcinfo, 9);
			mask |= DBGATE_ALTER_PARALLEL;
		}
		if (!PG_ARGISNULL(10))
		{
			values.utility = PG_GETARG_BOOL(10);
			mask |= DBGATE_ALTER_UTILITY;
		}
		if (!PG_ARGISNULL(11))
		{
			values.enforce = PG_GETARG_BOOL(11);
			mask |= DBGATE_ALTER_ENFORCE;
		}
	}

	/* even with nothing to change, an unknown budget is an error */
	dbgate_config_add_alter(name, &values, mask);
}

Datum
dbgate_alter_budget(PG_FUNCTION_ARGS)
{
	alter_budget(fcinfo, false);
	PG_RETURN_VOID();
}

Datum
dbgate_alter_budget_1_1(PG_FUNCTION_ARGS)
{
	alter_budget(fcinfo, true);
	PG_RETURN_VOID();
}

Datum
dbgate_drop_budget(PG_FUNCTION_ARGS)
{
	char		name[NAMEDATALEN];
	bool		force;

	check_writable("drop_budget()");
	budget_name_arg(fcinfo, 0, name);
	force = bool_arg(fcinfo, 1, "force");
	dbgate_config_add_drop(name, force);
	PG_RETURN_VOID();
}

Datum
dbgate_assign_role(PG_FUNCTION_ARGS)
{
	Oid			roleid;
	char		budget[NAMEDATALEN];

	check_writable("assign_role()");
	roleid = role_arg(fcinfo, 0);
	budget_name_arg(fcinfo, 1, budget);
	dbgate_config_add_assign(roleid, budget);
	if (superuser_arg(roleid))
		ereport(NOTICE,
				(errmsg("role \"%s\" is a superuser and is never gated",
						GetUserNameFromId(roleid, false)),
				 errdetail("The assignment takes effect if the role loses the superuser attribute.")));
	PG_RETURN_VOID();
}

Datum
dbgate_unassign_role(PG_FUNCTION_ARGS)
{
	Oid			roleid;

	check_writable("unassign_role()");
	roleid = role_arg(fcinfo, 0);
	if (!dbgate_config_add_unassign(roleid))
		ereport(NOTICE,
				(errmsg("role \"%s\" has no budget assignment, skipping",
						GetUserNameFromId(roleid, false))));
	PG_RETURN_VOID();
}

Datum
dbgate_assign_database(PG_FUNCTION_ARGS)
{
	Oid			dbid;
	char		budget[NAMEDATALEN];

	check_writable("assign_database()");
	dbid = database_arg(fcinfo, 0);
	budget_name_arg(fcinfo, 1, budget);
	dbgate_config_add_assign_db(dbid, budget);
	PG_RETURN_VOID();
}

Datum
dbgate_unassign_database(PG_FUNCTION_ARGS)
{
	Oid			dbid;

	check_writable("unassign_database()");
	dbid = database_arg(fcinfo, 0);
	if (!dbgate_config_add_unassign_db(dbid))
		ereport(NOTICE,
				(errmsg("database \"%s\" has no budget assignment, skipping",
						NameStr(*PG_GETARG_NAME(0)))));
	PG_RETURN_VOID();
}

/*
 * Statistics are not configuration: reset_stats() takes effect at once and
 * is not undone by ROLLBACK, like pg_stat_reset().
 */
Datum
dbgate_reset_stats(PG_FUNCTION_ARGS)
{
	DbgateShared *sh;
	TimestampTz now;
	int			i;

	dbgate_check_loaded();
	sh = dbgate_shared;
	now = GetCurrentTimestamp();

	if (PG_ARGISNULL(0))
	{
		LWLockAcquire(sh->config_lock, LW_SHARED);
		for (i = 0; i < sh->max_budgets; i++)
		{
			int			root;

			if (!sh->budgets[i].d.in_use)
				continue;
			root = dbgate_admission_lock_tree(i);
			dbgate_reset_budget_stats(&sh->budgets[i].d, now);
			LWLockRelease(dbgate_budget_lock(root));
		}
		LWLockRelease(sh->config_lock);
	}
	else
	{
		char		name[NAMEDATALEN];
		DbgateConfig config;
		int			idx;

		budget_name_arg(fcinfo, 0, name);
		LWLockAcquire(sh->config_lock, LW_SHARED);
		idx = dbgate_find_budget(name);
		if (idx >= 0)
		{
			int			root = dbgate_admission_lock_tree(idx);

			dbgate_reset_budget_stats(&sh->budgets[idx].d, now);
			LWLockRelease(dbgate_budget_lock(root));
		}
		LWLockRelease(sh->config_lock);

		if (idx < 0)
		{
			/* created but not yet committed by this transaction: all zero */
			dbgate_config_current(&config);
			if (dbgate_image_find_budget(&config, name) < 0)
				ereport(ERROR,
						(errcode(ERRCODE_UNDEFINED_OBJECT),
						 errmsg("budget \"%s\" does not exist", name)));
		}
	}
	PG_RETURN_VOID();
}

/* ----------
 * View functions
 * ----------
 */
static Datum
ms_to_interval(int32 ms)
{
	Interval   *iv = palloc0(sizeof(Interval));

	iv->time = (int64) ms * 1000;
	return IntervalPGetDatum(iv);
}

static int
name_cmp(const void *a, const void *b)
{
	return strcmp(NameStr(*(const NameData *) a), NameStr(*(const NameData *) b));
}

/* The names of the roles or databases assigned to 'budget', sorted. */
static Datum
assigned_names(const DbgateConfig *config, const char *budget, bool dbs)
{
	int			n = dbs ? config->ndbs : config->nroles;
	NameData   *names = palloc(sizeof(NameData) * Max(n, 1));
	Datum	   *elems;
	int			nnames = 0;
	int			i;

	for (i = 0; i < n; i++)
	{
		char	   *name;

		if (dbs)
		{
			if (strcmp(config->dbs[i].budget, budget) != 0)
				continue;
			name = get_database_name(config->dbs[i].dbid);
		}
		else
		{
			if (strcmp(config->roles[i].budget, budget) != 0)
				continue;
			name = GetUserNameFromId(config->roles[i].roleid, true);
		}
		if (name == NULL)
			continue;			/* dropped concurrently */
		namestrcpy(&names[nnames++], name);
	}
	qsort(names, nnames, sizeof(NameData), name_cmp);
	elems = palloc(sizeof(Datum) * Max(nnames, 1));
	for (i = 0; i < nnames; i++)
		elems[i] = NameGetDatum(&names[i]);
	return PointerGetDatum(construct_array(elems, nnames, NAMEOID,
										   NAMEDATALEN, false, TYPALIGN_CHAR));
}

/* dbgate.budgets: 'ncols' is that of the calling SQL definition */
static void
budget_config(FunctionCallInfo fcinfo, int ncols)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	DbgateConfig config;
	int			i;

	dbgate_check_loaded();
	InitMaterializedSRF(fcinfo, 0);
	if (rsinfo->setDesc->natts != ncols)
		elog(ERROR, "function returning %d columns bound to a C function of %d columns",
			 rsinfo->setDesc->natts, ncols);

	dbgate_config_current(&config);

	for (i = 0; i < config.nbudgets; i++)
	{
		DbgateBudgetConf *c = &config.budgets[i];
		Datum		values[BUDGET_CONFIG_COLS];
		bool		nulls[BUDGET_CONFIG_COLS];

		memset(nulls, 0, sizeof(nulls));
		values[0] = CStringGetTextDatum(c->name);
		values[1] = Int32GetDatum(c->max_active);
		values[2] = Int32GetDatum(c->max_queued);
		values[3] = ms_to_interval(c->queue_timeout_ms);
		values[4] = ms_to_interval(c->statement_timeout_ms);
		values[5] = ms_to_interval(c->lock_timeout_ms);
		values[6] = BoolGetDatum(c->fair);
		values[7] = assigned_names(&config, c->name, false);
		if (ncols == BUDGET_CONFIG_COLS)
		{
			values[8] = CStringGetTextDatum(c->scope == DBGATE_SCOPE_TRANSACTION ?
											"transaction" : "statement");
			values[9] = ms_to_interval(c->idle_timeout_ms);
			values[10] = Int32GetDatum(c->parallel_workers);
			values[11] = BoolGetDatum(c->utility);
			values[12] = BoolGetDatum(c->enforce);
			values[13] = assigned_names(&config, c->name, true);
		}
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
}

Datum
dbgate_budget_config(PG_FUNCTION_ARGS)
{
	budget_config(fcinfo, BUDGET_CONFIG_COLS_1_0);
	return (Datum) 0;
}

Datum
dbgate_budget_config_1_1(PG_FUNCTION_ARGS)
{
	budget_config(fcinfo, BUDGET_CONFIG_COLS);
	return (Datum) 0;
}

/* ----------
 * config_script()
 * ----------
 */
static int
budget_conf_cmp(const void *a, const void *b)
{
	return strcmp(((const DbgateBudgetConf *) a)->name,
				  ((const DbgateBudgetConf *) b)->name);
}

typedef struct ScriptLine
{
	char	   *object;			/* the quoted argument */
	const char *budget;
} ScriptLine;

static int
script_line_cmp(const void *a, const void *b)
{
	return strcmp(((const ScriptLine *) a)->object,
				  ((const ScriptLine *) b)->object);
}

/* The assign_role() or assign_database() calls, sorted by object. */
static void
script_assignments(StringInfo buf, const DbgateConfig *config, bool dbs)
{
	int			n = dbs ? config->ndbs : config->nroles;
	ScriptLine *lines = palloc(sizeof(ScriptLine) * Max(n, 1));
	int			nlines = 0;
	int			i;

	for (i = 0; i < n; i++)
	{
		char	   *name;

		if (dbs)
			name = get_database_name(config->dbs[i].dbid);
		else
			name = GetUserNameFromId(config->roles[i].roleid, true);
		if (name == NULL)
			continue;			/* dropped concurrently */
		lines[nlines].object = dbs ? quote_literal_cstr(name) :
			quote_literal_cstr(quote_identifier(name));
		lines[nlines].budget = dbs ? config->dbs[i].budget : config->roles[i].budget;
		nlines++;
	}
	qsort(lines, nlines, sizeof(ScriptLine), script_line_cmp);
	for (i = 0; i < nlines; i++)
		appendStringInfo(buf, "SELECT dbgate.%s(%s, %s);\n",
						 dbs ? "assign_database" : "assign_role",
						 lines[i].object, quote_literal_cstr(lines[i].budget));
}

static void
append_duration(StringInfo buf, const char *argname, int32 ms)
{
	appendStringInfo(buf, ", %s => '%d ms'", argname, ms);
}

/*
 * SQL statements that recreate every budget and assignment of what the
 * transaction sees, in one transaction.  Roles are named as regrole input
 * (a quoted identifier), databases by their plain name; assignments of
 * roles or databases that no longer exist are left out.
 */
Datum
dbgate_config_script(PG_FUNCTION_ARGS)
{
	DbgateConfig config;
	StringInfoData buf;
	int			i;

	dbgate_check_loaded();
	dbgate_config_current(&config);
	qsort(config.budgets, config.nbudgets, sizeof(DbgateBudgetConf),
		  budget_conf_cmp);

	initStringInfo(&buf);
	appendStringInfoString(&buf, "BEGIN;\n");
	for (i = 0; i < config.nbudgets; i++)
	{
		const DbgateBudgetConf *c = &config.budgets[i];

		appendStringInfo(&buf, "SELECT dbgate.create_budget(%s, max_active => %d, max_queued => %d",
						 quote_literal_cstr(c->name), c->max_active, c->max_queued);
		append_duration(&buf, "queue_timeout", c->queue_timeout_ms);
		append_duration(&buf, "statement_timeout", c->statement_timeout_ms);
		append_duration(&buf, "lock_timeout", c->lock_timeout_ms);
		appendStringInfo(&buf, ", fair => %s, scope => '%s'",
						 c->fair ? "true" : "false",
						 c->scope == DBGATE_SCOPE_TRANSACTION ? "transaction" : "statement");
		append_duration(&buf, "idle_in_transaction_timeout", c->idle_timeout_ms);
		appendStringInfo(&buf, ", parallel_workers => %d, utility => %s, enforce => %s);\n",
						 c->parallel_workers, c->utility ? "true" : "false",
						 c->enforce ? "true" : "false");
	}
	script_assignments(&buf, &config, false);
	script_assignments(&buf, &config, true);
	appendStringInfoString(&buf, "COMMIT;\n");
	PG_RETURN_TEXT_P(cstring_to_text(buf.data));
}
