/*-------------------------------------------------------------------------
 *
 * admission.h
 *	  Admission, as the statement path uses it: a slot taken (queued for if
 *	  need be) and returned, and the backend's entry (admission.c; the
 *	  files of admission are listed there).
 *
 *-------------------------------------------------------------------------
 */
#ifndef DBGATE_ADMISSION_H
#define DBGATE_ADMISSION_H

#include "executor/execdesc.h"

#include "admitdefs.h"
#include "classify.h"


extern DbgateAdmit dbgate_admit(const DbgateLookup *lk, bool utility,
								QueryDesc *queryDesc, DbgateAdmission *a);
extern void dbgate_admission_return(const DbgateChain *c,
									TimestampTz admitted_at);

/* This backend's entry */
extern void dbgate_admission_attach(int procno);
extern void dbgate_admission_mark(uint8 state, TimestampTz since);
extern void dbgate_admission_memory(int64 delta_kb);
extern void dbgate_admission_count_terminated_idle(const DbgateChain *c);

#endif							/* DBGATE_ADMISSION_H */
