/*-------------------------------------------------------------------------
 *
 * move.c
 *	  The move of a slot between chains (1.3, 'demote'): the runaway
 *	  worker moves the slot of a runaway statement of a budget with
 *	  runaway_action 'demote' to the budget's runaway_budget, and applies
 *	  the target's timeouts to the statement it moved until the backend
 *	  adopts them.
 *
 * Called by the runaway worker (runaway.c) and by nothing below it: the
 * core of admission never calls it.  It writes state words and DbgateProc
 * entries under the rules of the files of admission (admission.c lists
 * them), through their lower header admission_internals.h, and returns
 * the source's levels as a release does (queue.c).  The backend's side of
 * a moved slot, and the request of the move, are demote.c's; the move
 * word (DbgateProc.move) is laid out in shmem.h, its protocol is in
 * demote.c.
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
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <signal.h>

#include "miscadmin.h"
#include "storage/proc.h"
#include "utils/memutils.h"

#include "admission_internals.h"
#include "compat.h"
#include "move.h"
#include "queue.h"
#include "shmem.h"

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
										   dbgate_mv_make(t, f | flag)))
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
dbgate_move_watch(void)
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

/*
 * The target's timeouts (tl), where tighter than the source's (sl), for
 * the statement of backend p (procno, pid) that was just moved with
 * 'ticket' and started at 'start'; none for a shadow target (SPEC:
 * enforce).
 */
static void
watch_moved(DbgateProc *p, int procno, uint32 ticket, int pid,
			TimestampTz start, const DbgateLimits *tl, const DbgateLimits *sl)
{
	TimestampTz deadline = 0;
	int32		lock_ms = 0;

	if (tl->enforce && tl->statement_timeout_ms > 0 &&
		(sl->statement_timeout_ms <= 0 ||
		 tl->statement_timeout_ms < sl->statement_timeout_ms))
		deadline = TimestampTzPlusMilliseconds(start,
											   tl->statement_timeout_ms);
	if (tl->enforce && tl->lock_timeout_ms > 0 &&
		(sl->lock_timeout_ms <= 0 || tl->lock_timeout_ms < sl->lock_timeout_ms))
		lock_ms = tl->lock_timeout_ms;
	/* for a worker started again (restore_watches()) */
	p->watch_deadline = deadline;
	p->watch_lock_ms = lock_ms;
	p->watch_ticket = ticket;
	if (deadline != 0 || lock_ms != 0)
		watch_add(procno, ticket, pid, deadline, lock_ms);
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
dbgate_move_slot(int procno, uint32 ticket, int budget,
				 uint32 incarnation, TimestampTz start, char *target)
{
	DbgateShared *sh = dbgate_shared;
	DbgateProc *p = proc_entry(procno);
	uint64		asked = dbgate_mv_make(ticket, DBGATE_MV_ASKED);
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
		(t = dbgate_find_budget(src->conf.runaway_budget)) < 0 ||
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
		pg_atomic_write_u64(&p->move, dbgate_mv_make(ticket, DBGATE_MV_DONE));
		result = 1;
	}
	else
		pg_atomic_write_u64(&p->move, dbgate_mv_make(ticket, 0));	/* nothing held */
	END_CRIT_SECTION();
	LWLockRelease(sh->config_lock);

	if (result == 1)
		watch_moved(p, procno, ticket, pid, start, &tl, &sl);
	return result;
}
