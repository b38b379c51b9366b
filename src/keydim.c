/*-------------------------------------------------------------------------
 *
 * keydim.c
 *	  Keys (1.3) as an admission dimension: a statement of a budget with
 *	  key_by is admitted only when its key admits it too (key_max_active,
 *	  key_max_queued, key_max_rate and key_rate_burst, or the key's own
 *	  limits of set_key_limit), and a free slot goes to the key with the
 *	  fewest active statements.
 *
 * The key table is keytab.c's (a service that knows budgets by index
 * only); where a statement's key comes from, keysource.c's.  This file is
 * the dimension (dimdefs.h has the callbacks' rules):
 *	  - enter (the statement's own process, no lock): the key read where
 *		key_by says, its entry held (keytab: found or made, or the budget's
 *		overflow key) and kept in the backend's entry (DbgateProc.key, its
 *		text for the views, DBGATE_DIM_KEY's bit in dim_held) until the
 *		statement is done: admitted, queued, or neither;
 *	  - take: one active more at the key, by compare-and-swap against its
 *		max_active, and a token of its bucket (gcra.h) if it has a rate;
 *		untake gives both back; release gives back the active and the hold;
 *	  - join / unjoin: a waiter counted in its key's 'queued' (tree lock),
 *		refused at the key's max_queued (53300 with the key's DETAIL,
 *		counted in the key's 'rejected');
 *	  - pick: the order of a budget's queue across keys (SPEC 1.3
 *		Interactions, Keys and order): overdue waiters first ('lifo',
 *		longest first, any key); then the key with the fewest active
 *		statements whose waiters could take a slot, ties to the key whose
 *		candidate waited longest; within a key, the budget's queue_order;
 *	  - newcomer_waits: a newcomer of a fair budget passes the waiters
 *		only when none of them could take the free slot ahead of it.
 * A statement without a key entry (queued before key_by was set) counts
 * as a key of its own with nothing active.
 *
 * Locking: a key's 'active' and bucket change by compare-and-swap; its
 * 'queued' and pick_mark under the tree lock of its budget (which has no
 * children, so that is the lock of its chain's root); the hold is
 * keytab's.  enter may take config_lock (a new key's own limits) and a
 * partition lock of the key table, so it runs before the tree lock.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"

#include "dimdefs.h"
#include "gcra.h"
#include "keydim.h"
#include "keysource.h"
#include "keylimits.h"
#include "keytab.h"
#include "shmem.h"

#define KEY_BIT DBGATE_DIM_BIT(DBGATE_DIM_KEY)

static inline int32
budget_index(DbgateBudget *b)
{
	return (int32) (((DbgateBudgetPadded *) b) - dbgate_shared->budgets);
}

/* ----------
 * Where a budget's keys come from: its key_by, cached per backend
 * ----------
 */
/*
 * This backend's last key that had an entry of its own: a session's
 * statements mostly have the same key, and dbgate_key_pin() holds its
 * entry again without a lock or a hash while it is still that key's.
 * While kc_entry >= 0, kc_budget and kc_incarnation are kb_budget and
 * kb_incarnation (keyby_load() forgets the key when they change), so a
 * statement whose key_by was read from the cache compares only the key.
 */
static int32 kc_entry = -1;
static DbgateKey *kc_ke;		/* key_entry(kc_entry) */
static uint64 kc_made;
static DbgateBudget *kc_budget;
static uint32 kc_incarnation;
static int	kc_len;
static char kc_key[DBGATE_KEY_BYTES + 1];

static DbgateBudget *kb_budget = NULL;
static uint32 kb_incarnation;
static uint32 kb_seq;
static int	kb_kind;
static char kb_setting[NAMEDATALEN];
static uint32 kb_setting_id = 0;	/* changes with kb_setting (keysource.h) */

static int
keyby_kind(const char *key_by, char *setting)
{
	setting[0] = '\0';
	if (strcmp(key_by, "user") == 0)
		return DBGATE_KEYBY_USER;
	if (strcmp(key_by, "application_name") == 0)
		return DBGATE_KEYBY_APPNAME;
	if (strcmp(key_by, "client_addr") == 0)
		return DBGATE_KEYBY_CLIENT;
	if (strncmp(key_by, "setting:", 8) == 0)
	{
		strlcpy(setting, key_by + 8, NAMEDATALEN);
		return DBGATE_KEYBY_SETTING;
	}
	return DBGATE_KEYBY_NONE;
}

/*
 * keyby_of()'s cache made anew for budget b as of conf_seq 'seq' and
 * incarnation 'inc'; false if b's configuration changed meanwhile.
 */
static pg_noinline bool
keyby_load(DbgateBudget *b, uint32 seq, uint32 inc)
{
	char		key_by[DBGATE_KEY_BY_LEN];

	memcpy(key_by, b->conf.key_by, sizeof(key_by));
	pg_read_barrier();
	if (pg_atomic_read_u32(&b->conf_seq) != seq)
		return false;
	key_by[sizeof(key_by) - 1] = '\0';
	kb_kind = keyby_kind(key_by, kb_setting);
	kb_setting_id++;
	if (b != kc_budget || inc != kc_incarnation)
		kc_entry = -1;			/* (the cached key is kb_budget's, or none) */
	kb_budget = b;
	kb_incarnation = inc;
	kb_seq = seq;
	return true;
}

/*
 * key_by of budget b, read consistently without a lock (conf_seq, as
 * dbgate_read_limits() reads the limits), once per change of b; its
 * incarnation as of that read is kb_incarnation.
 */
static inline int
keyby_of(DbgateBudget *b)
{
	for (;;)
	{
		uint32		seq = pg_atomic_read_u32(&b->conf_seq);
		uint32		inc;

		if (unlikely(seq & 1))
		{
			pg_spin_delay();
			continue;
		}
		pg_read_barrier();
		inc = b->incarnation;
		if (likely(b == kb_budget && inc == kb_incarnation && seq == kb_seq))
			return kb_kind;
		if (keyby_load(b, seq, inc))
			return kb_kind;
	}
}

/* ----------
 * The callbacks
 * ----------
 */

static inline bool
has_key(const DbgateProc *e)
{
	return (e->dim_held & KEY_BIT) != 0;
}

/* Whether our entry's key_text is kc_key already (written by us alone). */
static bool kt_is_kc = false;

/*
 * Is v (NUL-terminated, not cut) the cached key kc_key?  Read no further
 * than v's end; a key that was cut never compares equal (the slow way
 * then, which cuts it).
 */
static inline bool
is_cached_key(const char *v)
{
	return strncmp(kc_key, v, kc_len) == 0 && v[kc_len] == '\0';
}

/*
 * The slow way of key_enter(): key v cut, its entry found or made and
 * held (keytab), and kept as the cached key if it is not the overflow
 * key; e->key and its text set.  Returns whether the key overflowed.
 */
static pg_noinline bool
enter_slow(DbgateBudget *b, DbgateProc *e, const char *v)
{
	int			len = dbgate_key_cut(v, strnlen(v, DBGATE_KEY_BYTES + 1));
	bool		overflowed;
	int32		k;

	k = dbgate_key_hold(budget_index(b), kb_incarnation, v, len,
						&overflowed);
	if (!overflowed)
	{
		kc_entry = k;
		kc_ke = key_entry(k);
		kc_made = kc_ke->made;	/* (held: it stays) */
		kc_budget = b;
		kc_incarnation = kb_incarnation;
		kc_len = len;
		memcpy(kc_key, v, len);
		kc_key[len] = '\0';
	}
	e->key = k;
	memcpy(e->key_text, v, len);
	e->key_text[len] = '\0';
	kt_is_kc = !overflowed;
	return overflowed;
}

/*
 * The key of e's statement in budget b, NULL if b has no key_by (its key
 * source read as keysource.h says).
 */
static pg_attribute_always_inline const char *
statement_key(DbgateBudget *b)
{
	int			kind = keyby_of(b);

	if (kind == DBGATE_KEYBY_NONE)
		return NULL;
	return dbgate_key_value(kind, kb_setting, kb_setting_id);
}

/*
 * If key v is the cached key and its entry could be held again (and, with
 * 'unrated', the key has no rate): e holds it, e->key and its text set;
 * true.  false: nothing held.
 */
static pg_attribute_always_inline bool
hold_cached(DbgateProc *e, const char *v, const bool unrated)
{
	if (!(kc_entry >= 0 && is_cached_key(v) &&
		  (!unrated || kc_ke->lim.rate_interval_ns <= 0) &&
		  dbgate_key_pin(kc_ke, kc_made)))
		return false;
	e->key = kc_entry;
	if (unlikely(!kt_is_kc))
	{
		memcpy(e->key_text, kc_key, kc_len + 1);
		kt_is_kc = true;
	}
	return true;
}

/* enter (dimdefs.h): e's key held, unless it is held or level is not 0 */
static pg_attribute_always_inline void
enter_body(DbgateBudget *b, DbgateProc *e, int level)
{
	const char *v;
	bool		overflowed = false;

	if (has_key(e) || level != 0)
		return;
	v = statement_key(b);
	if (v == NULL)
		return;
	if (unlikely(!hold_cached(e, v, false)))
		overflowed = enter_slow(b, e, v);
	pg_write_barrier();			/* the views read the text once the flag is set */
	e->key_flags = DBGATE_KEYF_HELD | (overflowed ? DBGATE_KEYF_OVERFLOW : 0);
	e->dim_held |= KEY_BIT;
}

static void
key_enter(DbgateBudget *b, DbgateProc *e, int level)
{
	enter_body(b, e, level);
}

/*
 * Would key k admit a statement at now_ns: TAKEN, UNTIL_RELEASE (at its
 * max_active) or its token's due time.
 */
static inline int64
key_state(DbgateKey *ke, int64 now_ns)
{
	int32		max = ke->lim.max_active;

	if (max > 0 && pg_atomic_read_u32(&ke->active) >= (uint32) max)
		return DBGATE_DIM_UNTIL_RELEASE;
	if (ke->lim.rate_interval_ns > 0)
		return dbgate_gcra_due(&ke->rate_tat, ke->lim.rate_tolerance_ns,
							   now_ns);
	return DBGATE_DIM_TAKEN;
}

/* e's statement is taken by its key ke: flagged and counted. */
static inline void
count_taken(DbgateProc *e, DbgateKey *ke)
{
	e->key_flags |= DBGATE_KEYF_ACTIVE;
	pg_atomic_fetch_add_u64(&ke->admitted, 1);
	if (unlikely(e->key_flags & DBGATE_KEYF_WAITED))
		pg_atomic_fetch_add_u64(&ke->rate_limited, 1);
}

/*
 * key_take() of a key with a rate, or forced (shadow mode): the active
 * and the token, counted as taken even without room or token if forced.
 */
static pg_noinline int64
take_rated(DbgateProc *e, DbgateKey *ke, int64 now_ns, int64 asof_ns,
		   bool force)
{
	bool		room = dbgate_key_take_active(ke, force);
	int64		due = DBGATE_DIM_TAKEN;

	if (!room && !force)
		return DBGATE_DIM_UNTIL_RELEASE;
	if (ke->lim.rate_interval_ns > 0)
	{
		if (now_ns == 0)		/* (no dimension of the level needed the clock) */
			now_ns = asof_ns = dbgate_now_ns();
		due = dbgate_gcra_take(&ke->rate_tat, ke->lim.rate_interval_ns,
							   ke->lim.rate_tolerance_ns, now_ns, asof_ns,
							   force);
		if (due != DBGATE_DIM_TAKEN && !force)
		{
			dbgate_key_untake_active(ke);
			return due;
		}
		e->key_flags |= DBGATE_KEYF_TOKEN;
	}
	count_taken(e, ke);
	if (!room)
		return DBGATE_DIM_UNTIL_RELEASE;	/* (force: counted anyway) */
	return due;
}

/* take (dimdefs.h) */
static pg_attribute_always_inline int64
take_body(DbgateBudget *b, DbgateProc *e, int level, int64 now_ns,
		  int64 asof_ns, bool force)
{
	DbgateKey  *ke;

	if (!has_key(e) || level != 0)
		return DBGATE_DIM_TAKEN;	/* no key: a key of its own */
	Assert(!(e->key_flags & DBGATE_KEYF_ACTIVE));
	ke = key_entry(e->key);
	if (unlikely(force || ke->lim.rate_interval_ns > 0))
		return take_rated(e, ke, now_ns, asof_ns, force);
	if (!dbgate_key_take_active(ke, false))
		return DBGATE_DIM_UNTIL_RELEASE;
	count_taken(e, ke);
	return DBGATE_DIM_TAKEN;
}

static int64
key_take(DbgateBudget *b, DbgateProc *e, int level, int64 now_ns,
		 int64 asof_ns, bool force)
{
	return take_body(b, e, level, now_ns, asof_ns, force);
}

/*
 * enter_take (dimdefs.h).  The usual statement -- its session's key of the
 * statement before, that key without a rate, not forced -- holds and
 * takes its entry in one go, without the checks of enter_body() and
 * take_body() that cannot fail for it; anything else goes their way.
 */
static int64
key_enter_take(DbgateBudget *b, DbgateProc *e, int level, int64 now_ns,
			   bool force)
{
	if (likely(!has_key(e) && level == 0 && !force))
	{
		const char *v = statement_key(b);

		if (v == NULL)
			return DBGATE_DIM_TAKEN;
		if (likely(hold_cached(e, v, true)))
		{
			bool		room = dbgate_key_take_active(kc_ke, false);

			pg_write_barrier();	/* the views read the text once the flag is set */
			if (likely(room))
			{
				e->key_flags = DBGATE_KEYF_HELD | DBGATE_KEYF_ACTIVE;
				e->dim_held |= KEY_BIT;
				pg_atomic_fetch_add_u64(&kc_ke->admitted, 1);
				return DBGATE_DIM_TAKEN;
			}
			e->key_flags = DBGATE_KEYF_HELD;
			e->dim_held |= KEY_BIT;
			return DBGATE_DIM_UNTIL_RELEASE;
		}
	}
	enter_body(b, e, level);
	return take_body(b, e, level, now_ns, now_ns, force);
}

static void
key_untake(DbgateBudget *b, DbgateProc *e, int level)
{
	DbgateKey  *ke;

	if (!has_key(e) || level != 0 || !(e->key_flags & DBGATE_KEYF_ACTIVE))
		return;
	ke = key_entry(e->key);
	if (e->key_flags & DBGATE_KEYF_TOKEN)
		dbgate_gcra_untake(&ke->rate_tat, ke->lim.rate_interval_ns);
	dbgate_key_untake_active(ke);
	pg_atomic_fetch_sub_u64(&ke->admitted, 1);
	if (e->key_flags & DBGATE_KEYF_WAITED)
		pg_atomic_fetch_sub_u64(&ke->rate_limited, 1);
	e->key_flags &= ~(DBGATE_KEYF_ACTIVE | DBGATE_KEYF_TOKEN);
}

static int64
key_due(DbgateBudget *b, DbgateProc *e, int level, int64 now_ns)
{
	int64		r;

	if (!has_key(e) || level != 0)
		return DBGATE_DIM_TAKEN;
	r = key_state(key_entry(e->key), now_ns);
	if (r > 0)
		e->key_flags |= DBGATE_KEYF_WAITED;	/* tree lock: e is queued */
	return r;
}

/* The slot's end, or a statement that leaves without one. */
static void
key_release(DbgateProc *e, const DbgateChain *c)
{
	DbgateKey  *ke = key_entry(e->key);

	Assert(!(e->key_flags & DBGATE_KEYF_QUEUED));
	e->dim_held &= ~KEY_BIT;
	if (e->key_flags & DBGATE_KEYF_ACTIVE)
		dbgate_key_untake_active(ke);
	e->key_flags = 0;
	dbgate_key_unhold(ke);
}

static bool
key_join(DbgateBudget *b, DbgateProc *e, char *detail, int len)
{
	DbgateKey  *ke;

	if (!has_key(e))
		return true;
	ke = key_entry(e->key);
	if (ke->lim.max_queued > 0 && ke->queued >= ke->lim.max_queued)
	{
		pg_atomic_fetch_add_u64(&ke->rejected, 1);
		if (ke->kind == DBGATE_KEY_OVERFLOW)
			snprintf(detail, len,
					 "The budget's overflow key (the keys the table of keys had no room for) has %d of %d queue places taken.",
					 ke->queued, ke->lim.max_queued);
		else
			snprintf(detail, len,
					 "Key \"%s\" has %d of %d queue places taken.",
					 e->key_text, ke->queued, ke->lim.max_queued);
		return false;
	}
	ke->queued++;
	e->key_flags |= DBGATE_KEYF_QUEUED;
	return true;
}

static void
key_unjoin(DbgateProc *e)
{
	if (!has_key(e) || !(e->key_flags & DBGATE_KEYF_QUEUED))
		return;
	key_entry(e->key)->queued--;
	e->key_flags &= ~DBGATE_KEYF_QUEUED;
}

/* Why e's key did not admit it (the DETAIL of a 53300). */
static bool
key_explain(DbgateBudget *b, DbgateProc *e, char *detail, int len)
{
	DbgateKey  *ke;
	int64		st;

	if (!has_key(e))
		return false;
	ke = key_entry(e->key);
	st = key_state(ke, dbgate_now_ns());
	if (st == DBGATE_DIM_TAKEN)
		return false;
	if (st == DBGATE_DIM_UNTIL_RELEASE && ke->kind == DBGATE_KEY_OVERFLOW)
		snprintf(detail, len,
				 "The budget's overflow key (the keys the table of keys had no room for) has %u of %d statements active",
				 pg_atomic_read_u32(&ke->active), ke->lim.max_active);
	else if (st == DBGATE_DIM_UNTIL_RELEASE)
		snprintf(detail, len, "Key \"%s\" has %u of %d statements active",
				 e->key_text, pg_atomic_read_u32(&ke->active),
				 ke->lim.max_active);
	else if (ke->kind == DBGATE_KEY_OVERFLOW)
		snprintf(detail, len,
				 "No admission is due yet under the rate of the budget's overflow key");
	else
		snprintf(detail, len,
				 "No admission is due yet under the rate of key \"%s\"",
				 e->key_text);
	return true;
}

/* ----------
 * The order of a budget's queue across keys (tree lock)
 * ----------
 */

/* The active statements of waiter p's key (0 for one without a key). */
static inline uint32
active_of(const DbgateProc *p)
{
	return has_key(p) ? pg_atomic_read_u32(&key_entry(p->key)->active) : 0;
}

/* Could waiter p's key take a slot now (and if not, when)? */
static inline int64
state_of(DbgateProc *p, int64 now_ns)
{
	return has_key(p) ? key_state(key_entry(p->key), now_ns) :
		DBGATE_DIM_TAKEN;
}

/*
 * Is p the candidate of its key in a walk marked 'mark' (the first waiter
 * of its key that the walk meets)?  Waiters without a key are each their
 * own.
 */
static inline bool
first_of_key(DbgateProc *p, uint64 mark)
{
	DbgateKey  *ke;

	if (!has_key(p))
		return true;
	ke = key_entry(p->key);
	if (ke->pick_mark == mark)
		return false;
	ke->pick_mark = mark;
	return true;
}

/* A mark no other walk uses: this backend's pid and a count. */
static inline uint64
new_mark(void)
{
	static uint32 count = 0;

	return ((uint64) (uint32) MyProcPid << 32) | ++count;
}

static int
key_pick(DbgateBudget *b, const DbgateLimits *l, TimestampTz now,
		 int64 now_ns, bool *overdue)
{
	uint64		mark = new_mark();
	int			best = -1;
	uint32		best_active = 0;
	int			blocked = -1;
	int64		blocked_due = 0;
	int			p;

	*overdue = false;
	/* 'lifo': the overdue first, longest first, any key (a prefix) */
	if (l->lifo && b->qlim.overtake_ms > 0)
	{
		int64		limit_us = (int64) b->qlim.overtake_ms * 1000;

		for (p = b->queue_head; p >= 0; p = proc_entry(p)->next)
		{
			DbgateProc *e = proc_entry(p);

			if (now - e->state_since < limit_us)
				break;
			if (state_of(e, now_ns) == DBGATE_DIM_TAKEN)
			{
				*overdue = true;
				return p;
			}
		}
	}

	/*
	 * Each key's candidate is the first of its waiters in the walk: from
	 * the head for 'fifo' (its longest waiter), from the tail for 'lifo'
	 * (its newest).  The fewest active wins; between equals the candidate
	 * that waited longest: the first met from the head, the last met from
	 * the tail.
	 */
	for (p = l->lifo ? b->queue_tail : b->queue_head; p >= 0;
		 p = l->lifo ? proc_entry(p)->prev : proc_entry(p)->next)
	{
		DbgateProc *e = proc_entry(p);
		int64		st;
		uint32		a;

		if (!first_of_key(e, mark))
			continue;
		st = state_of(e, now_ns);
		if (st != DBGATE_DIM_TAKEN)
		{
			if (st > 0 && (blocked < 0 || st < blocked_due))
			{
				blocked = p;
				blocked_due = st;
			}
			continue;
		}
		a = active_of(e);
		if (best < 0 || a < best_active || (l->lifo && a == best_active))
		{
			best = p;
			best_active = a;
		}
	}
	return best >= 0 ? best : blocked;
}

/*
 * A newcomer e of fair budget b finds a slot free while others wait: it
 * queues if a waiter could take the slot ahead of it ('lifo': only an
 * overdue one; otherwise one of a key with no more active statements than
 * e's, which comes first by the fewest active or, between equals, by its
 * wait).
 */
static bool
key_newcomer_waits(DbgateBudget *b, const DbgateLimits *l, DbgateProc *e,
				   TimestampTz now)
{
	int64		now_ns = dbgate_now_ns();
	uint32		mine = active_of(e);
	int			p;

	if (l->lifo)
	{
		bool		overdue;

		return key_pick(b, l, now, now_ns, &overdue) >= 0 && overdue;
	}
	for (p = b->queue_head; p >= 0; p = proc_entry(p)->next)
	{
		DbgateProc *w = proc_entry(p);

		if (active_of(w) <= mine && state_of(w, now_ns) == DBGATE_DIM_TAKEN)
			return true;
	}
	return false;
}

/* ----------
 * Install, statistics, shared memory
 * ----------
 */

static bool
key_install(DbgateBudget *b, const DbgateBudgetConf *conf,
			DbgateQueueLimits *q)
{
	int32		idx = budget_index(b);
	DbgateKeyLimits lim;
	bool		keyed;

	if (conf == NULL)
	{
		memset(&lim, 0, sizeof(lim));
		dbgate_keytab_set_budget(idx, b->incarnation, false, &lim);
		return false;
	}
	keyed = conf->key_by[0] != '\0';
	dbgate_keytab_conf_limits(conf, &lim);
	dbgate_keytab_set_budget(idx, b->incarnation, keyed, &lim);
	return keyed;
}

/* A key's own limits for the refresh (config_lock held by the install). */
static bool
own_limits(int32 budget, const char *key, int len, DbgateKeyLimits *lim)
{
	DbgateKeyLimitEntry kl;
	DbgateKeyLimits deflim;

	if (!dbgate_keylimit_lookup(budget, key, len, &kl))
		return false;
	dbgate_keytab_conf_limits(&budget_entry(budget)->conf, &deflim);
	dbgate_keytab_limits_of(&kl, &deflim, lim);
	return true;
}

static void
key_installed(void)
{
	dbgate_keytab_refresh(own_limits);
}

static void
key_reset_stats(DbgateBudget *b)
{
	dbgate_keytab_reset_stats(budget_index(b), b->incarnation);
}

const DbgateDimension dbgate_key_dimension = {
	.name = "key",
	.shmem_request = dbgate_keytab_shmem_request,
	.shmem_init = dbgate_keytab_shmem_init,
	.install = key_install,
	.take = key_take,
	.untake = key_untake,
	.due = key_due,
	.release = key_release,
	.reset_stats = key_reset_stats,
	.enter = key_enter,
	.enter_take = key_enter_take,
	.join = key_join,
	.unjoin = key_unjoin,
	.pick = key_pick,
	.newcomer_waits = key_newcomer_waits,
	.installed = key_installed,
	.explain = key_explain,
};
