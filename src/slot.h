/*-------------------------------------------------------------------------
 *
 * slot.h
 *	  The life of this backend's slot (slot.c), as the hooks drive it.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DBGATE_SLOT_H
#define DBGATE_SLOT_H

#include "executor/execdesc.h"
#include "nodes/plannodes.h"

#include "shmem.h"
#include "timeouts.h"

/*
 * Flags the hooks look at before they call in (dbgate.c): each is one
 * test on the statement path.
 */
/* Variables of the slot's files (slot.c), hidden from outside the library */
extern DBGATE_HIDDEN int dbgate_nrefs;	/* references keeping this backend's
										 * slot */
extern DBGATE_HIDDEN bool dbgate_slot_has_limits;	/* the slot's budget has
													 * timeouts or
													 * max_memory_mb */
extern DBGATE_HIDDEN bool dbgate_refs_span_subxacts;
extern DBGATE_HIDDEN bool dbgate_run_work;	/* ExecutorRun/Finish have work
											 * to do */
extern DBGATE_HIDDEN bool dbgate_slot_busy;	/* the transaction's end has
											 * work to do */
extern DBGATE_HIDDEN bool dbgate_xact_committing;	/* the commit has started */

extern void dbgate_slot_executor_start(QueryDesc *queryDesc, int eflags);
extern void dbgate_slot_executor_end(QueryDesc *queryDesc);
extern void dbgate_slot_commit_start(bool prepare);
extern void dbgate_slot_xact_end(void);
extern void dbgate_slot_subxact_start(void);
extern void dbgate_slot_subxact_abort(SubTransactionId mySubid);
extern void dbgate_slot_utility_start(void);
extern void dbgate_slot_utility_done(PlannedStmt *pstmt, bool toplevel);
extern void dbgate_slot_call_start(void);

/*
 * A DO block or a CALL starts or ends (dbgate.c: end() on every exit):
 * inside one, each statement that runs under a slot already held has a
 * clock of its own (slot.c, "Clocks").
 */
extern void dbgate_slot_block_begin(void);
extern void dbgate_slot_block_end(void);

/* Around ExecutorRun / ExecutorFinish (finish: the latter) */
extern bool dbgate_run_begin(QueryDesc *queryDesc, DbgateLimitState *st,
							 bool finish);
extern void dbgate_run_end(QueryDesc *queryDesc, DbgateLimitState *st,
						   bool is_error);

/*
 * A utility command that takes a slot like a query (budget field
 * 'utility'; which commands qualify is decided by the caller).  begin()
 * classifies the backend and, when its budget has utility = true and no
 * slot is held yet, admits (queue, reject) exactly like ExecutorStart.
 * Returns true when a slot was taken for the command; the caller must
 * then call end() once on every exit (PG_FINALLY).  The slot stays held
 * across the transactions a command such as VACUUM runs internally.
 */
extern bool dbgate_utility_begin(void);
extern void dbgate_utility_end(void);

#endif							/* DBGATE_SLOT_H */
