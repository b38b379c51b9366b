/*-------------------------------------------------------------------------
 *
 * shmem.h
 *	  The layout of dbgate's shared memory and its set-up (shmem.c): the
 *	  budget entries, the per-backend entries and the maps, with the locks
 *	  that protect them and their inline readers; the settings that size
 *	  it, and the lookup of a budget entry by name.
 *
 * The ground layer: every other file may include this header, and it
 * includes only PostgreSQL's headers and budgetdefs.h.  The modules with
 * shared state of their own declare it in their own headers and size and
 * initialise it themselves (adapt.h, runaway.h, quarantine.h; dbgate.c's
 * shared-memory hooks call them), as PostgreSQL's lock.h and proc.h do.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DBGATE_SHMEM_H
#define DBGATE_SHMEM_H

#include "postgres.h"

#include "access/xlogdefs.h"
#include "port/atomics.h"
#include "storage/lwlock.h"
#include "utils/timestamp.h"

#include "budgetdefs.h"

/*
 * Functions and variables that the files of dbgate share and nothing
 * outside the library uses, reached directly and not through the
 * library's PLT or GOT (admission_internals.h says why).
 */
#if defined(__GNUC__)
#define DBGATE_HIDDEN __attribute__((visibility("hidden")))
#else
#define DBGATE_HIDDEN
#endif

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
	/* the controller's memory is adapt.c's own (DbgateAdaptState, adapt.h) */
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

/*
 * A budget entry takes 1024 bytes (8 lines of 128 bytes, the most it has
 * needed so far; shmem.c checks that it fits): a power of 2, so that the
 * address of entry i, which the statement path computes at every level of
 * a chain, is a shift and an addition.
 */
#define DBGATE_BUDGET_BYTES		1024

typedef union DbgateBudgetPadded
{
	DbgateBudget d;
	char		pad[DBGATE_BUDGET_BYTES];
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
	uint8		token_levels;	/* chain levels that held it back until a
								 * due time (a token: rate_limited) */
	uint8		dim_held;		/* dimensions with per-statement state in
								 * this entry (dimdefs.h) */
	uint8		key_flags;		/* DBGATE_KEYF_* (keydim.c) */
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
	 * Its key (1.3, keydim.c): the entry of the table of keys it holds
	 * (-1: none) and the key's bytes as the views show them.  Written by
	 * the backend itself (enter, release), and key_flags also by whoever
	 * grants it a slot or counts it as a waiter under the tree lock.
	 */
	int32		key;
	char		key_text[DBGATE_KEY_MAXLEN + 1];

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

/* DbgateProc.key_flags (keydim.c) */
#define DBGATE_KEYF_ACTIVE		0x01	/* counted active at its key */
#define DBGATE_KEYF_TOKEN		0x02	/* took a token of its key's bucket */
#define DBGATE_KEYF_QUEUED		0x04	/* counted as waiting at its key */
#define DBGATE_KEYF_OVERFLOW	0x08	/* its key is the overflow key */
#define DBGATE_KEYF_WAITED		0x10	/* held back by its key's token */
#define DBGATE_KEYF_HELD		0x20	/* holds a key (key, key_text) */

/*
 * The move word of a backend's entry (DbgateProc.move): | ticket:32 |
 * flags:32 |.  demote.c has the protocol; the runaway worker's move is
 * move.c's.
 */
#define DBGATE_MV_ASKED		0x01	/* the runaway timer asked for a move */
#define DBGATE_MV_BUSY		0x02	/* the runaway worker is moving the slot */
#define DBGATE_MV_DONE		0x04	/* the slot was moved (chain: the target's) */
#define DBGATE_MV_PIN		0x08	/* the backend is using its chain */
#define DBGATE_MV_ADOPTED	0x10	/* the backend applies the target's limits */
#define DBGATE_MV_TIMEOUT	0x20	/* the worker canceled for the target's
									 * statement_timeout */
#define DBGATE_MV_LOCK		0x40	/* ... for its lock_timeout */

static inline uint32
dbgate_mv_flags(uint64 w)
{
	return (uint32) w;
}

static inline uint32
dbgate_mv_ticket(uint64 w)
{
	return (uint32) (w >> 32);
}

static inline uint64
dbgate_mv_make(uint32 ticket, uint32 flags)
{
	return ((uint64) ticket << 32) | flags;
}

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

	/*
	 * The named locks of dbgate's tranche that belong to a module, as
	 * PostgreSQL's individual LWLocks: the quarantine table's (quarantine.c,
	 * whose table is its own shared memory, quarantine.h).
	 */
	LWLock	   *quarantine_lock;
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


/*
 * This backend's entry and its proc number, once attached (admission.c's
 * dbgate_admission_attach() sets them), as PostgreSQL's MyProc.
 */
extern DBGATE_HIDDEN DbgateProc *dbgate_my_proc;
extern DBGATE_HIDDEN int dbgate_my_procno;

static inline DbgateProc *
proc_entry(int procno)
{
	return &dbgate_shared->procs[procno].d;
}

static inline DbgateBudget *
budget_entry(int idx)
{
	return &dbgate_shared->budgets[idx].d;
}

/* Settings (dbgate.c defines them as GUCs). */
extern PGDLLIMPORT bool dbgate_enabled;
extern PGDLLIMPORT int dbgate_max_budgets;
extern PGDLLIMPORT int dbgate_max_roles;
extern PGDLLIMPORT int dbgate_max_quarantine;

extern void dbgate_shmem_request(void);
extern bool dbgate_shmem_init(void);
extern void dbgate_check_loaded(void);
extern int	dbgate_find_budget(const char *name);

#endif							/* DBGATE_SHMEM_H */
