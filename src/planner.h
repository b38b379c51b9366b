/*-------------------------------------------------------------------------
 *
 * planner.h
 *	  The planner hook (planner.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef DBGATE_PLANNER_H
#define DBGATE_PLANNER_H

extern void dbgate_planner_init(void);

#endif							/* DBGATE_PLANNER_H */
