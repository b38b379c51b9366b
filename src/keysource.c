/*-------------------------------------------------------------------------
 *
 * keysource.c
 *	  A statement's key (1.3): read when the statement arrives at the gate,
 *	  from where its budget's key_by says, so that a SET LOCAL inside a
 *	  transaction counts.
 *
 *	  'user'				current_user (the role the statement runs as,
 *							SET ROLE and SECURITY DEFINER included): its name,
 *							kept for the last role id seen and forgotten at
 *							any change of pg_authid (a rename);
 *	  'application_name'	the setting as it is now;
 *	  'client_addr'			host(inet_client_addr()): the numeric address of
 *							the client, 'local' for a Unix socket (or a
 *							process without a client connection); it cannot
 *							change, so it is made once per backend;
 *	  'setting:NAME'		current_setting(NAME, true): '' when unset.
 *
 * The value is taken as UTF-8 bytes and cut at the last whole character
 * within DBGATE_KEY_BYTES (keytab.c's dbgate_key_cut()).  Nothing here
 * reads a catalog on the path but the name of a role not seen before.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <sys/socket.h>
#include <netdb.h>

#include "common/ip.h"
#include "libpq/libpq-be.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/guc.h"
#if PG_VERSION_NUM < 160000
#include "utils/guc_tables.h"
#endif
#include "utils/inval.h"
#include "utils/syscache.h"

#include "keysource.h"

/* current_user's name, for role user_oid (InvalidOid: none kept) */
static Oid	user_oid = InvalidOid;
static char user_name[NAMEDATALEN];
static bool user_callback = false;

/* the client's address as text; client_len < 0: not made yet */
static char client_text[DBGATE_KEY_BYTES + 1];
static int	client_len = -1;

static void
forget_user(Datum arg, int cacheid, uint32 hashvalue)
{
	user_oid = InvalidOid;
}

static const char *
user_key(void)
{
	Oid			uid = GetUserId();

	if (uid != user_oid)
	{
		char	   *name;

		if (!user_callback)
		{
			CacheRegisterSyscacheCallback(AUTHOID, forget_user, (Datum) 0);
			user_callback = true;
		}
		name = GetUserNameFromId(uid, true);
		strlcpy(user_name, name ? name : "", sizeof(user_name));
		if (name)
			pfree(name);
		user_oid = uid;
	}
	return user_name;
}

static const char *
client_key(void)
{
	if (client_len < 0)
	{
		char		host[NI_MAXHOST];

		if (MyProcPort == NULL || MyProcPort->raddr.addr.ss_family == AF_UNIX ||
			pg_getnameinfo_all(&MyProcPort->raddr.addr, MyProcPort->raddr.salen,
							   host, sizeof(host), NULL, 0,
							   NI_NUMERICHOST | NI_NUMERICSERV) != 0)
			strlcpy(host, "local", sizeof(host));
		client_len = dbgate_key_cut(host, strlen(host));
		memcpy(client_text, host, client_len);
		client_text[client_len] = '\0';
	}
	return client_text;
}

#if PG_VERSION_NUM < 160000
/*
 * PostgreSQL 15 finds a setting by a binary search of its sorted table
 * with a case-insensitive compare of the names (GetConfigOption(): some
 * 500 instructions for a custom setting).  The key of a 'setting:NAME'
 * budget is read at every statement, so the setting's record is found
 * once and its place in the table kept: the record is used while the
 * table still has it there and the caller's number for the name is the
 * same (a record that PostgreSQL freed -- a placeholder replaced when a
 * module defines the setting -- is no longer in the table; the table
 * grows and is sorted again when a setting is added, and shrinks when a
 * module reserves a prefix of placeholders: the record is then looked for
 * again).  keysource.h reads the record found without a call.  A name
 * with no record is looked for again only when the table grew.  A string
 * setting's value is read from its record; any other type through
 * GetConfigOption().  From 16 on the table is a hash: GetConfigOption().
 */
static struct config_generic *set_rec = NULL;
struct config_generic *dbgate_set_str = NULL;	/* set_rec if a string */
int			dbgate_set_pos = -1;
uint32		dbgate_set_id = 0;	/* the caller's number of NAME (0: none) */
static int	set_missing_n = -1;	/* the table's size when NAME was missing */

static const char *
setting_value(const char *name, uint32 id)
{
	struct config_generic **vars = get_guc_variables();
	int			n = GetNumConfigOptions();

	if (set_rec == NULL || dbgate_set_pos >= n ||
		vars[dbgate_set_pos] != set_rec || dbgate_set_id != id)
	{
		int			i;

		if (set_rec == NULL && set_missing_n == n && dbgate_set_id == id)
			return NULL;		/* still no such setting */
		set_rec = NULL;
		dbgate_set_str = NULL;
		dbgate_set_id = id;
		for (i = 0; i < n; i++)
		{
			if (pg_strcasecmp(vars[i]->name, name) == 0)
			{
				set_rec = vars[i];
				dbgate_set_pos = i;
				if (vars[i]->vartype == PGC_STRING)
					dbgate_set_str = vars[i];
				break;
			}
		}
		if (set_rec == NULL)
		{
			const char *v = GetConfigOption(name, true, false); /* an old name? */

			set_missing_n = (v == NULL) ? n : -1;
			return v;
		}
	}
	if (likely(set_rec->vartype == PGC_STRING))
	{
		char	   *v = *((struct config_string *) set_rec)->variable;

		return v ? v : "";
	}
	return GetConfigOption(name, true, false);
}
#else
static inline const char *
setting_value(const char *name, uint32 id)
{
	return GetConfigOption(name, true, false);
}
#endif

const char *
dbgate_key_value_slow(int kind, const char *setting, uint32 setting_id)
{
	const char *v = NULL;

	switch (kind)
	{
		case DBGATE_KEYBY_USER:
			v = user_key();
			break;
		case DBGATE_KEYBY_APPNAME:
			v = application_name;
			break;
		case DBGATE_KEYBY_CLIENT:
			v = client_key();
			break;
		case DBGATE_KEYBY_SETTING:
			v = setting_value(setting, setting_id);
			break;
	}
	return v ? v : "";
}
