/*-------------------------------------------------------------------------
 *
 * rate.h
 *	  A budget's token bucket: max_rate and rate_burst (rate.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef DBGATE_RATE_H
#define DBGATE_RATE_H

#include "shmem.h"

/*
 * How far back a queued statement granted after the token waiter may take
 * its token: the latch wait's millisecond granularity and a scheduling
 * delay.
 */
#define DBGATE_TOKEN_CATCHUP_NS INT64CONST(2000000)

extern int64 dbgate_now_ns(void);
extern int64 dbgate_token_due(DbgateBudget *b, int64 now_ns);
extern int64 dbgate_token_take(DbgateBudget *b, int64 now_ns, bool force);
extern int64 dbgate_token_take_at(DbgateBudget *b, int64 now_ns,
								  int64 asof_ns, bool force);
extern void dbgate_token_return(DbgateBudget *b);
extern void dbgate_token_fill(DbgateBudget *b);

#endif							/* DBGATE_RATE_H */
