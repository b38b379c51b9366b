/*-------------------------------------------------------------------------
 *
 * dimdefs.h
 *	  What an admission dimension is: the struct of callbacks that each
 *	  dimension fills in (one const DbgateDimension per dimension,
 *	  in its own file), the answers of its take, and the clock they share.
 *
 * An admission dimension is a limit beside a budget's slots that can hold
 * a statement back: today the rate's tokens (rate.c), next the keys.  The
 * table of the dimensions and the helpers through which the files of
 * admission reach them are dimension.h's; this header is the ground
 * layer's (it includes only shmem.h), so that a dimension's file includes
 * it without depending on the table that lists it, as PostgreSQL's
 * lockdefs.h keeps the small definitions off lock.h.
 *
 * How the core uses a dimension
 * -----------------------------
 * The install (dbgate_admission_set_limits(), install.c) asks every
 * dimension whether a budget uses it under its configuration, and sets
 * the dimension's bit in the budget's DbgateLimits.dim_flags.  The files
 * of admission then call a dimension only at the levels of a chain whose
 * dim_flags has its bit, so a budget that uses no dimension pays one test
 * of one byte on the statement path.  At each such level:
 *	  - take: when a slot is taken (the fast path without a lock, the
 *		decision under the tree lock, the grant step for a waiter); its
 *		answer admits the statement, or says when the dimension would
 *		(a due time: the waiter that lacks only this sleeps until then),
 *		or that it will not before one of its releases;
 *	  - untake: the admission did not happen after all (another level or
 *		another dimension turned it back): what take took goes back;
 *	  - due: under the tree lock, the grant step asks of a waiter whether
 *		the dimension would admit it now, without taking anything.
 * And at the statement's end, release (the slot's end; not untake).
 *
 * A dimension with per-statement state (a key: the key entry that the
 * admission took, which its release and untake must find) keeps it in a
 * field of its own of the statement's backend entry (DbgateProc, shmem.h),
 * which its callbacks receive as 'e': take writes it and sets the
 * dimension's bit in e->dim_held, untake and release clear both.  The
 * entry is written by the backend itself (the fast path, the decision
 * under the tree lock) or, while it is queued, by the backend that grants
 * it a slot under the tree lock: the rules of every DbgateProc field
 * (admission.c).  The core calls release only for the bits of
 * e->dim_held, so a dimension without per-statement state (the rate)
 * has no release and costs the release path nothing but that test.
 * What take can learn only in the statement's own process (a key: the
 * value of the session's setting) it writes into e before it answers,
 * also when it does not admit: the grant step's due and take run in the
 * backend that grants, and find it there.
 *
 * A dimension that partitions a budget's statements (keys: keydim.c)
 * has five more callbacks, NULL for the others: enter, in the
 * statement's own process before its first take at the level (what only
 * that process can learn: the key, and the hold of its entry); join and
 * unjoin, as the statement joins and leaves its budget's queue (a limit
 * on the waiters of one part: key_max_queued); pick, the waiter of a
 * budget's queue that a free slot goes to (the order across the parts:
 * the key with the fewest active first); newcomer_waits, whether a
 * newcomer may take a free slot past the waiters.  Its release is called
 * at the slot's end and for a statement that leaves without a slot
 * (rejected, timed out, canceled while queued, ungated, classified
 * again), so that a queued statement keeps what enter took until it is
 * done.  installed runs after every configuration install (what the
 * dimension derives from the whole configuration: the key limits).
 * Still the core's, not the table's: a slot moved by the runaway worker
 * (move.c returns the source's levels without release).
 *
 *-------------------------------------------------------------------------
 */
#ifndef DBGATE_DIMDEFS_H
#define DBGATE_DIMDEFS_H

#include <time.h>

#include "shmem.h"

/* The dimensions: their index in the table (dimension.c) and their bit. */
typedef enum DbgateDimId
{
	DBGATE_DIM_RATE = 0,		/* max_rate, rate_burst: rate.c */
	DBGATE_DIM_KEY,				/* key_by and the key_* limits: keydim.c */
	DBGATE_NDIMS
} DbgateDimId;

#define DBGATE_DIM_BIT(d)	((uint8) (1 << (d)))

/*
 * What take and due answer (int64): DBGATE_DIM_TAKEN (admitted by the
 * dimension), DBGATE_DIM_UNTIL_RELEASE (not before a release of the
 * dimension: a key at its key_max_active), or a time > 0 of dbgate_now_ns()'s
 * clock before which the dimension admits nothing (a rate's next token).
 */
#define DBGATE_DIM_TAKEN			INT64CONST(0)
#define DBGATE_DIM_UNTIL_RELEASE	INT64CONST(-1)

/*
 * How far back a queued statement granted after the tree's timed waiter
 * (the waiter for whom the grant step was woken: queue.c) may take what
 * fell due meanwhile: the latch wait's millisecond granularity and a
 * scheduling delay (rate.c says what that bounds).
 */
#define DBGATE_DIM_CATCHUP_NS	INT64CONST(2000000)

/*
 * The callbacks of a dimension.  b is the budget entry of the level, e the
 * backend entry of the statement (its per-statement state, see above),
 * level its level in the statement's chain (0: its own budget).
 */
typedef struct DbgateDimension
{
	const char *name;

	/*
	 * Shared memory of the dimension's own beyond the budget entries (a
	 * key table): its request (RequestAddinShmemSpace() and any LWLock
	 * tranche, at the postmaster's shmem_request_hook), and its set-up in
	 * every process (ShmemInitStruct under AddinShmemInitLock, initialised
	 * when not found: as adapt.c's).  NULL when none (the rate keeps one
	 * word in the budget entry, shmem.h).
	 */
	void		(*shmem_request) (void);
	void		(*shmem_init) (void);

	/*
	 * Install configuration 'conf' into budget entry b (b->conf is still
	 * the old one) under b's tree lock, before the new limits are
	 * published: reset what a change of conf resets, fill the queue side's
	 * fields of *q.  Returns whether b uses the dimension under conf (its
	 * bit in dim_flags).  conf == NULL: the entry starts serving a new
	 * budget (forget the dropped one's state; q is NULL, the answer
	 * ignored).
	 */
	bool		(*install) (DbgateBudget *b, const DbgateBudgetConf *conf,
							DbgateQueueLimits *q);

	/*
	 * Take what an admission at this level needs.  Whether it is there is
	 * judged at now_ns; a queued statement takes it as of asof_ns <=
	 * now_ns (the time it fell due: queue.c's grant step).  Both are 0
	 * when the caller read no clock (no dimension of the level is in
	 * dbgate_dims_timed, dimension.h): a take that needs it reads it.  'force' (a
	 * level in shadow mode): take it whatever, and still answer whether
	 * it was there.  Without a lock, or under the tree lock.
	 */
	int64		(*take) (DbgateBudget *b, DbgateProc *e, int level,
						 int64 now_ns, int64 asof_ns, bool force);

	/* Give back what take took a moment ago (no admission after all). */
	void		(*untake) (DbgateBudget *b, DbgateProc *e, int level);

	/*
	 * Under the tree lock, for the grant step: would take admit e's
	 * statement at this level at now_ns?  Answers as take, taking nothing.
	 */
	int64		(*due) (DbgateBudget *b, DbgateProc *e, int level,
						int64 now_ns);

	/*
	 * The end of e's slot (held along chain c): give back what its
	 * per-statement state holds.  Called before the slot's levels are
	 * returned, so a waiter that this held back is in its budget's queue
	 * (counted in 'queued') and the return takes the tree lock and runs
	 * the grant step.  NULL: the dimension keeps no per-statement state.
	 */
	void		(*release) (DbgateProc *e, const DbgateChain *c);

	/* Zero the dimension's counters of budget b (dbgate.reset_stats). */
	void		(*reset_stats) (DbgateBudget *b);

	/*
	 * A dimension that partitions a budget's statements (see above); NULL
	 * for the others.
	 *
	 * enter: e's statement arrives at level 'level' of budget b, in its own
	 * process (e == dbgate_my_proc), with no lock held, before its first
	 * take there: learn what only its process can and keep it in e, with
	 * the dimension's bit in e->dim_held (release gives it back).
	 */
	void		(*enter) (DbgateBudget *b, DbgateProc *e, int level);

	/*
	 * enter_take (optional, for a dimension with enter): enter, then take
	 * with now_ns as asof_ns too, in one call -- what the fast paths
	 * (admission.c: the statement's own process, no lock) do, so a
	 * dimension whose two steps share work does it once.  NULL: enter
	 * then take.
	 */
	int64		(*enter_take) (DbgateBudget *b, DbgateProc *e, int level,
							   int64 now_ns, bool force);

	/*
	 * join: under the tree lock, e's statement is about to join budget
	 * b's queue: may it?  false: it is rejected (53300) with a DETAIL
	 * written into detail (len bytes), counted by the dimension.  true: it
	 * is counted as waiting.  unjoin: it left the queue (granted or not),
	 * under the tree lock.
	 */
	bool		(*join) (DbgateBudget *b, DbgateProc *e, char *detail, int len);
	void		(*unjoin) (DbgateProc *e);

	/*
	 * pick: under the tree lock, the waiter of budget b's queue that a
	 * free slot of b goes to (b's queue order l within each part), or -1
	 * if none could take it now; if none could but one lacks only what
	 * falls due at a time (a token), that one, which the caller's due()
	 * then finds blocked.  *overdue: chosen because it waited
	 * overtake_limit ('lifo').
	 */
	int			(*pick) (DbgateBudget *b, const DbgateLimits *l,
						 TimestampTz now, int64 now_ns, bool *overdue);

	/*
	 * newcomer_waits: under the tree lock, in a fair budget b with
	 * waiters and room: must newcomer e queue behind them?
	 */
	bool		(*newcomer_waits) (DbgateBudget *b, const DbgateLimits *l,
								   DbgateProc *e, TimestampTz now);

	/*
	 * installed: after a configuration install, under config_lock held
	 * exclusively and no tree lock.
	 */
	void		(*installed) (void);

	/*
	 * explain: take at level 0 did not admit e's statement a moment ago
	 * (under the tree lock): if this dimension is why, the first part of
	 * the DETAIL of its 53300 into detail (len bytes), and true.
	 */
	bool		(*explain) (DbgateBudget *b, DbgateProc *e, char *detail,
							int len);
} DbgateDimension;

/*
 * Nanoseconds of the monotonic clock (vDSO: no system call).  The
 * timespec is static, not on the stack: a local whose address is taken
 * gives every function this is inlined into a stack protector (a backend
 * has one thread; nothing else reads it).
 */
static inline int64
dbgate_now_ns(void)
{
	static struct timespec now_ts;

	clock_gettime(CLOCK_MONOTONIC, &now_ts);
	return (int64) now_ts.tv_sec * INT64CONST(1000000000) + now_ts.tv_nsec;
}

#endif							/* DBGATE_DIMDEFS_H */
