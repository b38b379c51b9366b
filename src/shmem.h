/*-------------------------------------------------------------------------
 *
 * shmem.h
 *	  The set-up of dbgate's shared memory (shmem.c), the settings it
 *	  reads, and the lookup of a budget entry by name.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DBGATE_SHMEM_H
#define DBGATE_SHMEM_H

/* Settings (dbgate.c defines them as GUCs). */
extern PGDLLIMPORT bool dbgate_enabled;
extern PGDLLIMPORT int dbgate_max_budgets;
extern PGDLLIMPORT int dbgate_max_roles;
extern PGDLLIMPORT int dbgate_max_quarantine;

extern void dbgate_shmem_request(void);
extern bool dbgate_shmem_init(void);
extern void dbgate_check_loaded(void);
extern int	dbgate_find_budget(const char *name);

#endif							/* DBGATE_SHMEM_H */
