/*-------------------------------------------------------------------------
 *
 * sqlfuncs.c
 *	  SQL-callable functions and the functions behind the views.
 *
 * Input is validated completely before anything is recorded: bad input
 * gets an ERROR with its documented SQLSTATE and changes nothing.
 *
 * Functions whose signature or result columns changed in a version of the
 * SQL objects have a C symbol per version (suffixes _1_1, _1_2), so that
 * this library still serves a database whose objects are those of an
 * older version.  Which arguments and columns each version has comes from
 * the table of budget fields (fields.c).  Configuration changes are
 * recorded as pending operations of the transaction (config.c) and take
 * effect at COMMIT.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "common/shortest_dec.h"
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
#include "utils/syscache.h"
#include "utils/timestamp.h"

#include "budgets.h"
#include "compat.h"			/* PG_FUNCTION_INFO_V1 exports on 15 too */
#include "config.h"
#include "confimage.h"
#include "fields.h"
#include "install.h"
#include "keylimits.h"
#include "queue.h"
#include "shmem.h"

PG_FUNCTION_INFO_V1(dbgate_create_budget);
PG_FUNCTION_INFO_V1(dbgate_create_budget_1_1);
PG_FUNCTION_INFO_V1(dbgate_create_budget_1_2);
PG_FUNCTION_INFO_V1(dbgate_create_budget_1_3);
PG_FUNCTION_INFO_V1(dbgate_alter_budget);
PG_FUNCTION_INFO_V1(dbgate_alter_budget_1_1);
PG_FUNCTION_INFO_V1(dbgate_alter_budget_1_2);
PG_FUNCTION_INFO_V1(dbgate_alter_budget_1_3);
PG_FUNCTION_INFO_V1(dbgate_drop_budget);
PG_FUNCTION_INFO_V1(dbgate_assign_role);
PG_FUNCTION_INFO_V1(dbgate_unassign_role);
PG_FUNCTION_INFO_V1(dbgate_assign_database);
PG_FUNCTION_INFO_V1(dbgate_unassign_database);
PG_FUNCTION_INFO_V1(dbgate_reset_stats);
PG_FUNCTION_INFO_V1(dbgate_budget_config);
PG_FUNCTION_INFO_V1(dbgate_budget_config_1_1);
PG_FUNCTION_INFO_V1(dbgate_budget_config_1_2);
PG_FUNCTION_INFO_V1(dbgate_budget_config_1_3);
PG_FUNCTION_INFO_V1(dbgate_config_script);
PG_FUNCTION_INFO_V1(dbgate_set_key_limit);
PG_FUNCTION_INFO_V1(dbgate_reset_key_limit);
PG_FUNCTION_INFO_V1(dbgate_key_limit_entries);

/*
 * Mutating functions: like any write, refused during recovery (a standby
 * follows its primary's configuration through WAL) and in a read-only
 * transaction.
 */
static void
check_writable(const char *funcname)
{
	dbgate_check_loaded();
	PreventCommandDuringRecovery(funcname);
	PreventCommandIfReadOnly(funcname);
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
	require_arg(fcinfo, argno, "budget name");
	dbgate_budget_name_from_text(PG_GETARG_TEXT_PP(argno), dest,
								 "budget name", false);
}

static bool
bool_arg(FunctionCallInfo fcinfo, int argno, const char *argname)
{
	require_arg(fcinfo, argno, argname);
	return PG_GETARG_BOOL(argno);
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
 * The SQL definition of a function of the SQL objects of 'api' has the
 * name and that version's fields as arguments (fields.c).
 */
static int
check_nargs(FunctionCallInfo fcinfo, DbgateApi api)
{
	int			nfields = dbgate_fields_of_api(api);

	if (PG_NARGS() != 1 + nfields)
		elog(ERROR, "function of %d arguments bound to a C function of %d arguments",
			 PG_NARGS(), 1 + nfields);
	return nfields;
}

/*
 * create_budget: argument i + 1 is field i of the table; the fields that
 * are no arguments in the caller's SQL API version take their defaults.
 * NULL is refused except where a field's default is NULL (parent).
 */
static void
create_budget(FunctionCallInfo fcinfo, DbgateApi api)
{
	DbgateBudgetConf conf;
	int			nfields;
	int			i;

	check_writable("create_budget()");
	nfields = check_nargs(fcinfo, api);
	memset(&conf, 0, sizeof(conf));
	budget_name_arg(fcinfo, 0, conf.name);
	dbgate_conf_set_defaults(&conf);
	for (i = 0; i < nfields; i++)
	{
		if (PG_ARGISNULL(i + 1))
		{
			if (!dbgate_fields[i].nullable)
				require_arg(fcinfo, i + 1, dbgate_fields[i].name);
			continue;			/* the default */
		}
		dbgate_field_from_arg(i, PG_GETARG_DATUM(i + 1), &conf);
	}

	dbgate_config_add_create(&conf);
}

Datum
dbgate_create_budget(PG_FUNCTION_ARGS)
{
	create_budget(fcinfo, DBGATE_API_1_0);
	PG_RETURN_VOID();
}

Datum
dbgate_create_budget_1_1(PG_FUNCTION_ARGS)
{
	create_budget(fcinfo, DBGATE_API_1_1);
	PG_RETURN_VOID();
}

Datum
dbgate_create_budget_1_2(PG_FUNCTION_ARGS)
{
	create_budget(fcinfo, DBGATE_API_1_2);
	PG_RETURN_VOID();
}

Datum
dbgate_create_budget_1_3(PG_FUNCTION_ARGS)
{
	create_budget(fcinfo, DBGATE_API_1_3);
	PG_RETURN_VOID();
}

/*
 * alter_budget: the arguments as for create_budget; NULL keeps a field.
 * The mask has the bit of every field given.
 */
static void
alter_budget(FunctionCallInfo fcinfo, DbgateApi api)
{
	char		name[NAMEDATALEN];
	DbgateBudgetConf values;
	uint32		mask = 0;
	int			nfields;
	int			i;

	check_writable("alter_budget()");
	nfields = check_nargs(fcinfo, api);
	memset(&values, 0, sizeof(values));
	budget_name_arg(fcinfo, 0, name);
	for (i = 0; i < nfields; i++)
	{
		if (PG_ARGISNULL(i + 1))
			continue;
		dbgate_field_from_arg(i, PG_GETARG_DATUM(i + 1), &values);
		mask |= DBGATE_FIELD_BIT(i);
	}

	/* even with nothing to change, an unknown budget is an error */
	dbgate_config_add_alter(name, &values, mask);
}

Datum
dbgate_alter_budget(PG_FUNCTION_ARGS)
{
	alter_budget(fcinfo, DBGATE_API_1_0);
	PG_RETURN_VOID();
}

Datum
dbgate_alter_budget_1_1(PG_FUNCTION_ARGS)
{
	alter_budget(fcinfo, DBGATE_API_1_1);
	PG_RETURN_VOID();
}

Datum
dbgate_alter_budget_1_2(PG_FUNCTION_ARGS)
{
	alter_budget(fcinfo, DBGATE_API_1_2);
	PG_RETURN_VOID();
}

Datum
dbgate_alter_budget_1_3(PG_FUNCTION_ARGS)
{
	alter_budget(fcinfo, DBGATE_API_1_3);
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

/*
 * dbgate.budgets: the budget's name, its fields (each in its column, see
 * fields.c) and its assignments.  The columns of each SQL API version are
 * those of the previous one and more at the end.
 */
#define ROLES_COLUMN		7
#define DATABASES_COLUMN	13	/* 1.1 */
#define MAX_COLUMNS			(DBGATE_NFIELDS + 3)

static int
budget_config_columns(DbgateApi api)
{
	return 1 + dbgate_fields_of_api(api) + 1 + (api >= DBGATE_API_1_1 ? 1 : 0);
}

static void
budget_config(FunctionCallInfo fcinfo, DbgateApi api)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	int			ncols = budget_config_columns(api);
	int			nfields = dbgate_fields_of_api(api);
	DbgateConfig config;
	int			i;
	int			f;

	dbgate_check_loaded();
	InitMaterializedSRF(fcinfo, 0);
	if (rsinfo->setDesc->natts != ncols)
		elog(ERROR, "function returning %d columns bound to a C function of %d columns",
			 rsinfo->setDesc->natts, ncols);

	dbgate_config_current(&config);

	for (i = 0; i < config.nbudgets; i++)
	{
		DbgateBudgetConf *c = &config.budgets[i];
		Datum		values[MAX_COLUMNS];
		bool		nulls[MAX_COLUMNS];

		memset(nulls, 0, sizeof(nulls));
		values[0] = CStringGetTextDatum(c->name);
		for (f = 0; f < nfields; f++)
		{
			int			col = dbgate_fields[f].column;

			Assert(col > 0 && col < ncols);
			values[col] = dbgate_field_datum(f, c, &nulls[col]);
		}
		values[ROLES_COLUMN] = assigned_names(&config, c->name, false);
		if (api >= DBGATE_API_1_1)
			values[DATABASES_COLUMN] = assigned_names(&config, c->name, true);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
}

Datum
dbgate_budget_config(PG_FUNCTION_ARGS)
{
	budget_config(fcinfo, DBGATE_API_1_0);
	return (Datum) 0;
}

Datum
dbgate_budget_config_1_1(PG_FUNCTION_ARGS)
{
	budget_config(fcinfo, DBGATE_API_1_1);
	return (Datum) 0;
}

Datum
dbgate_budget_config_1_2(PG_FUNCTION_ARGS)
{
	budget_config(fcinfo, DBGATE_API_1_2);
	return (Datum) 0;
}

Datum
dbgate_budget_config_1_3(PG_FUNCTION_ARGS)
{
	budget_config(fcinfo, DBGATE_API_1_3);
	return (Datum) 0;
}

/* ----------
 * config_script()
 * ----------
 */
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

/* (1.3) The set_key_limit() calls, naming only the values set. */
static void
script_key_limits(StringInfo buf, DbgateConfig *config)
{
	int			i;

	qsort(config->keylimits, config->nkeylimits, sizeof(DbgateKeyLimitConf),
		  dbgate_image_keylimit_cmp);
	for (i = 0; i < config->nkeylimits; i++)
	{
		const DbgateKeyLimitConf *k = &config->keylimits[i];

		appendStringInfo(buf, "SELECT dbgate.set_key_limit(%s, %s",
						 quote_literal_cstr(k->budget),
						 quote_literal_cstr(k->key));
		if (k->max_active >= 0)
			appendStringInfo(buf, ", max_active => %d", k->max_active);
		if (k->max_queued >= 0)
			appendStringInfo(buf, ", max_queued => %d", k->max_queued);
		if (k->max_rate >= 0)
		{
			char		num[DOUBLE_SHORTEST_DECIMAL_LEN];

			double_to_shortest_decimal_buf(k->max_rate, num);
			appendStringInfo(buf, ", max_rate => %s", num);
		}
		if (k->rate_burst >= 0)
			appendStringInfo(buf, ", rate_burst => %d", k->rate_burst);
		appendStringInfoString(buf, ");\n");
	}
}

/*
 * SQL statements that recreate every budget and assignment of what the
 * transaction sees, in one transaction: every budget, parents first, then
 * (1.3) the fields that may name another budget (runaway_action,
 * runaway_budget, quarantine: fields.c's script_later) with alter_budget,
 * then (1.3) the key limits, then the assignments.  Each create_budget call names only the fields that are
 * not at their defaults (fields.c), so that the script also runs on the
 * SQL objects of an older version while no newer field is in use.  Roles
 * are named as regrole input (a quoted identifier), databases by their
 * plain name; assignments of roles or databases that no longer exist are
 * left out.
 */
Datum
dbgate_config_script(PG_FUNCTION_ARGS)
{
	DbgateConfig config;
	int		   *order;
	StringInfoData buf;
	int			i;

	dbgate_check_loaded();
	dbgate_config_current(&config);
	qsort(config.budgets, config.nbudgets, sizeof(DbgateBudgetConf),
		  dbgate_image_budget_cmp);

	/* parents first: each budget followed by its subtree, each level by name */
	order = dbgate_image_tree_order(&config);

	initStringInfo(&buf);
	appendStringInfoString(&buf, "BEGIN;\n");
	for (i = 0; i < config.nbudgets; i++)
	{
		const DbgateBudgetConf *c = &config.budgets[order[i]];
		int			f;

		appendStringInfo(&buf, "SELECT dbgate.create_budget(%s",
						 quote_literal_cstr(c->name));
		for (f = 0; f < DBGATE_NFIELDS; f++)
		{
			if (!dbgate_fields[f].script_later && dbgate_field_in_script(f, c))
				dbgate_field_append_sql(&buf, f, c);
		}
		appendStringInfoString(&buf, ");\n");
	}
	/* the fields that may name another budget, once every budget exists */
	for (i = 0; i < config.nbudgets; i++)
	{
		const DbgateBudgetConf *c = &config.budgets[order[i]];
		bool		any = false;
		int			f;

		for (f = 0; f < DBGATE_NFIELDS; f++)
		{
			if (!dbgate_fields[f].script_later || !dbgate_field_in_script(f, c))
				continue;
			if (!any)
				appendStringInfo(&buf, "SELECT dbgate.alter_budget(%s",
								 quote_literal_cstr(c->name));
			any = true;
			dbgate_field_append_sql(&buf, f, c);
		}
		if (any)
			appendStringInfoString(&buf, ");\n");
	}
	script_key_limits(&buf, &config);
	script_assignments(&buf, &config, false);
	script_assignments(&buf, &config, true);
	appendStringInfoString(&buf, "COMMIT;\n");
	PG_RETURN_TEXT_P(cstring_to_text(buf.data));
}

/* ----------
 * Key limits (1.3)
 * ----------
 */

/* A key: at most DBGATE_KEY_MAXLEN bytes (keys are compared byte for byte). */
static void
key_arg(FunctionCallInfo fcinfo, int argno, char *dest)
{
	text	   *t;
	int			len;

	require_arg(fcinfo, argno, "key");
	t = PG_GETARG_TEXT_PP(argno);
	len = VARSIZE_ANY_EXHDR(t);
	if (len > DBGATE_KEY_MAXLEN)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("key is too long"),
				 errdetail("The key has %d bytes; keys are at most %d bytes.",
						   len, DBGATE_KEY_MAXLEN)));
	memcpy(dest, VARDATA_ANY(t), len);
	dest[len] = '\0';
}

/* An integer limit of a key: NULL is -1 (the budget's key_* value). */
static int32
key_int_arg(FunctionCallInfo fcinfo, int argno, int32 min, int32 max,
			const char *msg)
{
	int32		v;

	if (PG_ARGISNULL(argno))
		return -1;
	v = PG_GETARG_INT32(argno);
	if (v < min || v > max)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s", msg),
				 errdetail("The value given is %d.", v)));
	return v;
}

/*
 * set_key_limit(budget, key, max_active, max_queued, max_rate,
 * rate_burst): the limits of one key, each NULL for the budget's key_*
 * value, in the ranges of the budget's key_* fields.
 */
Datum
dbgate_set_key_limit(PG_FUNCTION_ARGS)
{
	DbgateKeyLimitConf k;

	check_writable("set_key_limit()");
	memset(&k, 0, sizeof(k));
	budget_name_arg(fcinfo, 0, k.budget);
	key_arg(fcinfo, 1, k.key);
	k.max_active = key_int_arg(fcinfo, 2, 0, PG_INT32_MAX,
							   "max_active must not be negative");
	k.max_queued = key_int_arg(fcinfo, 3, 0, PG_INT32_MAX,
							   "max_queued must not be negative");
	k.max_rate = -1;
	if (!PG_ARGISNULL(4))
	{
		double		v = PG_GETARG_FLOAT8(4);

		if (v != 0 && !(v >= DBGATE_MIN_RATE && v <= DBGATE_MAX_RATE))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("max_rate must be 0 or between 0.01 and 1000000")));
		k.max_rate = v;
	}
	k.rate_burst = key_int_arg(fcinfo, 5, 1, DBGATE_MAX_BURST,
							   "rate_burst must be between 1 and 1000000");
	dbgate_config_add_set_key_limit(&k);
	PG_RETURN_VOID();
}

/* reset_key_limit(budget, key): one key's limits; key NULL: all of them. */
Datum
dbgate_reset_key_limit(PG_FUNCTION_ARGS)
{
	char		budget[NAMEDATALEN];
	char		key[DBGATE_KEY_MAXLEN + 1];

	check_writable("reset_key_limit()");
	budget_name_arg(fcinfo, 0, budget);
	if (PG_ARGISNULL(1))
	{
		dbgate_config_add_reset_key_limit(budget, NULL);
		PG_RETURN_VOID();
	}
	key_arg(fcinfo, 1, key);
	dbgate_config_add_reset_key_limit(budget, key);
	PG_RETURN_VOID();
}

/* dbgate.key_limits: what set_key_limit set, in what the transaction sees. */
#define KEY_LIMIT_COLS	6

Datum
dbgate_key_limit_entries(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	DbgateConfig config;
	int			i;

	dbgate_check_loaded();
	InitMaterializedSRF(fcinfo, 0);
	if (rsinfo->setDesc->natts != KEY_LIMIT_COLS)
		elog(ERROR, "function returning %d columns bound to a C function of %d columns",
			 rsinfo->setDesc->natts, KEY_LIMIT_COLS);
	dbgate_config_current(&config);
	for (i = 0; i < config.nkeylimits; i++)
	{
		const DbgateKeyLimitConf *k = &config.keylimits[i];
		Datum		values[KEY_LIMIT_COLS];
		bool		nulls[KEY_LIMIT_COLS];

		memset(nulls, 0, sizeof(nulls));
		values[0] = CStringGetTextDatum(k->budget);
		values[1] = CStringGetTextDatum(k->key);
		values[2] = Int32GetDatum(k->max_active);
		nulls[2] = k->max_active < 0;
		values[3] = Int32GetDatum(k->max_queued);
		nulls[3] = k->max_queued < 0;
		values[4] = Float8GetDatum(k->max_rate);
		nulls[4] = k->max_rate < 0;
		values[5] = Int32GetDatum(k->rate_burst);
		nulls[5] = k->rate_burst < 0;
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}
