/*-------------------------------------------------------------------------
 *
 * demote.c
 *	  Demotion (1.3), the backend's side: the slot of a runaway statement
 *	  of a budget with runaway_action 'demote' is moved to the budget's
 *	  runaway_budget by the runaway worker while the statement runs
 *	  (move.c); here the request of the move (the runaway timer's
 *	  handler), what the backend that holds the slot does about it, and a
 *	  quarantined statement of such a budget gated by the runaway_budget
 *	  instead.
 *
 * One of the files of admission (admission.c lists them): it writes
 * DbgateProc entries under their rules.  The move word (DbgateProc.move,
 * shmem.h) is this file's and move.c's protocol, below.
 *
 * The backend
 * -----------
 * The backend's chain (DbgateProc.chain) is the truth once a budget may
 * demote: the backend's own copy is brought up to date (adopted) where it
 * uses it.  Every use of the chain while a move could start pins it:
 *	  memory	a grant added or taken back (PIN while it counts, so that the
 *				worker never moves the memory of a grant half counted);
 *	  release	close: the word is set to no flags (a move that was asked
 *				and not claimed will not be made), waiting while BUSY; a
 *				moved slot is returned to the target's chain.
 * A move changes the backend's limits from its next statement (adopt, at
 * the start of each outermost run and where the statement that ran away
 * ends): the target's statement_timeout, lock_timeout and
 * idle_in_transaction_timeout where they are tighter (none of them when
 * the target is in shadow mode, enforce = false: a shadow budget applies
 * no timeout, as for a quarantined statement admitted to it), its
 * runaway_after and runaway_action (a second 'demote' acts as 'log': the
 * word still says DONE; a shadow target's 'cancel' as well), its
 * adaptive-limit counting.  Scope and memory grant stay the source's.  For
 * the statement that is moved while it runs, the worker applies an
 * enforcing target's statement_timeout and lock_timeout itself
 * (dbgate_move_watch(), move.c): when one of them runs out, it marks the word
 * (TIMEOUT, LOCK) and sends the backend SIGINT, as PostgreSQL's own timers
 * do, and the run's PG_CATCH raises the cancel as the timeout
 * (dbgate_demote_rethrow()).  The worker watches only until the backend
 * adopts.  What it watches is kept in the backend's entry as well
 * (watch_ticket, watch_deadline, watch_lock_ms: written and read by the
 * worker alone), so that a worker started again (after a SIGTERM of its
 * own) takes up the watches of the one before (move.c).
 * The mark (TIMEOUT, LOCK) names the cancel that the worker sent for the
 * statement it moved, and lives no longer than that cancel: the backend's
 * catch spends it (dbgate_demote_rethrow()), the release clears it with
 * the rest of the word, and so does the adoption where no cancel pends
 * (QueryCancelPending false: it was raised and caught inside the
 * statement, by a PL/pgSQL exception handler, or dropped because it came
 * when the statement had ended), so that it never makes a later cancel of
 * the transaction a timeout.  A cancel of the user later in the same
 * statement, after the statement caught the worker's, is still reported as
 * the timeout: nothing tells the two apart before the statement ends.
 *
 * The move word
 * -------------
 *	  handler	CAS: sets ASKED and a new ticket, unless ASKED or DONE is set
 *				(signal context; lock-free atomics only)
 *	  worker	CAS ASKED -> ASKED|BUSY (fails while PIN is set: retried),
 *				then writes DONE; sets TIMEOUT or LOCK by CAS
 *	  backend	CAS to set or clear PIN and ADOPTED (waiting while BUSY),
 *				clearing TIMEOUT and LOCK at adoption unless a cancel pends;
 *				the catch clears TIMEOUT and LOCK; close: CAS to no flags
 *				(waiting while BUSY)
 * A word with no flags is the state between slots: the worker's claim
 * names the ticket of the request, so a request of an earlier slot or
 * statement never moves a later one.
 *
 * Quarantine
 * ----------
 * A statement whose query is quarantined in a budget whose runaway_action
 * is 'demote' is admitted to the runaway_budget (its counters, its
 * histogram, its rules), under the source's scope, and counts as moved:
 * its word says DONE|ADOPTED from the start (moved_at 0: no time in the
 * source), the entry shows the budget it came from.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <signal.h>
#include <unistd.h>

#include "miscadmin.h"
#include "storage/lock.h"
#include "storage/proc.h"
#include "utils/elog.h"
#include "utils/memutils.h"

#include "admission_internals.h"
#include "compat.h"
#include "demote.h"
#include "shmem.h"

/* ----------
 * The move word
 * ----------
 */

/* Wait a moment for the worker to finish a move (BUSY). */
static inline void
mv_wait(int *spins)
{
	if (++(*spins) < 1000)
		pg_spin_delay();
	else
		pg_usleep(100L);
}

uint32
dbgate_demote_ask(void)
{
	DbgateProc *me = dbgate_my_proc;
	uint64		old;

	if (me == NULL)
		return 0;
	old = pg_atomic_read_u64(&me->move);
	for (;;)
	{
		uint32		f = dbgate_mv_flags(old);
		uint32		t = dbgate_mv_ticket(old) + 1;

		if (f & (DBGATE_MV_ASKED | DBGATE_MV_DONE))
			return 0;
		if (t == 0)
			t = 1;
		if (pg_atomic_compare_exchange_u64(&me->move, &old,
										   dbgate_mv_make(t, f | DBGATE_MV_ASKED)))
			return t;
	}
}

/* Set 'set' and clear 'clear' in our word once no move is being made. */
static uint64
mv_change(uint32 set, uint32 clear)
{
	DbgateProc *me = dbgate_my_proc;
	uint64		old = pg_atomic_read_u64(&me->move);
	int			spins = 0;

	for (;;)
	{
		uint32		f = dbgate_mv_flags(old);

		if (f & DBGATE_MV_BUSY)
		{
			mv_wait(&spins);
			old = pg_atomic_read_u64(&me->move);
			continue;
		}
		if (pg_atomic_compare_exchange_u64(&me->move, &old,
										   dbgate_mv_make(dbgate_mv_ticket(old),
												   (f | set) & ~clear)))
			return old;
	}
}

/* ----------
 * The backend's side
 * ----------
 */

static inline int32
tighter(int32 a, int32 b)
{
	if (a <= 0)
		return b;
	if (b <= 0)
		return a;
	return Min(a, b);
}

/* The target's limits into lim (the slot moved to the chain of me). */
static void
take_target_limits(DbgateLimits *lim, const DbgateChain *c)
{
	DbgateBudget *tb;
	DbgateLimits tl;

	if (c->n <= 0)
		return;
	tb = budget_entry(c->idx[0]);
	dbgate_read_limits(tb, &tl);
	if (dbgate_st_tag(pg_atomic_read_u64(&tb->state)) != dbgate_tag_of(c->inc[0]))
		return;					/* the target is gone: the source's limits stay */
	if (tl.enforce)
	{
		lim->statement_timeout_ms = tighter(lim->statement_timeout_ms,
											tl.statement_timeout_ms);
		lim->lock_timeout_ms = tighter(lim->lock_timeout_ms, tl.lock_timeout_ms);
		lim->idle_timeout_ms = tighter(lim->idle_timeout_ms, tl.idle_timeout_ms);
		lim->runaway_after_ms = tl.runaway_after_ms;
		lim->runaway_cancel = tl.runaway_cancel;
	}
	else
	{
		/* a shadow target applies none of its timeouts (SPEC: enforce) */
		lim->runaway_after_ms = tl.runaway_after_ms;
		lim->runaway_cancel = false;
	}
	lim->adapt_chain = lim->adapt_chain || tl.adapt_chain;
	lim->limit_flags = dbgate_limit_flags(lim);
}

void
dbgate_demote_adopt_slow(DbgateAdmission *a)
{
	DbgateProc *me = dbgate_my_proc;
	uint64		old = pg_atomic_read_u64(&me->move);
	uint32		f;
	int			spins = 0;

	for (;;)
	{
		uint64		w;

		f = dbgate_mv_flags(old);
		if (f & DBGATE_MV_BUSY)
		{
			mv_wait(&spins);
			old = pg_atomic_read_u64(&me->move);
			continue;
		}
		if (!(f & DBGATE_MV_DONE))
			return;				/* not moved */
		w = old | DBGATE_MV_ADOPTED;
		/*
		 * A cancel of the worker that no longer pends was spent or dropped
		 * (the statement it was for has ended, or caught it): its mark
		 * goes, so that it names no later cancel.
		 */
		if (!QueryCancelPending)
			w &= ~(uint64) (DBGATE_MV_TIMEOUT | DBGATE_MV_LOCK);
		if (w == old)
			return;				/* adopted already */
		if (pg_atomic_compare_exchange_u64(&me->move, &old, w))
			break;
	}
	if (f & DBGATE_MV_ADOPTED)
		return;					/* adopted already: only the mark went */
	pg_read_barrier();
	a->chain = me->chain;
	take_target_limits(&a->lim, &a->chain);
}

void
dbgate_demote_close_slow(DbgateAdmission *a)
{
	DbgateProc *me = dbgate_my_proc;
	uint64		old = pg_atomic_read_u64(&me->move);
	int			spins = 0;
	uint32		f;

	for (;;)
	{
		f = dbgate_mv_flags(old);
		if (f == 0)
			return;				/* nothing asked, nothing moved */
		if (f & DBGATE_MV_BUSY)
		{
			mv_wait(&spins);
			old = pg_atomic_read_u64(&me->move);
			continue;
		}
		if (pg_atomic_compare_exchange_u64(&me->move, &old,
										   dbgate_mv_make(dbgate_mv_ticket(old), 0)))
			break;
	}
	if (!(f & DBGATE_MV_DONE))
		return;
	pg_read_barrier();
	a->chain = me->chain;
	if (me->moved_at != 0 && me->demoted_from >= 0)
	{
		DbgateBudget *src = budget_entry(me->demoted_from);

		/* the time before the move is the source's */
		if (dbgate_st_tag(pg_atomic_read_u64(&src->state)) ==
			dbgate_tag_of(me->demoted_from_inc))
			pg_atomic_fetch_add_u64(&src->active_time_total_us,
									elapsed_us(a->since, me->moved_at));
		a->since = me->moved_at;
	}
}

/* The memory grants of this backend change by delta_kb (admission.c). */
void
dbgate_demote_memory(int64 delta_kb)
{
	(void) mv_change(DBGATE_MV_PIN, 0);
	pg_read_barrier();
	memory_add(dbgate_my_proc, delta_kb);
	(void) mv_change(0, DBGATE_MV_PIN);
}

bool
dbgate_demote_cancel_pending(void)
{
	DbgateProc *me = dbgate_my_proc;

	return me != NULL &&
		(dbgate_mv_flags(pg_atomic_read_u64(&me->move)) &
		 (DBGATE_MV_TIMEOUT | DBGATE_MV_LOCK)) != 0;
}

void
dbgate_demote_rethrow(void)
{
	DbgateProc *me = dbgate_my_proc;
	uint64		w;
	uint32		f;
	MemoryContext old;
	ErrorData  *edata;
	char		name[NAMEDATALEN];
	DbgateLimits tl;

	if (!dbgate_demote_cancel_pending())
		return;
	w = mv_change(0, DBGATE_MV_TIMEOUT | DBGATE_MV_LOCK);
	f = dbgate_mv_flags(w);
	old = MemoryContextSwitchTo(CurTransactionContext);
	edata = CopyErrorData();
	if (edata->sqlerrcode != ERRCODE_QUERY_CANCELED || me->chain.n <= 0)
	{
		FreeErrorData(edata);
		MemoryContextSwitchTo(old);
		return;
	}
	FlushErrorState();
	/* a name and limits, for the message only */
	memcpy(name, budget_entry(me->chain.idx[0])->conf.name, NAMEDATALEN);
	name[NAMEDATALEN - 1] = '\0';
	dbgate_read_limits(budget_entry(me->chain.idx[0]), &tl);
	if (f & DBGATE_MV_LOCK)
	{
		edata->sqlerrcode = ERRCODE_LOCK_NOT_AVAILABLE;
		edata->message = pstrdup("canceling statement due to lock timeout");
		edata->detail = psprintf("The statement was demoted to budget \"%s\", whose lock_timeout is %d ms.",
								 name, tl.lock_timeout_ms);
	}
	else
	{
		edata->message = pstrdup("canceling statement due to statement timeout");
		edata->detail = psprintf("The statement was demoted to budget \"%s\", whose statement_timeout is %d ms.",
								 name, tl.statement_timeout_ms);
	}
	MemoryContextSwitchTo(old);
	ReThrowError(edata);
}

/* ----------
 * Quarantine
 * ----------
 */

bool
dbgate_demote_quarantine_target(const DbgateLookup *lk, DbgateLookup *tgt)
{
	DbgateShared *sh = dbgate_shared;
	DbgateBudget *b = budget_entry(lk->budget);
	int			t = -1;

	LWLockAcquire(sh->config_lock, LW_SHARED);
	if (b->in_use && b->incarnation == lk->incarnation && b->conf.enforce &&
		b->conf.runaway_action == DBGATE_RUNAWAY_DEMOTE &&
		b->conf.runaway_budget[0] != '\0')
	{
		t = dbgate_find_budget(b->conf.runaway_budget);
		if (t >= 0 && budget_entry(t)->first_child >= 0)
			t = -1;				/* has children: admits nothing of its own */
	}
	if (t >= 0)
	{
		*tgt = *lk;
		tgt->budget = t;
		tgt->incarnation = budget_entry(t)->incarnation;
		tgt->quarantine = false;
		/* a hint: the way that reads reservations is right for any chain */
		tgt->reserves = true;
		tgt->min_cost = false;
	}
	LWLockRelease(sh->config_lock);
	return t >= 0;
}

void
dbgate_demote_quarantined(DbgateAdmission *a, const DbgateLookup *lk)
{
	DbgateProc *me = dbgate_my_proc;
	DbgateLimits sl;
	uint64		old = pg_atomic_read_u64(&me->move);

	dbgate_read_limits(budget_entry(lk->budget), &sl);
	/* the source's scope (SPEC: under the source's scope) */
	a->lim.scope = sl.scope;
	/* close resets the word at the release */
	a->lim.runaway_demote = true;
	a->lim.limit_flags = dbgate_limit_flags(&a->lim);
	me->demoted_from = lk->budget;
	me->demoted_from_inc = lk->incarnation;
	me->moved_at = 0;
	pg_write_barrier();
	for (;;)
	{
		if (pg_atomic_compare_exchange_u64(&me->move, &old,
										   dbgate_mv_make(dbgate_mv_ticket(old),
												   DBGATE_MV_DONE |
												   DBGATE_MV_ADOPTED)))
			break;
	}
}
