/*-------------------------------------------------------------------------
 *
 * memgrant.h
 *	  A budget's max_memory_mb: memory grants and the work_mem of a run
 *	  (memgrant.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef DBGATE_MEMGRANT_H
#define DBGATE_MEMGRANT_H

#include "executor/execdesc.h"

#include "budgetdefs.h"
#include "gucvar.h"

/* The smallest work_mem (kB) a grant lowers to: work_mem's own minimum. */
#define DBGATE_MIN_WORK_MEM		64

/*
 * A stretch of work (ExecutorStart, ExecutorRun, ExecutorFinish) of a run
 * with a memory grant.
 */
typedef struct DbgateMemStretch
{
	bool		entered;		/* counted in the stretch depth */
	DbgateGucOverride wm;		/* work_mem lowered for the stretch */
} DbgateMemStretch;

/*
 * True while this backend holds a slot of a budget with max_memory_mb > 0
 * (the ExecutorStart hook's test); the number of open grants (the
 * ExecutorRun / ExecutorFinish / ExecutorEnd hooks' test).
 */
extern PGDLLIMPORT bool dbgate_memgrant_slot;
extern PGDLLIMPORT int dbgate_memgrant_nrecs;

extern void dbgate_memgrant_slot_taken(const DbgateChain *chain,
									   int max_active, int max_memory_mb,
									   bool enforce, bool demote);
extern void dbgate_memgrant_slot_released(void);
extern void dbgate_memgrant_start(QueryDesc *queryDesc, DbgateMemStretch *st);
extern void dbgate_memgrant_enter(QueryDesc *queryDesc, DbgateMemStretch *st);
extern void dbgate_memgrant_leave(QueryDesc *queryDesc, DbgateMemStretch *st,
								  bool is_error);
extern void dbgate_memgrant_end(QueryDesc *queryDesc);
extern void dbgate_memgrant_subxact_abort(SubTransactionId mySubid);
extern bool dbgate_memgrant_nested(void);
extern double dbgate_memgrant_open_kb(void);
extern void dbgate_memgrant_lower_work_mem(DbgateGucOverride *o, int kb,
										   bool to_workers);

#endif							/* DBGATE_MEMGRANT_H */
