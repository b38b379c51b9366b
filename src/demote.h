/*-------------------------------------------------------------------------
 *
 * demote.h
 *	  Demotion (1.3, demote.c), the backend's side: the request of the
 *	  move of a runaway's slot to the budget's runaway_budget (the runaway
 *	  worker makes it: move.h), and what the backend that holds the slot
 *	  does about it.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DBGATE_DEMOTE_H
#define DBGATE_DEMOTE_H

#include "admission.h"
#include "classify.h"
#include "compat.h"
#include "shmem.h"

/*
 * The runaway timer's handler (runaway.c, signal context): ask the worker
 * to move this backend's slot.  Returns the ticket of the request, or 0 if
 * the slot was moved (or asked for) already: the statement acts as 'log'.
 */
extern uint32 dbgate_demote_ask(void);

/*
 * The backend's side (slot.c), only for a slot whose budget demotes
 * (DbgateLimits.runaway_demote):
 *	  adopt	if the slot was moved, take the target's chain into *a and the
 *			target's limits into a->lim (only tightening; none of a shadow
 *			target's timeouts); the worker no longer watches the statement's
 *			timeouts, and the mark of a cancel of the worker that no longer
 *			pends goes (slot.c calls it where the statement that was moved
 *			has ended, or another starts).
 *	  close	the slot is about to be returned: adopt, no move may start any
 *			more, and a->since becomes the time of the move (the source's
 *			active_time_total gets the time before it, the target's the
 *			rest).
 */
extern void dbgate_demote_adopt_slow(DbgateAdmission *a);
extern void dbgate_demote_close_slow(DbgateAdmission *a);

/* This backend's move word. */
static inline uint32
dbgate_demote_my_flags(void)
{
	return dbgate_mv_flags(pg_atomic_read_u64(&dbgate_shared->procs[DBGATE_MY_PROCNO()].d.move));
}

/* adopt: nothing to do unless a move is made or was made */
static inline void
dbgate_demote_adopt(DbgateAdmission *a)
{
	if (unlikely(dbgate_demote_my_flags() & (DBGATE_MV_BUSY | DBGATE_MV_DONE)))
		dbgate_demote_adopt_slow(a);
}

/* close: nothing to do while the word has no flags (nothing asked) */
static inline void
dbgate_demote_close(DbgateAdmission *a)
{
	if (unlikely(dbgate_demote_my_flags() != 0))
		dbgate_demote_close_slow(a);
}

/*
 * This backend's memory grants change by delta_kb at every level of its
 * chain, for a slot whose budget demotes (memgrant.c; for any other slot
 * dbgate_admission_memory()): pinned.
 */
extern void dbgate_demote_memory(int64 delta_kb);

/*
 * A statement rewritten by a cancel of the worker (the target's timeouts):
 * raise it as PostgreSQL's own statement or lock timeout (in the PG_CATCH
 * of the run, after its limits were undone).  Returns if not.
 */
extern void dbgate_demote_rethrow(void);
extern bool dbgate_demote_cancel_pending(void);

/*
 * A statement of budget lk (the source) whose query is quarantined there,
 * with runaway_action 'demote': the lookup of its runaway_budget to gate
 * it by instead (*tgt, filled in), or false if there is none.
 */
extern bool dbgate_demote_quarantine_target(const DbgateLookup *lk,
											DbgateLookup *tgt);

/*
 * The slot just taken under *tgt for a quarantined statement of lk: it
 * counts as moved (shown as demoted from lk's budget, not moved again)
 * and keeps the source's scope.
 */
extern void dbgate_demote_quarantined(DbgateAdmission *a,
									  const DbgateLookup *lk);

#endif							/* DBGATE_DEMOTE_H */
