/*-------------------------------------------------------------------------
 *
 * queue.h
 *	  The queues of the budgets (queue.c): the tree lock, for the
 *	  configuration install, the views and the adaptive limit; what the
 *	  other files of admission use of queue.c.  The install's side of the
 *	  queues and the views' reads are install.h's.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DBGATE_QUEUE_H
#define DBGATE_QUEUE_H

#include "shmem.h"

/* The lock of budget idx's tree; returns the root, whose lock it is. */
extern int	dbgate_admission_lock_tree(int idx);

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
