/*-------------------------------------------------------------------------
 *
 * lockgraph.h
 *	  Lock safety: the waits-for graph across queues (lockgraph.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef DBGATE_LOCKGRAPH_H
#define DBGATE_LOCKGRAPH_H

#include "dbgate.h"

extern void dbgate_lockgraph_check(int idx, TimestampTz now);

/* admission.c, for the lock-holder check */
typedef struct DbgateHeldBack
{
	int			pid;
	int			procno;
	int			nlevels;		/* full enforcing levels of its chain */
	int32		levels[DBGATE_MAX_DEPTH];
	uint32		incs[DBGATE_MAX_DEPTH];
} DbgateHeldBack;

extern int	dbgate_admission_claim_lock_check(int idx, TimestampTz now,
											  TimestampTz until);
extern int	dbgate_admission_held_back(int root, DbgateHeldBack *out, int max);
extern int	dbgate_admission_lock_waiting_holders(int idx, uint32 inc,
												  int *pids, int max);
extern bool dbgate_admission_queued_levels(int procno, int pid,
										   DbgateHeldBack *hb);
extern void dbgate_admission_admit_lock_holder(int procno, int pid);

#endif							/* DBGATE_LOCKGRAPH_H */
