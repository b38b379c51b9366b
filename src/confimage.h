/*-------------------------------------------------------------------------
 *
 * confimage.h
 *	  Configuration images: backend-local copies of a whole configuration
 *	  (confimage.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef DBGATE_CONFIMAGE_H
#define DBGATE_CONFIMAGE_H

#include "budgetdefs.h"

/* One role assignment of a configuration image. */
typedef struct DbgateRoleConf
{
	Oid			roleid;
	char		budget[NAMEDATALEN];
} DbgateRoleConf;

/* One database assignment of a configuration image. */
typedef struct DbgateDbConf
{
	Oid			dbid;
	char		budget[NAMEDATALEN];
} DbgateDbConf;

/*
 * A hash index of an image's role or database assignments by OID: built
 * when first needed, kept up to date by the image functions.  slots ==
 * NULL: none.
 */
typedef struct DbgateOidIndex
{
	int32	   *slots;			/* array position + 1; 0 = empty */
	uint32		mask;			/* number of slots - 1 */
} DbgateOidIndex;

/*
 * A complete configuration (backend-local): what the state file holds and
 * what a committing transaction installs into shared memory.  The arrays
 * are changed only through the image functions below once assignments
 * have been looked up (the indexes follow them).
 */
typedef struct DbgateConfig
{
	int			nbudgets;
	int			maxbudgets;
	DbgateBudgetConf *budgets;
	int			nroles;
	int			maxroles;
	DbgateRoleConf *roles;
	int			ndbs;
	int			maxdbs;
	DbgateDbConf *dbs;
	DbgateOidIndex role_index;
	DbgateOidIndex db_index;
	int			nkeylimits;		/* (1.3) set_key_limit entries */
	int			maxkeylimits;
	DbgateKeyLimitConf *keylimits;
} DbgateConfig;

extern void dbgate_image_init(DbgateConfig *config);
extern void dbgate_image_alloc(DbgateConfig *config, int nbudgets, int nroles,
							   int ndbs);
extern void dbgate_image_copy(DbgateConfig *dst, const DbgateConfig *src);
extern void dbgate_image_free(DbgateConfig *config);
extern int	dbgate_image_find_budget(const DbgateConfig *config, const char *name);
extern int	dbgate_image_find_role(const DbgateConfig *config, Oid roleid);
extern int	dbgate_image_find_db(const DbgateConfig *config, Oid dbid);
extern void dbgate_image_add_budget(DbgateConfig *config,
									const DbgateBudgetConf *conf);
extern void dbgate_image_remove_budget(DbgateConfig *config, int i);
extern void dbgate_image_add_role(DbgateConfig *config, Oid roleid,
								  const char *budget);
extern void dbgate_image_remove_role(DbgateConfig *config, int i);
extern void dbgate_image_add_db(DbgateConfig *config, Oid dbid,
								const char *budget);
extern void dbgate_image_remove_db(DbgateConfig *config, int i);
extern int *dbgate_image_tree_order(const DbgateConfig *config);

/* (1.3) key limits */
extern void dbgate_image_alloc_keylimits(DbgateConfig *config, int n);
extern int	dbgate_image_find_keylimit(const DbgateConfig *config,
									   const char *budget, const char *key);
extern void dbgate_image_add_keylimit(DbgateConfig *config,
									  const DbgateKeyLimitConf *k);
extern void dbgate_image_remove_keylimit(DbgateConfig *config, int i);
extern int	dbgate_image_remove_keylimits_of(DbgateConfig *config,
											 const char *budget);
extern int	dbgate_image_keylimit_cmp(const void *a, const void *b);
extern bool dbgate_image_fit_keylimits(DbgateConfig *config, int max,
									   const char *what, const char *hint);

/*
 * qsort/bsearch orders of an image: budgets by name (a key may be a bare
 * name, 'name' being the first field), assignments by OID.
 */
extern int	dbgate_image_budget_cmp(const void *a, const void *b);
extern int	dbgate_image_role_cmp(const void *a, const void *b);
extern int	dbgate_image_db_cmp(const void *a, const void *b);
extern bool dbgate_image_fit(DbgateConfig *config, int max_budgets,
							 int max_roles, const char *what, const char *hint);

#endif							/* DBGATE_CONFIMAGE_H */
