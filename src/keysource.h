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
 * The key of the statement at the gate: its bytes (where they are: valid
 * until the session changes the source, so used at once) and in *len
 * their length cut as SPEC says (dbgate_key_cut()).  'setting' is NAME of
 * 'setting:NAME'.
 */
extern const char *dbgate_key_of(int kind, const char *setting, int *len);

#endif							/* DBGATE_KEYSOURCE_H */
