/*-------------------------------------------------------------------------
 *
 * confimage.c
 *	  Configuration images: backend-local copies of a whole configuration.
 *
 * An image (DbgateConfig) is what the state file holds, what a
 * transaction sees and changes (config.c), and what a commit installs
 * into shared memory (budgets.c).  Its arrays are palloc'd in the memory
 * context current when they grow; they grow by doubling.  Budgets are
 * few (dbgate.max_budgets) and found by name with a linear search;
 * assignments are not kept in any order.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/memutils.h"

#include "dbgate.h"

void
dbgate_image_init(DbgateConfig *config)
{
	memset(config, 0, sizeof(DbgateConfig));
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
	dbgate_image_init(config);
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

int
dbgate_image_find_role(const DbgateConfig *config, Oid roleid)
{
	int			i;

	for (i = 0; i < config->nroles; i++)
	{
		if (config->roles[i].roleid == roleid)
			return i;
	}
	return -1;
}

int
dbgate_image_find_db(const DbgateConfig *config, Oid dbid)
{
	int			i;

	for (i = 0; i < config->ndbs; i++)
	{
		if (config->dbs[i].dbid == dbid)
			return i;
	}
	return -1;
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
		config->roles = grow_array(config->roles, &config->maxroles,
								   sizeof(DbgateRoleConf));
	r = &config->roles[config->nroles++];
	r->roleid = roleid;
	strlcpy(r->budget, budget, NAMEDATALEN);
}

void
dbgate_image_remove_role(DbgateConfig *config, int i)
{
	config->roles[i] = config->roles[--config->nroles];
}

void
dbgate_image_add_db(DbgateConfig *config, Oid dbid, const char *budget)
{
	DbgateDbConf *d;

	if (config->ndbs >= config->maxdbs)
		config->dbs = grow_array(config->dbs, &config->maxdbs,
								 sizeof(DbgateDbConf));
	d = &config->dbs[config->ndbs++];
	d->dbid = dbid;
	strlcpy(d->budget, budget, NAMEDATALEN);
}

void
dbgate_image_remove_db(DbgateConfig *config, int i)
{
	config->dbs[i] = config->dbs[--config->ndbs];
}
