/*-------------------------------------------------------------------------
 *
 * install.h
 *	  The queues as a configuration install and the views reach them
 *	  (install.c): with the tree lock of queue.h, the one interface of the
 *	  configuration side to the files of admission.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DBGATE_INSTALL_H
#define DBGATE_INSTALL_H

#include "shmem.h"

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

/* The adaptive limit that adapt.c computes, applied */
extern void dbgate_admission_set_adaptive(DbgateBudget *b, int root,
										  int32 limit);
extern void dbgate_admission_adapt_released(const DbgateChain *c,
											TimestampTz admitted_at);
extern void dbgate_admission_adapt_reserved(DbgateBudget *b, int root);

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
	uint8		key_flags;		/* DBGATE_KEYF_* (1.3): HELD, OVERFLOW */
	int32		key_entry;		/* its key's entry (queue_position) */
	uint32		key_active;		/* ... and its active statements */
	char		key[DBGATE_KEY_MAXLEN + 1];
} DbgateBackendRow;

extern int	dbgate_admission_backends(int idx, DbgateBackendRow *rows,
									  int maxrows);
extern uint64 dbgate_admission_oldest_wait(int idx);
extern int	dbgate_admission_idle_count(int idx);

#endif							/* DBGATE_INSTALL_H */
