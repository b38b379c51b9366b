/*-------------------------------------------------------------------------
 *
 * dbgate.h
 *	  Shared declarations of dbgate: workload admission control.
 *
 * Files and what they own:
 *	  dbgate.c		module entry, GUCs, hook installation, xact callbacks,
 *					the recognition of fast-path function calls
 *	  budgets.c		the shared budget table and role map
 *	  classify.c	which budget gates a backend (the lookup and its cache)
 *	  slot.c		the life of a backend's slot (one state machine)
 *	  admission.c	admit / queue / hand off / release of slots in shared
 *					memory: queues, trees of budgets, queue order, rate
 *	  rate.c		a budget's token bucket (max_rate, rate_burst)
 *	  lockgraph.c	lock safety: the waits-for graph across queues
 *	  limits.c		per-budget statement_timeout, lock_timeout and
 *					idle_in_transaction_timeout
 *	  gucvar.c		a built-in setting tightened for a while
 *	  fields.c		the table of budget fields: arguments, checks, storage,
 *					columns (fields.h)
 *	  confimage.c	configuration images (backend-local copies)
 *	  config.c		transactional configuration changes
 *	  persist.c		the state file in the data directory, image encoding
 *	  wal.c			WAL records of configuration changes and their redo
 *	  sqlfuncs.c	SQL-callable configuration functions, dbgate.budgets
 *	  status.c		the live views dbgate.status and dbgate.backends
 *	  parallel.c	a budget's parallel_workers: the cap, plan and maintenance
 *					capping
 *	  utility.c		which utility commands take a slot
 *	  waitsnap.c	a queued statement holds no snapshot while it waits
 *	  memestimate.c	the working memory a plan may use (memgrant.h)
 *	  memgrant.c	memory grants: a statement's work_mem (memgrant.h)
 *	  mincost.c		cheap read-only statements that are not gated
 *					(memgrant.h)
 *	  planner.c		the planner hook: the parallel cap, plans that fit a
 *					slot's memory (memgrant.h)
 *
 *-------------------------------------------------------------------------
 */
#ifndef DBGATE_H
#define DBGATE_H

#include "postgres.h"

#include "access/xact.h"
#include "access/xlogdefs.h"
#include "executor/execdesc.h"
#include "nodes/plannodes.h"
#include "miscadmin.h"
#include "port/atomics.h"
#include "storage/lwlock.h"
#include "tcop/utility.h"
#include "utils/elog.h"
#include "utils/timestamp.h"

#define DBGATE_STATE_FILE		"dbgate.state"
#define DBGATE_STATE_TMPFILE	"dbgate.state.tmp"
#define DBGATE_STATE_BADFILE	"dbgate.state.corrupt"

/* Largest values of dbgate.max_budgets and dbgate.max_roles. */
#define DBGATE_MAX_BUDGETS_LIMIT	10000
#define DBGATE_MAX_ROLES_LIMIT		1000000

/* Longest duration accepted for a timeout, in milliseconds (as for GUCs). */
#define DBGATE_MAX_TIMEOUT_MS	INT_MAX

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

/* What a slot covers: see admission.c. */
#define DBGATE_SCOPE_STATEMENT		0
#define DBGATE_SCOPE_TRANSACTION	1

/* Largest parallel_workers accepted (max_parallel_workers' own maximum). */
#define DBGATE_MAX_PARALLEL_WORKERS	1024

/* Which waiter a released slot goes to (1.2). */
#define DBGATE_ORDER_FIFO			0
#define DBGATE_ORDER_LIFO			1

/* Limits of the 1.2 fields. */
#define DBGATE_MAX_WEIGHT			10000
#define DBGATE_MIN_RATE				0.01
#define DBGATE_MAX_RATE				1000000.0
#define DBGATE_MAX_BURST			1000000
/* Longest chain of budgets: a budget and at most three ancestors. */
#define DBGATE_MAX_DEPTH			4

/* One role assignment of a configuration image. */
typedef struct DbgateRoleConf
{
	Oid			roleid;
	char		budget[NAMEDATALEN];
} DbgateRoleConf;

/* One database assignment of a configuration image. */
typedef struct DbgateDbConf
{
	Oid			dbid;
	char		budget[NAMEDATALEN];
} DbgateDbConf;

/*
 * A hash index of an image's role or database assignments by OID (see
 * confimage.c): built when first needed, kept up to date by the image
 * functions.  slots == NULL: none.
 */
typedef struct DbgateOidIndex
{
	int32	   *slots;			/* array position + 1; 0 = empty */
	uint32		mask;			/* number of slots - 1 */
} DbgateOidIndex;

/*
 * A complete configuration (backend-local): what the state file holds and
 * what a committing transaction installs into shared memory.  The arrays
 * are changed only through the image functions of confimage.c once
 * assignments have been looked up (the indexes follow them).
 */
typedef struct DbgateConfig
{
	int			nbudgets;
	int			maxbudgets;
	DbgateBudgetConf *budgets;
	int			nroles;
	int			maxroles;
	DbgateRoleConf *roles;
	int			ndbs;
	int			maxdbs;
	DbgateDbConf *dbs;
	DbgateOidIndex role_index;
	DbgateOidIndex db_index;
} DbgateConfig;

/*
 * The limits that a statement's admission reads, copied consistently from
 * a budget entry (read_limits() in admission.c): the hot fields of the
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
	int32		scope;
	bool		fair;
	bool		enforce;
	bool		utility;
	bool		lifo;
	bool		rate;			/* max_rate > 0 */
	double		min_cost;
} DbgateLimits;

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

/* Buckets of dbgate.wait_histogram with a finite bound (ms). */
#define DBGATE_HIST_BUCKETS		11

/* ----------
 * Shared memory.
 *
 * Locks (admission.c has the slot life cycle and the queue rules):
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
	 * admission.c's read_limits() (lim) or as single aligned fields.
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
	/* admissions after a wait, by wait (the bounds: status.c) */
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

typedef struct DbgateShared
{
	LWLock	   *config_lock;
	LWLockPadded *budget_locks; /* max_budgets of them */

	/* bumped after every installed configuration change */
	pg_atomic_uint64 generation;

	/*
	 * dbgate.enabled as the postmaster last read it: queued backends look
	 * here (they do not reload the configuration file mid-statement).
	 */
	pg_atomic_uint32 enabled;
	uint32		wait_event_info;	/* reported while queued */

	int			max_budgets;
	int			max_roles;
	int			max_procs;

	int			nroles;			/* entries used in roles[] */
	int			ndbs;			/* entries used in dbs[] */
	XLogRecPtr	state_lsn;		/* WAL position of the installed image (the
								 * start of its record); config_lock */
	DbgateBudgetPadded *budgets;	/* [max_budgets] */
	DbgateRoleMap *roles;		/* [max_roles] */
	DbgateDbMap *dbs;			/* [max_roles] as well */
	char	   *procs;			/* [max_procs] entries private to admission.c */
} DbgateShared;

/* dbgate.c */
extern PGDLLIMPORT bool dbgate_enabled;
extern PGDLLIMPORT int dbgate_max_budgets;
extern PGDLLIMPORT int dbgate_max_roles;
extern PGDLLIMPORT char *dbgate_default_budget;
extern void dbgate_check_loaded(void);

/* budgets.c */
extern PGDLLIMPORT DbgateShared *dbgate_shared;
extern Size dbgate_shmem_size(void);
extern void dbgate_shmem_request(void);
extern void dbgate_shmem_init(void);

/* classify.c */
extern void dbgate_invalidate_lookup(void);

/* How a backend was classified (dbgate.backends.classified_by). */
typedef enum DbgateRule
{
	DBGATE_BY_ROLE,				/* the session user's own assignment */
	DBGATE_BY_MEMBER,			/* that of a role it is a member of */
	DBGATE_BY_DATABASE,			/* that of the backend's database */
	DBGATE_BY_DEFAULT			/* dbgate.default_budget */
} DbgateRule;

typedef struct DbgateLookup
{
	int			budget;			/* budget index, -1 = not gated */
	uint32		incarnation;	/* of that budget */
	DbgateRule	rule;
	Oid			via;			/* DBGATE_BY_MEMBER: the assigned group */
	Oid			user;			/* the session user it was made for */
	bool		min_cost;		/* the budget had a min_cost (mincost.c):
								 * every configuration change makes the
								 * backend classify again */
} DbgateLookup;

/*
 * The per-backend cache of the classification (classify.c): valid while no
 * catalog invalidation arrived and the configuration generation and the
 * session user are the ones it was made for.
 */
typedef struct DbgateLookupCache
{
	bool		valid;
	Oid			user;
	uint64		generation;
	DbgateLookup result;
} DbgateLookupCache;

extern PGDLLIMPORT DbgateLookupCache dbgate_lookup_cache;
extern const DbgateLookup *dbgate_classify_slow(void);

/*
 * The budget that gates the current statement (budget -1: none), and why.
 * The statement path: two comparisons and one atomic read while nothing
 * changed.
 */
static inline const DbgateLookup *
dbgate_classify(void)
{
	const DbgateLookupCache *c = &dbgate_lookup_cache;

	if (likely(c->valid && c->user == GetSessionUserId() &&
			   c->generation == pg_atomic_read_u64(&dbgate_shared->generation)))
		return &c->result;
	return dbgate_classify_slow();
}

/* budgets.c */
extern int	dbgate_find_budget(const char *name);
extern void dbgate_snapshot_config(DbgateConfig *config);
extern void dbgate_install_config(const DbgateConfig *config, XLogRecPtr lsn);
extern void dbgate_install_replayed(DbgateConfig *config, XLogRecPtr lsn);
extern void dbgate_reset_budget_stats(DbgateBudget *b, TimestampTz now);

static inline LWLock *
dbgate_budget_lock(int idx)
{
	return &dbgate_shared->budget_locks[idx].lock;
}

/*
 * A chain of budgets: a budget and its ancestors, leaf first, as a slot
 * was taken from them (or as a waiter is counted in their 'queued').
 */
typedef struct DbgateChain
{
	int32		n;
	int32		idx[DBGATE_MAX_DEPTH];
	uint32		inc[DBGATE_MAX_DEPTH];
} DbgateChain;

/* What an admission hands to the slot (admission.c -> slot.c). */
typedef struct DbgateAdmission
{
	DbgateChain chain;
	DbgateLimits lim;			/* the statement's budget's, when admitted */
	TimestampTz since;			/* when the slot was taken */
} DbgateAdmission;

typedef enum DbgateAdmit
{
	DBGATE_ADMIT_SLOT,			/* holds a slot now */
	DBGATE_ADMIT_NONE,			/* goes on without a slot */
	DBGATE_ADMIT_RETRY			/* the budget changed identity: classify again */
} DbgateAdmit;

/* States of a backend's shared entry (admission.c). */
#define DBGATE_PROC_IDLE		0	/* neither queued nor holding a slot */
#define DBGATE_PROC_QUEUED		1	/* in a budget's queue */
#define DBGATE_PROC_ACTIVE		2	/* holds a slot, a statement runs */
#define DBGATE_PROC_HELD		3	/* holds a slot, nothing runs under it */

/* slot.c: the life of this backend's slot */
extern int	dbgate_nrefs;		/* references keeping this backend's slot */
extern bool dbgate_slot_has_limits; /* the slot's budget has timeouts or
									 * max_memory_mb */
extern bool dbgate_refs_span_subxacts;
extern bool dbgate_run_work;	/* ExecutorRun/Finish have work to do */
extern bool dbgate_slot_busy;	/* the transaction's end has work to do */
extern bool dbgate_xact_committing;	/* the commit has started */
extern void dbgate_slot_executor_start(QueryDesc *queryDesc, int eflags);
extern void dbgate_slot_executor_end(QueryDesc *queryDesc);
extern void dbgate_slot_commit_start(bool prepare);
extern void dbgate_slot_xact_end(void);
extern void dbgate_slot_subxact_start(void);
extern void dbgate_slot_subxact_abort(SubTransactionId mySubid);
extern void dbgate_slot_utility_start(void);
extern void dbgate_slot_utility_done(PlannedStmt *pstmt, bool toplevel);
extern void dbgate_slot_call_start(void);

/*
 * A utility command that takes a slot like a query (budget field
 * 'utility'; which commands qualify is decided by the caller).  begin()
 * classifies the backend and, when its budget has utility = true and no
 * slot is held yet, admits (queue, reject) exactly like ExecutorStart.
 * Returns true when a slot was taken for the command; the caller must
 * then call end() once on every exit (PG_FINALLY).  The slot stays held
 * across the transactions a command such as VACUUM runs internally.
 */
extern bool dbgate_utility_begin(void);
extern void dbgate_utility_end(void);

/* admission.c: slots in shared memory */
extern DbgateAdmit dbgate_admit(const DbgateLookup *lk, bool utility,
								QueryDesc *queryDesc, DbgateAdmission *a);
extern void dbgate_admission_release(const DbgateChain *c,
									 TimestampTz admitted_at);
extern void dbgate_admission_leave_queue(void);
extern void dbgate_admission_attach(int procno);
extern void dbgate_admission_mark(uint8 state, TimestampTz since);
extern void dbgate_admission_return(const DbgateChain *c,
									TimestampTz admitted_at);
extern void dbgate_admission_memory(const DbgateChain *c, int64 delta_kb);
extern void dbgate_admission_count_terminated_idle(const DbgateChain *c);
extern const double dbgate_hist_bounds_ms[DBGATE_HIST_BUCKETS];

/* admission.c, for the configuration install */
extern Size dbgate_admission_shmem_size(int max_procs);
extern void dbgate_admission_shmem_init(void *base, int max_procs);
extern void dbgate_admission_shmem_attach(void *base);
extern void dbgate_admission_budget_created(DbgateBudget *b);
extern void dbgate_admission_set_limits(DbgateBudget *b,
										const DbgateBudgetConf *conf,
										int parent, uint32 parent_incarnation);
extern void dbgate_admission_release_waiters(DbgateBudget *b);
extern void dbgate_admission_recount_queued(void);
extern void dbgate_admission_admit_all(DbgateBudget *b);
extern void dbgate_admission_grant(int root);
extern int	dbgate_admission_lock_tree(int idx);

/* admission.c, for the lock-holder check (lockgraph.c) */
typedef struct DbgateHeldBack
{
	int			pid;
	int			procno;
	int			nlevels;		/* full enforcing levels of its chain */
	int32		levels[DBGATE_MAX_DEPTH];
	uint32		incs[DBGATE_MAX_DEPTH];
} DbgateHeldBack;

extern int	dbgate_admission_claim_lock_check(int idx, TimestampTz now,
											  TimestampTz until);
extern int	dbgate_admission_held_back(int root, DbgateHeldBack *out, int max);
extern int	dbgate_admission_lock_waiting_holders(int idx, uint32 inc,
												  int *pids, int max);
extern bool dbgate_admission_queued_levels(int procno, int pid,
										   DbgateHeldBack *hb);
extern void dbgate_admission_admit_lock_holder(int procno, int pid);

/* lockgraph.c */
extern void dbgate_lockgraph_check(int idx, TimestampTz now);

/* rate.c */
extern int64 dbgate_now_ns(void);
extern int64 dbgate_token_due(DbgateBudget *b, int64 now_ns);
extern int64 dbgate_token_take(DbgateBudget *b, int64 now_ns, bool force);
extern int64 dbgate_token_take_at(DbgateBudget *b, int64 now_ns,
								  int64 asof_ns, bool force);

/*
 * How far back a queued statement granted after the token waiter may take
 * its token (rate.c): the latch wait's millisecond granularity and a
 * scheduling delay.
 */
#define DBGATE_TOKEN_CATCHUP_NS INT64CONST(2000000)
extern void dbgate_token_return(DbgateBudget *b);
extern void dbgate_token_fill(DbgateBudget *b);

/* admission.c, for the views */
#define DBGATE_ROW_QUEUED		0
#define DBGATE_ROW_ACTIVE		1
#define DBGATE_ROW_HELD			2	/* holds a slot, nothing runs under it */

typedef struct DbgateBackendRow
{
	int32		pid;
	Oid			roleid;
	int			budget;
	uint8		state;			/* DBGATE_ROW_* */
	uint8		rule;			/* DbgateRule */
	Oid			via;
	TimestampTz since;
	int32		position;		/* 1 = next; queued only */
	int64		memory_kb;		/* open memory grants */
} DbgateBackendRow;

extern int	dbgate_admission_backends(int idx, DbgateBackendRow *rows,
									  int maxrows);
extern uint64 dbgate_admission_oldest_wait(int idx);
extern int	dbgate_admission_idle_count(int idx);

/*
 * The child plans of a plan node other than lefttree and righttree (the
 * members of an Append, MergeAppend, BitmapAnd, BitmapOr or CustomScan);
 * a SubqueryScan's plan comes back in *subplan.  For the plan walks of
 * parallel.c, memestimate.c and mincost.c.
 */
static inline List *
dbgate_plan_children(Plan *plan, Plan **subplan)
{
	*subplan = NULL;
	switch (nodeTag(plan))
	{
		case T_Append:
			return ((Append *) plan)->appendplans;
		case T_MergeAppend:
			return ((MergeAppend *) plan)->mergeplans;
		case T_BitmapAnd:
			return ((BitmapAnd *) plan)->bitmapplans;
		case T_BitmapOr:
			return ((BitmapOr *) plan)->bitmapplans;
		case T_CustomScan:
			return ((CustomScan *) plan)->custom_plans;
		case T_SubqueryScan:
			*subplan = ((SubqueryScan *) plan)->subplan;
			return NIL;
		default:
			return NIL;
	}
}

/* parallel.c */
extern int	dbgate_parallel_cap(void);
extern void dbgate_parallel_executor_start_slow(QueryDesc *queryDesc);
extern void dbgate_parallel_utility(ProcessUtility_hook_type next,
									PlannedStmt *pstmt,
									const char *queryString,
									bool readOnlyTree,
									ProcessUtilityContext context,
									ParamListInfo params,
									QueryEnvironment *queryEnv,
									DestReceiver *dest, QueryCompletion *qc);

/* ExecutorStart: cap a plan made before the budget's cap was in force. */
static inline void
dbgate_parallel_executor_start(QueryDesc *queryDesc)
{
	/* a plan without Gather or Gather Merge needs no parallel mode */
	if (unlikely(queryDesc->plannedstmt->parallelModeNeeded))
		dbgate_parallel_executor_start_slow(queryDesc);
}

/* utility.c */
extern bool dbgate_utility_takes_slot(PlannedStmt *pstmt,
									  ProcessUtilityContext context);

/* waitsnap.c: a queued statement gives up its snapshot while it waits */
extern bool dbgate_waitsnap_release(QueryDesc *queryDesc);
extern void dbgate_waitsnap_retake(QueryDesc *queryDesc);
extern bool dbgate_waitsnap_utility_release(void);
extern void dbgate_waitsnap_utility_retake(void);
extern bool dbgate_waitsnap_call_release(void);
extern void dbgate_waitsnap_call_retake(void);

/* limits.c */
/* gucvar.c: a built-in integer setting tightened for a while */
typedef struct DbgateGucOverride
{
	bool		applied;
	struct config_generic *rec; /* the GUC record */
	int		   *variable;		/* the variable behind it */
	int			value;			/* the value set */
	int			session;		/* the session's value before */
	Oid			session_srole;	/* and the role that set it */
	int			session_source; /* and its GucSource */
	bool		moved_source;	/* the record's source was moved from
								 * PGC_S_DEFAULT (for parallel workers) */
	struct guc_stack *stack;	/* top of its GUC stack then */
	int			stack_state;	/* that entry's state, or -1 */
} DbgateGucOverride;

extern void dbgate_guc_override_apply(DbgateGucOverride *o,
									  struct config_generic *rec,
									  int *variable, int value);
extern void dbgate_guc_override_apply_to_workers(DbgateGucOverride *o,
												 struct config_generic *rec,
												 int *variable, int value);
extern void dbgate_guc_override_restore(DbgateGucOverride *o);

/*
 * memgrant.c: a stretch of work (ExecutorStart, ExecutorRun, ExecutorFinish)
 * of a run with a memory grant.
 */
typedef struct DbgateMemStretch
{
	bool		entered;		/* counted in the stretch depth */
	DbgateGucOverride wm;		/* work_mem lowered for the stretch */
} DbgateMemStretch;

typedef struct DbgateLimitState
{
	bool		tracked;		/* the run is a reference of our slot */
	bool		applied;		/* budget limits were applied */
	bool		stmt_armed;		/* we set STATEMENT_TIMEOUT */
	bool		stmt_had_session;	/* a session timer was active before */
	TimestampTz stmt_session_fin;	/* its finish time */
	TimestampTz stmt_our_fin;	/* the finish time we set */
	DbgateGucOverride lock;		/* lock_timeout */
	DbgateMemStretch mem;		/* memgrant.c: the run's work_mem */
} DbgateLimitState;

extern void dbgate_limits_apply(DbgateLimitState *st, TimestampTz start,
								int statement_timeout_ms, int lock_timeout_ms);
extern void dbgate_limits_apply_call(DbgateLimitState *st, TimestampTz start,
									 int statement_timeout_ms,
									 int lock_timeout_ms);
extern void dbgate_limits_restore(DbgateLimitState *st, bool is_error);
extern void dbgate_idle_timeout_arm(int idle_timeout_ms);
extern void dbgate_idle_timeout_disarm(void);
extern bool dbgate_idle_timeout_fired(void);

/* slot.c, around ExecutorRun / ExecutorFinish */
extern bool dbgate_run_begin(QueryDesc *queryDesc, DbgateLimitState *st);
extern void dbgate_run_end(QueryDesc *queryDesc, DbgateLimitState *st,
						   bool is_error);

/* config.c */
extern bool dbgate_config_busy;	/* changes pending in this transaction */
extern void dbgate_config_xact_callback(XactEvent event);
extern void dbgate_config_subxact_callback(SubXactEvent event,
										   SubTransactionId mySubid,
										   SubTransactionId parentSubid);
extern void dbgate_config_current(DbgateConfig *config);
extern void dbgate_config_add_create(const DbgateBudgetConf *conf);
extern void dbgate_config_add_alter(const char *name, const DbgateBudgetConf *values,
									uint32 mask);
extern void dbgate_config_add_drop(const char *name, bool force);
extern void dbgate_config_add_assign(Oid roleid, const char *budget);
extern bool dbgate_config_add_unassign(Oid roleid);
extern void dbgate_config_add_assign_db(Oid dbid, const char *budget);
extern bool dbgate_config_add_unassign_db(Oid dbid);
extern void dbgate_config_role_dropped(Oid roleid);
extern void dbgate_config_database_dropped(Oid dbid);

/* the alter mask has one bit per budget field: see fields.h */

/* confimage.c */
extern void dbgate_image_init(DbgateConfig *config);
extern void dbgate_image_alloc(DbgateConfig *config, int nbudgets, int nroles,
							   int ndbs);
extern void dbgate_image_copy(DbgateConfig *dst, const DbgateConfig *src);
extern void dbgate_image_free(DbgateConfig *config);
extern int	dbgate_image_find_budget(const DbgateConfig *config, const char *name);
extern int	dbgate_image_find_role(const DbgateConfig *config, Oid roleid);
extern int	dbgate_image_find_db(const DbgateConfig *config, Oid dbid);
extern void dbgate_image_add_budget(DbgateConfig *config,
									const DbgateBudgetConf *conf);
extern void dbgate_image_remove_budget(DbgateConfig *config, int i);
extern void dbgate_image_add_role(DbgateConfig *config, Oid roleid,
								  const char *budget);
extern void dbgate_image_remove_role(DbgateConfig *config, int i);
extern void dbgate_image_add_db(DbgateConfig *config, Oid dbid,
								const char *budget);
extern void dbgate_image_remove_db(DbgateConfig *config, int i);
extern int *dbgate_image_tree_order(const DbgateConfig *config);
extern bool dbgate_image_fit(DbgateConfig *config, int max_budgets,
							 int max_roles, const char *what, const char *hint);

/* persist.c */
extern char *dbgate_state_encode(const DbgateConfig *config, XLogRecPtr lsn,
								 Size *lenp);
/* what dbgate_state_decode() found */
typedef enum DbgateDecodeResult
{
	DBGATE_DECODE_OK,
	DBGATE_DECODE_INVALID,		/* damaged, or not a dbgate image */
	DBGATE_DECODE_NEWER			/* a format version newer than this library's */
} DbgateDecodeResult;

extern DbgateDecodeResult dbgate_state_decode(const char *buf, Size len,
											  DbgateConfig *config,
											  XLogRecPtr *lsn, uint32 *format,
											  char *why, size_t whylen);
extern bool dbgate_state_load(DbgateConfig *config, XLogRecPtr *lsn);
extern void dbgate_state_write_temp(const DbgateConfig *config, XLogRecPtr lsn);
extern void dbgate_state_commit_temp(int elevel);
extern void dbgate_state_discard_temp(void);

/* wal.c */
extern void dbgate_wal_init(void);
extern XLogRecPtr dbgate_wal_log_image(const DbgateConfig *config);
extern void dbgate_wal_log_confirm(TransactionId xid);

#endif							/* DBGATE_H */
