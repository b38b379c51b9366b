/*-------------------------------------------------------------------------
 *
 * rate.c
 *	  A budget's max_rate and rate_burst: a token bucket in one atomic word.
 *
 * The bucket is kept as the generic cell rate algorithm keeps it: not a
 * count of tokens and a refill time, but the *theoretical arrival time*
 * (tat) of the next admission if admissions came exactly at the rate.  With
 * interval T = 1 / max_rate and tolerance tau = (rate_burst - 1) x T, an
 * admission at time t finds a token when max(tat, t) - t <= tau, and then
 * sets tat = max(tat, t) + T.  That is a bucket of rate_burst tokens filled
 * at max_rate per second, one token per admission: after an idle period
 * (tat in the past) rate_burst admissions may follow each other at once,
 * and from then on one every T.  Without a token the next one is due at
 * max(tat, t) - tau.
 *
 * A queued statement takes its token as of the time it was due, not of the
 * moment the grant step reaches it (queue.c's grant step; the "as of"
 * time of dbgate_token_take_at): with a queue behind the bucket there is
 * no idle time to lose, and a rate of thousands per second would otherwise
 * fall short by the wake-up delays.  The tree's token waiter, for whom the
 * grant step was woken, takes its own token as of its due time however
 * late it woke; the waiters granted after it in the same step take theirs
 * as of at most DBGATE_TOKEN_CATCHUP_NS ago: a timer that fires late (the
 * latch wait counts in milliseconds) is made up for by admitting the
 * tokens that fell due meanwhile at once, and that is the only way the
 * admissions of a short stretch may exceed rate_burst (by at most
 * max_rate x DBGATE_TOKEN_CATCHUP_NS).  Over any window the count stays
 * within max_rate x time + rate_burst + max_rate x DBGATE_TOKEN_CATCHUP_NS:
 * every admission moves tat on by T, tat never goes back, an admission
 * needs tat <= now + tau, and the first one of the window sets tat to at
 * least its time - DBGATE_TOKEN_CATCHUP_NS + T.
 *
 * The word is the budget entry's rate_tat (nanoseconds of the monotonic
 * clock, CLOCK_MONOTONIC, which is the same in every process of the
 * machine and never goes back); 0 is a full bucket.  Taking a token is one
 * compare-and-swap, without a lock, also on the statement path; a waiter
 * checks with token_due() before it is granted, and the grant takes the
 * token.  The interval and tolerance (the entry's qlim, aligned 8-byte
 * fields read as they are) are derived from the configuration when it is
 * installed, which also
 * fills the bucket (SPEC: full at creation, at server start and after any
 * change of max_rate or rate_burst).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <time.h>

#include "rate.h"
#include "shmem.h"

/* Nanoseconds of the monotonic clock (vDSO: no system call). */
int64
dbgate_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64) ts.tv_sec * INT64CONST(1000000000) + ts.tv_nsec;
}

/*
 * When is the next token of budget b due?  0 if one is there now.
 */
int64
dbgate_token_due(DbgateBudget *b, int64 now_ns)
{
	int64		tat = (int64) pg_atomic_read_u64(&b->rate_tat);
	int64		tolerance = b->qlim.rate_tolerance_ns;

	if (tat <= now_ns || tat - now_ns <= tolerance)
		return 0;
	return tat - tolerance;
}

/*
 * Take a token of budget b.  Returns 0 when taken, otherwise when the next
 * one is due (nothing taken).  With 'force' a token is always taken, even
 * ahead of its time (shadow mode: counted as held back, not held back);
 * the return value then still says whether one was due.
 */
int64
dbgate_token_take(DbgateBudget *b, int64 now_ns, bool force)
{
	return dbgate_token_take_at(b, now_ns, now_ns, force);
}

/*
 * dbgate_token_take for a queued statement: whether a token is there is
 * judged at now_ns, and it is taken as of asof_ns (<= now_ns) if the
 * bucket's next token fell due before now: tat moves on from
 * max(tat, asof_ns), so the time between its due time and now is not lost.
 */
int64
dbgate_token_take_at(DbgateBudget *b, int64 now_ns, int64 asof_ns, bool force)
{
	uint64		old = pg_atomic_read_u64(&b->rate_tat);
	int64		interval = b->qlim.rate_interval_ns;
	int64		tolerance = b->qlim.rate_tolerance_ns;

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
		if (pg_atomic_compare_exchange_u64(&b->rate_tat, &old,
										   (uint64) (start + interval)))
			return due;
	}
}

/*
 * Give back a token taken a moment ago (its admission did not happen).
 */
void
dbgate_token_return(DbgateBudget *b)
{
	uint64		old = pg_atomic_read_u64(&b->rate_tat);
	uint64		interval = (uint64) b->qlim.rate_interval_ns;

	for (;;)
	{
		uint64		new = (old > interval) ? old - interval : 0;

		if (pg_atomic_compare_exchange_u64(&b->rate_tat, &old, new))
			return;
	}
}

/* A full bucket. */
void
dbgate_token_fill(DbgateBudget *b)
{
	pg_atomic_write_u64(&b->rate_tat, 0);
}
