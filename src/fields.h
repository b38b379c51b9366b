/*-------------------------------------------------------------------------
 *
 * fields.h
 *	  The table of budget fields (fields.c) and what is done with it.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DBGATE_FIELDS_H
#define DBGATE_FIELDS_H

#include "fmgr.h"
#include "lib/stringinfo.h"

#include "budgetdefs.h"

/* Longest duration accepted for a timeout, in milliseconds (as for GUCs). */
#define DBGATE_MAX_TIMEOUT_MS	INT_MAX

/* Largest parallel_workers accepted (max_parallel_workers' own maximum). */
#define DBGATE_MAX_PARALLEL_WORKERS	1024

/* Limits of the 1.2 fields. */
#define DBGATE_MAX_WEIGHT			10000
#define DBGATE_MIN_RATE				0.01
#define DBGATE_MAX_RATE				1000000.0
#define DBGATE_MAX_BURST			1000000

/* How a field is given in SQL, kept in DbgateBudgetConf and stored. */
typedef enum DbgateFieldKind
{
	DBGATE_KIND_INT,			/* integer; int32 */
	DBGATE_KIND_DURATION,		/* interval; int32 milliseconds */
	DBGATE_KIND_BOOL,			/* boolean; bool */
	DBGATE_KIND_ENUM,			/* text, one of 'names'; int32 index */
	DBGATE_KIND_BUDGET,			/* text, a budget name; char[NAMEDATALEN],
								 * "" = none (SQL NULL) */
	DBGATE_KIND_FLOAT,			/* double precision; double */
	DBGATE_KIND_KEY_BY			/* text, a key source (1.3); char
								 * [DBGATE_KEY_BY_LEN], "" = none (SQL
								 * NULL) */
} DbgateFieldKind;

/*
 * Versions of the SQL objects of a database (what CREATE EXTENSION or
 * ALTER EXTENSION UPDATE made them): each binds create_budget,
 * alter_budget and budget_config to its own C symbol.
 */
typedef enum DbgateApi
{
	DBGATE_API_1_0,
	DBGATE_API_1_1,
	DBGATE_API_1_2,
	DBGATE_API_1_3
} DbgateApi;

/*
 * Versions of the encoding of a configuration image, in the state file
 * and in WAL records (persist.c).  1 was written by dbgate 1.0, 2 by 1.1,
 * 2 or 3 by 1.2; 1.3 writes 2, 3 or 4, the oldest that holds the image (so
 * 4 only while a budget has a 1.3 field away from its default).
 */
#define DBGATE_FORMAT_OLDEST_WRITTEN	2
#define DBGATE_FORMAT_CURRENT			4

typedef struct DbgateField
{
	const char *name;			/* SQL argument and dbgate.budgets column */
	DbgateFieldKind kind;
	uint16		offset;			/* of the value in DbgateBudgetConf */
	uint8		api;			/* an argument since this DbgateApi */
	uint8		format;			/* stored since this format version */
	int16		column;			/* in dbgate.budgets (0 = budget) */
	bool		nullable;		/* create_budget: NULL means the default */
	bool		required;		/* create_budget: an argument without a
								 * default, always given */
	bool		script_later;	/* config_script(): set by alter_budget once
								 * every budget exists (it names another
								 * budget, or depends on one that does) */
	double		def;			/* the default (BUDGET: always ""); of a
								 * required field, the value an image
								 * starts from */
	double		min;			/* INT, DURATION (ms), FLOAT: the range */
	double		max;
	bool		zero_ok;		/* FLOAT: 0 besides min..max */
	const char *const *names;	/* ENUM: the value names, NULL-terminated */
	const char *range_msg;		/* INT, FLOAT: the error for a value out of
								 * range */
} DbgateField;

#define DBGATE_NFIELDS	31

extern const DbgateField dbgate_fields[DBGATE_NFIELDS];

/* the bit of field i in the mask of alter_budget */
#define DBGATE_FIELD_BIT(i)		((uint32) 1 << (i))

/* Whole budgets */
extern void dbgate_conf_set_defaults(DbgateBudgetConf *c);
extern const char *dbgate_conf_problem(const DbgateBudgetConf *c);
extern void dbgate_conf_check(const DbgateBudgetConf *c);
extern void dbgate_budget_name_from_text(text *t, char *dest,
										 const char *argname, bool allow_empty);

/* One field */
extern int	dbgate_fields_of_api(DbgateApi api);
extern int	dbgate_field_index(const char *name);
extern void dbgate_field_from_arg(int i, Datum arg, DbgateBudgetConf *c);
extern bool dbgate_field_valid(int i, const DbgateBudgetConf *c);
extern bool dbgate_field_is_default(int i, const DbgateBudgetConf *c);
extern bool dbgate_field_in_script(int i, const DbgateBudgetConf *c);
extern void dbgate_field_copy(int i, DbgateBudgetConf *dst,
							  const DbgateBudgetConf *src);
extern Datum dbgate_field_datum(int i, const DbgateBudgetConf *c,
								bool *isnull);
extern void dbgate_field_append_sql(StringInfo buf, int i,
									const DbgateBudgetConf *c);
extern Size dbgate_field_stored_size(int i);
extern void dbgate_field_store(int i, const DbgateBudgetConf *c, char *dest);
extern bool dbgate_field_load(int i, const char *src, DbgateBudgetConf *c);

#endif							/* DBGATE_FIELDS_H */
