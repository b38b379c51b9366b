/*-------------------------------------------------------------------------
 *
 * keytab.c
 *	  The table of live keys (1.3): a fixed number of fixed-size entries in
 *	  shared memory for the keys of all budgets with key_by together, their
 *	  overflow keys, and the rules that keep the table bounded without ever
 *	  resetting a key that still bounds anything.
 *
 * The entries
 * -----------
 * The table has three parts, laid out one after the other:
 *	  - the shared pool, dbgate.max_keys entries, for the keys of every
 *		budget with key_by;
 *	  - the reserved pool, dbgate.max_key_limits entries, for keys that have
 *		limits of their own (set_key_limit): there are never more such keys
 *		than entries here, so they never overflow;
 *	  - one overflow key per budget entry (dbgate.max_budgets of them),
 *		never freed: a budget's keys that find no room are counted there
 *		together, under the budget's key_* limits.
 * An entry of the pools is found through a hash of (budget index, key
 * bytes) whose buckets are split into DBGATE_KEY_PARTITIONS partitions,
 * each with an LWLock of the tranche "dbgate keys".
 *
 * Life of an entry
 * ----------------
 * A statement of a budget with key_by holds its key's entry from the gate
 * until it is done (dbgate_key_hold() or dbgate_key_pin(), then
 * dbgate_key_unhold(): 'holders'); the
 * hold is taken under the partition lock shared, so that nothing reclaims
 * the entry between the lookup and the count.  A key whose entry is not
 * there is made under the partition lock exclusive from a free entry.
 * An entry is *live* while it is held or its token bucket is not full again
 * (dbgate_key_is_live()); an entry that is not live bounds nothing, and is
 * reclaimed for another key only when the table needs room for one (a
 * clock sweep: keytab_sweep()): until then the same key finds it again,
 * with its statistics and 'since'.  So a key's counts and bucket are never
 * reset while they bound anything, and a key that comes and goes costs no
 * lock of a partition exclusive while the table has room.  An entry of a
 * budget that was dropped, or whose key_by was cleared, bounds nothing once
 * it is no longer held, whatever its bucket.
 *
 * Shares
 * ------
 * Each budget with key_by has a *share*: max_keys / (budgets with key_by),
 * kept for it whether it uses it or not (a live entry can never be taken
 * back, so a share lent to another budget could not be had again when its
 * budget's keys come).
 * 'owed' is the sum over those budgets of what they hold below their share
 * (max(0, share - held)), and a budget at or over its share takes a free
 * entry only while more than 'owed' are free, and reclaims only its own
 * entries that are not live: so a budget below its share always finds an
 * entry (a free one, or one that is not live), however many keys the
 * others make, and a flood of new keys in one budget goes to its own
 * overflow key, never into another budget's share.  'held', 'owed', the
 * free lists and the shares change under alloc_lock (a spinlock: a few
 * instructions, taken only when an entry is made or given back).
 *
 * Locks: a partition lock is taken alone (the sweep takes the lock of the
 * victim's partition while it holds none; the make takes its own after its
 * entry is allocated); alloc_lock is taken under no other lock or under a
 * partition lock, never the other way round.  The install's refresh
 * (dbgate_keytab_refresh()) takes each partition lock exclusive in turn,
 * under the install's own locks (config_lock exclusive).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "common/hashfn.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "storage/spin.h"

#include "keylimits.h"
#include "keytab.h"
#include "dimdefs.h"

/* Settings (dbgate.c defines them). */
int			dbgate_max_keys = 10000;

typedef struct KeytabShared
{
	int32		nplain;			/* the shared pool: [0, nplain) */
	int32		nlimited;		/* the reserved pool: [nplain, nplain + nlimited) */
	int32		nbudgets;		/* overflow keys: the rest */
	uint32		mask;			/* hash buckets - 1 (a power of 2) */
	LWLockPadded *locks;		/* DBGATE_KEY_PARTITIONS */
	int32	   *buckets;		/* first entry of each bucket, or -1 */

	/* the allocator: under alloc_lock */
	slock_t		alloc_lock;
	int32		free_plain;		/* free lists (through 'next'), -1: empty */
	int32		free_limited;
	int32		free_n;			/* entries on free_plain */
	int32		nkeyed;			/* budgets with key_by */
	int32		share;			/* nplain / nkeyed */
	int32		owed;			/* sum of max(0, share - held) of those */
	bool	   *keyed;			/* [nbudgets] */
	uint32	   *held_inc;		/* [nbudgets]: the incarnation held counts */
	int32	   *held;			/* [nbudgets]: shared-pool entries made for it */
	DbgateKeyLimits *deflim;	/* [nbudgets]: its key_* limits */

	/* the number of the next entry made (DbgateKey.made) */
	pg_atomic_uint64 makes;

	/* the sweep */
	pg_atomic_uint32 hand;
	pg_atomic_uint64 nothing_until_ns;	/* a full sweep found nothing */
} KeytabShared;

static KeytabShared *ksh;
DbgateKey  *dbgate_keys;

/* How long a sweep that found nothing spares the next ones (1 ms). */
#define KEYTAB_SWEEP_QUIET_NS INT64CONST(1000000)

static int32
keytab_total(void)
{
	return dbgate_max_keys + dbgate_max_key_limits + dbgate_max_budgets;
}

static uint32
keytab_buckets(void)
{
	uint32		n = 16;

	while (n < (uint32) (dbgate_max_keys + dbgate_max_key_limits) && n < (1U << 30))
		n <<= 1;
	return n;
}

static Size
keytab_shmem_size(void)
{
	Size		size = CACHELINEALIGN(sizeof(KeytabShared));
	Size		nb = (Size) dbgate_max_budgets;

	size = add_size(size, mul_size(keytab_total(), sizeof(DbgateKey)));
	size = add_size(size, mul_size(keytab_buckets(), sizeof(int32)));
	size = add_size(size, mul_size(nb, sizeof(bool)));
	size = add_size(size, mul_size(nb, sizeof(uint32)));
	size = add_size(size, mul_size(nb, sizeof(int32)));
	size = add_size(size, mul_size(nb, sizeof(DbgateKeyLimits)) + 8);
	return size;
}

void
dbgate_keytab_shmem_request(void)
{
	RequestAddinShmemSpace(keytab_shmem_size());
	RequestNamedLWLockTranche("dbgate keys", DBGATE_KEY_PARTITIONS);
}

/* A new segment: every pool entry free, every overflow key unused. */
void
dbgate_keytab_shmem_init(void)
{
	bool		found;

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	ksh = ShmemInitStruct("dbgate keys", keytab_shmem_size(), &found);
	if (!found)
	{
		char	   *base;
		int32		i;
		int32		n = keytab_total();

		memset(ksh, 0, keytab_shmem_size());
		ksh->nplain = dbgate_max_keys;
		ksh->nlimited = dbgate_max_key_limits;
		ksh->nbudgets = dbgate_max_budgets;
		ksh->mask = keytab_buckets() - 1;
		ksh->locks = GetNamedLWLockTranche("dbgate keys");
		base = (char *) ksh + CACHELINEALIGN(sizeof(KeytabShared));
		ksh->buckets = (int32 *) base;	/* first: 8-byte alignment kept below */
		base += mul_size(keytab_buckets(), sizeof(int32));
		base = (char *) TYPEALIGN(8, base);
		dbgate_keys = (DbgateKey *) base;
		base += mul_size(n, sizeof(DbgateKey));
		ksh->deflim = (DbgateKeyLimits *) base;
		base += mul_size(ksh->nbudgets, sizeof(DbgateKeyLimits));
		ksh->held = (int32 *) base;
		base += mul_size(ksh->nbudgets, sizeof(int32));
		ksh->held_inc = (uint32 *) base;
		base += mul_size(ksh->nbudgets, sizeof(uint32));
		ksh->keyed = (bool *) base;
		for (i = 0; i <= (int32) ksh->mask; i++)
			ksh->buckets[i] = -1;
		for (i = 0; i < n; i++)
		{
			DbgateKey  *e = &dbgate_keys[i];

			e->budget = -1;
			e->kind = DBGATE_KEY_FREE;
			/* a pool's entry is free (DEAD) until made; an overflow key is
			 * never reclaimed */
			pg_atomic_init_u32(&e->holders,
							   i < ksh->nplain + ksh->nlimited ? DBGATE_KEY_DEAD : 0);
			pg_atomic_init_u32(&e->active, 0);
			pg_atomic_init_u64(&e->rate_tat, 0);
			pg_atomic_init_u64(&e->admitted, 0);
			pg_atomic_init_u64(&e->rejected, 0);
			pg_atomic_init_u64(&e->rate_limited, 0);
			pg_atomic_init_u64(&e->holds, 0);
			if (i < ksh->nplain)
				e->next = (i + 1 < ksh->nplain) ? i + 1 : -1;
			else if (i < ksh->nplain + ksh->nlimited)
				e->next = (i + 1 < ksh->nplain + ksh->nlimited) ? i + 1 : -1;
			else
				e->next = -1;
		}
		ksh->free_plain = ksh->nplain > 0 ? 0 : -1;
		ksh->free_limited = ksh->nlimited > 0 ? ksh->nplain : -1;
		ksh->free_n = ksh->nplain;
		SpinLockInit(&ksh->alloc_lock);
		pg_atomic_init_u32(&ksh->hand, 0);
		pg_atomic_init_u64(&ksh->makes, 1);
		pg_atomic_init_u64(&ksh->nothing_until_ns, 0);
	}
	else
		dbgate_keys = (DbgateKey *) TYPEALIGN(8, (char *) ksh +
											  CACHELINEALIGN(sizeof(KeytabShared)) +
											  mul_size(keytab_buckets(), sizeof(int32)));
	LWLockRelease(AddinShmemInitLock);
}

int32
dbgate_keytab_entries(void)
{
	return ksh->nplain + ksh->nlimited + ksh->nbudgets;
}

/* ----------
 * Limits
 * ----------
 */

static void
rate_limits(double max_rate, int32 burst, DbgateKeyLimits *lim)
{
	lim->rate_interval_ns = 0;
	lim->rate_tolerance_ns = 0;
	if (max_rate > 0)
	{
		double		interval = 1e9 / max_rate;

		lim->rate_interval_ns = (int64) Max(interval, 1.0);
		lim->rate_tolerance_ns = (int64) (Max(burst, 1) - 1) *
			lim->rate_interval_ns;
	}
}

void
dbgate_keytab_conf_limits(const DbgateBudgetConf *conf, DbgateKeyLimits *lim)
{
	lim->max_active = conf->key_max_active;
	lim->max_queued = conf->key_max_queued;
	lim->max_rate = conf->key_max_rate;
	lim->rate_burst = conf->key_rate_burst;
	rate_limits(conf->key_max_rate, conf->key_rate_burst, lim);
}

void
dbgate_keytab_limits_of(const DbgateKeyLimitEntry *kl,
						const DbgateKeyLimits *deflim, DbgateKeyLimits *lim)
{
	lim->max_active = kl->max_active >= 0 ? kl->max_active : deflim->max_active;
	lim->max_queued = kl->max_queued >= 0 ? kl->max_queued : deflim->max_queued;
	lim->max_rate = kl->max_rate >= 0 ? kl->max_rate : deflim->max_rate;
	lim->rate_burst = kl->rate_burst >= 0 ? kl->rate_burst : deflim->rate_burst;
	rate_limits(lim->max_rate, lim->rate_burst, lim);
}

/* ----------
 * Keys
 * ----------
 */

int
dbgate_key_cut(const char *key, int len)
{
	if (len <= DBGATE_KEY_BYTES)
		return len;
	len = DBGATE_KEY_BYTES;
	/* back to the first byte of the character that would be cut */
	while (len > 0 && (((unsigned char) key[len]) & 0xC0) == 0x80)
		len--;
	return len;
}

static inline uint32
key_hash(int32 budget, const char *key, int len)
{
	return hash_combine(hash_bytes((const unsigned char *) key, len),
						murmurhash32((uint32) budget));
}

LWLock *
dbgate_key_partition_lock(uint32 hash)
{
	return &ksh->locks[(hash & ksh->mask) % DBGATE_KEY_PARTITIONS].lock;
}

static inline int32 *
bucket_of(uint32 hash)
{
	return &ksh->buckets[hash & ksh->mask];
}

/* The entry of the key in its partition (its lock held), or -1. */
static int32
keytab_lookup(int32 budget, uint32 incarnation, uint32 hash,
			  const char *key, int len)
{
	int32		k;

	for (k = *bucket_of(hash); k >= 0; k = dbgate_keys[k].next)
	{
		DbgateKey  *e = &dbgate_keys[k];

		if (e->hash == hash && e->budget == budget &&
			e->incarnation == incarnation && e->len == len &&
			memcmp(e->key, key, len) == 0)
			return k;
	}
	return -1;
}

static void
keytab_unlink(int32 k)
{
	int32	   *p = bucket_of(dbgate_keys[k].hash);

	while (*p != k)
	{
		Assert(*p >= 0);
		p = &dbgate_keys[*p].next;
	}
	*p = dbgate_keys[k].next;
	dbgate_keys[k].next = -1;
}

/* ----------
 * The allocator (alloc_lock held by the callers of these three)
 * ----------
 */

static inline int32
owed_of(int32 held)
{
	return Max(0, ksh->share - held);
}

/* Count delta entries of the shared pool for budget (index, incarnation). */
static void
held_add(int32 budget, uint32 incarnation, int32 delta)
{
	if (budget < 0 || ksh->held_inc[budget] != incarnation)
		return;					/* an entry of an earlier incarnation */
	if (ksh->keyed[budget])
		ksh->owed -= owed_of(ksh->held[budget]);
	ksh->held[budget] += delta;
	if (ksh->keyed[budget])
		ksh->owed += owed_of(ksh->held[budget]);
}

static void
shares_recompute(void)
{
	int32		b;

	ksh->nkeyed = 0;
	for (b = 0; b < ksh->nbudgets; b++)
		ksh->nkeyed += ksh->keyed[b] ? 1 : 0;
	ksh->share = ksh->nkeyed > 0 ? ksh->nplain / ksh->nkeyed : ksh->nplain;
	ksh->owed = 0;
	for (b = 0; b < ksh->nbudgets; b++)
		if (ksh->keyed[b])
			ksh->owed += owed_of(ksh->held[b]);
}

/* May budget take a free entry of the shared pool? */
static inline bool
may_take_free(int32 budget, uint32 incarnation)
{
	bool		counted = ksh->held_inc[budget] == incarnation &&
		ksh->keyed[budget];

	if (counted && ksh->held[budget] < ksh->share)
		return true;
	return ksh->free_n > ksh->owed;
}

/* ----------
 * Making an entry
 * ----------
 */

/*
 * Reclaim an entry of the pool [from, from + n) that is not live (of
 * 'budget' only, when own_only), for 'budget'.  Holds no lock on entry;
 * returns the entry, taken out of its chain and no longer anyone's, or -1.
 */
static int32
keytab_sweep(int32 from, int32 n, int32 budget, uint32 incarnation,
			 bool own_only, int64 now_ns)
{
	uint32		start;
	int32		i;

	if (n <= 0)
		return -1;
	if (!own_only &&
		(int64) pg_atomic_read_u64(&ksh->nothing_until_ns) > now_ns)
		return -1;
	start = pg_atomic_fetch_add_u32(&ksh->hand, 1);
	for (i = 0; i < n; i++)
	{
		int32		k = from + (int32) ((start + (uint32) i) % (uint32) n);
		DbgateKey  *e = &dbgate_keys[k];
		int32		ob = e->budget;
		uint32		oinc = e->incarnation;
		uint32		hash = e->hash;
		LWLock	   *lock;
		bool		stale;
		uint32		zero = 0;

		if (e->kind == DBGATE_KEY_FREE || ob < 0)
			continue;
		if (own_only && (ob != budget || oinc != incarnation))
			continue;
		if (pg_atomic_read_u32(&e->holders) != 0)
			continue;
		stale = budget_entry(ob)->incarnation != oinc || !ksh->keyed[ob];
		if (!stale && dbgate_key_is_live(e, now_ns))
			continue;
		lock = dbgate_key_partition_lock(hash);
		LWLockAcquire(lock, LW_EXCLUSIVE);
		/*
		 * Nobody finds it through the hash without this lock: look again;
		 * then no hold without the lock either (dbgate_key_pin()) once
		 * holders is DEAD.
		 */
		if (e->kind == DBGATE_KEY_FREE || e->budget != ob ||
			e->incarnation != oinc || e->hash != hash ||
			(!stale && dbgate_key_is_live(e, now_ns)) ||
			!pg_atomic_compare_exchange_u32(&e->holders, &zero,
											DBGATE_KEY_DEAD))
		{
			LWLockRelease(lock);
			continue;
		}
		keytab_unlink(k);
		e->kind = DBGATE_KEY_FREE;
		e->budget = -1;
		LWLockRelease(lock);
		if (k < ksh->nplain)
		{
			SpinLockAcquire(&ksh->alloc_lock);
			held_add(ob, oinc, -1);
			held_add(budget, incarnation, 1);
			SpinLockRelease(&ksh->alloc_lock);
		}
		return k;
	}
	if (!own_only)
		pg_atomic_write_u64(&ksh->nothing_until_ns,
							(uint64) (now_ns + KEYTAB_SWEEP_QUIET_NS));
	return -1;
}

/* A free entry for a key of budget, of the reserved pool if 'limited'. */
static int32
keytab_alloc(int32 budget, uint32 incarnation, bool limited, int64 now_ns)
{
	int32		k = -1;
	bool		own_only = false;

	SpinLockAcquire(&ksh->alloc_lock);
	if (limited)
	{
		k = ksh->free_limited;
		if (k >= 0)
			ksh->free_limited = dbgate_keys[k].next;
	}
	else if (may_take_free(budget, incarnation) && ksh->free_plain >= 0)
	{
		k = ksh->free_plain;
		ksh->free_plain = dbgate_keys[k].next;
		ksh->free_n--;
		held_add(budget, incarnation, 1);
	}
	else
		own_only = !(ksh->held_inc[budget] == incarnation &&
					 ksh->keyed[budget] &&
					 ksh->held[budget] < ksh->share);
	SpinLockRelease(&ksh->alloc_lock);
	if (k >= 0)
		return k;
	if (limited)
		return keytab_sweep(ksh->nplain, ksh->nlimited, budget, incarnation,
							false, now_ns);
	return keytab_sweep(0, ksh->nplain, budget, incarnation, own_only,
						now_ns);
}

/* Give back entry k, allocated for budget and never made visible. */
static void
keytab_free(int32 k, int32 budget, uint32 incarnation)
{
	DbgateKey  *e = &dbgate_keys[k];

	e->kind = DBGATE_KEY_FREE;
	e->budget = -1;
	pg_atomic_write_u32(&e->holders, DBGATE_KEY_DEAD);
	SpinLockAcquire(&ksh->alloc_lock);
	if (k < ksh->nplain)
	{
		e->next = ksh->free_plain;
		ksh->free_plain = k;
		ksh->free_n++;
		held_add(budget, incarnation, -1);
	}
	else
	{
		e->next = ksh->free_limited;
		ksh->free_limited = k;
	}
	SpinLockRelease(&ksh->alloc_lock);
}

static inline int32
overflow_of(int32 budget)
{
	return ksh->nplain + ksh->nlimited + budget;
}

/*
 * The limits of a key of budget (index, incarnation) with an entry of
 * set_key_limit: into *lim (its NULLs the budget's key_* values), true.
 * false: none (the budget's key_* limits apply).
 */
static bool
own_limits(int32 budget, uint32 incarnation, const char *key, int len,
		   DbgateKeyLimits *lim)
{
	DbgateKeyLimitEntry kl;
	bool		found;

	LWLockAcquire(dbgate_shared->config_lock, LW_SHARED);
	found = budget_entry(budget)->incarnation == incarnation &&
		dbgate_keylimit_lookup(budget, key, len, &kl);
	if (found)
		dbgate_keytab_limits_of(&kl, &ksh->deflim[budget], lim);
	LWLockRelease(dbgate_shared->config_lock);
	return found;
}

static int32
keytab_make(int32 budget, uint32 incarnation, uint32 hash, const char *key,
			int len, bool *overflowed)
{
	int64		now_ns = dbgate_now_ns();
	LWLock	   *lock = dbgate_key_partition_lock(hash);
	DbgateKeyLimits own;
	bool		limited = own_limits(budget, incarnation, key, len, &own);
	int32		k;
	int32		found;
	DbgateKey  *e;

	k = keytab_alloc(budget, incarnation, limited, now_ns);
	if (k < 0 && limited)
	{
		/* a key limit added while its old entry drains: the shared pool */
		limited = false;
		k = keytab_alloc(budget, incarnation, false, now_ns);
	}
	if (k < 0)
	{
		k = overflow_of(budget);
		pg_atomic_fetch_add_u32(&dbgate_keys[k].holders, 1);
		pg_atomic_fetch_add_u64(&dbgate_keys[k].holds, 1);
		*overflowed = true;
		return k;
	}
	LWLockAcquire(lock, LW_EXCLUSIVE);
	found = keytab_lookup(budget, incarnation, hash, key, len);
	if (found >= 0)
	{
		/* made by another backend meanwhile */
		pg_atomic_fetch_add_u32(&dbgate_keys[found].holders, 1);
		LWLockRelease(lock);
		keytab_free(k, budget, incarnation);
		return found;
	}
	e = &dbgate_keys[k];
	e->budget = budget;
	e->incarnation = incarnation;
	e->hash = hash;
	e->kind = limited ? DBGATE_KEY_LIMITED : DBGATE_KEY_PLAIN;
	e->len = (uint8) len;
	memcpy(e->key, key, len);
	e->key[len] = '\0';
	pg_atomic_write_u32(&e->active, 0);
	e->queued = 0;
	e->lim = limited ? own : ksh->deflim[budget];
	pg_atomic_write_u64(&e->rate_tat, 0);
	pg_atomic_write_u64(&e->admitted, 0);
	pg_atomic_write_u64(&e->rejected, 0);
	pg_atomic_write_u64(&e->rate_limited, 0);
	pg_atomic_write_u64(&e->holds, 0);
	e->since = GetCurrentTimestamp();
	e->made = pg_atomic_fetch_add_u64(&ksh->makes, 1);
	e->next = *bucket_of(hash);
	*bucket_of(hash) = k;
	pg_write_barrier();			/* identity first: dbgate_key_pin() */
	pg_atomic_write_u32(&e->holders, 1);
	LWLockRelease(lock);
	return k;
}

int32
dbgate_key_hold(int32 budget, uint32 incarnation, const char *key, int len,
				bool *overflowed)
{
	uint32		hash = key_hash(budget, key, len);
	LWLock	   *lock = dbgate_key_partition_lock(hash);
	int32		k;

	Assert(len <= DBGATE_KEY_BYTES);
	*overflowed = false;
	LWLockAcquire(lock, LW_SHARED);
	k = keytab_lookup(budget, incarnation, hash, key, len);
	if (k >= 0)
		pg_atomic_fetch_add_u32(&dbgate_keys[k].holders, 1);
	LWLockRelease(lock);
	if (k >= 0)
		return k;
	return keytab_make(budget, incarnation, hash, key, len, overflowed);
}

/* ----------
 * The install's side
 * ----------
 */

static bool
rate_differs(const DbgateKeyLimits *a, const DbgateKeyLimits *b)
{
	return a->rate_interval_ns != b->rate_interval_ns ||
		a->rate_tolerance_ns != b->rate_tolerance_ns;
}

void
dbgate_keytab_set_budget(int32 budget, uint32 incarnation, bool keyed,
						 const DbgateKeyLimits *deflim)
{
	DbgateKey  *ov = &dbgate_keys[overflow_of(budget)];
	static const DbgateKeyLimits none = {0};

	SpinLockAcquire(&ksh->alloc_lock);
	if (ksh->held_inc[budget] != incarnation)
	{
		ksh->held_inc[budget] = incarnation;
		ksh->held[budget] = 0;
	}
	ksh->keyed[budget] = keyed;
	ksh->deflim[budget] = keyed ? *deflim : none;
	shares_recompute();
	SpinLockRelease(&ksh->alloc_lock);

	/* the overflow key: made anew for a new incarnation */
	if (ov->budget != budget || ov->incarnation != incarnation)
	{
		ov->budget = budget;
		ov->incarnation = incarnation;
		ov->kind = DBGATE_KEY_OVERFLOW;
		ov->len = 0;
		ov->key[0] = '\0';
		/* (active and queued drain: the dropped budget's statements that
		 * still count there give them back when they are done) */
		ov->lim = ksh->deflim[budget];
		pg_atomic_write_u64(&ov->rate_tat, 0);
		pg_atomic_write_u64(&ov->admitted, 0);
		pg_atomic_write_u64(&ov->rejected, 0);
		pg_atomic_write_u64(&ov->rate_limited, 0);
		pg_atomic_write_u64(&ov->holds, 0);
		ov->since = GetCurrentTimestamp();
	}
	else
	{
		if (rate_differs(&ov->lim, &ksh->deflim[budget]))
			pg_atomic_write_u64(&ov->rate_tat, 0);
		ov->lim = ksh->deflim[budget];
	}
}

/*
 * After dbgate_keytab_set_budget() of every budget of an install: every
 * entry's limits are made those in force now (its own through
 * own_limits(), or its budget's key_* limits); a change of its rate fills
 * its bucket (SPEC).
 */
void
dbgate_keytab_refresh(DbgateKeyOwnLimits own_limits)
{
	int			p;

	for (p = 0; p < DBGATE_KEY_PARTITIONS; p++)
	{
		uint32		bkt;

		LWLockAcquire(&ksh->locks[p].lock, LW_EXCLUSIVE);
		for (bkt = (uint32) p; bkt <= ksh->mask; bkt += DBGATE_KEY_PARTITIONS)
		{
			int32		k;

			for (k = ksh->buckets[bkt]; k >= 0; k = dbgate_keys[k].next)
			{
				DbgateKey  *e = &dbgate_keys[k];
				DbgateKeyLimits lim;

				if (budget_entry(e->budget)->incarnation != e->incarnation ||
					!ksh->keyed[e->budget])
					continue;	/* drains; its limits stay as they were */
				if (own_limits == NULL ||
					!own_limits(e->budget, e->key, e->len, &lim))
					lim = ksh->deflim[e->budget];
				if (rate_differs(&e->lim, &lim))
					pg_atomic_write_u64(&e->rate_tat, 0);
				e->lim = lim;
			}
		}
		LWLockRelease(&ksh->locks[p].lock);
	}
}

/* ----------
 * Readers
 * ----------
 */

void
dbgate_keytab_count_live(int32 *live, int64 now_ns)
{
	int32		n = dbgate_keytab_entries();
	int32		k;

	memset(live, 0, sizeof(int32) * ksh->nbudgets);
	for (k = 0; k < n; k++)
	{
		DbgateKey  *e = &dbgate_keys[k];
		int32		b = e->budget;

		if (b < 0 || e->kind == DBGATE_KEY_OVERFLOW ||
			budget_entry(b)->incarnation != e->incarnation)
			continue;
		if (dbgate_key_is_live(e, now_ns))
			live[b]++;
	}
}

bool
dbgate_keytab_read(int32 k, DbgateKey *copy, int64 now_ns)
{
	DbgateKey  *e = &dbgate_keys[k];
	uint32		hash = e->hash;
	LWLock	   *lock = NULL;
	bool		ok;

	if (e->kind == DBGATE_KEY_FREE)
		return false;
	if (e->kind != DBGATE_KEY_OVERFLOW)
	{
		lock = dbgate_key_partition_lock(hash);
		LWLockAcquire(lock, LW_SHARED);
	}
	ok = e->kind != DBGATE_KEY_FREE && e->budget >= 0 &&
		(e->kind == DBGATE_KEY_OVERFLOW || e->hash == hash) &&
		budget_entry(e->budget)->incarnation == e->incarnation &&
		dbgate_key_is_live(e, now_ns);
	if (ok)
		memcpy(copy, e, sizeof(DbgateKey));
	if (lock)
		LWLockRelease(lock);
	return ok;
}

void
dbgate_keytab_reset_stats(int32 budget, uint32 incarnation)
{
	int32		n = dbgate_keytab_entries();
	TimestampTz now = GetCurrentTimestamp();
	int32		k;

	for (k = 0; k < n; k++)
	{
		DbgateKey  *e = &dbgate_keys[k];

		if (e->budget != budget || e->incarnation != incarnation)
			continue;
		pg_atomic_write_u64(&e->admitted, 0);
		pg_atomic_write_u64(&e->rejected, 0);
		pg_atomic_write_u64(&e->rate_limited, 0);
		pg_atomic_write_u64(&e->holds, 0);
		e->since = now;
	}
}

uint64
dbgate_keytab_overflowed(int32 budget, uint32 incarnation)
{
	DbgateKey  *ov = &dbgate_keys[overflow_of(budget)];

	if (ov->budget != budget || ov->incarnation != incarnation)
		return 0;
	return pg_atomic_read_u64(&ov->holds);
}
