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
 * time of the take, dimdefs.h): with a queue behind the bucket there is
 * no idle time to lose, and a rate of thousands per second would otherwise
 * fall short by the wake-up delays.  The tree's token waiter, for whom the
 * grant step was woken, takes its own token as of its due time however
 * late it woke; the waiters granted after it in the same step take theirs
 * as of at most DBGATE_DIM_CATCHUP_NS ago: a timer that fires late (the
 * latch wait counts in milliseconds) is made up for by admitting the
 * tokens that fell due meanwhile at once, and that is the only way the
 * admissions of a short stretch may exceed rate_burst (by at most
 * max_rate x DBGATE_DIM_CATCHUP_NS).  Over any window the count stays
 * within max_rate x time + rate_burst + max_rate x DBGATE_DIM_CATCHUP_NS:
 * every admission moves tat on by T, tat never goes back, an admission
 * needs tat <= now + tau, and the first one of the window sets tat to at
 * least its time - DBGATE_DIM_CATCHUP_NS + T.
 *
 * The word is the budget entry's rate_tat (nanoseconds of the monotonic
 * clock, CLOCK_MONOTONIC, which is the same in every process of the
 * machine and never goes back); 0 is a full bucket.  Taking a token is one
 * compare-and-swap, without a lock, also on the statement path; a waiter
 * checks with rate_due() before it is granted, and the grant takes the
 * token.  The interval and tolerance (the entry's qlim, aligned 8-byte
 * fields read as they are) are derived from the configuration when it is
 * installed, which also
 * fills the bucket (SPEC: full at creation, at server start and after any
 * change of max_rate or rate_burst).
 *
 * The rate is an admission dimension (dimdefs.h): the files of admission
 * reach it only through its entry of the table (dimension.c),
 * dbgate_rate_dimension below, at the levels whose dim_flags has
 * DBGATE_DIM_RATE's bit.  It keeps no per-statement state (no release)
 * and no shared memory of its own; its counter, rate_limited, is counted
 * by waiting.c for the levels that held a waiter back until a due time
 * (DbgateProc.token_levels) and zeroed by its reset_stats.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "dimdefs.h"
#include "gcra.h"
#include "rate.h"
#include "shmem.h"

/*
 * When is the next token of budget b due?  0 if one is there now.  (Its
 * due: the statement's entry and level do not matter to a bucket of the
 * budget.)
 */
static int64
rate_due(DbgateBudget *b, DbgateProc *e, int level, int64 now_ns)
{
	return dbgate_gcra_due(&b->rate_tat, b->qlim.rate_tolerance_ns, now_ns);
}

/*
 * Take a token of budget b (gcra.h: judged at now_ns, taken as of
 * asof_ns; with 'force' always taken, shadow mode: counted as held back,
 * not held back).  Returns 0 when taken, otherwise when the next one is
 * due.
 */
static int64
rate_take(DbgateBudget *b, DbgateProc *e, int level, int64 now_ns,
		  int64 asof_ns, bool force)
{
	return dbgate_gcra_take(&b->rate_tat, b->qlim.rate_interval_ns,
							b->qlim.rate_tolerance_ns, now_ns, asof_ns,
							force);
}

/* Give back a token taken a moment ago (its admission did not happen). */
static void
rate_untake(DbgateBudget *b, DbgateProc *e, int level)
{
	dbgate_gcra_untake(&b->rate_tat, b->qlim.rate_interval_ns);
}

/* A full bucket. */
static inline void
rate_fill(DbgateBudget *b)
{
	pg_atomic_write_u64(&b->rate_tat, 0);
}

/*
 * Install 'conf' (b->conf the old configuration): the interval and the
 * tolerance of a budget with a rate, and a full bucket for a new budget
 * and after a change of max_rate, rate_burst or enforce.  Caller holds the
 * tree lock.
 */
static bool
rate_install(DbgateBudget *b, const DbgateBudgetConf *conf,
			 DbgateQueueLimits *q)
{
	if (conf == NULL)
	{
		rate_fill(b);
		return false;
	}
	if (conf->max_rate > 0)
	{
		double		interval = 1e9 / conf->max_rate;

		q->rate_interval_ns = (int64) Max(interval, 1.0);
		q->rate_tolerance_ns = (int64) (Max(conf->rate_burst, 1) - 1) *
			q->rate_interval_ns;
	}
	if (b->conf.max_rate != conf->max_rate ||
		b->conf.rate_burst != conf->rate_burst ||
		b->conf.enforce != conf->enforce)
		rate_fill(b);
	return conf->max_rate > 0;
}

static void
rate_reset_stats(DbgateBudget *b)
{
	pg_atomic_write_u64(&b->rate_limited, 0);
}

const DbgateDimension dbgate_rate_dimension = {
	.name = "rate",
	.shmem_request = NULL,
	.shmem_init = NULL,
	.install = rate_install,
	.take = rate_take,
	.untake = rate_untake,
	.due = rate_due,
	.release = NULL,
	.reset_stats = rate_reset_stats,
};
