/*-------------------------------------------------------------------------
 *
 * dbgate.h
 *	  What every part of dbgate shares: the layout of its shared memory and
 *	  the values of a budget's configuration.
 *
 * The budget entries, the role and database maps and the per-backend
 * entries, with the locks that protect them; the configuration of a
 * budget as it is stored in its entry.  Each module declares its own
 * functions in its own header; src/README is the map of the modules.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DBGATE_H
#define DBGATE_H

#include "postgres.h"

#include "access/xlogdefs.h"
#include "port/atomics.h"
#include "storage/lwlock.h"
#include "utils/timestamp.h"

/* Largest values of dbgate.max_budgets and dbgate.max_roles. */
#define DBGATE_MAX_BUDGETS_LIMIT	10000
#define DBGATE_MAX_ROLES_LIMIT		1000000
#define DBGATE_MAX_QUARANTINE_LIMIT	100000

/* ----------
 * Configuration of one budget, as stored, persisted and compared.
 * ----------
 */
typedef struct DbgateBudgetConf
{
	char		name[NAMEDATALEN];	/* NUL-terminated, 1..63 bytes */
	int32		max_active;		/* B >= 1 */
	int32		max_queued;		/* Q >= 0 */
	int32		queue_timeout_ms;	/* 0 = no limit */
	int32		statement_timeout_ms;	/* 0 = no limit */
	int32		lock_timeout_ms;	/* 0 = no limit */
	bool		fair;
	/* 1.1 */
	bool		utility;		/* heavy utility commands take a slot */
	bool		enforce;		/* false: shadow mode, never queue or reject */
	int32		scope;			/* DBGATE_SCOPE_* */
	int32		idle_timeout_ms;	/* idle_in_transaction_timeout; 0 = none */
	int32		parallel_workers;	/* -1 = not capped */
	/* 1.2 */
	int32		queue_order;	/* DBGATE_ORDER_* */
	int32		overtake_limit_ms;	/* 'lifo': 0 = never overdue */
	char		parent[NAMEDATALEN];	/* "" = top-level */
	int32		weight;			/* 1..10000, share of the parent's slots */
	int32		rate_burst;		/* 1..1000000 */
	double		max_rate;		/* admissions per second; 0 = none */
	int32		max_memory_mb;	/* 0 = none */
	double		min_cost;		/* 0 = every statement is gated */
	/* 1.3 */
	int32		reserved;		/* slots of the parent kept for this child */
	int32		runaway_after_ms;	/* 0 = no statement is a runaway */
	int32		runaway_action; /* DBGATE_RUNAWAY_* */
	char		runaway_budget[NAMEDATALEN];	/* "" = none */
	int32		quarantine_ms;	/* 0 = runaways' queries are not held back */
	int32		adapt;			/* DBGATE_ADAPT_* */
	int32		adapt_min;		/* lowest adaptive limit, 1..max_active */

	/*
	 * In a configuration image: the installed budget entry this one stands
	 * for (index and incarnation), or src_index = -1 for a budget created
	 * by the transaction.  A budget dropped and created again in one
	 * transaction is a new budget.  Not persisted.
	 */
	int32		src_index;
	uint32		src_incarnation;
} DbgateBudgetConf;

/* src_index of a replayed budget that its transaction dropped and created */
#define DBGATE_SRC_RECREATED		(-2)

/* What a slot covers: see slot.c. */
#define DBGATE_SCOPE_STATEMENT		0
#define DBGATE_SCOPE_TRANSACTION	1

/* Which waiter a released slot goes to (1.2). */
#define DBGATE_ORDER_FIFO			0
#define DBGATE_ORDER_LIFO			1

/* Whether a budget computes and uses an adaptive limit (1.3, adapt.c). */
#define DBGATE_ADAPT_OFF			0
#define DBGATE_ADAPT_SHADOW			1
#define DBGATE_ADAPT_ON				2

/* What happens to a runaway statement (1.3, runaway.c). */
#define DBGATE_RUNAWAY_LOG			0
#define DBGATE_RUNAWAY_DEMOTE		1
#define DBGATE_RUNAWAY_CANCEL		2

/* Longest chain of budgets: a budget and at most three ancestors. */
#define DBGATE_MAX_DEPTH			4

/*
 * The limits that a statement's admission reads, copied consistently from
 * a budget entry (dbgate_read_limits() below): the hot fields of the
 * configuration, some of them derived, in one small block.
 */
typedef struct DbgateLimits
{
	int32		max_active;
	int32		max_queued;
	int32		queue_timeout_ms;
	int32		statement_timeout_ms;
	int32		lock_timeout_ms;
	int32		idle_timeout_ms;
	int32		parent;			/* budget index of the parent, -1: none */
	uint32		parent_incarnation;
	int32		max_memory_mb;
	int16		scope;
	uint8		limit_flags;	/* DBGATE_LIM_*: derived, for the statement path */
	bool		fair;
	bool		enforce;
	bool		utility;
	bool		lifo;
	bool		rate;			/* max_rate > 0 */
	bool		adapt_chain;	/* this budget or an ancestor adapts (1.3) */
	bool		resv;			/* reserved > 0 (and a parent) */
	bool		runaway_cancel; /* runaway_action 'cancel' (1.3, runaway.c) */
	bool		runaway_demote; /* runaway_action 'demote' (1.3, demote.c) */
	double		min_cost;
	int32		grant_max_active;	/* the configured max_active: memory
									 * grants are max_memory_mb / it */
	int32		runaway_after_ms;	/* 0: never (1.3, runaway.c) */
} DbgateLimits;

/*
 * DbgateLimits.limit_flags: what a run under the slot must apply (RUN: a
 * statement_timeout, lock_timeout or runaway_after), whether the slot
 * has anything to apply at all (SLOT: RUN, or an idle timeout) and whether
 * its release has more to do than return it (RELEASE: count it for the
 * adaptive limit, close its move word), so that the
 * statement path tests one byte instead of the fields one by one.
 */
#define DBGATE_LIM_RUN		0x01
#define DBGATE_LIM_SLOT		0x02
#define DBGATE_LIM_RELEASE	0x04	/* the release has work: adapt_chain or
									 * runaway_demote */

static inline uint8
dbgate_limit_flags(const DbgateLimits *l)
{
	uint8		f = 0;

	if (l->statement_timeout_ms > 0 || l->lock_timeout_ms > 0 ||
		l->runaway_after_ms > 0)
		f |= DBGATE_LIM_RUN | DBGATE_LIM_SLOT;
	if (l->idle_timeout_ms > 0)
		f |= DBGATE_LIM_SLOT;
	if (l->adapt_chain || l->runaway_demote)
		f |= DBGATE_LIM_RELEASE;
	return f;
}

/*
 * What only the queue side needs of a budget's configuration (read under
 * the tree lock, or as single aligned fields: see rate.c).
 */
typedef struct DbgateQueueLimits
{
	int32		overtake_ms;
	int32		weight;
	int64		rate_interval_ns;	/* 10^9 / max_rate */
	int64		rate_tolerance_ns;	/* (rate_burst - 1) x rate_interval_ns */
} DbgateQueueLimits;

/*
 * The memory of a budget's adaptive-limit controller (adapt.c), written by
 * the one process that runs a step, under the tree lock.
 */
typedef struct DbgateAdaptState
{
	TimestampTz period_start;	/* 0: no period measured yet */
	uint64		done0;			/* the counters when the period started */
	uint64		busy0;
	uint64		waits0;
	uint64		tokens0;
	uint64		above0;			/* held_above */
	double		runnable;		/* averages over periods: backends on a CPU */
	double		own_cpu;		/* the budget's statements on a CPU */
	double		own_lock;		/* the budget's statements waiting for a lock */
	double		x_avg;			/* throughput, averaged over busy periods */
	double		x_before;		/* x_avg before the last decrease (0: too
								 * few periods in it to check against) */
	int32		x_periods;		/* busy periods in x_avg, counted to 4 */
	int32		l_before;		/* L before it (0: none to check) */
	int32		hold;			/* periods left without a decrease */
	bool		sampled;		/* the averages hold a sample */
} DbgateAdaptState;

/*
 * A chain of budgets: a budget and its ancestors, leaf first, as a slot
 * was taken from them (or as a waiter is counted in their 'queued').
 */
typedef struct DbgateChain
{
	int32		n;
	int32		idx[DBGATE_MAX_DEPTH];
	uint32		inc[DBGATE_MAX_DEPTH];
	/*
	 * Holding a slot of a chain of more than one level: bit k set when the
	 * slot at level k was taken through the reservation of level k - 1
	 * (counted in its 'resv' word, queue.c).  0 for a queued chain; not
	 * kept for a chain of one level.
	 */
	uint8		resv;
} DbgateChain;

/* Buckets of dbgate.wait_histogram with a finite bound (ms). */
#define DBGATE_HIST_BUCKETS		11

/* ----------
 * Shared memory.
 *
 * Locks (slot.c has the slot life cycle, admission.c and queue.c the
 * queue rules):
 *	  config_lock	the identity of budget entries (in_use, incarnation, name),
 *					the role and database maps and state_lsn.  Shared for
 *					lookups and views, exclusive while a committed (or, in
 *					recovery, a replayed) configuration is installed.
 *	  commit lock	a heavyweight lock (not in shared memory here, see
 *					config.c) that serialises configuration commits; taken
 *					at PRE_COMMIT, released with the transaction's locks.
 *	  budget lock	one per budget entry.  The lock of a *tree* (a top-level
 *					budget with all its descendants; a budget without parent
 *					or children is a tree of one) is the lock of its root:
 *					it protects every queue of the tree, the 'queued' counts,
 *					the statistics that are not atomics and the DbgateProc
 *					entries of the tree's queued backends.  'active' also
 *					changes without it, by compare-and-swap (admission.c).
 *					The shape of the trees (root, first_child, next_sibling)
 *					changes only while every budget lock is held, so it is
 *					stable for whoever holds any one of them.
 *	  Lock order: commit lock, config_lock, budget locks in index order.
 *	  The statement path takes no lock while slots are free; otherwise one
 *	  tree lock, never two budget locks at once.
 * ----------
 */
typedef struct DbgateBudget
{
	/* identity: written with config_lock and this budget's lock exclusive */
	bool		in_use;
	uint32		incarnation;	/* bumped whenever the entry is (re)used */

	/*
	 * Configuration: written only by dbgate_admission_set_limits(), inside
	 * conf_seq (odd while writing); read without a lock only through
	 * dbgate_read_limits() (lim) or as single aligned fields.
	 */
	pg_atomic_uint32 conf_seq;
	DbgateLimits lim;
	DbgateQueueLimits qlim;
	DbgateBudgetConf conf;

	/*
	 * Live counts: one atomic word, see DBGATE_ST_*.  'active' changes
	 * without the lock on the fast paths (a free slot taken, a slot returned
	 * with nobody queued), by compare-and-swap of the whole word; 'queued'
	 * changes only under the tree lock, together with the queue lists.  A
	 * parent's 'active' counts the slots taken through it, its 'queued' the
	 * waiters of its whole subtree.
	 */
	pg_atomic_uint64 state;
	int32		queue_head;		/* proc number or -1; tree lock */
	int32		queue_tail;		/* proc number or -1; tree lock */

	/*
	 * 'lifo' in trees (queue.c): slots released by this budget's statements
	 * that its ancestors still count, held for its waiters and newcomers
	 * (the levels of held_chain from 1 on count them; its level 0 is this
	 * budget).  Only while the budget has waiters.  Tree lock.
	 */
	int32		held;
	DbgateChain held_chain;

	/*
	 * Reservations (queue.c has the rules): | parent + 1:14 | epoch:2 |
	 * r:16 | used:16 | held:16 |: the parent the word counts at (0: none),
	 * r, this budget's reservation there; used, its statements whose parent
	 * slot is counted here; held, parent slots counted in the parent's
	 * 'active' for this budget without a statement.  Changed by
	 * compare-and-swap of the whole word; the parent and r only by an
	 * install, which also changes the epoch.
	 */
	pg_atomic_uint64 resv;

	/* the shape of the tree (budgets.c, with every budget lock held) */
	int32		root;			/* index of the tree's root (itself if none) */
	int32		first_child;	/* -1: no children */
	int32		next_sibling;	/* -1: last */

	/* the rate: theoretical arrival time of the next token (rate.c) */
	pg_atomic_uint64 rate_tat;
	/* of a root: the waiter that sleeps until a token is due; tree lock */
	int32		token_waiter;	/* proc number or -1 */
	int64		token_due_ns;
	/* of a root: when the next lock-holder check of the tree is due */
	pg_atomic_uint64 lock_check_due;

	/*
	 * The adaptive limit (adapt.c; 1.3): L, 0 while the budget does not
	 * adapt; the end of the current period; what the budget's subtree
	 * finished and how long it held its slots, counted at release.  With
	 * adapt = 'on', L is also lim.max_active.
	 */
	pg_atomic_uint32 adapt_limit;
	pg_atomic_uint64 adapt_due_us;
	pg_atomic_uint64 adapt_done;
	pg_atomic_uint64 adapt_busy_us;
	DbgateAdaptState adapt;		/* tree lock */
	/*
	 * While the budget adapts: how often a grant step passed over a waiter
	 * of its subtree that had room at every level up to this budget,
	 * because a level above it was full (trees.c; tree lock).
	 */
	uint64		held_above;

	/* statistics; atomics are updated on the fast paths */
	pg_atomic_uint32 peak_active;
	int32		peak_queued;	/* tree lock */
	pg_atomic_uint64 admitted;
	pg_atomic_uint64 active_time_total_us;
	pg_atomic_uint64 admitted_after_wait;
	pg_atomic_uint64 wait_time_total_us;
	pg_atomic_uint64 wait_time_max_us;
	pg_atomic_uint64 would_queue;	/* shadow mode */
	pg_atomic_uint64 would_reject;
	pg_atomic_uint64 terminated_idle;
	pg_atomic_uint64 admitted_overdue;	/* 'lifo' */
	pg_atomic_uint64 rate_limited;
	pg_atomic_uint64 bypassed;	/* min_cost */
	pg_atomic_uint64 memory_kb_active;	/* open memory grants */
	/* 1.3: runaway statements (runaway.c) and the quarantine */
	pg_atomic_uint64 runaways;
	pg_atomic_uint64 demoted_out;
	pg_atomic_uint64 demoted_in;
	pg_atomic_uint64 quarantined;
	/*
	 * Live quarantine entries of this budget (quarantine.c, under its lock;
	 * may count a dropped incarnation's for up to a second): while 0, the
	 * budget's statements are not looked up.
	 */
	pg_atomic_uint32 quarantine_n;
	/* admissions after a wait, by wait (the bounds: waiting.c) */
	pg_atomic_uint64 wait_hist[DBGATE_HIST_BUCKETS];
	/* the rest only change under the tree lock */
	uint64		rejected_full;
	uint64		rejected_timeout;
	uint64		canceled_waiting;
	uint64		admitted_lock_holder;
	TimestampTz stats_reset;
} DbgateBudget;

/*
 * Budgets and backend entries are laid out on cache lines of their own:
 * every statement writes its backend's entry and its budget's state word,
 * and two backends (or two budgets) that shared a line would steal it from
 * each other's CPU on every statement.
 */
#define DBGATE_LINES(size) \
	((((size) + PG_CACHE_LINE_SIZE - 1) / PG_CACHE_LINE_SIZE) * PG_CACHE_LINE_SIZE)

typedef union DbgateBudgetPadded
{
	DbgateBudget d;
	char		pad[DBGATE_LINES(sizeof(DbgateBudget))];
} DbgateBudgetPadded;

/*
 * Copy the limits of budget b consistently, without a lock: taken again if
 * a writer was at work meanwhile (conf_seq is odd while one writes).
 */
static inline void
dbgate_read_limits(DbgateBudget *b, DbgateLimits *l)
{
	for (;;)
	{
		uint32		seq = pg_atomic_read_u32(&b->conf_seq);

		if (unlikely(seq & 1))
		{
			pg_spin_delay();
			continue;
		}
		pg_read_barrier();
		*l = b->lim;
		pg_read_barrier();
		if (likely(pg_atomic_read_u32(&b->conf_seq) == seq))
			return;
	}
}

/*
 * The state word of a budget: | tag:28 | active:18 | queued:18 |.  The tag
 * is the low 28 bits of the budget's incarnation, so that a compare-and-swap
 * (or a release) against a dropped entry, or one dropped and reused up to
 * 2^28 - 1 times since, fails.  Counts never exceed 2^18 - 1: both are
 * bounded by the number of backends, which PostgreSQL limits to
 * MAX_BACKENDS = 2^18 - 1.
 */
#define DBGATE_ST_BITS			18
#define DBGATE_ST_ONE_QUEUED	UINT64CONST(1)
#define DBGATE_ST_ONE_ACTIVE	(UINT64CONST(1) << DBGATE_ST_BITS)
#define DBGATE_ST_MASK			((UINT64CONST(1) << DBGATE_ST_BITS) - 1)
#define DBGATE_ST_TAG_SHIFT		(2 * DBGATE_ST_BITS)
#define DBGATE_ST_TAG_MASK		((UINT64CONST(1) << (64 - DBGATE_ST_TAG_SHIFT)) - 1)

static inline uint32
dbgate_st_queued(uint64 st)
{
	return (uint32) (st & DBGATE_ST_MASK);
}

static inline uint32
dbgate_st_active(uint64 st)
{
	return (uint32) ((st >> DBGATE_ST_BITS) & DBGATE_ST_MASK);
}

static inline uint32
dbgate_st_tag(uint64 st)
{
	return (uint32) (st >> DBGATE_ST_TAG_SHIFT);
}

static inline uint32
dbgate_tag_of(uint32 incarnation)
{
	return (uint32) (incarnation & DBGATE_ST_TAG_MASK);
}

static inline uint64
dbgate_st_make(uint32 incarnation, uint32 active, uint32 queued)
{
	return ((uint64) dbgate_tag_of(incarnation) << DBGATE_ST_TAG_SHIFT) |
		((uint64) active << DBGATE_ST_BITS) | (uint64) queued;
}


/* States of a backend's entry. */
#define DBGATE_PROC_IDLE		0	/* neither queued nor holding a slot */
#define DBGATE_PROC_QUEUED		1	/* in a budget's queue */
#define DBGATE_PROC_ACTIVE		2	/* holds a slot, a statement runs */
#define DBGATE_PROC_HELD		3	/* holds a slot, nothing runs under it */

/*
 * A backend's entry, indexed by proc number.  Written only by the files
 * of admission (admission.c has the rules): by the backend itself, and
 * while it is queued by whoever grants it a slot under the tree lock.
 * While state != IDLE the entry belongs to the tree of its 'budget'.
 */
typedef struct DbgateProc
{
	int32		budget;			/* leaf budget index, -1 when idle */
	uint32		incarnation;	/* of that budget */
	uint8		state;			/* DBGATE_PROC_* */
	bool		granted;		/* queued, and a slot was handed over */
	bool		released;		/* queued, and the budget no longer gates */
	bool		overdue;		/* granted because it was overdue ('lifo') */
	uint8		token_levels;	/* chain levels that held it back for a token */
	uint8		rule;			/* DbgateRule of the classification */
	Oid			via;			/* DBGATE_BY_MEMBER: the group */
	int32		prev;			/* queue links: proc numbers or -1 */
	int32		next;
	int32		pid;
	Oid			roleid;			/* session user */
	TimestampTz state_since;	/* queued: when it joined the queue (under the tree lock) */

	/*
	 * Holding a slot: the levels it was taken from.  Queued: the levels
	 * whose 'queued' counts it (the install keeps them current).
	 */
	DbgateChain chain;
	pg_atomic_uint64 memory_kb; /* open memory grants */

	/*
	 * Demotion (1.3, demote.c has the protocol): the move word (ticket and
	 * DBGATE_MV_* flags), and for a slot that was moved, the budget it was
	 * moved out of and when (written by the runaway worker before it sets
	 * DBGATE_MV_DONE).
	 */
	pg_atomic_uint64 move;
	int32		demoted_from;	/* leaf budget index */
	uint32		demoted_from_inc;	/* of that budget */
	TimestampTz moved_at;		/* 0: admitted to the target (quarantine) */

	/*
	 * The target's timeouts that the runaway worker applies to the
	 * statement it moved (demote.c): written and read by the runaway
	 * worker alone, kept here so that a worker started again takes them
	 * up.  watch_ticket: the ticket of the move they belong to.
	 */
	uint32		watch_ticket;
	int32		watch_lock_ms;	/* 0: none */
	TimestampTz watch_deadline; /* 0: none */
} DbgateProc;

typedef union DbgateProcPadded
{
	DbgateProc	d;
	char		pad[DBGATE_LINES(sizeof(DbgateProc))];
} DbgateProcPadded;

/* Role map entry; the map is sorted by roleid. */
typedef struct DbgateRoleMap
{
	Oid			roleid;
	int32		budget;			/* budget index */
} DbgateRoleMap;

/* Database map entry; the map is sorted by dbid. */
typedef struct DbgateDbMap
{
	Oid			dbid;
	int32		budget;			/* budget index */
} DbgateDbMap;

/*
 * A backend's runaway record, indexed by proc number (runaway.c has the
 * protocol): written by the backend's runaway timer handler (seq and the
 * facts), read by the runaway worker (which alone writes 'taken').
 */
typedef struct DbgateRunawayRec
{
	uint32		seq;			/* odd while written; seq / 2 = runaways */
	uint32		taken;			/* runaways the worker has counted */
	int32		budget;			/* leaf budget index */
	uint32		incarnation;	/* of that budget */
	int32		pid;
	Oid			dbid;
	int32		action;			/* DBGATE_RUNAWAY_*, as it acted */
	int32		after_ms;		/* runaway_after then */
	uint32		ticket;			/* 'demote': the move asked for (demote.c) */
	uint64		queryid;		/* 0: none computed */
	TimestampTz start;			/* the statement's runaway clock started */
	TimestampTz at;				/* it ran out (the handler ran) */
} DbgateRunawayRec;

typedef union DbgateRunawayPadded
{
	DbgateRunawayRec d;
	char		pad[DBGATE_LINES(sizeof(DbgateRunawayRec))];
} DbgateRunawayPadded;

/*
 * A quarantine entry (quarantine.c has the rules): a query id held back in
 * a budget of one database until 'until'.  The key and 'until', 'runaways'
 * and the text change only under quarantine_lock exclusive; 'hits' and
 * 'last_hit' are counted by the statement path under the lock shared.
 */
#define DBGATE_QUARANTINE_TEXT 1024

typedef struct DbgateQuarantineEntry
{
	bool		in_use;
	int32		next;			/* the next entry of its hash bucket, or -1 */
	int32		budget;			/* budget index */
	uint32		incarnation;	/* of that budget */
	Oid			dbid;
	uint64		queryid;		/* never 0 */
	TimestampTz until;
	uint64		runaways;		/* runaways that made or extended it */
	pg_atomic_uint64 hits;
	pg_atomic_uint64 last_hit;	/* TimestampTz; 0: none */
	int32		query_len;		/* -1: no text (quarantine_add) */
	char		query[DBGATE_QUARANTINE_TEXT];
} DbgateQuarantineEntry;

typedef struct DbgateShared
{
	LWLock	   *config_lock;
	LWLockPadded *budget_locks; /* max_budgets of them */

	/* bumped after every installed configuration change */
	pg_atomic_uint64 generation;

	/*
	 * dbgate.enabled as the postmaster last read it: the gate and queued
	 * backends look here (dbgate_gating(); a backend does not reload the
	 * configuration file mid-statement).
	 */
	pg_atomic_uint32 enabled;
	uint32		wait_event_info;	/* reported while queued */

	int			max_budgets;
	int			max_roles;
	int			max_procs;
	int			ncpu;			/* CPUs online at start (adapt.c) */

	int			nroles;			/* entries used in roles[] */
	int			ndbs;			/* entries used in dbs[] */
	XLogRecPtr	state_lsn;		/* WAL position of the installed image (the
								 * start of its record); config_lock */
	DbgateBudgetPadded *budgets;	/* [max_budgets] */
	DbgateRoleMap *roles;		/* [max_roles] */
	DbgateDbMap *dbs;			/* [max_roles] as well */
	DbgateProcPadded *procs;	/* [max_procs] */
	DbgateRunawayPadded *runaway;	/* [max_procs] (runaway.c) */
	struct Latch *volatile runaway_latch;	/* the runaway worker's, or NULL */
	/* the quarantine table (quarantine.c): [max_quarantine], may be 0 */
	int			max_quarantine;
	LWLock	   *quarantine_lock;
	DbgateQuarantineEntry *quarantine;
	uint32		quarantine_mask;	/* buckets - 1 (a power of 2) */
	int32	   *quarantine_buckets;	/* first entry of each bucket, or -1 */
} DbgateShared;

/* The shared memory (shmem.c sets it up). */
extern PGDLLIMPORT DbgateShared *dbgate_shared;

static inline LWLock *
dbgate_budget_lock(int idx)
{
	return &dbgate_shared->budget_locks[idx].lock;
}

/*
 * Whether statements are gated: dbgate.enabled as the postmaster last read
 * it, the value queued backends look at.  The gate reads it here, not in
 * the backend's own copy of the setting: a backend applies a reload only
 * between client commands, and a statement that starts after the reload
 * (the next statement of one query message, of a procedure or of a DO
 * block) must not be gated when the waiters ahead of it are let through.
 */
static inline bool
dbgate_gating(void)
{
	return dbgate_shared != NULL &&
		pg_atomic_read_u32(&dbgate_shared->enabled) != 0;
}

#endif							/* DBGATE_H */
