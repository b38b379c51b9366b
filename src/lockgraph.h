/*-------------------------------------------------------------------------
 *
 * lockgraph.h
 *	  The lock-holder check across the queues (lockgraph.c), for a queued
 *	  backend (waiting.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef DBGATE_LOCKGRAPH_H
#define DBGATE_LOCKGRAPH_H

#include "shmem.h"

/* The lock-holder check of the tree of budget idx, at 'now'. */
extern DBGATE_HIDDEN void dbgate_lockgraph_check(int idx, TimestampTz now);

#endif							/* DBGATE_LOCKGRAPH_H */
