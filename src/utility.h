/*-------------------------------------------------------------------------
 *
 * utility.h
 *	  Which utility commands take a slot (utility.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef DBGATE_UTILITY_H
#define DBGATE_UTILITY_H

#include "nodes/plannodes.h"
#include "tcop/utility.h"

extern bool dbgate_utility_takes_slot(PlannedStmt *pstmt,
									  ProcessUtilityContext context);

#endif							/* DBGATE_UTILITY_H */
