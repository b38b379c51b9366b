/*-------------------------------------------------------------------------
 *
 * config.h
 *	  Transactional configuration changes (config.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef DBGATE_CONFIG_H
#define DBGATE_CONFIG_H

#include "access/xact.h"

#include "budgetdefs.h"
#include "confimage.h"

extern bool dbgate_config_busy;	/* changes pending in this transaction */
extern void dbgate_config_xact_callback(XactEvent event);
extern void dbgate_config_subxact_callback(SubXactEvent event,
										   SubTransactionId mySubid,
										   SubTransactionId parentSubid);
extern void dbgate_config_current(DbgateConfig *config);

/* The changes of the SQL functions; the alter mask: see fields.h. */
extern void dbgate_config_add_create(const DbgateBudgetConf *conf);
extern void dbgate_config_add_alter(const char *name, const DbgateBudgetConf *values,
									uint32 mask);
extern void dbgate_config_add_drop(const char *name, bool force);
extern void dbgate_config_add_set_key_limit(const DbgateKeyLimitConf *k);
extern void dbgate_config_add_reset_key_limit(const char *budget,
											  const char *key);
extern void dbgate_config_add_assign(Oid roleid, const char *budget);
extern bool dbgate_config_add_unassign(Oid roleid);
extern void dbgate_config_add_assign_db(Oid dbid, const char *budget);
extern bool dbgate_config_add_unassign_db(Oid dbid);

/* DROP ROLE and DROP DATABASE (dbgate.c's ProcessUtility hook) */
extern void dbgate_config_role_dropped(Oid roleid);
extern void dbgate_config_database_dropped(Oid dbid);

#endif							/* DBGATE_CONFIG_H */
