/*-------------------------------------------------------------------------
 *
 * adapt.c
 *	  The adaptive limit of a budget (1.3): a limit L between adapt_min and
 *	  max_active that the budget finds from what the server measures of it,
 *	  and follows.  With adapt = 'on' L is the budget's max_active for
 *	  admission; with 'shadow' it is only computed and shown.
 *
 * When it runs
 * ------------
 * Without a process of its own: the statement path counts every statement
 * of a chain with an adapting level when its slot is returned (slot.c
 * calls dbgate_adapt_released(), only when the cached limits say that some
 * level adapts: a budget that does not adapt pays nothing), and the first
 * such return after the end of a period (DBGATE_ADAPT_PERIOD_MS) runs the
 * step of that level: one compare-and-swap of the period's end decides who.
 * A budget where nothing ends takes no steps, and stays as it is.
 *
 * The signals (per period, of the budget and its subtree)
 * --------------------------------------------------------
 *	  X		statements finished per second;
 *	  N		their slot time per second: the mean number of statements active;
 *	  W		whether work waited: a waiter now, or admissions after a wait;
 *	  held	whether it was held back by something else than its own L
 *			(SPEC: it waited for tokens or for an ancestor's slots): a
 *			statement of it waited for a token (rate_limited), or a grant
 *			step passed over a waiter of its subtree that had room at
 *			every level up to the budget, because a level above it was
 *			full (held_above, counted by trees.c: slots of an ancestor
 *			taken by statements, kept for a sibling's reservation or held
 *			for a 'lifo' sibling).  Counted over the period, not read at
 *			the step: the step runs just after a release, whose freed slot
 *			a non-fair budget (or a fair 'lifo' one with nobody overdue)
 *			leaves to the waiter it woke, so the budget would look held
 *			back at nearly every step; and a parent's 'queued' counts its
 *			children's waiters at their own limits, which wait for no
 *			slot of the parent's or above.  A top-level budget is held
 *			back only by tokens;
 * and one sample, at the step, of what backends wait for (PostgreSQL's
 * wait_event_info of every process, read without a lock as
 * pg_stat_activity does): R, the backends of the whole server that run or
 * could run on a CPU (no wait event); C, the budget's active statements
 * among them; K, the budget's active statements that wait for a
 * heavyweight lock.  R, C and K are averaged over periods (each period
 * weighs one half), which smooths one sample's noise; a step that changes
 * L starts the averages again from the next sample.
 *
 * The law (README.md "Adaptive limit" says it for users; docs/design.md
 * "How the adaptive limit moves" in full)
 * ------------------------------------------------------
 * Steps are bounded: at most max(1, L/8) up and max(1, L/4) down per
 * period.  In this order:
 *	  1. held, or idle (not W and N < L/2): L stays.
 *	  2. The check of the last decrease: if throughput fell below 85 % of
 *		 its average over the periods before (each period weighs one half;
 *		 at least 4 busy periods: the first ones after the budget started
 *		 to adapt are its clients connecting and a burst of ends, no
 *		 baseline) while work still waited, and by more than chance (the
 *		 period's ends short of what that average expects by more than
 *		 three standard deviations of a Poisson count: at 70 expected,
 *		 a fall to under 45), L goes back up towards what it was (one
 *		 bounded step up), and no decrease follows for 10 periods (a
 *		 bounded step down is the only probe; L is never dropped to
 *		 measure anything).
 *	  3. Past the knee on CPU: R > CPU_OVERCOMMIT (8) x the CPUs and at
 *		 least a quarter of L (and at least one) of the budget's statements
 *		 are on a CPU: L falls by the budget's share (C/R) of the excess, at
 *		 least 1.  Not at 1 x: a statement's parse, plan and result run
 *		 outside its slot, a slot handed on leaves its CPU idle for the
 *		 wake-up, and clients may share the CPUs, so throughput still grows
 *		 well past as many statements as CPUs (on two CPUs a fixed budget of
 *		 2, 4, 8 and 16 gives 0.79, 0.94, 0.94 and 0.98 of the best); the
 *		 rule is against oversubscription, where more statements only queue
 *		 on the CPUs and add latency.
 *	  4. Past the knee on locks: K >= max(1.5, L/2) (half of the budget's
 *		 statements wait for each other's row or table locks): L falls by
 *		 max(1, L/4).
 *	  5. Below the knee: W, K below max(0.5, L/4) (a dead band between it and
 *		 rule 4, so that L does not swing around a knee of lock waits), and
 *		 either R below the number of CPUs or fewer than a quarter of L of
 *		 the budget's statements on a CPU (they sleep or wait for I/O: more
 *		 of them cost the CPUs little): L rises by max(1, L/8).
 *	  6. Otherwise L stays.
 * Statements that sleep, wait for I/O or for an LWLock (the WAL flush of a
 * group commit) are not on a CPU and not waiting for each other's locks:
 * more of them do not lower L.  None of the signals is a time, so a change
 * of the statement mix does not move L by itself (a mix of cheap and
 * costly statements is as many statements on a CPU); query ids are not
 * needed.  L is at least adapt_min and, for a parent, the reservations of
 * its children, and at most max_active.
 *
 * test/bench/adapt_sim.py simulates the step in trees of budgets (fair,
 * non-fair and 'lifo' queues, wake-ups) for the rule of 'held'.
 *
 * Configuration changes (dbgate_adapt_install(), from the install)
 * -----------------------------------------------------------------
 * L starts at max_active when the budget starts to adapt (and at server
 * start); 'shadow' <-> 'on' keeps it.  Raising max_active raises L by as
 * much; lowering it, or raising adapt_min, clamps L at once.  Once the
 * whole configuration is installed (the children's reservations, the
 * shape of the trees), dbgate_adapt_reserved() raises a parent's L to its
 * children's reservations if it is below them.  Memory grants stay
 * max_memory_mb / max_active (lim.grant_max_active).
 *
 * Shared state and locks
 * ----------------------
 * This file owns the adaptive fields of a budget entry (shmem.h): the
 * counts adapt_done and adapt_busy_us (atomic additions, statement path),
 * adapt_due_us (compare-and-swap), adapt_limit (written under the tree
 * lock, by the step and by the install) and the controller's memory, a
 * DbgateAdaptState per budget entry in this file's shared memory (tree
 * lock); it reads held_above, which the grant step counts
 * (trees.c, tree lock).  This file computes L and takes no lock: the core
 * applies it (install.c).  At the release of a statement of an adapting
 * chain, install.c's dbgate_admission_adapt_released() counts it here
 * (dbgate_adapt_count(), adapt.h, inline) and, for a level whose period
 * has ended, takes the one tree lock of its budget (as a release with
 * waiters does), runs the step (dbgate_adapt_step()) and, where L changed
 * in a budget that admits by it, writes lim.max_active
 * (dbgate_admission_set_adaptive()), which hands out slots at once when L
 * rose.  The install does the same with dbgate_adapt_install() (inside
 * dbgate_admission_set_limits()) and dbgate_adapt_reserved().  No
 * ereport() and no allocation under the lock.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "miscadmin.h"
#include "storage/proc.h"
#include "storage/shmem.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"

#include "adapt.h"
#include "shmem.h"

#define HOLD_PERIODS	10
#define GUARD_SIGMAS	3.0		/* a fall of the check is this many sd */
#define GUARD_MIN_PERIODS 4		/* busy periods x_avg needs to be compared */
#define WAIT_CLASS_MASK	0xFF000000U
#define CPU_OVERCOMMIT	8.0		/* rule 3: runnable per CPU past the knee */

/* one read of a field that others write (as pg_stat_activity reads it) */
#define READ_ONCE_U32(var)	((uint32) (*((volatile uint32 *) &(var))))

static inline DbgateBudget *
entry(int idx)
{
	return &dbgate_shared->budgets[idx].d;
}

/* The controllers' memory, one per budget entry (adapt.h) */
static DbgateAdaptState *adapt_states = NULL;

static Size
adapt_shmem_size(void)
{
	return mul_size((Size) dbgate_max_budgets, sizeof(DbgateAdaptState));
}

void
dbgate_adapt_shmem_request(void)
{
	RequestAddinShmemSpace(adapt_shmem_size());
}

/* Every controller empty (a new segment: server start, crash restart). */
void
dbgate_adapt_shmem_init(void)
{
	bool		found;

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	adapt_states = ShmemInitStruct("dbgate adapt", adapt_shmem_size(), &found);
	if (!found)
		memset(adapt_states, 0, adapt_shmem_size());
	LWLockRelease(AddinShmemInitLock);
}

/* The index of budget entry b */
static inline int
entry_index(const DbgateBudget *b)
{
	return (int) ((const DbgateBudgetPadded *) b - dbgate_shared->budgets);
}

static int32
clamp_limit(int32 l, const DbgateBudgetConf *conf)
{
	return Max(Min(l, conf->max_active), Min(conf->adapt_min, conf->max_active));
}

/* ----------
 * The install
 * ----------
 */
int32
dbgate_adapt_install(DbgateBudget *b, const DbgateBudgetConf *conf)
{
	const DbgateBudgetConf *old = &b->conf;
	int32		l = (int32) pg_atomic_read_u32(&b->adapt_limit);

	if (conf->adapt == DBGATE_ADAPT_OFF)
	{
		pg_atomic_write_u32(&b->adapt_limit, 0);
		return 0;
	}
	if (old->adapt == DBGATE_ADAPT_OFF || l == 0)
	{
		/* starts to adapt: from max_active, with a fresh period */
		l = conf->max_active;
		memset(&adapt_states[entry_index(b)], 0, sizeof(DbgateAdaptState));
		pg_atomic_write_u64(&b->adapt_due_us, 0);
	}
	else if (conf->max_active > old->max_active)
		l += conf->max_active - old->max_active;
	l = clamp_limit(l, conf);
	pg_atomic_write_u32(&b->adapt_limit, (uint32) l);
	return l;
}

/* The reservations of budget b's children: L is never below them. */
static int32
children_reserved(DbgateBudget *b)
{
	int64		sum = 0;
	int			k;

	for (k = b->first_child; k >= 0; k = entry(k)->next_sibling)
		sum += entry(k)->conf.reserved;
	return (int32) Min(sum, PG_INT32_MAX);
}

/*
 * After an install: L of budget b is at least its children's reservations
 * (they may have been raised, or a child with a reservation added, without
 * a change of b's own configuration).  Caller holds the tree lock, or
 * every budget lock, with the whole configuration and the shape of the
 * trees installed.  Returns true when L was raised to *l and the budget
 * admits by it (adapt = 'on'): the caller applies it (install.c).
 */
bool
dbgate_adapt_reserved(DbgateBudget *b, int32 *l)
{
	int32		cur = (int32) pg_atomic_read_u32(&b->adapt_limit);
	int32		floor;

	if (cur == 0 || b->conf.adapt == DBGATE_ADAPT_OFF || b->first_child < 0)
		return false;
	floor = Min(children_reserved(b), b->conf.max_active);
	if (cur >= floor)
		return false;
	pg_atomic_write_u32(&b->adapt_limit, (uint32) floor);
	*l = floor;
	return b->conf.adapt == DBGATE_ADAPT_ON;
}

/* ----------
 * The signals
 * ----------
 */
typedef struct Sample
{
	double		runnable;		/* R */
	double		own_cpu;		/* C */
	double		own_lock;		/* K */
} Sample;

static bool
chain_has(const DbgateChain *c, int idx)
{
	int			n = Min(c->n, DBGATE_MAX_DEPTH);
	int			i;

	for (i = 0; i < n; i++)
	{
		if (c->idx[i] == idx)
			return true;
	}
	return false;
}

/*
 * One look at what every process waits for.  Without a lock: each field
 * is read once, and a backend that changes meanwhile is counted as it was
 * or as it is (a sample).
 */
static void
take_sample(int idx, Sample *s)
{
	uint32		nprocs = ProcGlobal->allProcCount;
	uint32		i;

	memset(s, 0, sizeof(*s));
	for (i = 0; i < nprocs; i++)
	{
		PGPROC	   *proc = &ProcGlobal->allProcs[i];
		uint32		we;
		DbgateProc *e;

		/*
		 * A process that has exited may leave its pid in the entry (it is
		 * reused later); one that lives owns its latch.
		 */
		if (proc->pid == 0 || proc->procLatch.owner_pid == 0)
			continue;
		we = READ_ONCE_U32(proc->wait_event_info);
		if (we == 0)
			s->runnable += 1;
		if (i >= (uint32) dbgate_shared->max_procs)
			continue;
		e = &dbgate_shared->procs[i].d;
		if (e->state != DBGATE_PROC_ACTIVE || !chain_has(&e->chain, idx))
			continue;
		if (we == 0)
			s->own_cpu += 1;
		else if ((we & WAIT_CLASS_MASK) == PG_WAIT_LOCK)
			s->own_lock += 1;
	}
}

/* ----------
 * The step
 * ----------
 */
typedef struct Period
{
	uint64		done;			/* statements finished in the period */
	double		secs;			/* its length */
	double		x;				/* statements finished per second */
	double		n;				/* mean number active */
	bool		waited;
	bool		held;
} Period;

/* The law (see the file header): the new L, from L and the period. */
static int32
decide(DbgateAdaptState *s, int32 l, const Period *p)
{
	double		ncpu = (double) dbgate_shared->ncpu;
	int32		down = Max(1, l / 4);
	int32		up = Max(1, l / 8);
	double		lockers = Max(1.5, l / 2.0);
	double		few_lockers = Max(0.5, l / 4.0);
	double		knee = CPU_OVERCOMMIT * ncpu;
	double		busy_cpu = Max(1.0, l / 4.0);	/* enough of L on a CPU */
	int32		cut;

	if (p->held || (!p->waited && p->n < l / 2.0))
		return l;
	if (s->l_before > 0)
	{
		int32		before = s->l_before;
		double		expect = s->x_before * p->secs;

		s->l_before = 0;

		/*
		 * A fall, not chance: ends are about a Poisson count, so the
		 * period must fall short of what the baseline expects by 15 % and
		 * by three standard deviations of that count.
		 */
		if (p->waited && expect > 0 && (double) p->done < 0.85 * expect &&
			expect - (double) p->done > GUARD_SIGMAS * sqrt(expect))
		{
			s->hold = HOLD_PERIODS;
			return Min(before, l + up);
		}
	}
	if (s->hold > 0)
	{
		s->hold--;
		cut = 0;
	}
	else if (s->runnable > knee && s->own_cpu >= busy_cpu)
	{
		double		excess = (s->runnable - knee) * s->own_cpu / s->runnable;

		cut = Min(down, Max(1, (int32) ceil(excess)));
	}
	else if (s->own_lock >= lockers)
		cut = down;
	else
		cut = 0;
	if (cut > 0)
	{
		/* the next step checks this decrease against the throughput now */
		s->l_before = l;
		s->x_before = s->x_periods >= GUARD_MIN_PERIODS ? s->x_avg : 0;
		return l - cut;
	}
	if (p->waited && s->own_lock < few_lockers &&
		(s->runnable < ncpu || s->own_cpu < busy_cpu))
		return l + up;
	return l;
}

/* Fold this period's sample into the averages (the first one is taken as is). */
static void
average_in(DbgateAdaptState *s, const Sample *now, bool first)
{
	if (first)
	{
		s->runnable = now->runnable;
		s->own_cpu = now->own_cpu;
		s->own_lock = now->own_lock;
		return;
	}
	s->runnable = (s->runnable + now->runnable) / 2;
	s->own_cpu = (s->own_cpu + now->own_cpu) / 2;
	s->own_lock = (s->own_lock + now->own_lock) / 2;
}

/*
 * The step of budget idx (incarnation inc) at 'now'.  Caller holds the
 * budget's tree lock (install.c).  Returns true when L changed to *l and
 * the budget admits by it (adapt = 'on'): the caller applies it.
 */
bool
dbgate_adapt_step(int idx, uint32 inc, TimestampTz now, int32 *lnew)
{
	DbgateBudget *b = entry(idx);
	bool		apply = false;
	DbgateAdaptState *s = &adapt_states[idx];
	uint64		done,
				busy,
				waits,
				tokens,
				above,
				st;
	int32		l,
				next;
	bool		first;
	Period		p;
	Sample		sample;

	if (!b->in_use || b->incarnation != inc || b->conf.adapt == DBGATE_ADAPT_OFF ||
		(l = (int32) pg_atomic_read_u32(&b->adapt_limit)) == 0)
		return false;
	done = pg_atomic_read_u64(&b->adapt_done);
	busy = pg_atomic_read_u64(&b->adapt_busy_us);
	waits = pg_atomic_read_u64(&b->admitted_after_wait);
	tokens = pg_atomic_read_u64(&b->rate_limited);
	above = b->held_above;
	st = pg_atomic_read_u64(&b->state);
	first = (s->period_start == 0);
	if (!first && now > s->period_start)
	{
		double		dt = (double) (now - s->period_start);

		take_sample(idx, &sample);
		average_in(s, &sample, !s->sampled);
		s->sampled = true;
		p.done = done - s->done0;
		p.secs = dt / 1e6;
		p.x = (double) p.done / p.secs;
		p.n = (double) (busy - s->busy0) / dt;
		p.waited = dbgate_st_queued(st) > 0 || waits != s->waits0;
		p.held = tokens != s->tokens0 || above != s->above0;
		/* the throughput that the check of a decrease compares with */
		if (p.waited || p.n >= l / 2.0)
		{
			s->x_avg = s->x_avg > 0 ? (s->x_avg + p.x) / 2 : p.x;
			if (s->x_periods < GUARD_MIN_PERIODS)
				s->x_periods++;
		}
		next = decide(s, l, &p);
		next = Max(clamp_limit(next, &b->conf),
				   Min(children_reserved(b), b->conf.max_active));
		if (next != l)
		{
			/*
			 * What was sampled at the old L says nothing of the new one: the
			 * next period's sample starts the averages afresh (else a fall
			 * goes on past the knee on samples taken above it, and a rise
			 * on those taken below).
			 */
			s->sampled = false;
			pg_atomic_write_u32(&b->adapt_limit, (uint32) next);
			*lnew = next;
			apply = (b->conf.adapt == DBGATE_ADAPT_ON);
		}
	}
	s->period_start = now;
	s->done0 = done;
	s->busy0 = busy;
	s->waits0 = waits;
	s->tokens0 = tokens;
	s->above0 = above;
	return apply;
}
