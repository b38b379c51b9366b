/*-------------------------------------------------------------------------
 *
 * dbgate.h
 *	  Shared declarations of dbgate: workload admission control.
 *
 * Files and what they own:
 *	  dbgate.c		module entry, GUCs, hook installation, xact callbacks
 *	  budgets.c		the shared budget table and role map
 *	  classify.c	which budget gates a backend (the lookup and its cache)
 *	  admission.c	admit / queue / hand off / release of slots
 *	  limits.c		per-budget statement_timeout, lock_timeout and
 *					idle_in_transaction_timeout
 *	  gucvar.c		a built-in setting tightened for a while
 *	  confimage.c	configuration images (backend-local copies)
 *	  config.c		transactional configuration changes
 *	  persist.c		the state file in the data directory, image encoding
 *	  wal.c			WAL records of configuration changes and their redo
 *	  sqlfuncs.c	SQL-callable configuration functions, dbgate.budgets
 *	  status.c		the live views dbgate.status and dbgate.backends
 *	  parallel.c	a budget's parallel_workers: the cap and plan capping
 *	  utility.c		which utility commands take a slot
 *	  waitsnap.c	a queued statement holds no snapshot while it waits
 *	  memestimate.c	the working memory a plan may use (memgrant.h)
 *	  memgrant.c	memory grants: a statement's work_mem, their accounting
 *	  mincost.c		cheap read-only statements that are not gated
 *	  planner.c		the planner hook: parallel cap, plans that fit memory
 *
 *-------------------------------------------------------------------------
 */
#ifndef DBGATE_H
#define DBGATE_H

#include "postgres.h"

#include "access/xact.h"
#include "access/xlogdefs.h"
#include "executor/execdesc.h"
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

/* ----------
 * Shared memory.
 *
 * Locks (see admission.c for the slot life cycle):
 *	  config_lock	the identity of budget entries (in_use, incarnation, name),
 *					the role and database maps and state_lsn.  Shared for
 *					lookups and views, exclusive while a committed (or, in
 *					recovery, a replayed) configuration is installed.
 *	  commit lock	a heavyweight lock (not in shared memory here, see
 *					config.c) that serialises configuration commits; taken
 *					at PRE_COMMIT, released with the transaction's locks.
 *	  budget lock	one per budget entry: limits, the queue and 'queued',
 *					the statistics that are not atomics, and the DbgateProc
 *					entries of its queued backends.  'active' also changes
 *					without it, by compare-and-swap (see admission.c).
 *	  Lock order: commit lock, config_lock, budget lock.  The statement path
 *	  takes no lock while a slot is free; otherwise only the budget lock.
 * ----------
 */
typedef struct DbgateBudget
{
	/* identity: written with config_lock and this budget's lock exclusive */
	bool		in_use;
	uint32		incarnation;	/* bumped whenever the entry is (re)used */

	/*
	 * Limits: written only by dbgate_admission_set_limits(), under the
	 * budget lock and inside conf_seq (odd while writing); read without
	 * the lock only through admission.c's read_limits().
	 */
	pg_atomic_uint32 conf_seq;
	DbgateBudgetConf conf;

	/*
	 * Live counts: one atomic word, see DBGATE_ST_*.  'active' changes
	 * without the lock on the fast paths (a free slot taken, a slot returned
	 * with nobody queued), by compare-and-swap of the whole word; 'queued'
	 * changes only under the budget lock, together with the queue list.
	 */
	pg_atomic_uint64 state;
	int32		queue_head;		/* proc number or -1; budget lock */
	int32		queue_tail;		/* proc number or -1; budget lock */

	/* statistics; atomics are updated on the fast paths */
	pg_atomic_uint32 peak_active;
	int32		peak_queued;	/* budget lock */
	pg_atomic_uint64 admitted;
	pg_atomic_uint64 active_time_total_us;
	pg_atomic_uint64 admitted_after_wait;
	pg_atomic_uint64 wait_time_total_us;
	pg_atomic_uint64 wait_time_max_us;
	pg_atomic_uint64 would_queue;	/* shadow mode */
	pg_atomic_uint64 would_reject;
	pg_atomic_uint64 terminated_idle;

	/*
	 * 1.2, memgrant.c and mincost.c (no lock): the sum of the open memory
	 * grants counted through this budget (| tag:28 | kB:36 |, the tag as
	 * in 'state'; a parent's covers its subtree), and the statements
	 * below min_cost that were not gated.
	 */
	pg_atomic_uint64 memory_word;
	pg_atomic_uint64 bypassed;
	/* the rest only change under the budget lock */
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

/* admission.c */
extern int	dbgate_nrefs;		/* executor runs keeping this backend's slot */
extern bool dbgate_slot_has_limits;
extern void dbgate_executor_start(QueryDesc *queryDesc, int eflags);
extern void dbgate_executor_end(QueryDesc *queryDesc);
extern void dbgate_admission_commit_start(bool prepare);
extern void dbgate_admission_xact_end(void);
extern void dbgate_admission_subxact_abort(SubTransactionId mySubid);
extern void dbgate_admission_utility_start(void);
extern void dbgate_admission_utility_done(bool toplevel);
extern void dbgate_admission_log(ErrorData *edata);

/* admission.c, for the configuration install */
extern Size dbgate_admission_shmem_size(int max_procs);
extern void dbgate_admission_shmem_init(void *base, int max_procs);
extern void dbgate_admission_shmem_attach(void *base);
extern void dbgate_admission_budget_created(DbgateBudget *b,
											const DbgateBudgetConf *conf);
extern void dbgate_admission_set_limits(DbgateBudget *b,
										const DbgateBudgetConf *conf,
										bool grant);
extern void dbgate_admission_budget_dropped(DbgateBudget *b);

/* admission.c, for the views */
#define DBGATE_ROW_QUEUED		0
#define DBGATE_ROW_ACTIVE		1
#define DBGATE_ROW_IDLE_IN_XACT	2

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
} DbgateBackendRow;

extern int	dbgate_admission_backends(int idx, DbgateBackendRow *rows,
									  int maxrows);
extern int	dbgate_admission_idle_count(int idx);

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

/* parallel.c */
extern int	dbgate_parallel_cap(void);
extern void dbgate_parallel_executor_start_slow(QueryDesc *queryDesc);

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

/* limits.c */
/* gucvar.c: a built-in integer setting tightened for a while */
typedef struct DbgateGucOverride
{
	bool		applied;
	struct config_generic *rec; /* the GUC record */
	int		   *variable;		/* the variable behind it */
	int			value;			/* the value set */
	int			session;		/* the session's value before */
	int			session_scontext;	/* and its GucContext */
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
extern void dbgate_limits_restore(DbgateLimitState *st, bool is_error);
extern void dbgate_idle_timeout_arm(int idle_timeout_ms);
extern void dbgate_idle_timeout_disarm(void);
extern bool dbgate_idle_timeout_fired(void);

/* admission.c, around ExecutorRun / ExecutorFinish */
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

/* bits of the alter mask */
#define DBGATE_ALTER_MAX_ACTIVE		0x01
#define DBGATE_ALTER_MAX_QUEUED		0x02
#define DBGATE_ALTER_QUEUE_TIMEOUT	0x04
#define DBGATE_ALTER_STMT_TIMEOUT	0x08
#define DBGATE_ALTER_LOCK_TIMEOUT	0x10
#define DBGATE_ALTER_FAIR			0x20
#define DBGATE_ALTER_SCOPE			0x40
#define DBGATE_ALTER_IDLE_TIMEOUT	0x80
#define DBGATE_ALTER_PARALLEL		0x100
#define DBGATE_ALTER_UTILITY		0x200
#define DBGATE_ALTER_ENFORCE		0x400

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

/* persist.c */
extern char *dbgate_state_encode(const DbgateConfig *config, XLogRecPtr lsn,
								 Size *lenp);
extern bool dbgate_state_decode(const char *buf, Size len, DbgateConfig *config,
								XLogRecPtr *lsn, char *why, size_t whylen);
extern bool dbgate_state_load(DbgateConfig *config, XLogRecPtr *lsn);
extern void dbgate_state_write_temp(const DbgateConfig *config, XLogRecPtr lsn);
extern void dbgate_state_commit_temp(int elevel);
extern void dbgate_state_discard_temp(void);

/* wal.c */
extern void dbgate_wal_init(void);
extern XLogRecPtr dbgate_wal_log_image(const DbgateConfig *config);
extern void dbgate_wal_log_confirm(TransactionId xid);

#endif							/* DBGATE_H */
