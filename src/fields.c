/*-------------------------------------------------------------------------
 *
 * fields.c
 *	  The table of budget fields.
 *
 * Every field of a budget after its name has one entry in dbgate_fields[]:
 * its SQL name, its kind, its default, its range and the message for a
 * value outside it, where it lives in DbgateBudgetConf, the version of the
 * SQL objects since which it is an argument of create_budget and
 * alter_budget, the format version of the state file and WAL records since
 * which it is stored, and its column in dbgate.budgets.  The table drives
 *	  - the arguments of create_budget and alter_budget of every SQL API
 *		version (sqlfuncs.c), the checks of their values, and the mask of
 *		alter_budget (one bit per field),
 *	  - the fields that an ALTER copies into the budget (config.c),
 *	  - the encoding of a budget in the state file and WAL records, and the
 *		checks of every decoded value (persist.c),
 *	  - the columns of dbgate.budgets and the arguments in config_script()
 *		(sqlfuncs.c): the arguments of required fields and those whose
 *		values are not their defaults, so that the script of a
 *		configuration that uses no newer field runs on the SQL objects of
 *		an older version.
 * The aim: a new field is one entry here plus its behaviour (what admission
 * does with it).
 *
 * Rules of the table:
 *	  - entries are in SQL argument order: field i is argument i + 1 of
 *		create_budget and alter_budget (argument 0 is the name);
 *	  - 'api' and 'format' never decrease along the table: a new field is
 *		appended, with the new SQL API version (and new C symbols for the
 *		functions, which take the first dbgate_fields_of_api() fields) and,
 *		if it must be stored, a new format version;
 *	  - a new column of dbgate.budgets comes after every existing one;
 *	  - the default of every field must be valid, so that an image written
 *		in an older format, or by an older SQL API, is complete.
 * What the values mean is said where they are used (admission.c and the
 * others named in src/README).
 *
 * Checks that concern more than one field: dbgate_conf_problem() (here)
 * for one budget, and config.c for the hierarchy of budgets.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "common/shortest_dec.h"
#include "utils/builtins.h"
#include "utils/datetime.h"
#include "utils/timestamp.h"

#include "budgetdefs.h"
#include "compat.h"
#include "fields.h"

static const char *const scope_names[] = {"statement", "transaction", NULL};
static const char *const order_names[] = {"fifo", "lifo", NULL};
static const char *const adapt_names[] = {"off", "shadow", "on", NULL};
static const char *const runaway_names[] = {"log", "demote", "cancel", NULL};

#define F(member)	((uint16) offsetof(DbgateBudgetConf, member))

/* the largest value of a duration, in milliseconds */
#define MAX_MS		((double) DBGATE_MAX_TIMEOUT_MS)

const DbgateField dbgate_fields[DBGATE_NFIELDS] = {
	/* 1.0, format 1 */
	{
		.name = "max_active", .kind = DBGATE_KIND_INT, .offset = F(max_active),
		.api = DBGATE_API_1_0, .format = 1, .column = 1, .required = true,
		.def = 1, .min = 1, .max = PG_INT32_MAX,
		.range_msg = "max_active must be at least 1"
	},
	{
		.name = "max_queued", .kind = DBGATE_KIND_INT, .offset = F(max_queued),
		.api = DBGATE_API_1_0, .format = 1, .column = 2,
		.def = 0, .min = 0, .max = PG_INT32_MAX,
		.range_msg = "max_queued must not be negative"
	},
	{
		.name = "queue_timeout", .kind = DBGATE_KIND_DURATION,
		.offset = F(queue_timeout_ms),
		.api = DBGATE_API_1_0, .format = 1, .column = 3,
		.def = 0, .min = 0, .max = MAX_MS
	},
	{
		.name = "statement_timeout", .kind = DBGATE_KIND_DURATION,
		.offset = F(statement_timeout_ms),
		.api = DBGATE_API_1_0, .format = 1, .column = 4,
		.def = 0, .min = 0, .max = MAX_MS
	},
	{
		.name = "lock_timeout", .kind = DBGATE_KIND_DURATION,
		.offset = F(lock_timeout_ms),
		.api = DBGATE_API_1_0, .format = 1, .column = 5,
		.def = 0, .min = 0, .max = MAX_MS
	},
	{
		.name = "fair", .kind = DBGATE_KIND_BOOL, .offset = F(fair),
		.api = DBGATE_API_1_0, .format = 1, .column = 6,
		.def = true
	},
	/* 1.1, format 2 */
	{
		.name = "scope", .kind = DBGATE_KIND_ENUM, .offset = F(scope),
		.api = DBGATE_API_1_1, .format = 2, .column = 8,
		.def = DBGATE_SCOPE_STATEMENT, .names = scope_names
	},
	{
		.name = "idle_in_transaction_timeout", .kind = DBGATE_KIND_DURATION,
		.offset = F(idle_timeout_ms),
		.api = DBGATE_API_1_1, .format = 2, .column = 9,
		.def = 0, .min = 0, .max = MAX_MS
	},
	{
		.name = "parallel_workers", .kind = DBGATE_KIND_INT,
		.offset = F(parallel_workers),
		.api = DBGATE_API_1_1, .format = 2, .column = 10,
		.def = -1, .min = -1, .max = DBGATE_MAX_PARALLEL_WORKERS,
		.range_msg = "parallel_workers must be between -1 and 1024"
	},
	{
		.name = "utility", .kind = DBGATE_KIND_BOOL, .offset = F(utility),
		.api = DBGATE_API_1_1, .format = 2, .column = 11,
		.def = false
	},
	{
		.name = "enforce", .kind = DBGATE_KIND_BOOL, .offset = F(enforce),
		.api = DBGATE_API_1_1, .format = 2, .column = 12,
		.def = true
	},
	/* 1.2, format 3 */
	{
		.name = "queue_order", .kind = DBGATE_KIND_ENUM, .offset = F(queue_order),
		.api = DBGATE_API_1_2, .format = 3, .column = 14,
		.def = DBGATE_ORDER_FIFO, .names = order_names
	},
	{
		.name = "overtake_limit", .kind = DBGATE_KIND_DURATION,
		.offset = F(overtake_limit_ms),
		.api = DBGATE_API_1_2, .format = 3, .column = 15,
		.def = 100, .min = 0, .max = MAX_MS
	},
	{
		.name = "parent", .kind = DBGATE_KIND_BUDGET, .offset = F(parent),
		.api = DBGATE_API_1_2, .format = 3, .column = 16,
		.nullable = true
	},
	{
		.name = "weight", .kind = DBGATE_KIND_INT, .offset = F(weight),
		.api = DBGATE_API_1_2, .format = 3, .column = 17,
		.def = 1, .min = 1, .max = DBGATE_MAX_WEIGHT,
		.range_msg = "weight must be between 1 and 10000"
	},
	{
		.name = "max_rate", .kind = DBGATE_KIND_FLOAT, .offset = F(max_rate),
		.api = DBGATE_API_1_2, .format = 3, .column = 18,
		.def = 0, .min = DBGATE_MIN_RATE, .max = DBGATE_MAX_RATE,
		.zero_ok = true,
		.range_msg = "max_rate must be 0 or between 0.01 and 1000000"
	},
	{
		.name = "rate_burst", .kind = DBGATE_KIND_INT, .offset = F(rate_burst),
		.api = DBGATE_API_1_2, .format = 3, .column = 19,
		.def = 1, .min = 1, .max = DBGATE_MAX_BURST,
		.range_msg = "rate_burst must be between 1 and 1000000"
	},
	{
		.name = "max_memory_mb", .kind = DBGATE_KIND_INT,
		.offset = F(max_memory_mb),
		.api = DBGATE_API_1_2, .format = 3, .column = 20,
		.def = 0, .min = 0, .max = PG_INT32_MAX,
		.range_msg = "max_memory_mb must not be negative"
	},
	{
		.name = "min_cost", .kind = DBGATE_KIND_FLOAT, .offset = F(min_cost),
		.api = DBGATE_API_1_2, .format = 3, .column = 21,
		.def = 0, .min = 0, .max = HUGE_VAL,
		.range_msg = "min_cost must be finite and not negative"
	},
	/* 1.3, format 4 */
	{
		.name = "reserved", .kind = DBGATE_KIND_INT, .offset = F(reserved),
		.api = DBGATE_API_1_3, .format = 4, .column = 22,
		.def = 0, .min = 0, .max = PG_INT32_MAX,
		.range_msg = "reserved must not be negative"
	},
	{
		.name = "key_by", .kind = DBGATE_KIND_KEY_BY, .offset = F(key_by),
		.api = DBGATE_API_1_3, .format = 4, .column = 23,
		.nullable = true
	},
	{
		.name = "key_max_active", .kind = DBGATE_KIND_INT,
		.offset = F(key_max_active),
		.api = DBGATE_API_1_3, .format = 4, .column = 24,
		.def = 0, .min = 0, .max = PG_INT32_MAX,
		.range_msg = "key_max_active must not be negative"
	},
	{
		.name = "key_max_queued", .kind = DBGATE_KIND_INT,
		.offset = F(key_max_queued),
		.api = DBGATE_API_1_3, .format = 4, .column = 25,
		.def = 0, .min = 0, .max = PG_INT32_MAX,
		.range_msg = "key_max_queued must not be negative"
	},
	{
		.name = "key_max_rate", .kind = DBGATE_KIND_FLOAT,
		.offset = F(key_max_rate),
		.api = DBGATE_API_1_3, .format = 4, .column = 26,
		.def = 0, .min = DBGATE_MIN_RATE, .max = DBGATE_MAX_RATE,
		.zero_ok = true,
		.range_msg = "key_max_rate must be 0 or between 0.01 and 1000000"
	},
	{
		.name = "key_rate_burst", .kind = DBGATE_KIND_INT,
		.offset = F(key_rate_burst),
		.api = DBGATE_API_1_3, .format = 4, .column = 27,
		.def = 1, .min = 1, .max = DBGATE_MAX_BURST,
		.range_msg = "key_rate_burst must be between 1 and 1000000"
	},
	{
		.name = "runaway_after", .kind = DBGATE_KIND_DURATION,
		.offset = F(runaway_after_ms),
		.api = DBGATE_API_1_3, .format = 4, .column = 28,
		.def = 0, .min = 0, .max = MAX_MS
	},
	{
		.name = "runaway_action", .kind = DBGATE_KIND_ENUM,
		.offset = F(runaway_action),
		.api = DBGATE_API_1_3, .format = 4, .column = 29,
		.def = DBGATE_RUNAWAY_LOG, .names = runaway_names,
		.script_later = true
	},
	{
		.name = "runaway_budget", .kind = DBGATE_KIND_BUDGET,
		.offset = F(runaway_budget),
		.api = DBGATE_API_1_3, .format = 4, .column = 30,
		.nullable = true, .script_later = true
	},
	{
		.name = "quarantine", .kind = DBGATE_KIND_DURATION,
		.offset = F(quarantine_ms),
		.api = DBGATE_API_1_3, .format = 4, .column = 31,
		.def = 0, .min = 0, .max = MAX_MS, .script_later = true
	},
	{
		.name = "adapt", .kind = DBGATE_KIND_ENUM, .offset = F(adapt),
		.api = DBGATE_API_1_3, .format = 4, .column = 32,
		.def = DBGATE_ADAPT_OFF, .names = adapt_names
	},
	{
		.name = "adapt_min", .kind = DBGATE_KIND_INT, .offset = F(adapt_min),
		.api = DBGATE_API_1_3, .format = 4, .column = 33,
		.def = 1, .min = 1, .max = PG_INT32_MAX,
		.range_msg = "adapt_min must be at least 1"
	},
};

StaticAssertDecl(DBGATE_NFIELDS <= 32, "the alter mask has one bit per field");

/* ----------
 * Access to a field's value
 * ----------
 */
static inline const DbgateField *
field(int i)
{
	Assert(i >= 0 && i < DBGATE_NFIELDS);
	return &dbgate_fields[i];
}

static inline int32 *
int_ptr(int i, const DbgateBudgetConf *c)
{
	return (int32 *) ((char *) c + field(i)->offset);
}

static inline bool *
bool_ptr(int i, const DbgateBudgetConf *c)
{
	return (bool *) ((char *) c + field(i)->offset);
}

static inline double *
float_ptr(int i, const DbgateBudgetConf *c)
{
	return (double *) ((char *) c + field(i)->offset);
}

static inline char *
name_ptr(int i, const DbgateBudgetConf *c)
{
	return (char *) c + field(i)->offset;
}

/* The number of fields that are arguments in the SQL objects of 'api'. */
int
dbgate_fields_of_api(DbgateApi api)
{
	int			n = 0;

	while (n < DBGATE_NFIELDS && dbgate_fields[n].api <= api)
		n++;
	return n;
}

/* The index of the field called 'name' (which must exist). */
int
dbgate_field_index(const char *name)
{
	int			i;

	for (i = 0; i < DBGATE_NFIELDS; i++)
	{
		if (strcmp(dbgate_fields[i].name, name) == 0)
			return i;
	}
	elog(ERROR, "no budget field \"%s\"", name);
	return -1;					/* keep compiler quiet */
}

static int
enum_count(const DbgateField *f)
{
	int			n = 0;

	while (f->names[n] != NULL)
		n++;
	return n;
}

void
dbgate_field_copy(int i, DbgateBudgetConf *dst, const DbgateBudgetConf *src)
{
	switch (field(i)->kind)
	{
		case DBGATE_KIND_INT:
		case DBGATE_KIND_DURATION:
		case DBGATE_KIND_ENUM:
			*int_ptr(i, dst) = *int_ptr(i, src);
			break;
		case DBGATE_KIND_BOOL:
			*bool_ptr(i, dst) = *bool_ptr(i, src);
			break;
		case DBGATE_KIND_BUDGET:
			strlcpy(name_ptr(i, dst), name_ptr(i, src), NAMEDATALEN);
			break;
		case DBGATE_KIND_KEY_BY:
			strlcpy(name_ptr(i, dst), name_ptr(i, src), DBGATE_KEY_BY_LEN);
			break;
		case DBGATE_KIND_FLOAT:
			*float_ptr(i, dst) = *float_ptr(i, src);
			break;
	}
}

static void
set_default(int i, DbgateBudgetConf *c)
{
	const DbgateField *f = field(i);

	switch (f->kind)
	{
		case DBGATE_KIND_INT:
		case DBGATE_KIND_DURATION:
		case DBGATE_KIND_ENUM:
			*int_ptr(i, c) = (int32) f->def;
			break;
		case DBGATE_KIND_BOOL:
			*bool_ptr(i, c) = (f->def != 0);
			break;
		case DBGATE_KIND_BUDGET:
			memset(name_ptr(i, c), 0, NAMEDATALEN);
			break;
		case DBGATE_KIND_KEY_BY:
			memset(name_ptr(i, c), 0, DBGATE_KEY_BY_LEN);
			break;
		case DBGATE_KIND_FLOAT:
			*float_ptr(i, c) = f->def;
			break;
	}
}

/* Every field of 'c' (not its name) to its default. */
void
dbgate_conf_set_defaults(DbgateBudgetConf *c)
{
	int			i;

	for (i = 0; i < DBGATE_NFIELDS; i++)
		set_default(i, c);
}

bool
dbgate_field_is_default(int i, const DbgateBudgetConf *c)
{
	const DbgateField *f = field(i);

	switch (f->kind)
	{
		case DBGATE_KIND_INT:
		case DBGATE_KIND_DURATION:
		case DBGATE_KIND_ENUM:
			return *int_ptr(i, c) == (int32) f->def;
		case DBGATE_KIND_BOOL:
			return *bool_ptr(i, c) == (f->def != 0);
		case DBGATE_KIND_BUDGET:
		case DBGATE_KIND_KEY_BY:
			return name_ptr(i, c)[0] == '\0';
		case DBGATE_KIND_FLOAT:
			return *float_ptr(i, c) == f->def;
	}
	return false;				/* keep compiler quiet */
}

/*
 * Does config_script() name field i of 'c'?  A create_budget argument is
 * given when the SQL function has no default for it or the value is not
 * its default: a call that names only those runs on the SQL objects of
 * every version that has them, and a field at its default is the same
 * whether it is given or not (an older version's SQL objects, whose
 * create_budget lacks the newer arguments, leave them at their defaults).
 */
bool
dbgate_field_in_script(int i, const DbgateBudgetConf *c)
{
	return field(i)->required || !dbgate_field_is_default(i, c);
}

/* ----------
 * Checks
 * ----------
 */
static bool
float_in_range(const DbgateField *f, double v)
{
	if (isnan(v) || isinf(v))
		return false;
	if (f->zero_ok && v == 0)
		return true;
	return v >= f->min && v <= f->max;
}

/*
 * key_by (1.3): "" (none), 'user', 'application_name', 'client_addr' or
 * 'setting:NAME', where NAME has the form of a setting's name: a built-in
 * one (an identifier) or a custom one ('prefix.name', parts separated by
 * dots), as PostgreSQL's guc.c accepts them: letters, '_' and bytes of
 * multi-byte characters, and after the first character of a part also
 * digits and '$'.  Whether the setting exists is not checked (a custom
 * setting need not be defined before a session sets it).  What is wrong,
 * or NULL.
 */
static const char *
key_by_problem(const char *v)
{
	const char *name;
	const char *p;
	bool		part_start = true;

	if (v[0] == '\0' || strcmp(v, "user") == 0 ||
		strcmp(v, "application_name") == 0 || strcmp(v, "client_addr") == 0)
		return NULL;
	if (strncmp(v, DBGATE_KEY_BY_PREFIX, strlen(DBGATE_KEY_BY_PREFIX)) != 0)
		return "form";
	name = v + strlen(DBGATE_KEY_BY_PREFIX);
	if (name[0] == '\0')
		return "The setting name is empty.";
	if (strlen(name) >= NAMEDATALEN)
		return "The setting name is too long.";
	for (p = name; *p != '\0'; p++)
	{
		unsigned char ch = (unsigned char) *p;

		if (ch == '.' && !part_start)
		{
			part_start = true;
			continue;
		}
		if ((ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') ||
			ch == '_' || IS_HIGHBIT_SET(ch) ||
			(!part_start && ((ch >= '0' && ch <= '9') || ch == '$')))
		{
			part_start = false;
			continue;
		}
		return "The setting name does not have the form of a setting's name.";
	}
	if (part_start)
		return "The setting name does not have the form of a setting's name.";
	return NULL;
}

static void
key_by_from_text(const DbgateField *f, text *t, char *dest)
{
	char	   *v = text_to_cstring(t);
	const char *problem;

	if (strlen(v) >= DBGATE_KEY_BY_LEN)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s is too long", f->name),
				 errdetail("The value has %d bytes; at most %d are accepted.",
						   (int) strlen(v), DBGATE_KEY_BY_LEN - 1)));
	problem = key_by_problem(v);
	if (problem != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid value for %s: \"%s\"", f->name, v),
				 strcmp(problem, "form") != 0 ? errdetail("%s", problem) : 0,
				 errhint("Valid values are \"user\", \"application_name\", \"client_addr\" and \"setting:NAME\" with the name of a setting, such as \"setting:app.tenant\".")));
	strlcpy(dest, v, DBGATE_KEY_BY_LEN);
}

/*
 * Whether a field's value is one the SQL functions accept.  A budget name
 * is not checked against the budgets that exist (the hierarchy is checked
 * on a whole image).
 */
bool
dbgate_field_valid(int i, const DbgateBudgetConf *c)
{
	const DbgateField *f = field(i);

	switch (f->kind)
	{
		case DBGATE_KIND_INT:
		case DBGATE_KIND_DURATION:
			return *int_ptr(i, c) >= f->min && *int_ptr(i, c) <= f->max;
		case DBGATE_KIND_BOOL:
			return true;
		case DBGATE_KIND_ENUM:
			return *int_ptr(i, c) >= 0 && *int_ptr(i, c) < enum_count(f);
		case DBGATE_KIND_BUDGET:
			return strnlen(name_ptr(i, c), NAMEDATALEN) < NAMEDATALEN;
		case DBGATE_KIND_FLOAT:
			return float_in_range(f, *float_ptr(i, c));
		case DBGATE_KIND_KEY_BY:
			return strnlen(name_ptr(i, c), DBGATE_KEY_BY_LEN) < DBGATE_KEY_BY_LEN &&
				key_by_problem(name_ptr(i, c)) == NULL;
	}
	return false;				/* keep compiler quiet */
}

/*
 * What is wrong with a budget as a whole, or NULL.  Only the rules that
 * concern more than one field of one budget; each field is checked by
 * dbgate_field_valid().
 */
const char *
dbgate_conf_problem(const DbgateBudgetConf *c)
{
	/* 'lifo' must bound the wait somehow: see "Queue order" in docs/design.md */
	if (c->queue_order == DBGATE_ORDER_LIFO && c->overtake_limit_ms == 0 &&
		c->queue_timeout_ms == 0)
		return "lifo";
	/* a reservation is of the parent's slots, and at most what it may use */
	if (c->reserved > 0 && c->parent[0] == '\0')
		return "reserved without parent";
	if (c->reserved > c->max_active)
		return "reserved over max_active";
	if (c->adapt_min > c->max_active)
		return "adapt_min over max_active";
	/* a key is one part of its budget's slots */
	if (c->key_max_active > c->max_active)
		return "key_max_active over max_active";
	/* where 'demote' moves a runaway; repeats are held back only of runaways */
	if (c->runaway_action == DBGATE_RUNAWAY_DEMOTE && c->runaway_budget[0] == '\0')
		return "demote without runaway_budget";
	if (strcmp(c->runaway_budget, c->name) == 0)
		return "runaway_budget itself";
	if (c->quarantine_ms > 0 && c->runaway_after_ms == 0)
		return "quarantine without runaway_after";
	return NULL;
}

/* dbgate_conf_problem() as an ERROR (SQLSTATE 22023). */
void
dbgate_conf_check(const DbgateBudgetConf *c)
{
	const char *problem = dbgate_conf_problem(c);

	if (problem == NULL)
		return;
	if (strcmp(problem, "reserved without parent") == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("only a budget with a parent can have reserved slots"),
				 errdetail("Budget \"%s\" would have reserved %d and no parent.",
						   c->name, c->reserved),
				 errhint("Give the budget a parent, or set reserved to 0.")));
	if (strcmp(problem, "reserved over max_active") == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("reserved must not be over max_active"),
				 errdetail("Budget \"%s\" would have reserved %d and max_active %d.",
						   c->name, c->reserved, c->max_active)));
	if (strcmp(problem, "adapt_min over max_active") == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("adapt_min must not be over max_active"),
				 errdetail("Budget \"%s\" would have adapt_min %d and max_active %d.",
						   c->name, c->adapt_min, c->max_active)));
	if (strcmp(problem, "key_max_active over max_active") == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("key_max_active must not be over max_active"),
				 errdetail("Budget \"%s\" would have key_max_active %d and max_active %d.",
						   c->name, c->key_max_active, c->max_active)));
	if (strcmp(problem, "demote without runaway_budget") == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("runaway_action 'demote' needs a runaway_budget"),
				 errdetail("Budget \"%s\" would demote its runaways to no budget.",
						   c->name),
				 errhint("Name the budget that runaways move to with runaway_budget.")));
	if (strcmp(problem, "runaway_budget itself") == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("budget \"%s\" cannot be its own runaway_budget", c->name)));
	if (strcmp(problem, "quarantine without runaway_after") == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("quarantine needs a non-zero runaway_after"),
				 errdetail("Budget \"%s\" would quarantine the queries of runaways, and no statement of it is a runaway.",
						   c->name),
				 errhint("Set runaway_after, or set quarantine to 0.")));
	Assert(strcmp(problem, "lifo") == 0);
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("a budget with queue_order 'lifo' needs a non-zero overtake_limit or queue_timeout"),
			 errdetail("Budget \"%s\" would have overtake_limit 0 and queue_timeout 0: a waiter could be passed over forever.",
					   c->name),
			 errhint("Set overtake_limit or queue_timeout to a non-zero duration.")));
}

/*
 * A budget name from a text argument: 1..63 bytes, taken as it is
 * (case-sensitive); the empty string only if 'allow_empty'.
 */
void
dbgate_budget_name_from_text(text *t, char *dest, const char *argname,
							 bool allow_empty)
{
	int			len = VARSIZE_ANY_EXHDR(t);

	if (len == 0 && !allow_empty)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must not be empty", argname)));
	if (len >= NAMEDATALEN)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s is too long", argname),
				 errdetail("The name has %d bytes; budget names are at most %d bytes.",
						   len, NAMEDATALEN - 1)));
	if (memchr(VARDATA_ANY(t), '\0', len) != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must not contain a zero byte", argname)));
	memcpy(dest, VARDATA_ANY(t), len);
	dest[len] = '\0';
}

/*
 * A duration in milliseconds.  Months count 30 days and days 24 hours, as
 * in interval comparison.  A non-zero duration under one millisecond
 * becomes one millisecond (rounding it to zero would mean "no limit").
 */
static int32
duration_from_interval(const DbgateField *f, Interval *iv)
{
	double		ms;

	if (!DBGATE_INTERVAL_IS_FINITE(iv))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must be finite", f->name)));
	ms = (double) iv->time / 1000.0 +
		((double) iv->day + (double) iv->month * DAYS_PER_MONTH) *
		((double) SECS_PER_DAY * 1000.0);
	if (ms < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must not be negative", f->name)));
	if (ms > 0 && ms < 1)
		ms = 1;
	ms = rint(ms);
	if (ms > f->max)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s is too long", f->name),
				 errdetail("The longest duration accepted is %d milliseconds.",
						   DBGATE_MAX_TIMEOUT_MS)));
	return (int32) ms;
}

static int32
enum_from_text(const DbgateField *f, text *t)
{
	char	   *v = text_to_cstring(t);
	StringInfoData valid;
	int			n = enum_count(f);
	int			k;

	for (k = 0; k < n; k++)
	{
		if (strcmp(v, f->names[k]) == 0)
			return k;
	}
	initStringInfo(&valid);
	for (k = 0; k < n; k++)
		appendStringInfo(&valid, "%s\"%s\"",
						 k == 0 ? "" : (k == n - 1 ? " and " : ", "),
						 f->names[k]);
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("invalid value for %s: \"%s\"", f->name, v),
			 errhint("Valid values are %s.", valid.data)));
	return 0;					/* keep compiler quiet */
}

/*
 * The shortest text that reads back as the same double, whatever
 * extra_float_digits says ("NaN", "Infinity" as float8 input spells them).
 */
static char *
float_text(double v)
{
	char	   *buf = palloc(DOUBLE_SHORTEST_DECIMAL_LEN);

	double_to_shortest_decimal_buf(v, buf);
	return buf;
}

/*
 * Set field i of 'c' from a non-null SQL argument of its kind, with the
 * checks of the field (an ERROR with SQLSTATE 22023).
 */
void
dbgate_field_from_arg(int i, Datum arg, DbgateBudgetConf *c)
{
	const DbgateField *f = field(i);

	switch (f->kind)
	{
		case DBGATE_KIND_INT:
			{
				int32		v = DatumGetInt32(arg);

				if (v < f->min || v > f->max)
					ereport(ERROR,
							(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
							 errmsg("%s", f->range_msg),
							 errdetail("The value given is %d.", v)));
				*int_ptr(i, c) = v;
			}
			break;
		case DBGATE_KIND_DURATION:
			*int_ptr(i, c) = duration_from_interval(f, DatumGetIntervalP(arg));
			break;
		case DBGATE_KIND_BOOL:
			*bool_ptr(i, c) = DatumGetBool(arg);
			break;
		case DBGATE_KIND_ENUM:
			*int_ptr(i, c) = enum_from_text(f, DatumGetTextPP(arg));
			break;
		case DBGATE_KIND_BUDGET:
			dbgate_budget_name_from_text(DatumGetTextPP(arg), name_ptr(i, c),
										 f->name, true);
			break;
		case DBGATE_KIND_KEY_BY:
			key_by_from_text(f, DatumGetTextPP(arg), name_ptr(i, c));
			break;
		case DBGATE_KIND_FLOAT:
			{
				double		v = DatumGetFloat8(arg);

				if (!float_in_range(f, v))
					ereport(ERROR,
							(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
							 errmsg("%s", f->range_msg),
							 errdetail("The value given is %s.",
									   float_text(v))));
				*float_ptr(i, c) = v;
			}
			break;
	}
	Assert(dbgate_field_valid(i, c));
}

/* ----------
 * Showing a field: dbgate.budgets and config_script()
 * ----------
 */
Datum
dbgate_field_datum(int i, const DbgateBudgetConf *c, bool *isnull)
{
	const DbgateField *f = field(i);

	*isnull = false;
	switch (f->kind)
	{
		case DBGATE_KIND_INT:
			return Int32GetDatum(*int_ptr(i, c));
		case DBGATE_KIND_DURATION:
			{
				Interval   *iv = palloc0(sizeof(Interval));

				iv->time = (int64) *int_ptr(i, c) * 1000;
				return IntervalPGetDatum(iv);
			}
		case DBGATE_KIND_BOOL:
			return BoolGetDatum(*bool_ptr(i, c));
		case DBGATE_KIND_ENUM:
			return CStringGetTextDatum(f->names[*int_ptr(i, c)]);
		case DBGATE_KIND_BUDGET:
		case DBGATE_KIND_KEY_BY:
			if (name_ptr(i, c)[0] == '\0')
			{
				*isnull = true;
				return (Datum) 0;
			}
			return CStringGetTextDatum(name_ptr(i, c));
		case DBGATE_KIND_FLOAT:
			return Float8GetDatum(*float_ptr(i, c));
	}
	return (Datum) 0;			/* keep compiler quiet */
}

/* ", name => value" for a call of create_budget */
void
dbgate_field_append_sql(StringInfo buf, int i, const DbgateBudgetConf *c)
{
	const DbgateField *f = field(i);

	appendStringInfo(buf, ", %s => ", f->name);
	switch (f->kind)
	{
		case DBGATE_KIND_INT:
			appendStringInfo(buf, "%d", *int_ptr(i, c));
			break;
		case DBGATE_KIND_DURATION:
			appendStringInfo(buf, "'%d ms'", *int_ptr(i, c));
			break;
		case DBGATE_KIND_BOOL:
			appendStringInfoString(buf, *bool_ptr(i, c) ? "true" : "false");
			break;
		case DBGATE_KIND_ENUM:
			appendStringInfo(buf, "'%s'", f->names[*int_ptr(i, c)]);
			break;
		case DBGATE_KIND_BUDGET:
		case DBGATE_KIND_KEY_BY:
			if (name_ptr(i, c)[0] == '\0')
				appendStringInfoString(buf, "NULL");
			else
				appendStringInfoString(buf, quote_literal_cstr(name_ptr(i, c)));
			break;
		case DBGATE_KIND_FLOAT:
			appendStringInfoString(buf, float_text(*float_ptr(i, c)));
			break;
	}
}

/* ----------
 * Storing a field: the state file and WAL records (native byte order)
 *	  INT, DURATION, ENUM	int32
 *	  BOOL					int32, 0 or 1
 *	  BUDGET				NAMEDATALEN bytes, NUL-terminated, zero-padded
 *	  KEY_BY				DBGATE_KEY_BY_LEN bytes, NUL-terminated,
 *							zero-padded
 *	  FLOAT					float8
 * ----------
 */
Size
dbgate_field_stored_size(int i)
{
	switch (field(i)->kind)
	{
		case DBGATE_KIND_INT:
		case DBGATE_KIND_DURATION:
		case DBGATE_KIND_ENUM:
		case DBGATE_KIND_BOOL:
			return sizeof(int32);
		case DBGATE_KIND_BUDGET:
			return NAMEDATALEN;
		case DBGATE_KIND_KEY_BY:
			return DBGATE_KEY_BY_LEN;
		case DBGATE_KIND_FLOAT:
			return sizeof(double);
	}
	return 0;					/* keep compiler quiet */
}

/* Store field i at 'dest' (dbgate_field_stored_size() bytes, zeroed). */
void
dbgate_field_store(int i, const DbgateBudgetConf *c, char *dest)
{
	int32		v;

	switch (field(i)->kind)
	{
		case DBGATE_KIND_INT:
		case DBGATE_KIND_DURATION:
		case DBGATE_KIND_ENUM:
			memcpy(dest, int_ptr(i, c), sizeof(int32));
			break;
		case DBGATE_KIND_BOOL:
			v = *bool_ptr(i, c) ? 1 : 0;
			memcpy(dest, &v, sizeof(int32));
			break;
		case DBGATE_KIND_BUDGET:
			strlcpy(dest, name_ptr(i, c), NAMEDATALEN);
			break;
		case DBGATE_KIND_KEY_BY:
			strlcpy(dest, name_ptr(i, c), DBGATE_KEY_BY_LEN);
			break;
		case DBGATE_KIND_FLOAT:
			memcpy(dest, float_ptr(i, c), sizeof(double));
			break;
	}
}

/*
 * Load field i from 'src'.  Returns false when the bytes cannot be a
 * stored value of the field's kind (a boolean other than 0 or 1, a name
 * without its terminating zero byte); the value is then left as it was.
 * Whether the value is in range is for dbgate_field_valid().
 */
bool
dbgate_field_load(int i, const char *src, DbgateBudgetConf *c)
{
	int32		v;

	switch (field(i)->kind)
	{
		case DBGATE_KIND_INT:
		case DBGATE_KIND_DURATION:
		case DBGATE_KIND_ENUM:
			memcpy(int_ptr(i, c), src, sizeof(int32));
			return true;
		case DBGATE_KIND_BOOL:
			memcpy(&v, src, sizeof(int32));
			if (v != 0 && v != 1)
				return false;
			*bool_ptr(i, c) = (v == 1);
			return true;
		case DBGATE_KIND_BUDGET:
			if (strnlen(src, NAMEDATALEN) >= NAMEDATALEN)
				return false;
			strlcpy(name_ptr(i, c), src, NAMEDATALEN);
			return true;
		case DBGATE_KIND_KEY_BY:
			if (strnlen(src, DBGATE_KEY_BY_LEN) >= DBGATE_KEY_BY_LEN)
				return false;
			strlcpy(name_ptr(i, c), src, DBGATE_KEY_BY_LEN);
			return true;
		case DBGATE_KIND_FLOAT:
			memcpy(float_ptr(i, c), src, sizeof(double));
			return true;
	}
	return false;				/* keep compiler quiet */
}
