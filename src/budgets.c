/*-------------------------------------------------------------------------
 *
 * budgets.c
 *	  The shared budget table and the role map: set-up and installation of
 *	  a configuration.
 *
 * Shared memory follows the pg_stat_statements pattern: one size function
 * used at request and at initialisation, a named LWLock tranche, and
 * initialisation under AddinShmemInitLock only when the segment is new
 * (also after a crash restart, when the configuration is read back from
 * the state file and every counter starts from zero).
 *
 * Which budget a backend belongs to is decided in classify.c, from the
 * maps installed here.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/shmem.h"
#include "utils/inval.h"
#include "utils/memutils.h"
#include "utils/syscache.h"

#include "compat.h"
#include "dbgate.h"

DbgateShared *dbgate_shared = NULL;

static Size
procs_count(void)
{
	return (Size) MaxBackends;
}

Size
dbgate_shmem_size(void)
{
	Size		size;

	/* the shared memory allocator starts us on a cache line */
	size = CACHELINEALIGN(sizeof(DbgateShared));
	size = add_size(size, mul_size(dbgate_max_budgets,
								   sizeof(DbgateBudgetPadded)));
	size = add_size(size, CACHELINEALIGN(mul_size(dbgate_max_roles,
												  sizeof(DbgateRoleMap))));
	size = add_size(size, mul_size(procs_count(), sizeof(DbgateProcPadded)));
	return size;
}

void
dbgate_shmem_request(void)
{
	RequestAddinShmemSpace(dbgate_shmem_size());
	/* config_lock, then one per budget */
	RequestNamedLWLockTranche("dbgate", 1 + dbgate_max_budgets);
}

/*
 * Install a configuration into a fresh table at start-up (postmaster, no
 * concurrency: locks are not needed and must not be waited for).
 */
static void
install_initial(const DbgateConfig *config)
{
	DbgateShared *sh = dbgate_shared;
	TimestampTz now = GetCurrentTimestamp();
	int			i;

	for (i = 0; i < config->nbudgets && i < sh->max_budgets; i++)
	{
		DbgateBudget *b = &sh->budgets[i].d;

		b->in_use = true;
		b->incarnation++;
		b->conf = config->budgets[i];
		pg_atomic_write_u64(&b->state, dbgate_st_make(b->incarnation, 0, 0));
		dbgate_reset_budget_stats(b, now);
	}
	sh->nroles = 0;
	for (i = 0; i < config->nroles && sh->nroles < sh->max_roles; i++)
	{
		int			bi = dbgate_config_find_budget(config, config->roles[i].budget);

		if (bi < 0 || bi >= sh->max_budgets)
			continue;
		sh->roles[sh->nroles].roleid = config->roles[i].roleid;
		sh->roles[sh->nroles].budget = bi;
		sh->nroles++;
	}
}

static int
rolemap_cmp(const void *a, const void *b)
{
	Oid			ra = ((const DbgateRoleMap *) a)->roleid;
	Oid			rb = ((const DbgateRoleMap *) b)->roleid;

	return (ra > rb) - (ra < rb);
}

void
dbgate_shmem_init(void)
{
	bool		found;
	char	   *base;
	DbgateShared *sh;
	int			i;

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	sh = ShmemInitStruct("dbgate", dbgate_shmem_size(), &found);
	dbgate_shared = sh;
	if (!found)
	{
		LWLockPadded *locks = GetNamedLWLockTranche("dbgate");
		DbgateConfig config;

		memset(sh, 0, dbgate_shmem_size());
		sh->config_lock = &locks[0].lock;
		sh->budget_locks = &locks[1];
		pg_atomic_init_u64(&sh->generation, 1);
		sh->max_budgets = dbgate_max_budgets;
		sh->max_roles = dbgate_max_roles;
		sh->max_procs = (int) procs_count();

		Assert((uintptr_t) sh == CACHELINEALIGN(sh));
		base = (char *) sh + CACHELINEALIGN(sizeof(DbgateShared));
		sh->budgets = (DbgateBudgetPadded *) base;
		base += mul_size(sh->max_budgets, sizeof(DbgateBudgetPadded));
		sh->roles = (DbgateRoleMap *) base;
		base += CACHELINEALIGN(mul_size(sh->max_roles, sizeof(DbgateRoleMap)));
		sh->procs = (DbgateProcPadded *) base;

		for (i = 0; i < sh->max_budgets; i++)
		{
			sh->budgets[i].d.in_use = false;
			sh->budgets[i].d.queue_head = -1;
			sh->budgets[i].d.queue_tail = -1;
			pg_atomic_init_u64(&sh->budgets[i].d.state, 0);
			pg_atomic_init_u32(&sh->budgets[i].d.peak_active, 0);
			pg_atomic_init_u64(&sh->budgets[i].d.admitted, 0);
			pg_atomic_init_u64(&sh->budgets[i].d.active_time_total_us, 0);
			pg_atomic_init_u64(&sh->budgets[i].d.admitted_after_wait, 0);
			pg_atomic_init_u64(&sh->budgets[i].d.wait_time_total_us, 0);
			pg_atomic_init_u64(&sh->budgets[i].d.wait_time_max_us, 0);
		}
		for (i = 0; i < sh->max_procs; i++)
		{
			sh->procs[i].d.budget = -1;
			sh->procs[i].d.state = DBGATE_PROC_IDLE;
			sh->procs[i].d.prev = -1;
			sh->procs[i].d.next = -1;
		}

		/* budgets and assignments survive restarts and crash restarts */
		dbgate_config_init(&config);
		if (dbgate_state_load(&config))
		{
			install_initial(&config);
			qsort(sh->roles, sh->nroles, sizeof(DbgateRoleMap), rolemap_cmp);
		}
		if (config.budgets)
			pfree(config.budgets);
		if (config.roles)
			pfree(config.roles);
	}
	LWLockRelease(AddinShmemInitLock);
}

/*
 * Zero the statistics of a budget.  Caller must hold the budget's lock
 * exclusively (or be alone at start-up).  Peaks restart from the current
 * counts.
 */
void
dbgate_reset_budget_stats(DbgateBudget *b, TimestampTz now)
{
	uint64		st = pg_atomic_read_u64(&b->state);

	pg_atomic_write_u32(&b->peak_active, dbgate_st_active(st));
	b->peak_queued = dbgate_st_queued(st);
	pg_atomic_write_u64(&b->admitted, 0);
	pg_atomic_write_u64(&b->active_time_total_us, 0);
	pg_atomic_write_u64(&b->admitted_after_wait, 0);
	pg_atomic_write_u64(&b->wait_time_total_us, 0);
	pg_atomic_write_u64(&b->wait_time_max_us, 0);
	b->rejected_full = 0;
	b->rejected_timeout = 0;
	b->canceled_waiting = 0;
	b->admitted_lock_holder = 0;
	b->stats_reset = now;
}

/*
 * Find an in-use budget by name.  Caller must hold config_lock.
 */
int
dbgate_find_budget(const char *name)
{
	DbgateShared *sh = dbgate_shared;
	int			i;

	for (i = 0; i < sh->max_budgets; i++)
	{
		if (sh->budgets[i].d.in_use &&
			strcmp(sh->budgets[i].d.conf.name, name) == 0)
			return i;
	}
	return -1;
}

/* ----------
 * Configuration snapshot and installation
 * ----------
 */

/*
 * Copy the installed configuration into a local image.
 */
void
dbgate_snapshot_config(DbgateConfig *config)
{
	DbgateShared *sh = dbgate_shared;
	int			i;

	dbgate_config_init(config);
	config->maxbudgets = sh->max_budgets + 1;
	config->budgets = palloc(sizeof(DbgateBudgetConf) * config->maxbudgets);
	config->maxroles = sh->max_roles + 1;
	config->roles = palloc(sizeof(DbgateRoleConf) * config->maxroles);

	LWLockAcquire(sh->config_lock, LW_SHARED);
	for (i = 0; i < sh->max_budgets; i++)
	{
		if (sh->budgets[i].d.in_use)
		{
			DbgateBudgetConf *c = &config->budgets[config->nbudgets++];

			*c = sh->budgets[i].d.conf;
			c->src_index = i;
			c->src_incarnation = sh->budgets[i].d.incarnation;
		}
	}
	for (i = 0; i < sh->nroles; i++)
	{
		DbgateRoleConf *r = &config->roles[config->nroles++];

		r->roleid = sh->roles[i].roleid;
		strlcpy(r->budget, sh->budgets[sh->roles[i].budget].d.conf.name,
				NAMEDATALEN);
	}
	LWLockRelease(sh->config_lock);
}

/*
 * Make 'config' the installed configuration.  Runs in the COMMIT callback
 * of a transaction that changed the configuration, holding the commit lock:
 * it must not fail.  The caller has checked that the image fits.
 */
void
dbgate_install_config(const DbgateConfig *config)
{
	DbgateShared *sh = dbgate_shared;
	TimestampTz now = GetCurrentTimestamp();
	int			i;
	int			n;

	LWLockAcquire(sh->config_lock, LW_EXCLUSIVE);

	/* 1. drop the budgets that are gone: their waiters go ungated */
	for (i = 0; i < sh->max_budgets; i++)
	{
		DbgateBudget *b = &sh->budgets[i].d;
		LWLock	   *lock = dbgate_budget_lock(i);
		bool		kept = false;

		if (!b->in_use)
			continue;
		for (n = 0; n < config->nbudgets; n++)
		{
			if (config->budgets[n].src_index == i &&
				config->budgets[n].src_incarnation == b->incarnation)
			{
				kept = true;
				break;
			}
		}
		if (kept)
			continue;

		LWLockAcquire(lock, LW_EXCLUSIVE);
		while (b->queue_head >= 0)
		{
			int			procno = b->queue_head;
			DbgateProc *p = &sh->procs[procno].d;

			b->queue_head = p->next;
			p->prev = p->next = -1;
			p->released = true;
			SetLatch(&DBGATE_PROC_BY_NUMBER(procno)->procLatch);
		}
		b->queue_tail = -1;
		b->in_use = false;
		b->incarnation++;
		/* fast-path CASes against the old word fail from now on */
		pg_atomic_write_u64(&b->state, dbgate_st_make(b->incarnation, 0, 0));
		LWLockRelease(lock);
	}

	/* 2. update the budgets that stay, create the new ones */
	for (n = 0; n < config->nbudgets; n++)
	{
		const DbgateBudgetConf *c = &config->budgets[n];
		int			idx = c->src_index;
		DbgateBudget *b;
		LWLock	   *lock;

		if (idx < 0 || idx >= sh->max_budgets ||
			!sh->budgets[idx].d.in_use ||
			sh->budgets[idx].d.incarnation != c->src_incarnation)
		{
			for (idx = 0; idx < sh->max_budgets; idx++)
			{
				if (!sh->budgets[idx].d.in_use)
					break;
			}
			if (idx >= sh->max_budgets)
			{
				/* cannot happen: the committing backend checked capacity */
				elog(WARNING, "dbgate: no free budget entry for \"%s\"", c->name);
				continue;
			}
			b = &sh->budgets[idx].d;
			lock = dbgate_budget_lock(idx);
			LWLockAcquire(lock, LW_EXCLUSIVE);
			b->in_use = true;
			b->incarnation++;
			b->conf = *c;
			b->queue_head = b->queue_tail = -1;
			pg_atomic_write_u64(&b->state, dbgate_st_make(b->incarnation, 0, 0));
			dbgate_reset_budget_stats(b, now);
			LWLockRelease(lock);
			continue;
		}

		b = &sh->budgets[idx].d;
		lock = dbgate_budget_lock(idx);
		LWLockAcquire(lock, LW_EXCLUSIVE);
		b->conf = *c;
		/* a raised limit admits waiting statements at once */
		(void) dbgate_grant_waiters(b, idx);
		LWLockRelease(lock);
	}

	/* 3. the role map */
	sh->nroles = 0;
	for (n = 0; n < config->nroles && sh->nroles < sh->max_roles; n++)
	{
		int			idx = dbgate_find_budget(config->roles[n].budget);

		if (idx < 0)
			continue;
		sh->roles[sh->nroles].roleid = config->roles[n].roleid;
		sh->roles[sh->nroles].budget = idx;
		sh->nroles++;
	}
	qsort(sh->roles, sh->nroles, sizeof(DbgateRoleMap), rolemap_cmp);

	pg_atomic_fetch_add_u64(&sh->generation, 1);
	LWLockRelease(sh->config_lock);
}
