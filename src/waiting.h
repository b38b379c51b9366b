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

#include "executor/execdesc.h"

#include "admitdefs.h"
#include "classify.h"
#include "shmem.h"

/*
 * No room at once (admission.c): the decision under the tree lock, then
 * the wait.  For the files of admission only.
 */
extern DBGATE_HIDDEN DbgateAdmit dbgate_admit_slow(const DbgateLookup *lk,
												   bool utility,
												   QueryDesc *queryDesc,
												   TimestampTz now,
												   DbgateAdmission *a);

#endif							/* DBGATE_WAITING_H */
