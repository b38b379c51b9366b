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

#include "classify.h"
#include "dbgate.h"

/* What an admission hands to the slot (admission.c -> slot.c). */
typedef struct DbgateAdmission
{
	DbgateChain chain;
	DbgateLimits lim;			/* the statement's budget's, when admitted */
	TimestampTz since;			/* when the slot was taken */
} DbgateAdmission;

typedef enum DbgateAdmit
{
	DBGATE_ADMIT_SLOT,			/* holds a slot now */
	DBGATE_ADMIT_NONE,			/* goes on without a slot */
	DBGATE_ADMIT_RETRY			/* the budget changed identity: classify again */
} DbgateAdmit;

extern DbgateAdmit dbgate_admit(const DbgateLookup *lk, bool utility,
								QueryDesc *queryDesc, DbgateAdmission *a);
extern void dbgate_admission_return(const DbgateChain *c,
									TimestampTz admitted_at);

/* This backend's entry */
extern void dbgate_admission_attach(int procno);
extern void dbgate_admission_mark(uint8 state, TimestampTz since);
extern void dbgate_admission_memory(int64 delta_kb, bool demote);
extern void dbgate_admission_count_terminated_idle(const DbgateChain *c);

#endif							/* DBGATE_ADMISSION_H */
