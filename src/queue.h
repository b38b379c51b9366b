/*-------------------------------------------------------------------------
 *
 * queue.h
 *	  The queues of the budgets (queue.c), as the configuration install and
 *	  the views reach them: the one interface of the configuration side to
 *	  the files of admission.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DBGATE_QUEUE_H
#define DBGATE_QUEUE_H

#include "shmem.h"

/* The lock of budget idx's tree; returns the root, whose lock it is. */
extern int	dbgate_admission_lock_tree(int idx);

/* For the configuration install (budgets.c) */
extern void dbgate_admission_budget_created(DbgateBudget *b);
extern void dbgate_admission_set_limits(DbgateBudget *b,
										const DbgateBudgetConf *conf,
										int parent, uint32 parent_incarnation);
extern void dbgate_admission_release_waiters(DbgateBudget *b);
extern void dbgate_admission_budget_dropped(DbgateBudget *b);
extern void dbgate_admission_recount_queued(void);
extern void dbgate_admission_admit_all(DbgateBudget *b);
extern void dbgate_admission_grant(int root);
extern void dbgate_admission_set_adapt_chain(DbgateBudget *b, bool adapt_chain);

/* For the adaptive limit (adapt.c) */
extern void dbgate_admission_set_adaptive(DbgateBudget *b, int root,
										  int32 limit);

/* For the views (status.c) */
#define DBGATE_ROW_QUEUED		0
#define DBGATE_ROW_ACTIVE		1
#define DBGATE_ROW_HELD			2	/* holds a slot, nothing runs under it */

typedef struct DbgateBackendRow
{
	int32		pid;
	Oid			roleid;
	int			budget;
	uint8		state;			/* DBGATE_ROW_* */
	uint8		rule;			/* DbgateRule */
	Oid			via;
	TimestampTz since;
	int32		position;		/* 1 = next; queued only */
	int64		memory_kb;		/* open memory grants */
	int			demoted_from;	/* budget index a demoted slot came from, or
								 * -1 (1.3, demote.c) */
} DbgateBackendRow;

extern int	dbgate_admission_backends(int idx, DbgateBackendRow *rows,
									  int maxrows);
extern uint64 dbgate_admission_oldest_wait(int idx);
extern int	dbgate_admission_idle_count(int idx);

/* ----------
 * For the other files of admission only (admission.c lists them): the
 * tree lock, the queue lists, granting, returning a slot.  Hidden from
 * outside the library (admission_internals.h says why).
 * ----------
 */
struct Wakeups;					/* admission_internals.h */

extern DBGATE_HIDDEN int dbgate_lock_tree(int idx);
extern DBGATE_HIDDEN void dbgate_list_append(DbgateBudget *b, int procno);
extern DBGATE_HIDDEN void dbgate_list_unlink(DbgateBudget *b, int procno);
extern DBGATE_HIDDEN void dbgate_queue_remove(int procno);
extern DBGATE_HIDDEN void dbgate_held_return(DbgateBudget *b, int n);
extern DBGATE_HIDDEN bool dbgate_held_settle(DbgateBudget *b);
extern DBGATE_HIDDEN bool dbgate_promote(int procno, bool beyond,
										 int64 now_ns, int64 asof_ns);
extern DBGATE_HIDDEN void dbgate_grant_tree(int root, TimestampTz now,
											struct Wakeups *w);
extern DBGATE_HIDDEN void dbgate_admission_release(const DbgateChain *c,
												   TimestampTz admitted_at);

#endif							/* DBGATE_QUEUE_H */
