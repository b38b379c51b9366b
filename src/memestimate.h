/*-------------------------------------------------------------------------
 *
 * memestimate.h
 *	  The working memory a plan may use, in units of work_mem
 *	  (memestimate.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef DBGATE_MEMESTIMATE_H
#define DBGATE_MEMESTIMATE_H

#include "miscadmin.h"
#include "nodes/plannodes.h"

typedef struct DbgateMemEstimate
{
	double		work_units;		/* places that may hold work_mem */
	double		hash_units;		/* places that may hold hash_mem */
	double		need_kb;		/* the largest planned need of one of them,
								 * in kB of work_mem (rows x width) */
} DbgateMemEstimate;

extern void dbgate_mem_estimate(PlannedStmt *pstmt, DbgateMemEstimate *est);

/* units such that the estimate at a work_mem of w kB is units * w kB */
static inline double
dbgate_mem_units(const DbgateMemEstimate *est)
{
	return est->work_units + est->hash_units * hash_mem_multiplier;
}

#endif							/* DBGATE_MEMESTIMATE_H */
