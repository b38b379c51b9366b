/*-------------------------------------------------------------------------
 *
 * budgets.h
 *	  A configuration installed into the shared budget table, and the
 *	  table copied out (budgets.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef DBGATE_BUDGETS_H
#define DBGATE_BUDGETS_H

#include "access/xlogdefs.h"

#include "confimage.h"
#include "shmem.h"

extern void dbgate_install_initial(void);
extern void dbgate_install_config(const DbgateConfig *config, XLogRecPtr lsn);
extern void dbgate_install_replayed(DbgateConfig *config, XLogRecPtr lsn);
extern void dbgate_snapshot_config(DbgateConfig *config);
extern void dbgate_reset_budget_stats(DbgateBudget *b, TimestampTz now);

#endif							/* DBGATE_BUDGETS_H */
