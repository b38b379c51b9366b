/*-------------------------------------------------------------------------
 *
 * queuewait.h
 *	  A statement in its budget's queue (queuewait.c): the wait, leaving
 *	  the queue at an error or exit, the wait histogram's bounds.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DBGATE_QUEUEWAIT_H
#define DBGATE_QUEUEWAIT_H

#include "executor/execdesc.h"

#include "admitdefs.h"
#include "classify.h"
#include "shmem.h"

/* Leave the queue at an error or at exit while waiting (slot.c). */
extern void dbgate_admission_leave_queue(void);

/* The bounds of dbgate.wait_histogram's finite buckets (status.c). */
extern const double dbgate_hist_bounds_ms[DBGATE_HIST_BUCKETS];

/*
 * Wait in the queue that waiting.c linked us into, with no lock held,
 * until a slot is ours (true) or the budget stops gating us (false);
 * throws what ends the wait otherwise (queue timeout, cancel, terminate).
 */
extern DBGATE_HIDDEN bool dbgate_wait_in_queue(const DbgateLookup *lk,
											   bool utility,
											   QueryDesc *queryDesc,
											   TimestampTz now,
											   const DbgateLimits *l,
											   DbgateAdmission *a);

#endif							/* DBGATE_QUEUEWAIT_H */
