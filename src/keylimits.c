/*-------------------------------------------------------------------------
 *
 * keylimits.c
 *	  The installed key limits (1.3): the set_key_limit entries of the
 *	  installed configuration, in a shared table of their own.
 *
 * The table holds at most dbgate.max_key_limits entries (set at server
 * start; the configuration side refuses more with 53400, and a replayed
 * image that has more is cut to fit first: confimage.c).  Its entries are
 * sorted by (budget index, key bytes).
 *
 * Locking: the table is written only by dbgate_keylimits_install(), which
 * budgets.c calls at every install under config_lock held exclusively
 * (with the budget entries already installed, so a budget's name gives
 * its index); it is read under config_lock, in either mode, by the copy
 * of the installed configuration (dbgate_keylimits_snapshot()) and by the
 * lookup of the key mechanism (dbgate_keylimit_lookup(): a key's entry is
 * made rarely, so a lock there is fine).
 *
 * A key limit names a budget with key_by (config.c's rule, checked again
 * on decode); one whose budget is not installed (cannot happen) is left
 * out.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "storage/ipc.h"
#include "storage/shmem.h"

#include "keylimits.h"
#include "shmem.h"

int			dbgate_max_key_limits = 1000;
DbgateKeyLimitTable *dbgate_keylimits = NULL;

static Size
keylimits_shmem_size(void)
{
	return add_size(offsetof(DbgateKeyLimitTable, entries),
					mul_size(dbgate_max_key_limits, sizeof(DbgateKeyLimitEntry)));
}

void
dbgate_keylimits_shmem_request(void)
{
	RequestAddinShmemSpace(keylimits_shmem_size());
}

/* An empty table (a new segment: server start, crash restart). */
void
dbgate_keylimits_shmem_init(void)
{
	bool		found;

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	dbgate_keylimits = ShmemInitStruct("dbgate key limits",
									   keylimits_shmem_size(), &found);
	if (!found)
	{
		dbgate_keylimits->max = dbgate_max_key_limits;
		dbgate_keylimits->n = 0;
	}
	LWLockRelease(AddinShmemInitLock);
}

static int
entry_cmp(const void *a, const void *b)
{
	const DbgateKeyLimitEntry *ea = a;
	const DbgateKeyLimitEntry *eb = b;
	int			c;

	if (ea->budget != eb->budget)
		return ea->budget < eb->budget ? -1 : 1;
	c = memcmp(ea->key, eb->key, Min(ea->keylen, eb->keylen));
	if (c != 0)
		return c;
	return (ea->keylen > eb->keylen) - (ea->keylen < eb->keylen);
}

/*
 * Make the key limits of 'config' the installed ones.  Caller must hold
 * config_lock exclusively (or be alone at start-up), with the budgets of
 * 'config' installed.  Cannot fail: the image fits (config.c checked the
 * capacity, a replayed or loaded image was fitted).
 */
void
dbgate_keylimits_install(const DbgateConfig *config)
{
	DbgateKeyLimitTable *t = dbgate_keylimits;
	int			i;

	t->n = 0;
	for (i = 0; i < config->nkeylimits && t->n < t->max; i++)
	{
		const DbgateKeyLimitConf *k = &config->keylimits[i];
		DbgateKeyLimitEntry *e = &t->entries[t->n];
		int			idx = dbgate_find_budget(k->budget);

		if (idx < 0)
			continue;
		memset(e, 0, sizeof(*e));
		e->budget = idx;
		e->keylen = strnlen(k->key, DBGATE_KEY_MAXLEN);
		memcpy(e->key, k->key, e->keylen);
		e->max_active = k->max_active;
		e->max_queued = k->max_queued;
		e->max_rate = k->max_rate;
		e->rate_burst = k->rate_burst;
		t->n++;
	}
	qsort(t->entries, t->n, sizeof(DbgateKeyLimitEntry), entry_cmp);
}

/*
 * Copy the installed key limits into 'config' (whose budgets were copied
 * under the same hold of config_lock).  Caller must hold config_lock.
 */
void
dbgate_keylimits_snapshot(DbgateConfig *config)
{
	DbgateKeyLimitTable *t = dbgate_keylimits;
	int			i;

	dbgate_image_alloc_keylimits(config, t->n);
	for (i = 0; i < t->n; i++)
	{
		const DbgateKeyLimitEntry *e = &t->entries[i];
		DbgateKeyLimitConf *k = &config->keylimits[config->nkeylimits++];

		memset(k, 0, sizeof(*k));
		strlcpy(k->budget, dbgate_shared->budgets[e->budget].d.conf.name,
				NAMEDATALEN);
		memcpy(k->key, e->key, e->keylen);
		k->max_active = e->max_active;
		k->max_queued = e->max_queued;
		k->max_rate = e->max_rate;
		k->rate_burst = e->rate_burst;
	}
}

/*
 * The key limit of key 'key' (keylen bytes) of budget 'budget' (an index
 * in the budget table): copied into '*found', or false when the key has
 * none.  Caller must hold config_lock (either mode).
 */
bool
dbgate_keylimit_lookup(int budget, const char *key, int keylen,
					   DbgateKeyLimitEntry *found)
{
	DbgateKeyLimitTable *t = dbgate_keylimits;
	DbgateKeyLimitEntry probe;
	DbgateKeyLimitEntry *e;

	if (keylen < 0 || keylen > DBGATE_KEY_MAXLEN)
		return false;
	probe.budget = budget;
	probe.keylen = keylen;
	memcpy(probe.key, key, keylen);
	e = bsearch(&probe, t->entries, t->n, sizeof(DbgateKeyLimitEntry),
				entry_cmp);
	if (e == NULL)
		return false;
	*found = *e;
	return true;
}
