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
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "common/hashfn.h"
#include "utils/memutils.h"

#include "confimage.h"
#include "dbgate.h"

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
