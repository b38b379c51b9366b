/*-------------------------------------------------------------------------
 *
 * budgetdefs.h
 *	  The small definitions of a budget that every layer uses: its
 *	  configuration as stored, the limits the statement path reads, a chain
 *	  of budgets and the state word.
 *
 * No shared memory here (shmem.h lays it out): like PostgreSQL's
 * lockdefs.h beside lock.h, these are the values and pure helpers that the
 * configuration side, the views and the statement path share without
 * needing the layout of the segment.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DBGATE_BUDGETDEFS_H
#define DBGATE_BUDGETDEFS_H

#include "postgres.h"

#include "utils/timestamp.h"

/* Largest values of dbgate.max_budgets and dbgate.max_roles. */
#define DBGATE_MAX_BUDGETS_LIMIT	10000
#define DBGATE_MAX_ROLES_LIMIT		1000000
#define DBGATE_MAX_QUARANTINE_LIMIT	100000

/* ----------
 * Configuration of one budget, as stored, persisted and compared.
 * ----------
 */
/*
 * The longest key_by (1.3) with its NUL: 'setting:' and a setting name of
 * at most NAMEDATALEN - 1 bytes.
 */
#define DBGATE_KEY_BY_PREFIX		"setting:"
#define DBGATE_KEY_BY_LEN			(8 + NAMEDATALEN)

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
	char		key_by[DBGATE_KEY_BY_LEN];	/* where a statement's key comes
											 * from; "" = no keys */
	int32		key_max_active; /* per key; 0 = none beyond the budget's */
	int32		key_max_queued; /* per key; 0 = none beyond the budget's */
	double		key_max_rate;	/* per key; 0 = none */
	int32		key_rate_burst; /* 1..1000000 */
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

/*
 * A key limit (1.3, set_key_limit): the limits of one key of a budget with
 * key_by.  A value of -1 is SQL NULL: the budget's key_* value.  Keys are
 * compared byte for byte; at most DBGATE_KEY_MAXLEN bytes.
 */
#define DBGATE_KEY_MAXLEN			127

typedef struct DbgateKeyLimitConf
{
	char		budget[NAMEDATALEN];
	char		key[DBGATE_KEY_MAXLEN + 1]; /* NUL-terminated */
	int32		max_active;		/* 0..the budget's max_active, or -1 */
	int32		max_queued;		/* >= 0, or -1 */
	double		max_rate;		/* 0 or 0.01..1000000, or -1 */
	int32		rate_burst;		/* 1..1000000, or -1 */
} DbgateKeyLimitConf;

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
 * a budget entry (dbgate_read_limits(), shmem.h): the hot fields of the
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
	uint8		scope;			/* DBGATE_SCOPE_* */
	uint8		limit_flags;	/* DBGATE_LIM_*: derived, for the statement path */
	bool		fair;
	bool		enforce;
	bool		utility;
	bool		lifo;
	uint8		dim_flags;		/* the admission dimensions it uses
								 * (DBGATE_DIM_BIT(), dimdefs.h) */
	uint8		dim_one;		/* dim_flags' dimension + 1 when it is the only
								 * one and its enter_take needs no clock; 0:
								 * none (dbgate_dims_one(), dimension.h) */
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


#endif							/* DBGATE_BUDGETDEFS_H */
