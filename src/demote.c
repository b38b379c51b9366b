/*-------------------------------------------------------------------------
 *
 * demote.c
 *	  Demotion (1.3): the slot of a runaway statement of a budget with
 *	  runaway_action 'demote' moves to the budget's runaway_budget while the
 *	  statement runs; a quarantined statement of such a budget is gated by
 *	  the runaway_budget instead.
 *
 * One of the files of admission (admission.c lists them): it writes state
 * words and DbgateProc entries under their rules.
 *
 * The move
 * --------
 * The runaway timer's handler (runaway.c) asks for the move in the
 * backend's *move word* (DbgateProc.move: a ticket and DBGATE_MV_* flags);
 * the runaway worker makes it, so that it happens within milliseconds
 * whatever the backend is doing.  Under config_lock shared (no install
 * meanwhile, so the shape of the trees and the budgets' identities hold
 * still), the worker:
 *	  1. claims the move (ASKED -> ASKED|BUSY, for the ticket it read);
 *	  2. counts the slot at the levels of the target's chain that are not in
 *		 the source's, beyond their limits, under the target's tree lock,
 *		 and there writes the entry's new chain, budget and the budget it
 *		 came from, counts demoted_out and demoted_in and adds DONE to the
 *		 word (with BUSY: a reader of dbgate.status or dbgate.backends sees
 *		 the extra slot together with what explains it); a level common to
 *		 both chains does not change (if the source's child took it through
 *		 a reservation, the reservation gets its slot back and the
 *		 statement is counted once more there);
 *	  3. moves the entry's open memory grants from the source-only levels
 *		 to the target-only ones;
 *	  4. returns the slot at the source-only levels as a release does
 *		 (queue.c: their waiters go on at once);
 *	  5. writes the word DONE alone (clearing ASKED and BUSY).
 * Steps 1-5 run in a critical section: nothing there can fail but a
 * corrupt table, and a failure must not leave a backend waiting for BUSY
 * to clear.  Levels are taken before the others are returned, so that the
 * statement counts somewhere at every instant; the target's levels are
 * taken beyond their limits (SPEC: demoted-in statements are one more
 * exception to active <= max_active), with no token and no key.
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
 * (dbgate_demote_watch()): when one of them runs out, it marks the word
 * (TIMEOUT, LOCK) and sends the backend SIGINT, as PostgreSQL's own timers
 * do, and the run's PG_CATCH raises the cancel as the timeout
 * (dbgate_demote_rethrow()).  The worker watches only until the backend
 * adopts.  What it watches is kept in the backend's entry as well
 * (watch_ticket, watch_deadline, watch_lock_ms: written and read by the
 * worker alone), so that a worker started again (after a SIGTERM of its
 * own) takes up the watches of the one before (restore_watches()).
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
#include "queue.h"
#include "shmem.h"

/* ----------
 * The move word
 * ----------
 */

static inline uint64
mv_make(uint32 ticket, uint32 flags)
{
	return ((uint64) ticket << 32) | flags;
}

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
										   mv_make(t, f | DBGATE_MV_ASKED)))
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
										   mv_make(dbgate_mv_ticket(old),
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
										   mv_make(dbgate_mv_ticket(old), 0)))
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

/* The budget named 'name' (config_lock held), or -1. */
static int
find_budget(const char *name)
{
	int			i;

	for (i = 0; i < dbgate_shared->max_budgets; i++)
	{
		DbgateBudget *b = budget_entry(i);

		if (b->in_use && strcmp(b->conf.name, name) == 0)
			return i;
	}
	return -1;
}

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
		t = find_budget(b->conf.runaway_budget);
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
										   mv_make(dbgate_mv_ticket(old),
												   DBGATE_MV_DONE |
												   DBGATE_MV_ADOPTED)))
			break;
	}
}

/* ----------
 * The worker's side
 * ----------
 */

/* A demoted statement whose target's timeouts the worker applies. */
typedef struct Watch
{
	int			procno;
	uint32		ticket;
	int			pid;
	TimestampTz deadline;		/* the target's statement_timeout; 0: none */
	int32		lock_ms;		/* the target's lock_timeout; 0: none */
} Watch;

static Watch *watches = NULL;
static int	nwatches = 0;
static bool watches_restored = false;

static void
watch_add(int procno, uint32 ticket, int pid, TimestampTz deadline,
		  int32 lock_ms)
{
	int			i;

	if (watches == NULL)
		watches = MemoryContextAllocZero(TopMemoryContext,
										 sizeof(Watch) * dbgate_shared->max_procs);
	for (i = 0; i < nwatches; i++)
	{
		if (watches[i].procno == procno)
			break;
	}
	if (i == nwatches)
	{
		if (nwatches >= dbgate_shared->max_procs)
			return;
		nwatches++;
	}
	watches[i].procno = procno;
	watches[i].ticket = ticket;
	watches[i].pid = pid;
	watches[i].deadline = deadline;
	watches[i].lock_ms = lock_ms;
}

/* Mark 'flag' in backend p's word (ticket t, moved, not adopted). */
static bool
mark_cancel(DbgateProc *p, uint32 t, uint32 flag)
{
	uint64		old = pg_atomic_read_u64(&p->move);

	for (;;)
	{
		uint32		f = dbgate_mv_flags(old);

		if (dbgate_mv_ticket(old) != t || !(f & DBGATE_MV_DONE) ||
			(f & DBGATE_MV_ADOPTED))
			return false;
		if (pg_atomic_compare_exchange_u64(&p->move, &old,
										   mv_make(t, f | flag)))
			return true;
	}
}

/*
 * A worker started again (after a SIGTERM, or an error that ended the one
 * before): the watches of the statements moved before, from the entries of
 * their backends (a move not adopted yet, no cancel marked).
 */
static void
restore_watches(void)
{
	int			i;

	for (i = 0; i < dbgate_shared->max_procs; i++)
	{
		DbgateProc *p = proc_entry(i);
		uint64		w = pg_atomic_read_u64(&p->move);
		uint32		f = dbgate_mv_flags(w);

		if (!(f & DBGATE_MV_DONE) ||
			(f & (DBGATE_MV_BUSY | DBGATE_MV_ADOPTED |
				  DBGATE_MV_TIMEOUT | DBGATE_MV_LOCK)) ||
			p->watch_ticket != dbgate_mv_ticket(w))
			continue;
		if (p->watch_deadline != 0 || p->watch_lock_ms != 0)
			watch_add(i, p->watch_ticket, p->pid, p->watch_deadline,
					  p->watch_lock_ms);
	}
}

long
dbgate_demote_watch(void)
{
	TimestampTz now;
	long		next = -1;
	int			i;

	if (unlikely(!watches_restored))
	{
		watches_restored = true;
		restore_watches();
	}
	if (nwatches == 0)
		return -1;
	now = GetCurrentTimestamp();
	for (i = 0; i < nwatches; i++)
	{
		Watch	   *wt = &watches[i];
		DbgateProc *p = proc_entry(wt->procno);
		uint64		w = pg_atomic_read_u64(&p->move);
		uint32		f = dbgate_mv_flags(w);
		bool		drop = false;
		uint32		flag = 0;

		if (dbgate_mv_ticket(w) != wt->ticket || !(f & DBGATE_MV_DONE) ||
			(f & (DBGATE_MV_ADOPTED | DBGATE_MV_TIMEOUT | DBGATE_MV_LOCK)))
			drop = true;		/* ended, or the backend applies them now */
		else if (wt->deadline != 0 && now >= wt->deadline)
			flag = DBGATE_MV_TIMEOUT;
		else if (wt->lock_ms > 0)
		{
			PGPROC	   *proc = DBGATE_PROC_BY_NUMBER(wt->procno);
			TimestampTz since = (TimestampTz) pg_atomic_read_u64(&proc->waitStart);

			if (proc->waitLock != NULL && since != 0 &&
				now - since >= (int64) wt->lock_ms * 1000)
				flag = DBGATE_MV_LOCK;
		}
		if (flag != 0)
		{
			if (mark_cancel(p, wt->ticket, flag))
				kill(wt->pid, SIGINT);
			drop = true;
		}
		if (drop)
		{
			watches[i--] = watches[--nwatches];
			continue;
		}
		if (wt->lock_ms > 0)
			next = (next < 0) ? 10 : Min(next, 10);
		if (wt->deadline != 0)
		{
			long		ms = (long) ((wt->deadline - now + 999) / 1000);

			ms = Max(ms, 1);
			next = (next < 0) ? ms : Min(next, ms);
		}
	}
	return next;
}

/* What the move does to the source-only and target-only levels. */
static void
move_levels(DbgateProc *p, const DbgateChain *s, const ChainLimits *tcl,
			int ns, int nt, TimestampTz now)
{
	DbgateChain nc;
	DbgateChain part;
	uint64		mem;
	bool		common_again = false;
	int			root;
	int			k;

	/*
	 * A common level that the source's child took through its reservation:
	 * the reservation has its slot back (held for the child, if it keeps
	 * it) and the statement is counted there on its own.
	 */
	if (ns > 0 && ns < s->n && (s->resv & (1 << ns)))
		common_again = resv_release(budget_entry(s->idx[ns - 1]),
									dbgate_tag_of(s->inc[ns - 1]),
									s->idx[ns], s->inc[ns]);

	/* the new chain: the target's own levels, then the common ones */
	memset(&nc, 0, sizeof(nc));
	for (k = 0; k < nt; k++)
	{
		nc.idx[k] = tcl->c.idx[k];
		nc.inc[k] = tcl->c.inc[k];
	}
	for (k = ns; k < s->n; k++)
	{
		nc.idx[nt + k - ns] = s->idx[k];
		nc.inc[nt + k - ns] = s->inc[k];
		if (k > ns && (s->resv & (1 << k)))
			nc.resv |= 1 << (nt + k - ns);
	}
	nc.n = nt + s->n - ns;

	/* 2. the target's levels, beyond their limits; the entry */
	root = dbgate_lock_tree(tcl->c.idx[0]);
	for (k = 0; k < nt; k++)
	{
		DbgateBudget *lb = budget_entry(nc.idx[k]);
		uint64		st = pg_atomic_read_u64(&lb->state);

		if (level_add(lb, dbgate_tag_of(nc.inc[k]), 1, 0))
			note_peak_active(lb, dbgate_st_active(st) + 1);
	}
	if (common_again)
		(void) level_add(budget_entry(s->idx[ns]), dbgate_tag_of(s->inc[ns]),
						 1, 0);
	p->demoted_from = s->idx[0];
	p->demoted_from_inc = s->inc[0];
	p->moved_at = now;
	p->chain = nc;
	p->budget = nc.idx[0];
	p->incarnation = nc.inc[0];

	/*
	 * Counted and shown as moved from here on, with the target's count:
	 * dbgate.backends names the source once DONE is set (BUSY stays until
	 * step 5, so the backend still waits), and demoted_in grows with the
	 * active count it explains.  Nothing else writes the word while ASKED
	 * and BUSY are set.
	 */
	pg_atomic_fetch_add_u64(&budget_entry(s->idx[0])->demoted_out, 1);
	pg_atomic_fetch_add_u64(&budget_entry(nc.idx[0])->demoted_in, 1);
	(void) pg_atomic_fetch_or_u64(&p->move, DBGATE_MV_DONE);
	unlock_tree(root);

	/* 3. the memory grants */
	mem = pg_atomic_read_u64(&p->memory_kb);
	if (mem != 0)
	{
		for (k = 0; k < ns; k++)
		{
			DbgateBudget *lb = budget_entry(s->idx[k]);

			if (dbgate_st_tag(pg_atomic_read_u64(&lb->state)) ==
				dbgate_tag_of(s->inc[k]))
				pg_atomic_fetch_sub_u64(&lb->memory_kb_active, mem);
		}
		for (k = 0; k < nt; k++)
		{
			DbgateBudget *lb = budget_entry(nc.idx[k]);

			if (dbgate_st_tag(pg_atomic_read_u64(&lb->state)) ==
				dbgate_tag_of(nc.inc[k]))
				pg_atomic_fetch_add_u64(&lb->memory_kb_active, mem);
		}
	}

	/* 4. the source's own levels go back: their waiters go on */
	part = *s;
	part.n = ns;
	part.resv = s->resv & ((1 << ns) - 1);
	if (ns > 0)
		dbgate_admission_release(&part, 0);
}

int
dbgate_demote_move(int procno, uint32 ticket, int budget,
				   uint32 incarnation, TimestampTz start, char *target)
{
	DbgateShared *sh = dbgate_shared;
	DbgateProc *p = proc_entry(procno);
	uint64		asked = mv_make(ticket, DBGATE_MV_ASKED);
	uint64		w = pg_atomic_read_u64(&p->move);
	DbgateBudget *src;
	DbgateBudget *tb;
	DbgateLimits tl;
	DbgateLimits sl;
	ChainLimits tcl;
	DbgateChain s;
	TimestampTz now;
	int			t;
	int			ns;
	int			nt;
	int			result = 0;
	int			pid;

	if (ticket == 0 || dbgate_mv_ticket(w) != ticket ||
		!(dbgate_mv_flags(w) & DBGATE_MV_ASKED))
		return 0;				/* the statement ended first */
	if (dbgate_mv_flags(w) & DBGATE_MV_PIN)
		return -1;
	if (budget < 0 || budget >= sh->max_budgets)
		return 0;

	LWLockAcquire(sh->config_lock, LW_SHARED);
	src = budget_entry(budget);
	if (!src->in_use || src->incarnation != incarnation ||
		!src->conf.enforce || src->conf.runaway_action != DBGATE_RUNAWAY_DEMOTE ||
		(t = find_budget(src->conf.runaway_budget)) < 0 ||
		budget_entry(t)->first_child >= 0)
	{
		LWLockRelease(sh->config_lock);
		return 0;				/* no longer 'demote', or nowhere to go */
	}
	tb = budget_entry(t);
	strlcpy(target, tb->conf.name, NAMEDATALEN);
	dbgate_read_limits(tb, &tl);
	dbgate_read_limits(src, &sl);
	if (chain_limits(t, tb->incarnation, &tl, &tcl) != CHAIN_OK)
	{
		LWLockRelease(sh->config_lock);
		return 0;
	}

	/* 1. claim it */
	if (!pg_atomic_compare_exchange_u64(&p->move, &asked,
										asked | DBGATE_MV_BUSY))
	{
		LWLockRelease(sh->config_lock);
		return (dbgate_mv_ticket(asked) == ticket &&
				(dbgate_mv_flags(asked) & DBGATE_MV_PIN)) ? -1 : 0;
	}

	START_CRIT_SECTION();
	s = p->chain;
	pid = p->pid;
	if ((p->state == DBGATE_PROC_ACTIVE || p->state == DBGATE_PROC_HELD) &&
		p->budget == budget && p->incarnation == incarnation && s.n > 0)
	{
		/* the levels both chains share: a suffix of each */
		ns = s.n;
		nt = tcl.c.n;
		while (ns > 0 && nt > 0 &&
			   s.idx[ns - 1] == tcl.c.idx[nt - 1] &&
			   s.inc[ns - 1] == tcl.c.inc[nt - 1])
		{
			ns--;
			nt--;
		}
		now = GetCurrentTimestamp();
		move_levels(p, &s, &tcl, ns, nt, now);
		pg_write_barrier();
		pg_atomic_write_u64(&p->move, mv_make(ticket, DBGATE_MV_DONE));
		result = 1;
	}
	else
		pg_atomic_write_u64(&p->move, mv_make(ticket, 0));	/* nothing held */
	END_CRIT_SECTION();
	LWLockRelease(sh->config_lock);

	/*
	 * the target's timeouts, where tighter, for the statement that runs;
	 * none for a shadow target (SPEC: enforce)
	 */
	if (result == 1)
	{
		TimestampTz deadline = 0;
		int32		lock_ms = 0;

		if (tl.enforce && tl.statement_timeout_ms > 0 &&
			(sl.statement_timeout_ms <= 0 ||
			 tl.statement_timeout_ms < sl.statement_timeout_ms))
			deadline = TimestampTzPlusMilliseconds(start,
												   tl.statement_timeout_ms);
		if (tl.enforce && tl.lock_timeout_ms > 0 &&
			(sl.lock_timeout_ms <= 0 || tl.lock_timeout_ms < sl.lock_timeout_ms))
			lock_ms = tl.lock_timeout_ms;
		/* for a worker started again (restore_watches()) */
		p->watch_deadline = deadline;
		p->watch_lock_ms = lock_ms;
		p->watch_ticket = ticket;
		if (deadline != 0 || lock_ms != 0)
			watch_add(procno, ticket, pid, deadline, lock_ms);
	}
	return result;
}
