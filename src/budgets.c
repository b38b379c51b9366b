/*-------------------------------------------------------------------------
 *
 * budgets.c
 *	  A configuration installed into the shared budget table and the role
 *	  and database maps, and the table copied out again.
 *
 * The table itself is set up by shmem.c; at server start and after a
 * crash restart the configuration of the state file is installed here
 * (dbgate_install_initial()), then every committed or replayed change
 * (dbgate_install_config(), dbgate_install_replayed()).  The queues of
 * the budgets are reached only through queue.h.  (1.3) The key limits of
 * an image are installed into keylimits.c's table on the same path, under
 * the same hold of config_lock, after the budgets they name.
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

#include "budgets.h"
#include "confimage.h"
#include "dimension.h"
#include "install.h"
#include "keylimits.h"
#include "persist.h"
#include "queue.h"
#include "shmem.h"

static int
rolemap_cmp(const void *a, const void *b)
{
	Oid			ra = ((const DbgateRoleMap *) a)->roleid;
	Oid			rb = ((const DbgateRoleMap *) b)->roleid;

	return (ra > rb) - (ra < rb);
}

static int
dbmap_cmp(const void *a, const void *b)
{
	Oid			da = ((const DbgateDbMap *) a)->dbid;
	Oid			db = ((const DbgateDbMap *) b)->dbid;

	return (da > db) - (da < db);
}

/* The installed budgets by name, for looking up many assignments. */
typedef struct BudgetIndex
{
	const char *name;
	int			idx;
} BudgetIndex;

static int
budget_index_cmp(const void *a, const void *b)
{
	return strcmp(((const BudgetIndex *) a)->name,
				  ((const BudgetIndex *) b)->name);
}

static int
budget_index_find(const BudgetIndex *index, int n, const char *name)
{
	BudgetIndex key;
	const BudgetIndex *found;

	if (index == NULL)
		return dbgate_find_budget(name);
	key.name = name;
	found = bsearch(&key, index, n, sizeof(BudgetIndex), budget_index_cmp);
	return found ? found->idx : -1;
}

/*
 * Fill the role and database maps from an image whose budgets are
 * installed already (looked up by name: n log n in the number of
 * assignments).  Caller must hold config_lock exclusively, or be alone at
 * start-up.  Cannot fail: without memory for the index, budgets are
 * looked up one by one.
 */
static void
fill_maps(const DbgateConfig *config)
{
	DbgateShared *sh = dbgate_shared;
	BudgetIndex *index;
	int			nindex = 0;
	int			n;

	index = palloc_extended(sizeof(BudgetIndex) * sh->max_budgets,
							MCXT_ALLOC_NO_OOM);
	for (n = 0; index != NULL && n < sh->max_budgets; n++)
	{
		if (sh->budgets[n].d.in_use)
		{
			index[nindex].name = sh->budgets[n].d.conf.name;
			index[nindex].idx = n;
			nindex++;
		}
	}
	if (index != NULL)
		qsort(index, nindex, sizeof(BudgetIndex), budget_index_cmp);

	sh->nroles = 0;
	for (n = 0; n < config->nroles && sh->nroles < sh->max_roles; n++)
	{
		int			idx = budget_index_find(index, nindex,
											config->roles[n].budget);

		if (idx < 0)
			continue;
		sh->roles[sh->nroles].roleid = config->roles[n].roleid;
		sh->roles[sh->nroles].budget = idx;
		sh->nroles++;
	}
	qsort(sh->roles, sh->nroles, sizeof(DbgateRoleMap), rolemap_cmp);

	sh->ndbs = 0;
	for (n = 0; n < config->ndbs && sh->ndbs < sh->max_roles; n++)
	{
		int			idx = budget_index_find(index, nindex,
											config->dbs[n].budget);

		if (idx < 0)
			continue;
		sh->dbs[sh->ndbs].dbid = config->dbs[n].dbid;
		sh->dbs[sh->ndbs].budget = idx;
		sh->ndbs++;
	}
	qsort(sh->dbs, sh->ndbs, sizeof(DbgateDbMap), dbmap_cmp);
	if (index != NULL)
		pfree(index);
}

/* ----------
 * Installing budgets
 *
 * The budgets of an image are matched with the entries that serve them
 * now (src_index and src_incarnation, set when the image was taken, or by
 * name for a replayed image); the others are dropped, and new ones get a
 * free entry.  Parents are named in the image and resolved to entries here.
 *
 * A change that leaves the shape of every tree as it is (no budget with a
 * parent or children created or dropped, no parent changed) touches each
 * changed budget under its own tree's lock and runs that tree's grant step.
 * A change of shape takes every budget lock (in index order), rebuilds the
 * trees, counts every waiter again at the levels of its budget's new chain
 * and runs the grant step of every tree: waiters keep their places, slot
 * holders return their slots to the budgets they took them from.
 *
 * An image always fits the table (the committing backend checks capacity;
 * the state file and WAL replay keep what fits, dbgate_image_fit()), so
 * every budget of it gets an entry and so does every parent.  Should one
 * not, the budget is installed top-level rather than under an entry that
 * serves something else: a budget is never its own parent or ancestor,
 * which the statement path relies on.
 * ----------
 */

/* scratch space of an install (no allocation: an install must not fail) */
static int32 entry_of[DBGATE_MAX_BUDGETS_LIMIT];	/* image budget -> entry */
static int32 image_of[DBGATE_MAX_BUDGETS_LIMIT];	/* entry -> image budget */
static bool kept[DBGATE_MAX_BUDGETS_LIMIT];	/* entry keeps its budget */

/* What one install does, passed from step to step. */
typedef struct Install
{
	const DbgateConfig *config;
	int			nb;				/* image budgets installed */
	bool		locked;			/* take budget locks (not at start-up) */
	bool		reshape;		/* the shape of a tree changes */
	TimestampTz now;
} Install;

/* The image budget named 'name', or -1. */
static int
image_budget(const DbgateConfig *config, const char *name)
{
	int			n;

	if (name[0] == '\0')
		return -1;
	for (n = 0; n < config->nbudgets; n++)
	{
		if (strcmp(config->budgets[n].name, name) == 0)
			return n;
	}
	return -1;
}

/*
 * The entry of the parent of image budget n, -1 for none (after step 1
 * set entry_of for the first nb budgets).  A parent outside them, without
 * an entry, or in n's own entry cannot be: it would read a slot of
 * entry_of that was not set for it, or make n its own parent.
 */
static int
parent_entry(const Install *in, int n)
{
	int			p = image_budget(in->config, in->config->budgets[n].parent);
	bool		named = in->config->budgets[n].parent[0] != '\0';

	if (!named)
		return -1;
	if (p < 0 || p >= in->nb || entry_of[p] < 0 || entry_of[p] == entry_of[n])
	{
		Assert(false);
		return -1;				/* installed top-level (see the header) */
	}
	return entry_of[p];
}

static void
lock_all(bool locked)
{
	int			i;

	if (!locked)
		return;
	for (i = 0; i < dbgate_shared->max_budgets; i++)
		LWLockAcquire(dbgate_budget_lock(i), LW_EXCLUSIVE);
}

static void
unlock_all(bool locked)
{
	int			i;

	if (!locked)
		return;
	for (i = dbgate_shared->max_budgets - 1; i >= 0; i--)
		LWLockRelease(dbgate_budget_lock(i));
}

/*
 * Whether budget b counted statements of its own: any counter that only a
 * budget without children counts (SPEC: a parent counts active, queued,
 * their peaks, would_queue and rate_limited).  The wait times, the
 * histogram and admitted_overdue go with admitted.
 */
static bool
has_own_counts(DbgateBudget *b)
{
	return (pg_atomic_read_u64(&b->admitted) |
			pg_atomic_read_u64(&b->active_time_total_us) |
			pg_atomic_read_u64(&b->terminated_idle) |
			pg_atomic_read_u64(&b->would_reject) |
			pg_atomic_read_u64(&b->bypassed) |
			pg_atomic_read_u64(&b->runaways) |
			pg_atomic_read_u64(&b->demoted_out) |
			pg_atomic_read_u64(&b->demoted_in) |
			pg_atomic_read_u64(&b->quarantined) |
			b->rejected_full | b->rejected_timeout | b->canceled_waiting |
			b->admitted_lock_holder) != 0;
}

/*
 * Rebuild root, first_child and next_sibling of every entry in use.  A
 * parent that is not an entry in use, or the entry itself, is not linked
 * (install sets none such; a link to itself would make the tree walks of
 * admission.c go round for ever).
 */
static void
build_trees(void)
{
	DbgateShared *sh = dbgate_shared;
	int			i;

	for (i = 0; i < sh->max_budgets; i++)
	{
		DbgateBudget *b = &sh->budgets[i].d;

		b->root = i;
		b->first_child = -1;
		b->next_sibling = -1;
	}
	for (i = sh->max_budgets - 1; i >= 0; i--)
	{
		DbgateBudget *b = &sh->budgets[i].d;
		int			p = b->lim.parent;

		if (!b->in_use || p < 0)
			continue;
		if (p >= sh->max_budgets || p == i || !sh->budgets[p].d.in_use)
		{
			Assert(false);
			continue;
		}
		b->next_sibling = sh->budgets[p].d.first_child;
		sh->budgets[p].d.first_child = i;
	}
	for (i = 0; i < sh->max_budgets; i++)
	{
		DbgateBudget *b = &sh->budgets[i].d;
		int			r = i;
		int			d = 0;

		if (!b->in_use)
			continue;
		while (sh->budgets[r].d.lim.parent >= 0 && d++ < DBGATE_MAX_DEPTH &&
			   sh->budgets[r].d.lim.parent < sh->max_budgets)
			r = sh->budgets[r].d.lim.parent;
		b->root = r;
	}
}

/* 1. Which entry serves which image budget. */
static void
match_entries(const Install *in)
{
	DbgateShared *sh = dbgate_shared;
	int			i;
	int			n;

	for (i = 0; i < sh->max_budgets; i++)
	{
		image_of[i] = -1;
		kept[i] = false;
	}
	for (n = 0; n < in->nb; n++)
	{
		const DbgateBudgetConf *c = &in->config->budgets[n];
		int			idx = c->src_index;

		entry_of[n] = -1;
		if (idx >= 0 && idx < sh->max_budgets && sh->budgets[idx].d.in_use &&
			sh->budgets[idx].d.incarnation == c->src_incarnation &&
			image_of[idx] < 0)
		{
			entry_of[n] = idx;
			image_of[idx] = n;
			kept[idx] = true;
		}
	}
	for (n = 0; n < in->nb; n++)
	{
		if (entry_of[n] >= 0)
			continue;
		for (i = 0; i < sh->max_budgets; i++)
		{
			/* a free entry, or one whose budget is dropped now */
			if (image_of[i] < 0)
				break;
		}
		if (i >= sh->max_budgets)
		{
			/* cannot happen: the image fits (see the header) */
			elog(WARNING, "no free budget entry for \"%s\"",
				 in->config->budgets[n].name);
			continue;
		}
		entry_of[n] = i;
		image_of[i] = n;
	}
}

/* 2. Does the shape of a tree change? */
static bool
shape_changes(const Install *in)
{
	DbgateShared *sh = dbgate_shared;
	int			i;
	int			n;

	for (i = 0; i < sh->max_budgets; i++)
	{
		DbgateBudget *b = &sh->budgets[i].d;

		if (b->in_use && !kept[i] &&
			(b->lim.parent >= 0 || b->first_child >= 0))
			return true;		/* a member of a tree dropped */
	}
	for (n = 0; n < in->nb; n++)
	{
		int			idx = entry_of[n];
		int			p;

		if (idx < 0)
			continue;
		p = parent_entry(in, n);
		if (kept[idx] ? p != sh->budgets[idx].d.lim.parent : p >= 0)
			return true;
	}
	return false;
}

/* Lock one entry, unless the whole table is locked for a new shape. */
static void
lock_one(const Install *in, int idx)
{
	if (in->locked && !in->reshape)
		LWLockAcquire(dbgate_budget_lock(idx), LW_EXCLUSIVE);
}

static void
unlock_one(const Install *in, int idx)
{
	if (in->locked && !in->reshape)
		LWLockRelease(dbgate_budget_lock(idx));
}

/* 3. Drop the budgets that are gone: their waiters go on ungated. */
static void
drop_gone(const Install *in)
{
	DbgateShared *sh = dbgate_shared;
	int			i;

	for (i = 0; i < sh->max_budgets; i++)
	{
		DbgateBudget *b = &sh->budgets[i].d;

		if (!b->in_use || kept[i])
			continue;
		lock_one(in, i);
		dbgate_admission_release_waiters(b);
		dbgate_admission_budget_dropped(b);
		b->in_use = false;
		b->incarnation++;
		/* fast-path CASes against the old word fail from now on */
		pg_atomic_write_u64(&b->state, dbgate_st_make(b->incarnation, 0, 0));
		unlock_one(in, i);
	}
}

/*
 * 4. Create the new ones: counters from zero, an empty queue, a full token
 * bucket (their limits follow in 5).
 */
static void
create_new(const Install *in)
{
	DbgateShared *sh = dbgate_shared;
	int			n;

	for (n = 0; n < in->nb; n++)
	{
		int			idx = entry_of[n];
		DbgateBudget *b;

		if (idx < 0 || kept[idx])
			continue;
		b = &sh->budgets[idx].d;
		lock_one(in, idx);
		b->incarnation++;
		dbgate_admission_budget_created(b);
		dbgate_admission_set_limits(b, &in->config->budgets[n], -1, 0);
		pg_atomic_write_u64(&b->state, dbgate_st_make(b->incarnation, 0, 0));
		dbgate_reset_budget_stats(b, in->now);
		b->root = idx;
		b->first_child = -1;
		b->next_sibling = -1;
		b->in_use = true;
		unlock_one(in, idx);
	}
}

/* 5. The limits of every budget, with parents resolved. */
static void
set_all_limits(const Install *in)
{
	DbgateShared *sh = dbgate_shared;
	int			n;

	for (n = 0; n < in->nb; n++)
	{
		const DbgateBudgetConf *c = &in->config->budgets[n];
		int			idx = entry_of[n];
		int			p;
		DbgateBudget *b;
		int			root = -1;

		if (idx < 0)
			continue;
		b = &sh->budgets[idx].d;
		p = parent_entry(in, n);
		if (memcmp(&b->conf, c, offsetof(DbgateBudgetConf, src_index)) == 0 &&
			b->lim.parent == p &&
			(p < 0 || b->lim.parent_incarnation == sh->budgets[p].d.incarnation))
			continue;			/* unchanged */
		if (in->locked && !in->reshape)
			root = dbgate_admission_lock_tree(idx);
		dbgate_admission_set_limits(b, c, p,
									p >= 0 ? sh->budgets[p].d.incarnation : 0);
		if (!b->conf.enforce)
			dbgate_admission_admit_all(b);
		if (root >= 0)
		{
			/* a raised limit, a changed order or rate: hand out slots */
			dbgate_admission_grant(root);
			LWLockRelease(dbgate_budget_lock(root));
		}
	}
}

/*
 * 7. Which budgets have an adapting level in their chain (themselves or
 * an ancestor): their statements are counted for adapt.c.  Along the
 * installed entries' parents, once every budget has its limits.
 */
static void
set_adapt_chains(const Install *in)
{
	DbgateShared *sh = dbgate_shared;
	int			i;

	for (i = 0; i < sh->max_budgets; i++)
	{
		DbgateBudget *b = &sh->budgets[i].d;
		bool		adapts = false;
		int			k = i;
		int			depth;
		int			root = -1;

		if (!b->in_use)
			continue;
		for (depth = 0; k >= 0 && depth < DBGATE_MAX_DEPTH; depth++)
		{
			DbgateBudget *a = &sh->budgets[k].d;

			adapts |= (a->conf.adapt != DBGATE_ADAPT_OFF);
			k = a->lim.parent;
		}
		if (b->lim.adapt_chain == adapts)
			continue;
		if (in->locked && !in->reshape)
			root = dbgate_admission_lock_tree(i);
		dbgate_admission_set_adapt_chain(b, adapts);
		if (root >= 0)
			LWLockRelease(dbgate_budget_lock(root));
	}
}

/*
 * 8. An adapting parent's L is never below its children's reservations
 * (SPEC): a child's reserved raised, or a child with one added, changes
 * no configuration of the parent's, so its install did not look.  Once
 * every budget has its limits and the trees their shape.
 */
static void
raise_to_reservations(const Install *in)
{
	DbgateShared *sh = dbgate_shared;
	int			i;

	for (i = 0; i < sh->max_budgets; i++)
	{
		DbgateBudget *b = &sh->budgets[i].d;
		int			root = b->root;

		if (!b->in_use || b->first_child < 0 ||
			b->conf.adapt == DBGATE_ADAPT_OFF)
			continue;
		if (in->locked && !in->reshape)
			root = dbgate_admission_lock_tree(i);
		dbgate_admission_adapt_reserved(b, root);
		if (in->locked && !in->reshape)
			LWLockRelease(dbgate_budget_lock(root));
	}
}

/* 6. A new shape: rebuild the trees, count the waiters again. */
static void
rebuild_shape(const Install *in)
{
	DbgateShared *sh = dbgate_shared;
	int			i;

	build_trees();
	for (i = 0; i < sh->max_budgets; i++)
	{
		DbgateBudget *b = &sh->budgets[i].d;

		/*
		 * A budget with children has no statements of its own: its waiters
		 * go on ungated, and the counts of its statements so far (it was a
		 * leaf until now) start anew, so that its row shows only what a
		 * parent counts (SPEC: a parent's other counters are 0; stats_reset
		 * says they went back).
		 */
		if (b->in_use && b->first_child >= 0)
		{
			dbgate_admission_release_waiters(b);
			if (has_own_counts(b))
				dbgate_reset_budget_stats(b, in->now);
		}
	}
	dbgate_admission_recount_queued();
	for (i = 0; i < sh->max_budgets; i++)
	{
		DbgateBudget *b = &sh->budgets[i].d;

		if (b->in_use && b->root == i)
			dbgate_admission_grant(i);
	}
}

/*
 * Install the budgets of 'config' (the role and database maps are the
 * caller's).  With 'locked', budget locks are taken as the header above
 * says (the caller holds config_lock exclusively); without, the caller is
 * alone (start-up).  Cannot fail.
 */
static void
install_entries(const DbgateConfig *config, bool locked)
{
	Install		in;

	Assert(config->nbudgets <= dbgate_shared->max_budgets);
	in.config = config;
	in.nb = Min(config->nbudgets, dbgate_shared->max_budgets);
	in.locked = locked;
	in.reshape = false;
	in.now = GetCurrentTimestamp();

	match_entries(&in);
	in.reshape = shape_changes(&in);
	if (in.reshape)
		lock_all(locked);
	drop_gone(&in);
	create_new(&in);
	set_all_limits(&in);
	if (in.reshape)
		rebuild_shape(&in);
	set_adapt_chains(&in);
	raise_to_reservations(&in);
	if (in.reshape)
		unlock_all(locked);
}

/*
 * Install a configuration into a fresh table at start-up (postmaster, no
 * concurrency: locks are not needed and must not be waited for).
 */
static void
install_initial(const DbgateConfig *config)
{
	install_entries(config, false);
	fill_maps(config);
	dbgate_keylimits_install(config);
	dbgate_dims_installed();
}

/*
 * The configuration of the state file, into the new table of a server
 * that starts or restarts after a crash (dbgate.c's shared-memory start-up
 * hook, once dbgate_shmem_init() has set up a new segment): budgets and
 * assignments survive restarts and crash restarts.  The state file is
 * read after AddinShmemInitLock is released (as pg_stat_statements reads
 * its file): this runs in the postmaster before any backend exists, so
 * nobody can look at the table yet.
 */
void
dbgate_install_initial(void)
{
	DbgateConfig config;
	XLogRecPtr	lsn;

	if (dbgate_state_load(&config, &lsn))
		install_initial(&config);
	dbgate_shared->state_lsn = lsn;
	dbgate_image_free(&config);
}

/*
 * Zero the statistics of a budget.  Caller must hold the budget's tree lock
 * exclusively (or be alone at start-up).  Peaks restart from the current
 * counts.
 */
void
dbgate_reset_budget_stats(DbgateBudget *b, TimestampTz now)
{
	uint64		st = pg_atomic_read_u64(&b->state);
	int			k;

	pg_atomic_write_u32(&b->peak_active, dbgate_st_active(st));
	b->peak_queued = dbgate_st_queued(st);
	pg_atomic_write_u64(&b->admitted, 0);
	pg_atomic_write_u64(&b->active_time_total_us, 0);
	pg_atomic_write_u64(&b->admitted_after_wait, 0);
	pg_atomic_write_u64(&b->wait_time_total_us, 0);
	pg_atomic_write_u64(&b->wait_time_max_us, 0);
	pg_atomic_write_u64(&b->would_queue, 0);
	pg_atomic_write_u64(&b->would_reject, 0);
	pg_atomic_write_u64(&b->terminated_idle, 0);
	pg_atomic_write_u64(&b->admitted_overdue, 0);
	pg_atomic_write_u64(&b->bypassed, 0);
	pg_atomic_write_u64(&b->runaways, 0);
	pg_atomic_write_u64(&b->demoted_out, 0);
	pg_atomic_write_u64(&b->demoted_in, 0);
	pg_atomic_write_u64(&b->quarantined, 0);
	for (k = 0; k < DBGATE_HIST_BUCKETS; k++)
		pg_atomic_write_u64(&b->wait_hist[k], 0);
	b->rejected_full = 0;
	b->rejected_timeout = 0;
	b->canceled_waiting = 0;
	b->admitted_lock_holder = 0;
	dbgate_dims_reset_stats(b);	/* rate_limited */
	b->stats_reset = now;
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

	/* allocate before taking the lock; retry if the maps grew meanwhile */
	for (;;)
	{
		dbgate_image_alloc(config, sh->max_budgets, sh->nroles, sh->ndbs);
		LWLockAcquire(sh->config_lock, LW_SHARED);
		if (sh->nroles <= config->maxroles && sh->ndbs <= config->maxdbs)
			break;
		LWLockRelease(sh->config_lock);
		dbgate_image_free(config);
	}
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
	for (i = 0; i < sh->ndbs; i++)
	{
		DbgateDbConf *d = &config->dbs[config->ndbs++];

		d->dbid = sh->dbs[i].dbid;
		strlcpy(d->budget, sh->budgets[sh->dbs[i].budget].d.conf.name,
				NAMEDATALEN);
	}
	dbgate_keylimits_snapshot(config);
	LWLockRelease(sh->config_lock);
}

/*
 * Install an image replayed from WAL (wal.c: the startup process, during
 * crash recovery, archive recovery or on a standby).  What does not fit
 * this server's tables is left out first, by the rule the state file is
 * loaded with, with a WARNING (a standby with smaller settings than its
 * primary).  The image names its budgets' entries in the shared table of
 * the server that logged it: they are matched here by name with the
 * entries of this server instead, but for a budget that its transaction
 * dropped and created again (marked DBGATE_SRC_RECREATED by wal.c): that
 * is a new budget, as on the primary.
 */
void
dbgate_install_replayed(DbgateConfig *config, XLogRecPtr lsn)
{
	DbgateShared *sh = dbgate_shared;
	char		what[64];
	int			i;

	snprintf(what, sizeof(what), "the configuration change replayed at %X/%X",
			 LSN_FORMAT_ARGS(lsn));
	(void) dbgate_image_fit(config, sh->max_budgets, sh->max_roles, what,
							"Give this server dbgate.max_budgets and dbgate.max_roles at least as large as the primary's and restart it.  Until then a role or database whose assignment was left out is classified as if it had none.");
	(void) dbgate_image_fit_keylimits(config, dbgate_keylimits->max, what,
									  "Give this server a dbgate.max_key_limits at least as large as the primary's and restart it.  Until then a key whose limit was left out has its budget's key_* limits.");

	/* only the startup process installs while in recovery: nothing moves */
	LWLockAcquire(sh->config_lock, LW_SHARED);
	for (i = 0; i < config->nbudgets; i++)
	{
		DbgateBudgetConf *c = &config->budgets[i];
		int			idx = c->src_index == DBGATE_SRC_RECREATED ? -1 :
			dbgate_find_budget(c->name);

		c->src_index = idx;
		c->src_incarnation = idx >= 0 ? sh->budgets[idx].d.incarnation : 0;
	}
	LWLockRelease(sh->config_lock);
	dbgate_install_config(config, lsn);
}

/*
 * After the dimensions derived what they take from the whole
 * configuration (a key's own limits: raised, they admit its waiters at
 * once), the grant step of every tree with a waiter of a budget that uses
 * a dimension.  Caller holds config_lock exclusively.
 */
static void
grant_dims(DbgateShared *sh)
{
	int			i;

	for (i = 0; i < sh->max_budgets; i++)
	{
		DbgateBudget *b = &sh->budgets[i].d;
		int			root;

		if (!b->in_use || b->lim.dim_flags == 0 ||
			dbgate_st_queued(pg_atomic_read_u64(&b->state)) == 0)
			continue;
		root = dbgate_admission_lock_tree(i);
		dbgate_admission_grant(root);
		LWLockRelease(dbgate_budget_lock(root));
	}
}

/*
 * Make 'config' the installed configuration.  Runs in the COMMIT callback
 * of a transaction that changed the configuration, holding the commit lock,
 * or in WAL redo: it must not fail.  The image fits: the committing backend
 * checked capacity, and WAL redo kept what fits (above).
 */
void
dbgate_install_config(const DbgateConfig *config, XLogRecPtr lsn)
{
	DbgateShared *sh = dbgate_shared;

	LWLockAcquire(sh->config_lock, LW_EXCLUSIVE);
	install_entries(config, true);
	fill_maps(config);
	dbgate_keylimits_install(config);
	dbgate_dims_installed();
	grant_dims(sh);
	sh->state_lsn = lsn;
	pg_atomic_fetch_add_u64(&sh->generation, 1);
	LWLockRelease(sh->config_lock);
}
