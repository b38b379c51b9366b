/*-------------------------------------------------------------------------
 *
 * dbgate.h
 *	  What the module entry (dbgate.c) exports: its registration with
 *	  PostgreSQL.
 *
 * dbgate.c is the top of dbgate: it defines the settings (their variables
 * live where they are used: shmem.h, classify.h), registers the hooks and
 * callbacks, and nothing calls into it.  The layout of the shared memory is
 * shmem.h's (the ground layer), the small definitions of a budget
 * budgetdefs.h's; each module declares its own functions and its own
 * shared state in its own header.  src/README is the map of the modules.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DBGATE_H
#define DBGATE_H

#include "postgres.h"

#include "fmgr.h"

/* Called by PostgreSQL when the library is loaded: the settings, the hooks. */
extern PGDLLEXPORT void _PG_init(void);

#endif							/* DBGATE_H */
