/*-------------------------------------------------------------------------
 *
 * waiting.h
 *	  Waiting in a budget's queue (waiting.c), as slot.c and the views see
 *	  it.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DBGATE_WAITING_H
#define DBGATE_WAITING_H

#include "dbgate.h"

/* Leave the queue at an error or at exit while waiting (slot.c). */
extern void dbgate_admission_leave_queue(void);

/* The bounds of dbgate.wait_histogram's finite buckets (status.c). */
extern const double dbgate_hist_bounds_ms[DBGATE_HIST_BUCKETS];

#endif							/* DBGATE_WAITING_H */
