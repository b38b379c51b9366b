/*-------------------------------------------------------------------------
 *
 * gcra.h
 *	  A token bucket in one atomic word: the generic cell rate algorithm
 *	  on a theoretical arrival time.  The arithmetic of every bucket of
 *	  dbgate (a budget's rate: rate.c; a key's: keydim.c), which has the
 *	  rules of the "as of" time (rate.c's header).
 *
 * The word holds the theoretical arrival time (tat) of the next admission
 * if admissions came exactly at the rate, in nanoseconds of
 * dbgate_now_ns()'s clock; 0 is a full bucket.  With interval T = 1 /
 * rate and tolerance tau = (burst - 1) x T, an admission at t finds a
 * token when max(tat, t) - t <= tau, and then sets tat = max(tat, t) + T;
 * without one, the next is due at max(tat, t) - tau.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DBGATE_GCRA_H
#define DBGATE_GCRA_H

#include "port/atomics.h"

/* When is the next token of the bucket due?  0 if one is there now. */
static inline int64
dbgate_gcra_due(pg_atomic_uint64 *tatp, int64 tolerance, int64 now_ns)
{
	int64		tat = (int64) pg_atomic_read_u64(tatp);

	if (tat <= now_ns || tat - now_ns <= tolerance)
		return 0;
	return tat - tolerance;
}

/*
 * Take a token.  Returns 0 when taken, otherwise when the next one is due
 * (nothing taken).  With 'force' a token is always taken, even ahead of
 * its time, and the return value still says whether one was due.  Judged
 * at now_ns, taken as of asof_ns <= now_ns: tat moves on from max(tat,
 * asof_ns), so the time between a queued statement's due time and now is
 * not lost.
 */
static inline int64
dbgate_gcra_take(pg_atomic_uint64 *tatp, int64 interval, int64 tolerance,
				 int64 now_ns, int64 asof_ns, bool force)
{
	uint64		old = pg_atomic_read_u64(tatp);

	Assert(asof_ns <= now_ns);
	for (;;)
	{
		int64		next = Max((int64) old, now_ns);
		int64		start = Max((int64) old, asof_ns);
		int64		due = 0;

		if (next - now_ns > tolerance)
		{
			due = next - tolerance;
			if (!force)
				return due;
		}
		if (pg_atomic_compare_exchange_u64(tatp, &old,
										   (uint64) (start + interval)))
			return due;
	}
}

/* Give back a token taken a moment ago (its admission did not happen). */
static inline void
dbgate_gcra_untake(pg_atomic_uint64 *tatp, int64 interval)
{
	uint64		old = pg_atomic_read_u64(tatp);

	for (;;)
	{
		uint64		new = (old > (uint64) interval) ? old - (uint64) interval : 0;

		if (pg_atomic_compare_exchange_u64(tatp, &old, new))
			return;
	}
}

#endif							/* DBGATE_GCRA_H */
