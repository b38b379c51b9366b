/*-------------------------------------------------------------------------
 *
 * keylimits.h
 *	  The installed key limits (1.3, set_key_limit) in shared memory
 *	  (keylimits.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef DBGATE_KEYLIMITS_H
#define DBGATE_KEYLIMITS_H

#include "budgetdefs.h"
#include "confimage.h"

/* Largest value of dbgate.max_key_limits. */
#define DBGATE_MAX_KEY_LIMITS_LIMIT	1000000

/*
 * One installed key limit: the budget's index in the budget table, the
 * key's bytes and the limits (-1: the budget's key_* value).
 */
typedef struct DbgateKeyLimitEntry
{
	int32		budget;			/* index in dbgate_shared->budgets */
	int32		keylen;			/* 0..DBGATE_KEY_MAXLEN */
	char		key[DBGATE_KEY_MAXLEN + 1];
	int32		max_active;
	int32		max_queued;
	double		max_rate;
	int32		rate_burst;
} DbgateKeyLimitEntry;

/*
 * The table: 'n' entries sorted by (budget, key bytes), of at most 'max'
 * (dbgate.max_key_limits at server start).  Written only at an install,
 * under config_lock held exclusively; read under config_lock (either
 * mode).
 */
typedef struct DbgateKeyLimitTable
{
	int32		max;
	int32		n;
	DbgateKeyLimitEntry entries[FLEXIBLE_ARRAY_MEMBER];
} DbgateKeyLimitTable;

extern PGDLLIMPORT int dbgate_max_key_limits;
extern PGDLLIMPORT DbgateKeyLimitTable *dbgate_keylimits;

extern void dbgate_keylimits_shmem_request(void);
extern void dbgate_keylimits_shmem_init(void);

/* the install (budgets.c) and its copy out; caller holds config_lock */
extern void dbgate_keylimits_install(const DbgateConfig *config);
extern void dbgate_keylimits_snapshot(DbgateConfig *config);

/* the key mechanism's lookup; caller holds config_lock */
extern bool dbgate_keylimit_lookup(int budget, const char *key, int keylen,
								   DbgateKeyLimitEntry *found);

#endif							/* DBGATE_KEYLIMITS_H */
