/*-------------------------------------------------------------------------
 *
 * keysource.h
 *	  A statement's key, read where its budget's key_by says (keysource.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef DBGATE_KEYSOURCE_H
#define DBGATE_KEYSOURCE_H

#include "keytab.h"

/* Where a budget's keys come from (its key_by). */
#define DBGATE_KEYBY_NONE		0
#define DBGATE_KEYBY_USER		1	/* 'user': current_user at the gate */
#define DBGATE_KEYBY_APPNAME	2	/* 'application_name' */
#define DBGATE_KEYBY_CLIENT		3	/* 'client_addr' */
#define DBGATE_KEYBY_SETTING	4	/* 'setting:NAME' */

/*
 * The key of the statement at the gate, as its source has it now: a
 * NUL-terminated string (never NULL; '' for a setting that is not set),
 * valid until the session changes the source, so used at once, and not
 * cut (dbgate_key_cut() does that).  'setting' is NAME of 'setting:NAME',
 * 'setting_id' a number the caller changes whenever 'setting' names
 * another setting (the name is then looked up again; while the number
 * stays, the setting found last is read without comparing names).
 */
extern const char *dbgate_key_value_slow(int kind, const char *setting,
										 uint32 setting_id);

#if PG_VERSION_NUM < 160000
#include "utils/guc_tables.h"

/*
 * keysource.c's record of the setting found last (PostgreSQL 15: see
 * there), written by keysource.c alone and read here so that the key of a
 * 'setting:NAME' budget is read at every statement without a call.
 */
extern DBGATE_HIDDEN struct config_generic *dbgate_set_str;
extern DBGATE_HIDDEN int dbgate_set_pos;
extern DBGATE_HIDDEN uint32 dbgate_set_id;

static inline const char *
dbgate_key_value(int kind, const char *setting, uint32 setting_id)
{
	struct config_generic *r = dbgate_set_str;	/* (a string's record) */

	/*
	 * The place found is still within the table (which shrinks when a
	 * prefix is reserved), the record there is the one found (or it was
	 * replaced, or the table sorted anew: looked for again), and the name
	 * the same.
	 */
	if (likely(kind == DBGATE_KEYBY_SETTING && r != NULL &&
			   dbgate_set_id == setting_id &&
			   dbgate_set_pos < GetNumConfigOptions() &&
			   get_guc_variables()[dbgate_set_pos] == r))
	{
		char	   *v = *((struct config_string *) r)->variable;

		return v ? v : "";
	}
	return dbgate_key_value_slow(kind, setting, setting_id);
}
#else
#define dbgate_key_value(kind, setting, setting_id) \
	dbgate_key_value_slow(kind, setting, setting_id)
#endif

#endif							/* DBGATE_KEYSOURCE_H */
