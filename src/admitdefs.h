/*-------------------------------------------------------------------------
 *
 * admitdefs.h
 *	  The small definitions of an admission: what it hands to the slot,
 *	  and how it ended.
 *
 * Apart from admission.h so that the files of admission (their lower
 * header admission_internals.h, waiting.h) use them without including
 * the statement path's view of admission.c.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DBGATE_ADMITDEFS_H
#define DBGATE_ADMITDEFS_H

#include "budgetdefs.h"

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

#endif							/* DBGATE_ADMITDEFS_H */
