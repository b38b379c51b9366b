/*-------------------------------------------------------------------------
 *
 * confimage.c
 *	  Configuration images: backend-local copies of a whole configuration.
 *
 * An image (DbgateConfig) is what the state file holds, what a
 * transaction sees and changes (config.c), and what a commit installs
 * into shared memory (budgets.c).  Its arrays are palloc'd in the memory
 * context current when they grow; they grow by doubling.  Budgets are
 * few (dbgate.max_budgets) and found by name with a linear search.
 * Assignments are not kept in any order; beyond a few dozen they are found
 * through a hash index by OID (open addressing, linear probing, deletion
 * by backward shift), built at the first lookup and kept up to date by
 * the functions here, so that a transaction making many assignments costs
 * time linear in their number.
 *
 * What fits: a server whose dbgate.max_budgets or dbgate.max_roles is
 * smaller than the configuration it loads from its state file or replays
 * from WAL (a standby with smaller settings than its primary) keeps what
 * fits by one rule, dbgate_image_fit(): budgets in the order of
 * config_script() (top-level budgets by name, each followed by its
 * subtree, each level by name), each kept while there is room and its
 * parent is kept -- a budget whose parent is left out is left out too,
 * never made top-level or given another parent; then the assignments to
 * the budgets kept, by OID, while there is room.  A budget kept whose
 * runaway_budget is left out loses it, as drop_budget(..., force => true)
 * takes it away: its runaway_budget is cleared and a runaway_action
 * 'demote' becomes 'log' (a 'demote' needs a runaway_budget).  Without
 * that the image would name a budget it lacks: the decoder refuses such an
 * image (persist.c), so the next committed change would write a state file
 * and a WAL record that no server loads.  One WARNING names what was left
 * out and the runaway_budgets cleared.
 *
 * An image that already names a runaway_budget it lacks (written by a
 * dbgate that fitted without that rule) is fitted the same way, also when
 * everything fits: the decoder lets that one fault through for the fit
 * to clear (persist.c).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "common/hashfn.h"
#include "lib/stringinfo.h"
#include "utils/memutils.h"

#include "budgetdefs.h"
#include "confimage.h"

void
dbgate_image_init(DbgateConfig *config)
{
	memset(config, 0, sizeof(DbgateConfig));
}

/* Fewer assignments than this are searched without an index. */
#define INDEX_MIN_ENTRIES	32

static void
oid_index_drop(DbgateOidIndex *index)
{
	if (index->slots)
		pfree(index->slots);
	index->slots = NULL;
	index->mask = 0;
}

void
dbgate_image_free(DbgateConfig *config)
{
	if (config->budgets)
		pfree(config->budgets);
	if (config->roles)
		pfree(config->roles);
	if (config->dbs)
		pfree(config->dbs);
	if (config->keylimits)
		pfree(config->keylimits);
	oid_index_drop(&config->role_index);
	oid_index_drop(&config->db_index);
	dbgate_image_init(config);
}

/* ----------
 * OID indexes.  'base' is the array, 'stride' its element size; the OID
 * is the first field of every element.
 * ----------
 */
static inline Oid
oid_at(const void *base, Size stride, int i)
{
	return *(const Oid *) ((const char *) base + stride * i);
}

static inline uint32
slot_of(const DbgateOidIndex *index, Oid oid)
{
	return murmurhash32((uint32) oid) & index->mask;
}

static void
oid_index_insert(DbgateOidIndex *index, Oid oid, int pos)
{
	uint32		j = slot_of(index, oid);

	while (index->slots[j] != 0)
		j = (j + 1) & index->mask;
	index->slots[j] = pos + 1;
}

/* Build the index of n elements, in the memory context of the array. */
static void
oid_index_build(DbgateOidIndex *index, const void *base, Size stride, int n)
{
	uint32		size = 64;
	int			i;

	while (size < (uint32) n * 2)
		size *= 2;
	oid_index_drop(index);
	index->slots = MemoryContextAllocExtended(GetMemoryChunkContext((void *) base),
											  sizeof(int32) * (Size) size,
											  MCXT_ALLOC_HUGE | MCXT_ALLOC_ZERO);
	index->mask = size - 1;
	for (i = 0; i < n; i++)
		oid_index_insert(index, oid_at(base, stride, i), i);
}

/* The slot holding 'oid', or -1. */
static int64
oid_index_slot(const DbgateOidIndex *index, const void *base, Size stride, Oid oid)
{
	uint32		j = slot_of(index, oid);

	while (index->slots[j] != 0)
	{
		if (oid_at(base, stride, index->slots[j] - 1) == oid)
			return j;
		j = (j + 1) & index->mask;
	}
	return -1;
}

/* Empty slot j, moving later entries of its probe run back. */
static void
oid_index_delete_slot(DbgateOidIndex *index, const void *base, Size stride, uint32 j)
{
	uint32		k = j;

	index->slots[j] = 0;
	for (;;)
	{
		uint32		home;

		k = (k + 1) & index->mask;
		if (index->slots[k] == 0)
			break;
		home = slot_of(index, oid_at(base, stride, index->slots[k] - 1));
		/* the entry at k may move to j unless its home lies in (j, k] */
		if (j < k ? (home <= j || home > k) : (home <= j && home > k))
		{
			index->slots[j] = index->slots[k];
			index->slots[k] = 0;
			j = k;
		}
	}
}

/* Position of 'oid' in an array of n elements, or -1. */
static int
find_oid(DbgateOidIndex *index, const void *base, Size stride, int n, Oid oid)
{
	int			i;
	int64		j;

	if (n < INDEX_MIN_ENTRIES)
	{
		for (i = 0; i < n; i++)
		{
			if (oid_at(base, stride, i) == oid)
				return i;
		}
		return -1;
	}
	if (index->slots == NULL)
		oid_index_build(index, base, stride, n);
	j = oid_index_slot(index, base, stride, oid);
	return j < 0 ? -1 : index->slots[j] - 1;
}

/* The element at n - 1 was just appended. */
static void
oid_index_added(DbgateOidIndex *index, const void *base, Size stride, int n)
{
	if (index->slots == NULL)
		return;
	if ((uint32) n * 2 > index->mask + 1)
		oid_index_drop(index);		/* rebuilt larger when next needed */
	else
		oid_index_insert(index, oid_at(base, stride, n - 1), n - 1);
}

/* The element at i is about to be replaced by the last one (n - 1). */
static void
oid_index_removing(DbgateOidIndex *index, const void *base, Size stride, int n, int i)
{
	int64		j;

	if (index->slots == NULL)
		return;
	j = oid_index_slot(index, base, stride, oid_at(base, stride, i));
	Assert(j >= 0);
	oid_index_delete_slot(index, base, stride, (uint32) j);
	if (i != n - 1)
	{
		j = oid_index_slot(index, base, stride, oid_at(base, stride, n - 1));
		Assert(j >= 0);
		index->slots[j] = i + 1;
	}
}

/* Allocate an array of n elements of 'size' (at least one), huge if need be. */
static void *
alloc_array(int n, Size size)
{
	return palloc_extended(mul_size(Max(n, 1), size), MCXT_ALLOC_HUGE);
}

static void *
grow_array(void *array, int *max, Size size)
{
	*max = Max(8, *max * 2);
	if (array == NULL)
		return alloc_array(*max, size);
	return repalloc_huge(array, mul_size(*max, size));
}

/*
 * An empty image with room for the given numbers of entries (more can be
 * added; they only cost a reallocation).
 */
void
dbgate_image_alloc(DbgateConfig *config, int nbudgets, int nroles, int ndbs)
{
	dbgate_image_init(config);
	config->maxbudgets = Max(nbudgets, 1);
	config->budgets = alloc_array(config->maxbudgets, sizeof(DbgateBudgetConf));
	config->maxroles = Max(nroles, 1);
	config->roles = alloc_array(config->maxroles, sizeof(DbgateRoleConf));
	config->maxdbs = Max(ndbs, 1);
	config->dbs = alloc_array(config->maxdbs, sizeof(DbgateDbConf));
}

/* 'dst' becomes a copy of 'src', in the current memory context. */
void
dbgate_image_copy(DbgateConfig *dst, const DbgateConfig *src)
{
	dbgate_image_alloc(dst, src->nbudgets, src->nroles, src->ndbs);
	memcpy(dst->budgets, src->budgets, sizeof(DbgateBudgetConf) * src->nbudgets);
	dst->nbudgets = src->nbudgets;
	memcpy(dst->roles, src->roles, sizeof(DbgateRoleConf) * src->nroles);
	dst->nroles = src->nroles;
	memcpy(dst->dbs, src->dbs, sizeof(DbgateDbConf) * src->ndbs);
	dst->ndbs = src->ndbs;
	if (src->nkeylimits > 0)
	{
		dbgate_image_alloc_keylimits(dst, src->nkeylimits);
		memcpy(dst->keylimits, src->keylimits,
			   sizeof(DbgateKeyLimitConf) * src->nkeylimits);
		dst->nkeylimits = src->nkeylimits;
	}
}

int
dbgate_image_find_budget(const DbgateConfig *config, const char *name)
{
	int			i;

	for (i = 0; i < config->nbudgets; i++)
	{
		if (strcmp(config->budgets[i].name, name) == 0)
			return i;
	}
	return -1;
}

/*
 * Lookups build the index of a const image: the index is a cache of the
 * arrays' contents, not part of the configuration.
 */
int
dbgate_image_find_role(const DbgateConfig *config, Oid roleid)
{
	DbgateConfig *c = unconstify(DbgateConfig *, config);

	return find_oid(&c->role_index, c->roles, sizeof(DbgateRoleConf),
					c->nroles, roleid);
}

int
dbgate_image_find_db(const DbgateConfig *config, Oid dbid)
{
	DbgateConfig *c = unconstify(DbgateConfig *, config);

	return find_oid(&c->db_index, c->dbs, sizeof(DbgateDbConf),
					c->ndbs, dbid);
}

void
dbgate_image_add_budget(DbgateConfig *config, const DbgateBudgetConf *conf)
{
	if (config->nbudgets >= config->maxbudgets)
		config->budgets = grow_array(config->budgets, &config->maxbudgets,
									 sizeof(DbgateBudgetConf));
	config->budgets[config->nbudgets++] = *conf;
}

void
dbgate_image_remove_budget(DbgateConfig *config, int i)
{
	config->budgets[i] = config->budgets[--config->nbudgets];
}

void
dbgate_image_add_role(DbgateConfig *config, Oid roleid, const char *budget)
{
	DbgateRoleConf *r;

	if (config->nroles >= config->maxroles)
	{
		config->roles = grow_array(config->roles, &config->maxroles,
								   sizeof(DbgateRoleConf));
		oid_index_drop(&config->role_index);	/* the array moved */
	}
	r = &config->roles[config->nroles++];
	r->roleid = roleid;
	strlcpy(r->budget, budget, NAMEDATALEN);
	oid_index_added(&config->role_index, config->roles, sizeof(DbgateRoleConf),
				config->nroles);
}

void
dbgate_image_remove_role(DbgateConfig *config, int i)
{
	oid_index_removing(&config->role_index, config->roles, sizeof(DbgateRoleConf),
				   config->nroles, i);
	config->roles[i] = config->roles[--config->nroles];
}

void
dbgate_image_add_db(DbgateConfig *config, Oid dbid, const char *budget)
{
	DbgateDbConf *d;

	if (config->ndbs >= config->maxdbs)
	{
		config->dbs = grow_array(config->dbs, &config->maxdbs,
								 sizeof(DbgateDbConf));
		oid_index_drop(&config->db_index);	/* the array moved */
	}
	d = &config->dbs[config->ndbs++];
	d->dbid = dbid;
	strlcpy(d->budget, budget, NAMEDATALEN);
	oid_index_added(&config->db_index, config->dbs, sizeof(DbgateDbConf),
				config->ndbs);
}

void
dbgate_image_remove_db(DbgateConfig *config, int i)
{
	oid_index_removing(&config->db_index, config->dbs, sizeof(DbgateDbConf),
				   config->ndbs, i);
	config->dbs[i] = config->dbs[--config->ndbs];
}

/* ----------
 * The order of trees, and what fits
 * ----------
 */
int
dbgate_image_budget_cmp(const void *a, const void *b)
{
	/* a key may be a bare name: 'name' is the first field */
	return strcmp(((const DbgateBudgetConf *) a)->name,
				  ((const DbgateBudgetConf *) b)->name);
}

/*
 * A budget with the names on its way from its top-level ancestor down to
 * itself.  Sorting by that path lists every budget after its parent and
 * its subtree right after it, each level by name.
 */
typedef struct TreePath
{
	int			idx;
	int			depth;
	const char *path[DBGATE_MAX_DEPTH];
} TreePath;

static int
tree_path_cmp(const void *a, const void *b)
{
	const TreePath *x = (const TreePath *) a;
	const TreePath *y = (const TreePath *) b;
	int			i;

	for (i = 0; i < x->depth && i < y->depth; i++)
	{
		int			r = strcmp(x->path[i], y->path[i]);

		if (r != 0)
			return r;
	}
	return x->depth - y->depth;
}

/*
 * The budgets of 'config' (sorted by name) with parents first, as indexes
 * into config->budgets (palloc'd, nbudgets of them): the order of
 * config_script().  An image has no cycle and no chain longer than
 * DBGATE_MAX_DEPTH (config.c and persist.c see to that); should one appear
 * all the same, its budgets come out in some order rather than never.
 */
int *
dbgate_image_tree_order(const DbgateConfig *config)
{
	int			n = config->nbudgets;
	TreePath   *tp = palloc0(sizeof(TreePath) * Max(n, 1));
	int		   *order = palloc(sizeof(int) * Max(n, 1));
	int			i;

	for (i = 0; i < n; i++)
	{
		const DbgateBudgetConf *c = &config->budgets[i];
		const char *up[DBGATE_MAX_DEPTH];
		int			d = 0;
		int			k;

		while (c != NULL && d < DBGATE_MAX_DEPTH)
		{
			up[d++] = c->name;
			c = c->parent[0] == '\0' ? NULL :
				bsearch(c->parent, config->budgets, n,
						sizeof(DbgateBudgetConf), dbgate_image_budget_cmp);
		}
		tp[i].idx = i;
		tp[i].depth = d;
		for (k = 0; k < d; k++)
			tp[i].path[k] = up[d - 1 - k];
	}
	qsort(tp, n, sizeof(TreePath), tree_path_cmp);
	for (i = 0; i < n; i++)
		order[i] = tp[i].idx;
	pfree(tp);
	return order;
}

/* At most this many names of each kind in the WARNING of a fit. */
#define FIT_NAMES	5

/* What dbgate_image_fit() left out, for its WARNING. */
typedef struct FitReport
{
	int			nbudgets;		/* of the image, before */
	int			nroles;
	int			ndbs;
	int			budgets_out;	/* left out */
	int			roles_out;
	int			dbs_out;
	int			runaways_out;	/* budgets kept whose runaway_budget is not */
	StringInfoData budget_names;	/* the first FIT_NAMES of each */
	StringInfoData role_oids;
	StringInfoData db_oids;
	StringInfoData runaway_names;	/* "budget" ("target"[, 'demote' ...]) */
} FitReport;

static void
note_name(StringInfo buf, int *count, const char *name, Oid oid)
{
	if (++*count > FIT_NAMES)
		return;
	if (buf->len > 0)
		appendStringInfoString(buf, ", ");
	if (name != NULL)
		appendStringInfo(buf, "\"%s\"", name);
	else
		appendStringInfo(buf, "%u", oid);
}

/*
 * Which budgets of 'config' (sorted by name) fit in max_budgets: in tree
 * order, while there is room and the parent is kept.  A parent comes
 * before its children in that order, so one pass decides; a budget whose
 * parent is not in the image, or that is on a cycle, is never kept.
 */
static void
fit_budgets(const DbgateConfig *config, int max_budgets, bool *keep)
{
	int		   *order = dbgate_image_tree_order(config);
	int			kept = 0;
	int			i;

	memset(keep, 0, sizeof(bool) * Max(config->nbudgets, 1));
	for (i = 0; i < config->nbudgets && kept < max_budgets; i++)
	{
		const DbgateBudgetConf *c = &config->budgets[order[i]];

		if (c->parent[0] != '\0')
		{
			DbgateBudgetConf *p = bsearch(c->parent, config->budgets,
										  config->nbudgets,
										  sizeof(DbgateBudgetConf),
										  dbgate_image_budget_cmp);

			if (p == NULL || !keep[p - config->budgets])
				continue;
		}
		keep[order[i]] = true;
		kept++;
	}
	pfree(order);
}

/*
 * Whether budget 'name' of 'config' (sorted by name) is kept; keep == NULL:
 * whether the image has it.
 */
static bool
budget_kept(const DbgateConfig *config, const bool *keep, const char *name)
{
	DbgateBudgetConf *b = bsearch(name, config->budgets, config->nbudgets,
								  sizeof(DbgateBudgetConf), dbgate_image_budget_cmp);

	return b != NULL && (keep == NULL || keep[b - config->budgets]);
}

/*
 * Whether a budget of 'config' (sorted by name) names a runaway_budget
 * that the image lacks.
 */
static bool
runaway_missing(const DbgateConfig *config)
{
	int			i;

	for (i = 0; i < config->nbudgets; i++)
	{
		const DbgateBudgetConf *c = &config->budgets[i];

		if (c->runaway_budget[0] != '\0' &&
			!budget_kept(config, NULL, c->runaway_budget))
			return true;
	}
	return false;
}

/*
 * A budget kept whose runaway_budget is not loses it, as with
 * drop_budget(..., force => true) (config.c): no runaway_budget, and
 * 'demote' becomes 'log'.  Noted in 'r'.
 */
static void
fit_runaways(DbgateConfig *config, const bool *keep, FitReport *r)
{
	int			i;

	for (i = 0; i < config->nbudgets; i++)
	{
		DbgateBudgetConf *c = &config->budgets[i];
		bool		demote = c->runaway_action == DBGATE_RUNAWAY_DEMOTE;

		if (!keep[i] || c->runaway_budget[0] == '\0' ||
			budget_kept(config, keep, c->runaway_budget))
			continue;
		if (++r->runaways_out <= FIT_NAMES)
		{
			if (r->runaway_names.len > 0)
				appendStringInfoString(&r->runaway_names, ", ");
			appendStringInfo(&r->runaway_names, "\"%s\" (\"%s\"%s)", c->name,
							 c->runaway_budget,
							 demote ? ", runaway_action 'demote' set to 'log'" : "");
		}
		memset(c->runaway_budget, 0, NAMEDATALEN);
		if (demote)
			c->runaway_action = DBGATE_RUNAWAY_LOG;
	}
}

int
dbgate_image_role_cmp(const void *a, const void *b)
{
	Oid			x = ((const DbgateRoleConf *) a)->roleid;
	Oid			y = ((const DbgateRoleConf *) b)->roleid;

	return (x > y) - (x < y);
}

int
dbgate_image_db_cmp(const void *a, const void *b)
{
	Oid			x = ((const DbgateDbConf *) a)->dbid;
	Oid			y = ((const DbgateDbConf *) b)->dbid;

	return (x > y) - (x < y);
}

/*
 * Keep the assignments (role or database: 'dbs') to kept budgets, by OID,
 * at most max_roles of them; note the others in 'r'.
 */
static void
fit_assignments(DbgateConfig *config, const bool *keep, int max_roles,
				bool dbs, FitReport *r)
{
	int			n = dbs ? config->ndbs : config->nroles;
	int			kept = 0;
	int			i;

	if (dbs)
		qsort(config->dbs, n, sizeof(DbgateDbConf), dbgate_image_db_cmp);
	else
		qsort(config->roles, n, sizeof(DbgateRoleConf), dbgate_image_role_cmp);
	for (i = 0; i < n; i++)
	{
		const char *budget = dbs ? config->dbs[i].budget : config->roles[i].budget;
		Oid			oid = dbs ? config->dbs[i].dbid : config->roles[i].roleid;

		if (kept >= max_roles || !budget_kept(config, keep, budget))
		{
			if (dbs)
				note_name(&r->db_oids, &r->dbs_out, NULL, oid);
			else
				note_name(&r->role_oids, &r->roles_out, NULL, oid);
			continue;
		}
		if (dbs)
			config->dbs[kept++] = config->dbs[i];
		else
			config->roles[kept++] = config->roles[i];
	}
	/* the arrays were reordered: their OID indexes are rebuilt when needed */
	if (dbs)
	{
		config->ndbs = kept;
		oid_index_drop(&config->db_index);
	}
	else
	{
		config->nroles = kept;
		oid_index_drop(&config->role_index);
	}
}

/* "...: "a", "b" and 3 more." */
static void
append_names(StringInfo detail, const char *what, const char *names, int count)
{
	if (count == 0)
		return;
	appendStringInfo(detail, " %s left out: %s", what, names);
	if (count > FIT_NAMES)
		appendStringInfo(detail, " and %d more", count - FIT_NAMES);
	appendStringInfoChar(detail, '.');
}

/* "<label>: "a" ("t"), ... and 3 more." */
static void
append_runaways(StringInfo detail, const char *label, const FitReport *r)
{
	if (r->runaways_out == 0)
		return;
	appendStringInfo(detail, "%s: %s", label, r->runaway_names.data);
	if (r->runaways_out > FIT_NAMES)
		appendStringInfo(detail, " and %d more", r->runaways_out - FIT_NAMES);
	appendStringInfoChar(detail, '.');
}

/*
 * The WARNING of a fit.  An image that left nothing out here but named a
 * runaway_budget it lacks gets a message of its own: the caller's hint
 * (raise the settings) does not apply to it.
 */
static void
fit_warning(const FitReport *r, int max_budgets, int max_roles,
			const char *what, const char *hint)
{
	StringInfoData detail;

	initStringInfo(&detail);
	if (r->budgets_out + r->roles_out + r->dbs_out == 0)
	{
		append_runaways(&detail, "Budgets whose runaway_budget is not a budget of it", r);
		appendStringInfoString(&detail, " A server that had left those runaway_budgets out wrote it so; each budget loses its runaway_budget, as with drop_budget(..., force => true).");
		ereport(WARNING,
				(errmsg("dbgate cleared the runaway_budget of %d of %d budgets of %s",
						r->runaways_out, r->nbudgets, what),
				 errdetail_internal("%s", detail.data),
				 errhint("Give those budgets a runaway_budget again with alter_budget() where they need one.")));
		pfree(detail.data);
		return;
	}
	appendStringInfo(&detail, "This server has dbgate.max_budgets = %d and dbgate.max_roles = %d.",
					 max_budgets, max_roles);
	append_names(&detail, "Budgets", r->budget_names.data, r->budgets_out);
	append_names(&detail, "Assignments of roles (OIDs)", r->role_oids.data,
				 r->roles_out);
	append_names(&detail, "Assignments of databases (OIDs)", r->db_oids.data,
				 r->dbs_out);
	append_runaways(&detail, " Budgets kept whose runaway_budget is left out", r);
	appendStringInfoString(&detail, " Budgets are kept in the order of config_script() while there is room and their parent is kept; assignments by OID while there is room and their budget is kept.");
	if (r->runaways_out > 0)
		appendStringInfoString(&detail, " A budget kept loses a runaway_budget left out, as with drop_budget(..., force => true).");
	ereport(WARNING,
			(errmsg("dbgate left out %d of %d budgets, %d of %d role assignments and %d of %d database assignments of %s",
					r->budgets_out, r->nbudgets, r->roles_out, r->nroles,
					r->dbs_out, r->ndbs, what),
			 errdetail_internal("%s", detail.data),
			 errhint("%s", hint)));
	pfree(detail.data);
}

/*
 * Make 'config' fit in max_budgets budgets and max_roles role (and
 * database) assignments by the rule in the file header, with one WARNING
 * naming what was left out: "dbgate left out ... of 'what'", and 'hint'
 * (or, when nothing was left out but runaway_budgets the image lacks were
 * cleared, "dbgate cleared the runaway_budget ... of 'what'").  The
 * image's budgets may come out sorted by name, its assignments by OID.
 * Returns whether anything was left out or cleared.  Nothing is allocated
 * when everything fits.
 */
bool
dbgate_image_fit(DbgateConfig *config, int max_budgets, int max_roles,
				 const char *what, const char *hint)
{
	FitReport	r;
	bool	   *keep;
	bool		changed;
	int			i;
	int			n;

	qsort(config->budgets, config->nbudgets, sizeof(DbgateBudgetConf),
		  dbgate_image_budget_cmp);
	if (config->nbudgets <= max_budgets && config->nroles <= max_roles &&
		config->ndbs <= max_roles && !runaway_missing(config))
		return false;			/* an image's parents are in it: all fits */

	memset(&r, 0, sizeof(r));
	r.nbudgets = config->nbudgets;
	r.nroles = config->nroles;
	r.ndbs = config->ndbs;
	initStringInfo(&r.budget_names);
	initStringInfo(&r.role_oids);
	initStringInfo(&r.db_oids);
	initStringInfo(&r.runaway_names);

	keep = palloc(sizeof(bool) * Max(config->nbudgets, 1));
	fit_budgets(config, max_budgets, keep);
	fit_runaways(config, keep, &r);
	fit_assignments(config, keep, max_roles, false, &r);
	fit_assignments(config, keep, max_roles, true, &r);

	/* budgets last: the assignments look them up by name */
	for (i = 0, n = 0; i < config->nbudgets; i++)
	{
		if (keep[i])
			config->budgets[n++] = config->budgets[i];
		else
			note_name(&r.budget_names, &r.budgets_out,
					  config->budgets[i].name, InvalidOid);
	}
	config->nbudgets = n;
	pfree(keep);

	changed = r.budgets_out + r.roles_out + r.dbs_out + r.runaways_out > 0;
	if (changed)
		fit_warning(&r, max_budgets, max_roles, what, hint);
	pfree(r.budget_names.data);
	pfree(r.role_oids.data);
	pfree(r.db_oids.data);
	pfree(r.runaway_names.data);
	return changed;
}

/* ----------
 * Key limits (1.3): set_key_limit entries, by budget name and key.  An
 * image's key limits name budgets of the image that have key_by
 * (config.c; checked again on decode by persist.c).
 * ----------
 */

/* Room for at least n key limits (those there are kept). */
void
dbgate_image_alloc_keylimits(DbgateConfig *config, int n)
{
	if (config->keylimits != NULL && config->maxkeylimits >= n)
		return;
	if (config->keylimits == NULL)
	{
		config->maxkeylimits = Max(n, 1);
		config->keylimits = alloc_array(config->maxkeylimits,
										sizeof(DbgateKeyLimitConf));
	}
	else
	{
		config->maxkeylimits = n;
		config->keylimits = repalloc_huge(config->keylimits,
										  mul_size(n, sizeof(DbgateKeyLimitConf)));
	}
}

/* by budget name, then key bytes */
int
dbgate_image_keylimit_cmp(const void *a, const void *b)
{
	const DbgateKeyLimitConf *ka = a;
	const DbgateKeyLimitConf *kb = b;
	int			c = strcmp(ka->budget, kb->budget);

	return c != 0 ? c : strcmp(ka->key, kb->key);
}

int
dbgate_image_find_keylimit(const DbgateConfig *config, const char *budget,
						   const char *key)
{
	int			i;

	for (i = 0; i < config->nkeylimits; i++)
	{
		if (strcmp(config->keylimits[i].budget, budget) == 0 &&
			strcmp(config->keylimits[i].key, key) == 0)
			return i;
	}
	return -1;
}

void
dbgate_image_add_keylimit(DbgateConfig *config, const DbgateKeyLimitConf *k)
{
	if (config->keylimits == NULL || config->nkeylimits >= config->maxkeylimits)
		dbgate_image_alloc_keylimits(config, Max(8, config->maxkeylimits * 2));
	config->keylimits[config->nkeylimits++] = *k;
}

void
dbgate_image_remove_keylimit(DbgateConfig *config, int i)
{
	config->keylimits[i] = config->keylimits[--config->nkeylimits];
}

/* Remove every key limit of 'budget'; returns how many there were. */
int
dbgate_image_remove_keylimits_of(DbgateConfig *config, const char *budget)
{
	int			i;
	int			n = 0;

	for (i = config->nkeylimits - 1; i >= 0; i--)
	{
		if (strcmp(config->keylimits[i].budget, budget) == 0)
		{
			dbgate_image_remove_keylimit(config, i);
			n++;
		}
	}
	return n;
}

/*
 * Make the key limits of 'config' fit (after dbgate_image_fit(), so that
 * its budgets are the ones kept): those of a budget the image lacks or
 * that has no key_by go, then those beyond 'max' in the order of budget
 * name and key, with one WARNING naming 'what' and 'hint' (a standby or a
 * server with a smaller dbgate.max_key_limits than the one that wrote the
 * image).  Returns whether any was left out.  The key limits come out
 * sorted.
 */
bool
dbgate_image_fit_keylimits(DbgateConfig *config, int max, const char *what,
						   const char *hint)
{
	int			n0 = config->nkeylimits;
	int			i;
	int			n = 0;

	if (n0 == 0)
		return false;
	qsort(config->keylimits, n0, sizeof(DbgateKeyLimitConf),
		  dbgate_image_keylimit_cmp);
	for (i = 0; i < n0; i++)
	{
		int			b = dbgate_image_find_budget(config, config->keylimits[i].budget);

		if (b < 0 || config->budgets[b].key_by[0] == '\0' || n >= max)
			continue;
		config->keylimits[n++] = config->keylimits[i];
	}
	config->nkeylimits = n;
	if (n == n0)
		return false;
	ereport(WARNING,
			(errmsg("dbgate left out %d of %d key limits of %s",
					n0 - n, n0, what),
			 errdetail("dbgate.max_key_limits is %d; the key limits are kept in the order of budget name and key while there is room and their budget is kept.",
					   max),
			 errhint("%s", hint)));
	return true;
}
