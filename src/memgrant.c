/*-------------------------------------------------------------------------
 *
 * memgrant.c
 *	  A budget's max_memory_mb: each statement's grant of working memory,
 *	  the work_mem it runs with, and the accounting in shared memory.
 *
 * Rules
 * -----
 * A slot of a budget with max_memory_mb = M > 0 and max_active = B may use
 * S = M / B of working memory.  At the ExecutorStart of a *top-level* run
 * under the slot (one that does not start inside the ExecutorStart,
 * ExecutorRun or ExecutorFinish of another run with a grant record), the
 * plan's estimate (memestimate.c: units, so that the estimate at work_mem
 * w is units * w) is compared with what the slot has left, R = S minus the
 * backend's open grants (a cursor's, say):
 *	  - units * work_mem <= R: the run keeps the session's work_mem;
 *	  - otherwise work_mem is lowered to floor(R / units) kB, but never
 *		below 64 kB (work_mem's own minimum) and never above the session's
 *		value (only tightens);
 *	  - the grant is units * the work_mem the run gets: at most R, except
 *		for a plan whose estimate at 64 kB is larger (it runs at 64 kB and
 *		the grant is that estimate).
 * A budget in shadow mode (enforce = false) lowers nothing; its grants are
 * the estimates at the session's work_mem, so memory_mb_active shows what
 * its statements would use.
 *
 * Runs that start inside a granted run's stretch (functions of a query
 * running queries of their own) get no grant: they run at the work_mem in
 * force, the outer run's.  Executor runs inside a gated utility command
 * (the query of REFRESH MATERIALIZED VIEW) are top-level runs of the
 * command's slot; the command itself has no grant.
 *
 * The lowered work_mem is in force for each *stretch* of the run: its
 * ExecutorStart (from before the plan is initialised), each ExecutorRun
 * and each ExecutorFinish; between them (a cursor between FETCHes) the
 * session's value is back, so SHOW shows it.  It is set without the GUC
 * machinery and keeps what the statement itself does to work_mem
 * (gucvar.c): a SET inside the run is not capped.  The override also makes
 * work_mem travel to parallel workers launched during the stretch
 * (dbgate_guc_override_apply_to_workers()).  The stretch is undone on
 * every exit: the hooks call dbgate_memgrant_leave() on error before the
 * error reaches the (sub)transaction abort that would pop GUC state.
 *
 * Release: a grant record is released exactly once, at the first of
 *	  - its ExecutorEnd;
 *	  - the abort of the subtransaction it was started in, or of the one
 *		its ExecutorRun/ExecutorFinish was running in (PostgreSQL calls no
 *		ExecutorEnd for a portal that failed);
 *	  - the release of the slot (every record belongs to the held slot),
 *		which happens at the end of the top-level transaction at the
 *		latest (no executor run outlives it) and at backend exit.
 * Releasing takes the grant out of every budget of the slot's chain and
 * out of the backend's sum; a record is removed from the list before its
 * shared counts change, so an error cannot release it twice.
 *
 * Accounting
 * ----------
 * Every grant is added to each budget of the slot's chain (the statement's
 * budget and its ancestors: memory_mb_active, a parent's covering its
 * subtree) and to the backend's own sum (dbgate.backends.memory_mb), and
 * taken back from them when released, by admission.c's
 * dbgate_admission_memory(): atomic additions, no lock; a budget dropped
 * meanwhile (its state word carries another incarnation) is left alone.
 * The chain is the backend's entry's: a runaway's slot moved by 'demote'
 * takes its grants along (demote.c), and those of a budget that may
 * demote are counted with the chain pinned.
 *
 * Cost: nothing on the statement path unless the held slot's budget has
 * max_memory_mb (dbgate_memgrant_slot); then one plan walk per top-level
 * run and a few atomic operations per grant.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "access/xact.h"
#include "miscadmin.h"
#include "utils/guc.h"
#include "utils/guc_tables.h"
#include "utils/memutils.h"

#include "admission.h"
#include "budgetdefs.h"
#include "compat.h"
#include "demote.h"
#include "gucvar.h"
#include "memestimate.h"
#include "memgrant.h"

/* the largest grant counted (kB) */
#define MEM_MAX_GRANT	(UINT64CONST(1) << 32)

/* One executor run with a grant record. */
typedef struct GrantRec
{
	QueryDesc  *qd;
	SubTransactionId create_subid;	/* subxact of its ExecutorStart */
	SubTransactionId run_subid; /* subxact of the ExecutorRun/Finish in
								 * progress, when not create_subid */
	uint64		grant_kb;		/* counted in shared memory */
	int			work_mem;		/* kB the run gets; 0 = the session's */
} GrantRec;

#define INLINE_RECS 4

bool		dbgate_memgrant_slot = false;
int			dbgate_memgrant_nrecs = 0;

static GrantRec inline_recs[INLINE_RECS];
static GrantRec *recs = inline_recs;
static int	maxrecs = INLINE_RECS;

/* the held slot, as of its admission (its chain: the backend's entry) */
static bool slot_demote;		/* demote.c: the chain may move */
static int	slot_max_active;
static int	slot_max_memory_mb;
static bool slot_enforce;

static uint64 open_kb = 0;		/* sum of this backend's open grants */
static int	stretch_depth = 0;	/* stretches of granted runs in progress */

static struct config_generic *work_mem_rec = NULL;

/* ----------
 * Grant records
 * ----------
 */
static inline int
find_rec(QueryDesc *qd)
{
	int			i;

	for (i = dbgate_memgrant_nrecs - 1; i >= 0; i--)
	{
		if (recs[i].qd == qd)
			return i;
	}
	return -1;
}

static void
ensure_rec_space(void)
{
	if (dbgate_memgrant_nrecs < maxrecs)
		return;
	if (recs == inline_recs)
	{
		GrantRec   *n = MemoryContextAlloc(TopMemoryContext,
										   sizeof(GrantRec) * maxrecs * 2);

		memcpy(n, inline_recs, sizeof(GrantRec) * dbgate_memgrant_nrecs);
		recs = n;
	}
	else
		recs = repalloc(recs, sizeof(GrantRec) * maxrecs * 2);
	maxrecs *= 2;
}

/*
 * The grants of this backend change by delta_kb at every level of its
 * chain: pinned against a move where the slot's budget demotes (demote.c).
 */
static inline void
memory_add_kb(int64 delta_kb)
{
	if (unlikely(slot_demote))
		dbgate_demote_memory(delta_kb);
	else
		dbgate_admission_memory(delta_kb);
}

/* Forget record i and take its grant back, exactly once. */
static void
release_rec(int i)
{
	uint64		kb = recs[i].grant_kb;

	recs[i] = recs[--dbgate_memgrant_nrecs];
	if (kb == 0)
		return;
	open_kb -= Min(open_kb, kb);
	memory_add_kb(-(int64) kb);
}

static void
release_all(void)
{
	while (dbgate_memgrant_nrecs > 0)
		release_rec(dbgate_memgrant_nrecs - 1);
	if (recs != inline_recs)
	{
		pfree(recs);
		recs = inline_recs;
		maxrecs = INLINE_RECS;
	}
	stretch_depth = 0;
}

/* ----------
 * The slot
 * ----------
 */

/*
 * The backend took a slot (admission.c): remember what its grants need.
 * Nothing happens for a budget without max_memory_mb.
 */
void
dbgate_memgrant_slot_taken(const DbgateChain *chain, int max_active,
						   int max_memory_mb, bool enforce, bool demote)
{
	Assert(dbgate_memgrant_nrecs == 0);
	if (max_memory_mb <= 0 || max_active <= 0 || chain->n <= 0)
	{
		dbgate_memgrant_slot = false;
		return;
	}
	slot_demote = demote;
	slot_max_active = max_active;
	slot_max_memory_mb = max_memory_mb;
	slot_enforce = enforce;
	dbgate_memgrant_slot = true;
}

/*
 * The slot is returned: every grant goes with it.  (Grant records exist
 * only while dbgate_memgrant_slot is set.)
 */
void
dbgate_memgrant_slot_released(void)
{
	release_all();
	dbgate_memgrant_slot = false;
}

/* ----------
 * Stretches and work_mem
 * ----------
 */

/*
 * Lower work_mem to kb for a stretch of work, with the override o (undone
 * by dbgate_guc_override_restore()); with to_workers the value also goes
 * to the parallel workers launched meanwhile.  Does nothing unless kb is
 * below the value in force.
 */
void
dbgate_memgrant_lower_work_mem(DbgateGucOverride *o, int kb, bool to_workers)
{
	o->applied = false;
	if (kb <= 0 || kb >= work_mem)
		return;
	if (work_mem_rec == NULL)
		work_mem_rec = dbgate_find_guc("work_mem");
	if (work_mem_rec == NULL)
		return;
	if (to_workers)
		dbgate_guc_override_apply_to_workers(o, work_mem_rec, &work_mem, kb);
	else
		dbgate_guc_override_apply(o, work_mem_rec, &work_mem, kb);
}

/* Does a granted run's stretch run now (so that a new run is nested)? */
bool
dbgate_memgrant_nested(void)
{
	return stretch_depth > 0;
}

/* The sum of this backend's open grants (kB). */
double
dbgate_memgrant_open_kb(void)
{
	return (double) open_kb;
}

/*
 * Enter a stretch of the run queryDesc (its ExecutorRun or ExecutorFinish;
 * dbgate_memgrant_start() enters its ExecutorStart).  The caller must call
 * dbgate_memgrant_leave() on every exit.
 */
void
dbgate_memgrant_enter(QueryDesc *queryDesc, DbgateMemStretch *st)
{
	int			i;
	GrantRec   *r;
	SubTransactionId sub;

	st->entered = false;
	st->wm.applied = false;
	i = find_rec(queryDesc);
	if (i < 0)
		return;
	r = &recs[i];

	/*
	 * A run in another subtransaction than its start (a FETCH inside a
	 * savepoint) that dies there gets no ExecutorEnd: mark it, so that the
	 * subtransaction's abort releases the grant.  The mark is cleared on
	 * normal exit.
	 */
	sub = GetCurrentSubTransactionId();
	if (r->create_subid != sub && r->run_subid == InvalidSubTransactionId)
		r->run_subid = sub;

	stretch_depth++;
	st->entered = true;
	if (r->work_mem > 0)
		dbgate_memgrant_lower_work_mem(&st->wm, r->work_mem, true);
}

void
dbgate_memgrant_leave(QueryDesc *queryDesc, DbgateMemStretch *st,
					  bool is_error)
{
	if (st->wm.applied)
		dbgate_guc_override_restore(&st->wm);
	if (!st->entered)
		return;
	st->entered = false;
	if (stretch_depth > 0)
		stretch_depth--;
	if (!is_error)
	{
		int			i = find_rec(queryDesc);

		if (i >= 0)
			recs[i].run_subid = InvalidSubTransactionId;
	}
}

/*
 * The work_mem (kB) a run with estimate 'units' gets when the slot has
 * remain kB left and the session has session_kb, and its grant.
 */
static int
grant_work_mem(double units, double remain, int session_kb, uint64 *grant_kb)
{
	double		w = session_kb;

	if (units <= 0)
	{
		*grant_kb = 0;
		return session_kb;
	}
	if (slot_enforce && units * session_kb > remain)
	{
		w = floor(remain / units);
		/* rounding up the grant must not take it over what is left */
		if (w > DBGATE_MIN_WORK_MEM && ceil(units * w) > remain)
			w -= 1;
		w = Max(w, DBGATE_MIN_WORK_MEM);
		w = Min(w, session_kb);
	}
	*grant_kb = (uint64) Min(ceil(units * w), (double) MEM_MAX_GRANT);
	return (int) w;
}

/*
 * ExecutorStart of a run under a slot of a budget with max_memory_mb:
 * make its grant record (unless the run is nested) and enter its
 * ExecutorStart stretch.  The caller must call dbgate_memgrant_leave() on
 * every exit of standard_ExecutorStart.
 */
void
dbgate_memgrant_start(QueryDesc *queryDesc, DbgateMemStretch *st)
{
	DbgateMemEstimate est;
	double		units;
	double		share;
	double		remain;
	uint64		grant_kb;
	int			w;
	GrantRec   *r;

	st->entered = false;
	st->wm.applied = false;

	/* nested: runs at the outer run's work_mem, under its grant */
	if (stretch_depth > 0 || !dbgate_memgrant_slot)
		return;

	dbgate_mem_estimate(queryDesc->plannedstmt, &est);
	units = dbgate_mem_units(&est);
	share = (double) slot_max_memory_mb * 1024.0 / slot_max_active;
	remain = share - (double) open_kb;
	w = grant_work_mem(units, remain, work_mem, &grant_kb);

	ensure_rec_space();
	r = &recs[dbgate_memgrant_nrecs++];
	r->qd = queryDesc;
	r->create_subid = GetCurrentSubTransactionId();
	r->run_subid = InvalidSubTransactionId;
	r->grant_kb = grant_kb;
	r->work_mem = (w < work_mem) ? w : 0;

	if (grant_kb > 0)
	{
		open_kb += grant_kb;
		memory_add_kb((int64) grant_kb);
	}

	dbgate_memgrant_enter(queryDesc, st);
}

/* ExecutorEnd: the run's grant goes back. */
void
dbgate_memgrant_end(QueryDesc *queryDesc)
{
	int			i = find_rec(queryDesc);

	if (i >= 0)
		release_rec(i);
}

/* Subtransaction abort: release the grants of the runs that died in it. */
void
dbgate_memgrant_subxact_abort(SubTransactionId mySubid)
{
	int			i;

	for (i = dbgate_memgrant_nrecs - 1; i >= 0; i--)
	{
		if (recs[i].create_subid >= mySubid ||
			(recs[i].run_subid != InvalidSubTransactionId &&
			 recs[i].run_subid >= mySubid))
			release_rec(i);
	}
}

