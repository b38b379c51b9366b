/*-------------------------------------------------------------------------
 *
 * confcheck.h
 *	  The checks of a configuration image between budgets (confcheck.c),
 *	  which the operations of a transaction (config.c) make before they
 *	  change the image: each raises the ERROR of the rule it checks.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DBGATE_CONFCHECK_H
#define DBGATE_CONFCHECK_H

#include "confimage.h"

/* A budget named by an operation is not in the image (42704). */

extern void dbgate_image_unknown_budget(const char *name);
extern void dbgate_image_check_unassigned(const DbgateConfig *config,
										  const char *budget);
extern void dbgate_image_check_parent(const DbgateConfig *config,
									  const DbgateBudgetConf *c, int bi);
extern void dbgate_image_check_reservations(const DbgateConfig *config,
											const char *parent,
											const DbgateBudgetConf *c, int bi);
extern void dbgate_image_check_runaway_target(const DbgateConfig *config,
											  const DbgateBudgetConf *c);
extern void dbgate_image_check_not_runaway_target(const DbgateConfig *config,
												  const char *name);
extern void dbgate_image_check_assignable(const DbgateConfig *config,
										  const char *name, Oid oid, bool db);
extern void dbgate_image_check_key_by(const DbgateConfig *config,
									  const DbgateBudgetConf *c, int bi);
extern void dbgate_image_check_childless(const DbgateConfig *config,
										 const char *name);

#endif							/* DBGATE_CONFCHECK_H */
