/*-------------------------------------------------------------------------
 *
 * waitsnap.h
 *	  A queued statement gives up its snapshot while it waits (waitsnap.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef DBGATE_WAITSNAP_H
#define DBGATE_WAITSNAP_H

#include "executor/execdesc.h"

extern bool dbgate_waitsnap_release(QueryDesc *queryDesc);
extern void dbgate_waitsnap_retake(QueryDesc *queryDesc);
extern bool dbgate_waitsnap_utility_release(void);
extern void dbgate_waitsnap_utility_retake(void);
extern bool dbgate_waitsnap_call_release(void);
extern void dbgate_waitsnap_call_retake(void);

#endif							/* DBGATE_WAITSNAP_H */
