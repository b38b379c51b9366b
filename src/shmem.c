/*-------------------------------------------------------------------------
 *
 * shmem.c
 *	  dbgate's shared memory: its size, its set-up, and the settings that
 *	  size it.
 *
 * The pg_stat_statements pattern: one size function used at request and
 * at initialisation, a named LWLock tranche (config_lock, then one lock
 * per budget entry), and initialisation under AddinShmemInitLock only
 * when the segment is new (at server start and after a crash restart,
 * when every counter starts from zero).  The layout is shmem.h's: the
 * shared header, the budget entries, the role map, the database map and
 * one entry per backend, each array on cache lines of its own.  The
 * modules with shared state of their own (adapt.c's controllers,
 * runaway.c's records, quarantine.c's table) size and set it up
 * themselves, called by dbgate.c's shared-memory hooks beside this file;
 * only the quarantine's lock is of this file's tranche.  What the
 * entries hold is installed by budgets.c (the configuration, read back
 * from the state file once the segment is new: dbgate.c's start-up hook
 * asks for it) and changed by the files of admission (the queues).
 *
 * The variables of dbgate.enabled, dbgate.max_budgets, dbgate.max_roles
 * and dbgate.max_quarantine are here, with the memory they size or the flag they are published in;
 * dbgate.c defines the settings.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <unistd.h>

#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/shmem.h"
#include "utils/wait_event.h"

#include "shmem.h"

/* GUCs (dbgate.c) */
bool		dbgate_enabled = true;
int			dbgate_max_budgets = 64;
int			dbgate_max_roles = 1024;
int			dbgate_max_quarantine = 1000;

DbgateShared *dbgate_shared = NULL;

/* This backend's entry, once attached (admission.c) */
DbgateProc *dbgate_my_proc = NULL;
int			dbgate_my_procno = -1;

StaticAssertDecl(sizeof(DbgateBudget) <= DBGATE_BUDGET_BYTES &&
				 DBGATE_BUDGET_BYTES % PG_CACHE_LINE_SIZE == 0,
				 "a budget entry must fit DBGATE_BUDGET_BYTES, on whole cache lines");

static Size
procs_count(void)
{
	return (Size) MaxBackends;
}

static Size
shmem_size(void)
{
	Size		size;

	/* the shared memory allocator starts us on a cache line */
	size = CACHELINEALIGN(sizeof(DbgateShared));
	size = add_size(size, mul_size(dbgate_max_budgets,
								   sizeof(DbgateBudgetPadded)));
	size = add_size(size, CACHELINEALIGN(mul_size(dbgate_max_roles,
												  sizeof(DbgateRoleMap))));
	size = add_size(size, CACHELINEALIGN(mul_size(dbgate_max_roles,
												  sizeof(DbgateDbMap))));
	size = add_size(size, mul_size(procs_count(), sizeof(DbgateProcPadded)));
	return size;
}

void
dbgate_shmem_request(void)
{
	RequestAddinShmemSpace(shmem_size());
	/* config_lock, one per budget, then the quarantine lock */
	RequestNamedLWLockTranche("dbgate", 2 + dbgate_max_budgets);
}

/* Every budget entry unused, with zero counts. */
static void
init_budget_entries(DbgateShared *sh)
{
	int			i;
	int			k;

	for (i = 0; i < sh->max_budgets; i++)
	{
		sh->budgets[i].d.in_use = false;
		pg_atomic_init_u32(&sh->budgets[i].d.conf_seq, 0);
		pg_atomic_init_u64(&sh->budgets[i].d.state, 0);
		pg_atomic_init_u64(&sh->budgets[i].d.resv, 0);
		pg_atomic_init_u32(&sh->budgets[i].d.peak_active, 0);
		pg_atomic_init_u64(&sh->budgets[i].d.admitted, 0);
		pg_atomic_init_u64(&sh->budgets[i].d.active_time_total_us, 0);
		pg_atomic_init_u64(&sh->budgets[i].d.admitted_after_wait, 0);
		pg_atomic_init_u64(&sh->budgets[i].d.wait_time_total_us, 0);
		pg_atomic_init_u64(&sh->budgets[i].d.wait_time_max_us, 0);
		pg_atomic_init_u64(&sh->budgets[i].d.would_queue, 0);
		pg_atomic_init_u64(&sh->budgets[i].d.would_reject, 0);
		pg_atomic_init_u64(&sh->budgets[i].d.terminated_idle, 0);
		pg_atomic_init_u64(&sh->budgets[i].d.admitted_overdue, 0);
		pg_atomic_init_u64(&sh->budgets[i].d.rate_limited, 0);
		pg_atomic_init_u64(&sh->budgets[i].d.bypassed, 0);
		pg_atomic_init_u64(&sh->budgets[i].d.runaways, 0);
		pg_atomic_init_u64(&sh->budgets[i].d.demoted_out, 0);
		pg_atomic_init_u64(&sh->budgets[i].d.demoted_in, 0);
		pg_atomic_init_u64(&sh->budgets[i].d.quarantined, 0);
		pg_atomic_init_u32(&sh->budgets[i].d.quarantine_n, 0);
		pg_atomic_init_u64(&sh->budgets[i].d.memory_kb_active, 0);
		pg_atomic_init_u64(&sh->budgets[i].d.rate_tat, 0);
		pg_atomic_init_u64(&sh->budgets[i].d.lock_check_due, 0);
		for (k = 0; k < DBGATE_HIST_BUCKETS; k++)
			pg_atomic_init_u64(&sh->budgets[i].d.wait_hist[k], 0);
		sh->budgets[i].d.root = i;
		sh->budgets[i].d.first_child = -1;
		sh->budgets[i].d.next_sibling = -1;
		sh->budgets[i].d.queue_head = -1;
		sh->budgets[i].d.queue_tail = -1;
		sh->budgets[i].d.token_waiter = -1;
		sh->budgets[i].d.lim.parent = -1;
	}
}

/* Every backend entry idle. */
static void
init_proc_entries(DbgateShared *sh)
{
	int			i;

	for (i = 0; i < sh->max_procs; i++)
	{
		memset(&sh->procs[i], 0, sizeof(DbgateProcPadded));
		sh->procs[i].d.budget = -1;
		sh->procs[i].d.state = DBGATE_PROC_IDLE;
		sh->procs[i].d.prev = -1;
		sh->procs[i].d.next = -1;
		pg_atomic_init_u64(&sh->procs[i].d.memory_kb, 0);
		pg_atomic_init_u64(&sh->procs[i].d.move, 0);
		sh->procs[i].d.demoted_from = -1;
	}
}

/*
 * Attach to dbgate's shared memory, setting it up if it is new.  Returns
 * true for a new segment: its budget table is empty, and the caller
 * installs the configuration of the state file (budgets.c).
 */
bool
dbgate_shmem_init(void)
{
	bool		found;
	char	   *base;
	DbgateShared *sh;

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	sh = ShmemInitStruct("dbgate", shmem_size(), &found);
	dbgate_shared = sh;
	if (!found)
	{
		LWLockPadded *locks = GetNamedLWLockTranche("dbgate");

		memset(sh, 0, shmem_size());
		sh->config_lock = &locks[0].lock;
		sh->budget_locks = &locks[1];
		pg_atomic_init_u64(&sh->generation, 1);
		sh->max_budgets = dbgate_max_budgets;
		sh->max_roles = dbgate_max_roles;
		sh->max_procs = (int) procs_count();
		sh->ncpu = Max((int) sysconf(_SC_NPROCESSORS_ONLN), 1);

		Assert((uintptr_t) sh == CACHELINEALIGN(sh));
		base = (char *) sh + CACHELINEALIGN(sizeof(DbgateShared));
		sh->budgets = (DbgateBudgetPadded *) base;
		base += mul_size(sh->max_budgets, sizeof(DbgateBudgetPadded));
		sh->roles = (DbgateRoleMap *) base;
		base += CACHELINEALIGN(mul_size(sh->max_roles, sizeof(DbgateRoleMap)));
		sh->dbs = (DbgateDbMap *) base;
		base += CACHELINEALIGN(mul_size(sh->max_roles, sizeof(DbgateDbMap)));
		sh->procs = (DbgateProcPadded *) base;
		base += mul_size(sh->max_procs, sizeof(DbgateProcPadded));
		/* the quarantine table's lock (its table: quarantine.c) */
		sh->quarantine_lock = &locks[1 + dbgate_max_budgets].lock;
		init_proc_entries(sh);
		pg_atomic_init_u32(&sh->enabled, dbgate_enabled ? 1 : 0);
		sh->wait_event_info = PG_WAIT_EXTENSION;
		init_budget_entries(sh);
	}
	LWLockRelease(AddinShmemInitLock);
	return !found;
}

/*
 * SQL functions call this first.
 */
void
dbgate_check_loaded(void)
{
	if (dbgate_shared == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("dbgate must be loaded via shared_preload_libraries"),
				 errhint("Add dbgate to shared_preload_libraries in postgresql.conf and restart the server.")));
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
