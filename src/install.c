/*-------------------------------------------------------------------------
 *
 * install.c
 *	  What a configuration install does to the queues of the budgets, and
 *	  what the views read of them: a budget entry set up, its limits
 *	  installed (inside conf_seq), its reservation set, its waiters
 *	  released or admitted, the 'queued' counts again after a change of
 *	  the shape of the trees; the adaptive limit applied; the rows of
 *	  dbgate.backends and the waits of dbgate.status.
 *
 * One of the admission files (admission.c lists them and has the rules
 * that all of them follow), above queue.c: the grant step, the queue
 * lists and the slots held for a 'lifo' child are queue.c's, and so are
 * the rules of the reservation word ("Reservations" in its header); this
 * file changes r and the parent the word counts at, as only an install
 * does.  The configuration side (budgets.c), the adaptive limit (adapt.c)
 * and the views (status.c, sqlfuncs.c) reach the files of admission
 * through install.h and queue.h's tree lock; the statement path never
 * calls this file.
 *
 * Locking: every function here is called with the tree lock of the
 * budget it changes held (or every budget lock, or alone at start-up),
 * as its header comment says; the views take the tree lock themselves.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "storage/latch.h"
#include "utils/timestamp.h"

#include "adapt.h"
#include "admission_internals.h"
#include "compat.h"
#include "dimension.h"
#include "install.h"
#include "keytab.h"
#include "queue.h"
#include "shmem.h"

/* ----------
 * Reservations: the install's side of the 'resv' word (queue.c has the
 * rules)
 * ----------
 */

/*
 * Add delta (negative: take away, down to 0) to b's 'active' in one
 * compare-and-swap, if b still carries 'tag'.  For the slots that an
 * install counts or returns for a reservation.
 */
static void
level_add_active(DbgateBudget *b, uint32 tag, int32 delta)
{
	uint64		old = pg_atomic_read_u64(&b->state);

	for (;;)
	{
		uint32		active = dbgate_st_active(old);
		int64		to = (int64) active + delta;
		uint64		new;

		if (dbgate_st_tag(old) != tag)
			return;
		to = Max(to, 0);
		to = Min(to, (int64) DBGATE_ST_MASK);
		new = old - (uint64) active * DBGATE_ST_ONE_ACTIVE +
			(uint64) to * DBGATE_ST_ONE_ACTIVE;
		if (pg_atomic_compare_exchange_u64(&b->state, &old, new))
			return;
	}
}

/* The epoch after that of word w, in its place. */
static inline uint64
resv_next_epoch(uint64 w)
{
	return (((w >> RESV_EPOCH_SHIFT) + 1) & RESV_EPOCH_MASK) << RESV_EPOCH_SHIFT;
}

/* A new epoch of b's reservation word with nothing reserved, used or held. */
static void
resv_reset(DbgateBudget *b)
{
	uint64		old = pg_atomic_read_u64(&b->resv);

	while (!pg_atomic_compare_exchange_u64(&b->resv, &old,
										   resv_next_epoch(old)))
		;
}

/*
 * An install sets b's reservation to r at parent p (-1: none), with
 * 'moved' at another parent than before: 'used' starts again at 0 there.
 * Holds what r leaves unused (*held; the caller counts it at the parent).
 * Returns the word before.
 */
static uint64
resv_install(DbgateBudget *b, uint32 r, int32 p, bool moved, uint32 *held)
{
	uint64		old = pg_atomic_read_u64(&b->resv);

	for (;;)
	{
		uint32		used = moved ? 0 : resv_used(old);
		uint64		new;

		*held = (r > used) ? r - used : 0;
		new = resv_next_epoch(old) |
			((uint64) (p >= 0 ? p + 1 : 0) << RESV_PARENT_SHIFT) |
			((uint64) r << RESV_R_SHIFT) | ((uint64) used * RESV_ONE_USED) |
			(uint64) *held;
		if (pg_atomic_compare_exchange_u64(&b->resv, &old, new))
			return old;
	}
}

/* ----------
 * For the configuration install (budgets.c)
 * ----------
 */

/*
 * A budget entry starts serving a budget: an empty queue, and nothing left
 * of the dropped budget in its admission dimensions (a full token
 * bucket).  Caller holds the budget's tree lock (or every lock, or is alone
 * at start-up) and installs the limits next.
 */
void
dbgate_admission_budget_created(DbgateBudget *b)
{
	b->queue_head = -1;
	b->queue_tail = -1;
	b->held = 0;
	resv_reset(b);
	b->token_waiter = -1;
	b->token_due_ns = 0;
	pg_atomic_write_u64(&b->lock_check_due, 0);
	/* grants of a dropped budget that used the entry are not released here */
	pg_atomic_write_u64(&b->memory_kb_active, 0);
	(void) dbgate_dims_install(b, NULL, NULL);
	/* a new budget adapts from its max_active (adapt.c) */
	pg_atomic_write_u32(&b->adapt_limit, 0);
	pg_atomic_write_u64(&b->adapt_due_us, 0);
	memset(&b->conf, 0, sizeof(b->conf));
}

/*
 * Install the configuration 'conf' (with its parent resolved to an entry)
 * as b's limits.  The admission dimensions install theirs (dimension.c:
 * a change of the rate or of 'enforce' fills the token bucket) and say
 * which of them b uses (dim_flags).  With adapt = 'on' the budget admits
 * up to its adaptive limit, which adapt.c computes for 'conf' first
 * (dbgate_adapt_install()).
 * Caller holds the budget's tree lock, or every budget lock.
 */
void
dbgate_admission_set_limits(DbgateBudget *b, const DbgateBudgetConf *conf,
							int parent, uint32 parent_incarnation)
{
	DbgateLimits l;
	DbgateQueueLimits q;
	int32		adaptive;
	int32		old_parent = b->lim.parent;
	uint32		old_pinc = b->lim.parent_incarnation;
	uint32		r = 0;
	uint64		was;
	uint32		held;

	/* adapt.c: L under 'conf', from b's old configuration (still b->conf) */
	(void) dbgate_adapt_install(b, conf);

	memset(&l, 0, sizeof(l));
	memset(&q, 0, sizeof(q));
	l.max_active = conf->max_active;
	l.grant_max_active = conf->max_active;
	l.max_queued = conf->max_queued;
	l.queue_timeout_ms = conf->queue_timeout_ms;
	l.statement_timeout_ms = conf->statement_timeout_ms;
	l.lock_timeout_ms = conf->lock_timeout_ms;
	l.idle_timeout_ms = conf->idle_timeout_ms;
	l.parent = parent;
	l.parent_incarnation = parent_incarnation;
	l.max_memory_mb = conf->max_memory_mb;
	l.scope = conf->scope;
	l.fair = conf->fair;
	l.enforce = conf->enforce;
	l.utility = conf->utility;
	l.lifo = (conf->queue_order == DBGATE_ORDER_LIFO);
	/* (more than there are backends could never be used) */
	if (parent >= 0 && conf->reserved > 0)
		r = (uint32) Min(Min(conf->reserved, (int32) RESV_MASK),
						 dbgate_shared->max_procs);
	l.resv = (r > 0);
	l.min_cost = conf->min_cost;
	/* runaway.c, demote.c */
	l.runaway_after_ms = conf->runaway_after_ms;
	l.runaway_cancel = (conf->runaway_action == DBGATE_RUNAWAY_CANCEL);
	l.runaway_demote = (conf->runaway_action == DBGATE_RUNAWAY_DEMOTE &&
						conf->runaway_after_ms > 0);
	/* budgets.c sets it for the whole tree once every budget has limits */
	l.adapt_chain = b->lim.adapt_chain;
	l.limit_flags = dbgate_limit_flags(&l);
	q.overtake_ms = conf->overtake_limit_ms;
	q.weight = Max(conf->weight, 1);
	/* the adaptive limit, as adapt.c has just set it for 'conf' */
	adaptive = (int32) pg_atomic_read_u32(&b->adapt_limit);
	if (conf->adapt == DBGATE_ADAPT_ON && adaptive > 0)
		l.max_active = adaptive;

	/* the dimensions' limits and state, from b's old configuration */
	l.dim_flags = dbgate_dims_install(b, conf, &q);
	l.dim_one = dbgate_dims_one(l.dim_flags);
	/* slots held under the old rules go back (the install's grant step) */
	if (b->held > 0)
		dbgate_held_return(b, b->held);

	/* the reservation, counted at the parent before the word says so */
	if (r > 0)
		level_add_active(budget_entry(parent), dbgate_tag_of(parent_incarnation),
						 (int32) r);

	pg_atomic_fetch_add_u32(&b->conf_seq, 1);	/* odd: writing (a barrier) */
	b->conf = *conf;
	b->lim = l;
	b->qlim = q;
	was = resv_install(b, r, r > 0 ? parent : -1, parent != old_parent ||
					   parent_incarnation != old_pinc, &held);
	pg_atomic_fetch_add_u32(&b->conf_seq, 1);	/* even again (a barrier) */

	/* what was counted beyond the new held slots, what the old ones held */
	if (r > held)
		level_add_active(budget_entry(parent), dbgate_tag_of(parent_incarnation),
						 -(int32) (r - held));
	if (old_parent >= 0 && old_parent < dbgate_shared->max_budgets &&
		resv_held(was) > 0)
		level_add_active(budget_entry(old_parent), dbgate_tag_of(old_pinc),
						 -(int32) resv_held(was));
	if (r > 0)
		note_peak_active(budget_entry(parent),
						 dbgate_st_active(pg_atomic_read_u64(&budget_entry(parent)->state)));
}

/*
 * Budget b is dropped (its entry's tag changes next): the slots its
 * reservation held go back to its parent.  Caller holds the tree lock or
 * every budget lock, and runs the grant step.
 */
void
dbgate_admission_budget_dropped(DbgateBudget *b)
{
	uint64		was = pg_atomic_read_u64(&b->resv);

	resv_reset(b);
	if (b->lim.parent >= 0 && b->lim.parent < dbgate_shared->max_budgets &&
		resv_held(was) > 0)
		level_add_active(budget_entry(b->lim.parent),
						 dbgate_tag_of(b->lim.parent_incarnation),
						 -(int32) resv_held(was));
}

/*
 * Whether some level of budget b's chain (b or an ancestor) adapts: the
 * statement path then counts its statements for adapt.c.  Caller holds
 * the tree lock, or every budget lock.
 */
void
dbgate_admission_set_adapt_chain(DbgateBudget *b, bool adapt_chain)
{
	if (b->lim.adapt_chain == adapt_chain)
		return;
	pg_atomic_fetch_add_u32(&b->conf_seq, 1);	/* odd: writing (a barrier) */
	b->lim.adapt_chain = adapt_chain;
	b->lim.limit_flags = dbgate_limit_flags(&b->lim);
	pg_atomic_fetch_add_u32(&b->conf_seq, 1);	/* even again (a barrier) */
}

/*
 * The adaptive limit that adapt.c computed: budget b (of tree 'root', whose
 * lock the caller holds) admits up to 'limit' statements from now on.  A
 * raised limit hands out slots at once.
 */
void
dbgate_admission_set_adaptive(DbgateBudget *b, int root, int32 limit)
{
	bool		raised = limit > b->lim.max_active;

	pg_atomic_fetch_add_u32(&b->conf_seq, 1);	/* odd: writing (a barrier) */
	b->lim.max_active = limit;
	pg_atomic_fetch_add_u32(&b->conf_seq, 1);	/* even again (a barrier) */
	if (raised)
		dbgate_admission_grant(root);
}

/*
 * Let the waiters of budget b go on ungated: it was dropped, or it has
 * children now.  Their 'queued' counts are the caller's (the entry is
 * reset, or every count is recomputed).  Caller holds the tree lock or
 * every budget lock.
 */
void
dbgate_admission_release_waiters(DbgateBudget *b)
{
	if (b->held > 0)
		dbgate_held_return(b, b->held);
	while (b->queue_head >= 0)
	{
		int			procno = b->queue_head;
		DbgateProc *p = proc_entry(procno);

		b->queue_head = p->next;
		p->prev = p->next = -1;
		p->released = true;
		SetLatch(&DBGATE_PROC_BY_NUMBER(procno)->procLatch);
	}
	b->queue_tail = -1;
}

/*
 * The positions in chain 'to' of the levels of chain 'from' whose bits are
 * set in 'levels' (a waiter's token_levels: bit k for the k-th level from
 * the leaf).  A level that is not in 'to' is forgotten: a token it lacked
 * held back no admission under the new chain.
 */
static uint8
remap_levels(const DbgateChain *from, const DbgateChain *to, uint8 levels)
{
	uint8		out = 0;
	int			k;
	int			j;

	for (k = 0; k < from->n; k++)
	{
		if (!(levels & (1 << k)))
			continue;
		for (j = 0; j < to->n; j++)
		{
			if (to->idx[j] == from->idx[k] && to->inc[j] == from->inc[k])
				out |= (uint8) (1 << j);
		}
	}
	return out;
}

/*
 * After the shape of the trees changed (every budget lock held): count
 * every waiter in 'queued' at the levels of its budget's chain as it is
 * now, and remember those levels in its entry (and which of them it waited
 * for a token of: rate_limited is counted at those levels).
 */
void
dbgate_admission_recount_queued(void)
{
	DbgateShared *sh = dbgate_shared;
	int			i;

	for (i = 0; i < sh->max_budgets; i++)
	{
		DbgateBudget *b = budget_entry(i);
		uint64		old = pg_atomic_read_u64(&b->state);

		if (!b->in_use)
			continue;
		/* held along a chain that may be no more (the grant steps follow) */
		if (b->held > 0)
			dbgate_held_return(b, b->held);
		while (!pg_atomic_compare_exchange_u64(&b->state, &old,
											   old & ~(uint64) DBGATE_ST_MASK))
			;
		b->token_waiter = -1;
	}
	for (i = 0; i < sh->max_budgets; i++)
	{
		DbgateBudget *b = budget_entry(i);
		int			p;

		if (!b->in_use)
			continue;
		for (p = b->queue_head; p >= 0; p = proc_entry(p)->next)
		{
			DbgateProc *e = proc_entry(p);
			DbgateChain before = e->chain;
			int			idx = i;
			int			n = 0;

			while (idx >= 0 && n < DBGATE_MAX_DEPTH)
			{
				DbgateBudget *lb = budget_entry(idx);

				e->chain.idx[n] = idx;
				e->chain.inc[n] = lb->incarnation;
				pg_atomic_fetch_add_u64(&lb->state, DBGATE_ST_ONE_QUEUED);
				n++;
				idx = lb->lim.parent;
			}
			e->chain.n = n;
			e->chain.resv = 0;
			e->token_levels = remap_levels(&before, &e->chain, e->token_levels);
		}
	}
}

/*
 * A budget in shadow mode holds nobody back: admit its waiters at once,
 * beyond every limit.  Caller holds the tree lock or every budget lock.
 */
void
dbgate_admission_admit_all(DbgateBudget *b)
{
	TimestampTz now = GetCurrentTimestamp();

	while (b->queue_head >= 0)
	{
		int			procno = b->queue_head;
		DbgateProc *p = proc_entry(procno);

		if (!dbgate_promote(procno, true, 0, 0))
		{
			/* a level was dropped meanwhile: let it go ungated */
			dbgate_list_unlink(b, procno);
			p->released = true;
		}
		else
		{
			dbgate_list_unlink(b, procno);
			mark_granted(p, now);
		}
		if (procno != dbgate_my_procno)
			SetLatch(&DBGATE_PROC_BY_NUMBER(procno)->procLatch);
	}
	if (b->held > 0)
		dbgate_held_return(b, b->held);
}

/*
 * Run the grant step of the tree whose root is 'root' (a raised limit, a
 * changed order, weight, rate or shape).  Caller holds the tree lock or
 * every budget lock.
 */
void
dbgate_admission_grant(int root)
{
	Wakeups		w;
	int			i;

	w.n = 0;
	budget_entry(root)->token_waiter = -1;
	dbgate_grant_tree(root, GetCurrentTimestamp(), &w);
	for (i = 0; i < w.n; i++)
		SetLatch(&DBGATE_PROC_BY_NUMBER(w.procnos[i])->procLatch);
}

/* ----------
 * For the views (status.c)
 * ----------
 */

/* A backend's key as the views show it (tree lock: a queued entry's). */
static inline void
copy_key(DbgateProc *e, DbgateBackendRow *row)
{
	row->key_flags = e->key_flags & (DBGATE_KEYF_HELD | DBGATE_KEYF_OVERFLOW);
	row->key_entry = -1;
	row->key_active = 0;
	row->key[0] = '\0';
	if (row->key_flags & DBGATE_KEYF_HELD)
	{
		pg_read_barrier();
		row->key_entry = e->key;
		row->key_active = dbgate_key_active(e->key);
		strlcpy(row->key, e->key_text, sizeof(row->key));
	}
}

/*
 * queue_position in a budget with keys (SPEC 1.3 Interactions, Keys and
 * order): after the overdue prefix of a 'lifo' budget, the selection of
 * the grant step repeated as if releases belonged to no key -- the key
 * with the fewest active statements, counting the waiters already
 * numbered in it; ties to the candidate that waited longest; within a
 * key, the queue order -- ignoring key limits and tokens.  rows[0, nq)
 * are the waiters in arrival order.  Without a lock (quadratic in the
 * waiters: a view's cost, not the statement path's).
 */
static void
key_positions(DbgateBackendRow *rows, int nq, int overdue, bool lifo)
{
	int32	   *rep = palloc(sizeof(int32) * Max(nq, 1));	/* first row of its key */
	uint32	   *count = palloc(sizeof(uint32) * Max(nq, 1));	/* per rep */
	int32	   *seen = palloc(sizeof(int32) * Max(nq, 1));	/* per rep: step */
	bool	   *done = palloc0(sizeof(bool) * Max(nq, 1));
	int			i,
				j,
				pos;

	for (i = 0; i < nq; i++)
	{
		rep[i] = i;
		for (j = 0; j < i && rows[i].key_entry >= 0; j++)
		{
			if (rows[j].key_entry == rows[i].key_entry)
			{
				rep[i] = rep[j];
				break;
			}
		}
		count[i] = rows[i].key_active;
		seen[i] = -1;
		done[i] = (i < overdue);	/* numbered by arrival already */
	}
	for (i = 0; i < overdue && i < nq; i++)
		count[rep[i]]++;
	for (pos = overdue; pos < nq; pos++)
	{
		int			best = -1;

		for (i = 0; i < nq; i++)
		{
			int			r = lifo ? nq - 1 - i : i;

			if (done[r] || seen[rep[r]] == pos)
				continue;
			seen[rep[r]] = pos; /* r is its key's candidate */
			if (best < 0 || count[rep[r]] < count[rep[best]] ||
				(count[rep[r]] == count[rep[best]] && rows[r].since < rows[best].since))
				best = r;
		}
		if (best < 0)
			break;
		done[best] = true;
		count[rep[best]]++;
		rows[best].position = pos + 1;
	}
	pfree(rep);
	pfree(count);
	pfree(seen);
	pfree(done);
}

/*
 * The backends of budget idx for dbgate.backends: queued ones in the order
 * they would be served (see SPEC: queue_position), then slot holders.  One
 * consistent picture per budget, copied under its tree lock.  Caller holds
 * config_lock (shared), so that the budget keeps its identity.  Returns the
 * number of rows written (at most maxrows).
 */
int
dbgate_admission_backends(int idx, DbgateBackendRow *rows, int maxrows)
{
	DbgateShared *sh = dbgate_shared;
	DbgateBudget *b = budget_entry(idx);
	TimestampTz now = GetCurrentTimestamp();
	int			n = 0;
	int			root;
	int			p;
	int			nqueued = 0;
	int			overdue = 0;
	bool		keyed = false;
	bool		lifo;

	root = dbgate_lock_tree(idx);
	/* in arrival order; 'lifo' serves the overdue prefix, then newest first */
	for (p = b->queue_head; p >= 0; p = proc_entry(p)->next)
	{
		DbgateProc *e = proc_entry(p);

		if (b->lim.lifo && b->qlim.overtake_ms > 0 &&
			now - e->state_since >= (int64) b->qlim.overtake_ms * 1000)
			overdue++;
		nqueued++;
	}
	for (p = b->queue_head; p >= 0 && n < maxrows; p = proc_entry(p)->next)
	{
		DbgateProc *e = proc_entry(p);
		DbgateBackendRow *row = &rows[n];

		row->pid = e->pid;
		row->roleid = e->roleid;
		row->budget = idx;
		row->state = DBGATE_ROW_QUEUED;
		row->since = e->state_since;
		row->rule = e->rule;
		row->via = e->via;
		row->memory_kb = 0;
		row->demoted_from = -1;
		copy_key(e, row);
		if (row->key_flags & DBGATE_KEYF_HELD)
			keyed = true;
		/* position by arrival: 1 .. nqueued */
		row->position = n + 1;
		if (b->lim.lifo && n >= overdue)
			row->position = overdue + (nqueued - n);
		n++;
	}
	for (p = 0; p < sh->max_procs && n < maxrows; p++)
	{
		DbgateProc *e = proc_entry(p);
		DbgateBackendRow *row;
		uint8		state = e->state;

		if (e->budget != idx || e->incarnation != b->incarnation)
			continue;
		/* a granted waiter already holds its slot */
		if (!(state == DBGATE_PROC_ACTIVE || state == DBGATE_PROC_HELD ||
			  (state == DBGATE_PROC_QUEUED && e->granted)))
			continue;
		row = &rows[n++];
		row->pid = e->pid;
		row->roleid = e->roleid;
		row->budget = idx;
		row->state = (state == DBGATE_PROC_HELD) ?
			DBGATE_ROW_HELD : DBGATE_ROW_ACTIVE;
		row->since = e->state_since;
		row->position = 0;
		row->rule = e->rule;
		row->via = e->via;
		row->memory_kb = (int64) pg_atomic_read_u64(&e->memory_kb);
		copy_key(e, row);
		/* demote.c: moved here (the budget it came from, if it still is) */
		row->demoted_from = -1;
		if ((pg_atomic_read_u64(&e->move) & DBGATE_MV_DONE) &&
			e->demoted_from >= 0 && e->demoted_from < sh->max_budgets &&
			budget_entry(e->demoted_from)->in_use &&
			budget_entry(e->demoted_from)->incarnation == e->demoted_from_inc)
			row->demoted_from = e->demoted_from;
	}
	lifo = b->lim.lifo;
	unlock_tree(root);
	if (keyed)
		key_positions(rows, Min(nqueued, n), overdue, lifo);
	return n;
}

/* The arrival of the longest waiter of idx's subtree, 0 if none (tree lock). */
static TimestampTz
oldest_arrival(int idx, int depth)
{
	DbgateBudget *b = budget_entry(idx);
	TimestampTz oldest = 0;
	int			c;

	if (b->queue_head >= 0)
		oldest = proc_entry(b->queue_head)->state_since;
	if (depth >= DBGATE_MAX_DEPTH)
		return oldest;
	for (c = b->first_child; c >= 0; c = budget_entry(c)->next_sibling)
	{
		TimestampTz t = oldest_arrival(c, depth + 1);

		if (t != 0 && (oldest == 0 || t < oldest))
			oldest = t;
	}
	return oldest;
}

/*
 * How long the longest waiter of budget idx's subtree has waited (us), 0
 * if none.  Caller holds config_lock (shared).
 */
uint64
dbgate_admission_oldest_wait(int idx)
{
	TimestampTz oldest;
	int			root;

	root = dbgate_lock_tree(idx);
	oldest = oldest_arrival(idx, 0);
	unlock_tree(root);
	return oldest == 0 ? 0 : elapsed_us(oldest, GetCurrentTimestamp());
}

/*
 * The number of slot holders of budget idx whose slot is held while
 * nothing runs under it (shown as idle in transaction).  Caller holds
 * config_lock (shared).  A hint: entries are read without their owners'
 * cooperation.
 */
int
dbgate_admission_idle_count(int idx)
{
	DbgateShared *sh = dbgate_shared;
	uint32		incarnation = budget_entry(idx)->incarnation;
	int			n = 0;
	int			p;

	for (p = 0; p < sh->max_procs; p++)
	{
		DbgateProc *e = proc_entry(p);

		if (e->state == DBGATE_PROC_HELD && e->budget == idx &&
			e->incarnation == incarnation)
			n++;
	}
	return n;
}

/* ----------
 * The adaptive limit applied (adapt.c computes it)
 * ----------
 */

/* The step of budget idx (incarnation inc), under its tree lock. */
static pg_noinline void
adapt_step(int idx, uint32 inc, TimestampTz now)
{
	int			root = dbgate_lock_tree(idx);
	int32		l;

	if (dbgate_adapt_step(idx, inc, now, &l))
		dbgate_admission_set_adaptive(budget_entry(idx), root, l);
	unlock_tree(root);
}

/*
 * The statement path (slot.c): a slot of chain c, with an adapting level,
 * taken at 'admitted_at', was returned.  The statement is counted for
 * adapt.c at every adapting level, and a level whose period ended has its
 * step.
 */
void
dbgate_admission_adapt_released(const DbgateChain *c, TimestampTz admitted_at)
{
	TimestampTz now = GetCurrentTimestamp();
	uint32		due = dbgate_adapt_count(c, admitted_at, now);
	int			i;

	for (i = 0; unlikely(due != 0); i++, due >>= 1)
	{
		if (due & 1)
			adapt_step(c->idx[i], c->inc[i], now);
	}
}

/*
 * The install (budgets.c), once every budget has its limits and the trees
 * their shape: an adapting parent's L raised to its children's
 * reservations.  Caller holds the tree lock of b's tree ('root'), or every
 * budget lock.
 */
void
dbgate_admission_adapt_reserved(DbgateBudget *b, int root)
{
	int32		l;

	if (dbgate_adapt_reserved(b, &l))
		dbgate_admission_set_adaptive(b, root, l);
}
