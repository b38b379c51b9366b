/*-------------------------------------------------------------------------
 *
 * move.h
 *	  The move of a slot between chains (1.3, move.c), for the runaway
 *	  worker (runaway.c) alone.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DBGATE_MOVE_H
#define DBGATE_MOVE_H

#include "shmem.h"

/*
 * Move the slot of backend 'procno', whose statement ran away with ticket
 * 'ticket' in budget (budget, incarnation), to that budget's
 * runaway_budget.  Returns 1 when moved (*target: the name of the
 * target), 0 when there was nothing to move (the statement ended first,
 * the budget changed), -1 when the backend was using its chain (try again
 * shortly).
 */
extern int	dbgate_move_slot(int procno, uint32 ticket, int budget,
							 uint32 incarnation, TimestampTz start,
							 char *target);

/*
 * The target's statement_timeout and lock_timeout for the moved
 * statements that still run (the backend applies them from its next
 * statement on).  Returns the milliseconds until the next check is due,
 * or -1 when no moved statement is being watched.
 */
extern long dbgate_move_watch(void);

#endif							/* DBGATE_MOVE_H */
