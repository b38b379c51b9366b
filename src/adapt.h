/*-------------------------------------------------------------------------
 *
 * adapt.h
 *	  The adaptive limit of a budget (adapt.c): the controller that finds
 *	  the knee of a budget's throughput curve and follows it.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DBGATE_ADAPT_H
#define DBGATE_ADAPT_H

#include "dbgate.h"

/* Length of a period of the controller, and its steps (README.md). */
#define DBGATE_ADAPT_PERIOD_MS	250

/*
 * The statement path (slot.c): a slot of a chain with an adapting level
 * was returned (taken at 'admitted_at').  Counts the statement at every
 * adapting level and, at most once per period and level, runs the step.
 */
extern void dbgate_adapt_released(const DbgateChain *c, TimestampTz admitted_at);

/*
 * The configuration install (budgets.c, with the tree lock or every lock
 * held, just before it installs the limits of 'conf'): the limit L that
 * budget b uses from now on under 'conf', from what it used before (its
 * old configuration is still in b->conf).  0 when 'conf' does not adapt.
 */
extern int32 dbgate_adapt_install(DbgateBudget *b, const DbgateBudgetConf *conf);

/*
 * The configuration install, once every budget has its limits and the
 * trees their shape (tree lock of 'root', or every lock, held): an
 * adapting parent's L is raised to its children's reservations.
 */
extern void dbgate_adapt_reserved(DbgateBudget *b, int root);

#endif							/* DBGATE_ADAPT_H */
