/*-------------------------------------------------------------------------
 *
 * trees.h
 *	  Trees of budgets (trees.c): what the shadow levels of a chain count,
 *	  and which waiter of a tree a free slot goes to.  For the other files
 *	  of admission only (admission.c lists them).
 *
 *-------------------------------------------------------------------------
 */
#ifndef DBGATE_TREES_H
#define DBGATE_TREES_H

#include "shmem.h"

/* A candidate of the grant step (trees.c chooses it, queue.c grants it). */
typedef struct Pick
{
	int			procno;			/* -1: none */
	TimestampTz since;			/* its arrival, for ties */
	bool		overdue;
	int64		due_ns;			/* for a token waiter: when it is due */
	int8		token_level;	/* for a token waiter: the level lacking a
								 * token of its own bucket (-1: only a
								 * key's) */
} Pick;

struct ChainLimits;				/* admission_internals.h */

extern DBGATE_HIDDEN void dbgate_count_shadow(const struct ChainLimits *cl,
											  const uint32 *before,
											  uint32 lacked);
extern DBGATE_HIDDEN bool dbgate_select_tree(int root, TimestampTz now,
											 int64 now_ns, Pick *pick,
											 Pick *blocked);
extern DBGATE_HIDDEN bool dbgate_lifo_overdue(DbgateBudget *b,
											  TimestampTz now);

#endif							/* DBGATE_TREES_H */
