/*-------------------------------------------------------------------------
 *
 * keytab.h
 *	  The table of live keys (keytab.c): one entry per key of a budget with
 *	  key_by that has statements active or queued, or a token bucket not yet
 *	  full again; a budget's overflow key; their counts, limits and buckets.
 *
 * A service below the admission files: it knows budgets only by index and
 * incarnation, and nothing of queues.  The key dimension (the admission
 * side of keys) takes and gives back its counts.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DBGATE_KEYTAB_H
#define DBGATE_KEYTAB_H

#include "port/atomics.h"
#include "utils/timestamp.h"

#include "keylimits.h"
#include "shmem.h"

/* Keys are compared on their first DBGATE_KEY_BYTES bytes (SPEC). */
#define DBGATE_KEY_BYTES 127

/* Partitions of the table's hash, each with a lock of its own. */
#define DBGATE_KEY_PARTITIONS 16

/*
 * The limits in force for one key: its own (set_key_limit) or the
 * budget's key_* fields.  0: no limit but the budget's (rate_interval_ns
 * 0: no rate).
 */
typedef struct DbgateKeyLimits
{
	int32		max_active;
	int32		max_queued;
	double		max_rate;		/* as configured (the views) */
	int32		rate_burst;
	int64		rate_interval_ns;	/* 10^9 / max_rate */
	int64		rate_tolerance_ns;	/* (rate_burst - 1) x rate_interval_ns */
} DbgateKeyLimits;

/* A budget's key_* limits; a key's own (set_key_limit) over them. */
extern void dbgate_keytab_conf_limits(const DbgateBudgetConf *conf,
									  DbgateKeyLimits *lim);
extern void dbgate_keytab_limits_of(const DbgateKeyLimitEntry *kl,
									const DbgateKeyLimits *deflim,
									DbgateKeyLimits *lim);

/* DbgateKey.kind */
#define DBGATE_KEY_FREE		0
#define DBGATE_KEY_PLAIN	1	/* of the budgets' shared pool */
#define DBGATE_KEY_LIMITED	2	/* a key with a set_key_limit entry: of the
								 * pool reserved beside max_key_limits */
#define DBGATE_KEY_OVERFLOW 3	/* the budget's overflow key (one per budget
								 * entry, never freed) */

/*
 * An entry (keytab.c has the rules).  Identity (budget, incarnation, hash,
 * the key, next) changes only under its partition's lock exclusive, and
 * only while holders is 0.  holders counts the statements that hold the entry
 * (looked up, admitted or queued, not yet done): taken under the
 * partition lock shared (so that the entry cannot be reclaimed meanwhile)
 * and given back without a lock.  active is taken by compare-and-swap
 * against lim.max_active; queued changes under the tree lock of the
 * budget (a budget with key_by has no children).  lim changes under the
 * partition lock exclusive and is read as aligned fields.
 */
typedef struct DbgateKey
{
	int32		budget;			/* budget index; -1: free */
	uint32		incarnation;	/* of that budget when the entry was made */
	uint32		hash;
	int32		next;			/* next of its hash chain, or of a free list */
	uint8		kind;			/* DBGATE_KEY_* */
	uint8		len;			/* bytes of key */
	char		key[DBGATE_KEY_BYTES + 1];
	pg_atomic_uint32 holders;
	pg_atomic_uint32 active;
	int32		queued;
	DbgateKeyLimits lim;
	pg_atomic_uint64 rate_tat;	/* its token bucket (rate.c's GCRA); 0: full */
	pg_atomic_uint64 admitted;
	pg_atomic_uint64 rejected;
	pg_atomic_uint64 rate_limited;
	pg_atomic_uint64 holds;		/* the overflow key: statements counted
								 * there (keys_overflowed) */
	TimestampTz since;			/* when the entry was made */
	uint64		pick_mark;		/* the grant step's scratch (keydim.c):
								 * tree lock */
	uint64		made;			/* a number no other making of any entry
								 * has (dbgate_key_pin()) */
} DbgateKey;

/* dbgate.max_keys (defined here, registered by dbgate.c) and its bound. */
extern PGDLLIMPORT int dbgate_max_keys;
#define DBGATE_MAX_KEYS_LIMIT 10000000

extern void dbgate_keytab_shmem_request(void);
extern void dbgate_keytab_shmem_init(void);

/* Entry k (0 <= k < dbgate_keytab_entries()). */
extern DBGATE_HIDDEN DbgateKey *dbgate_keys;

static inline DbgateKey *
key_entry(int32 k)
{
	return &dbgate_keys[k];
}

extern int32 dbgate_keytab_entries(void);

/*
 * A key's bytes cut as SPEC says: at most DBGATE_KEY_BYTES, at the last
 * whole UTF-8 character within them.  Returns the length kept.
 */
extern int	dbgate_key_cut(const char *key, int len);

/*
 * The entry of a key of budget (index, incarnation), found or made, held
 * for the caller (holders + 1): the budget's overflow key when the table has
 * no room for it (*overflowed set).  A new entry has the key's own limits
 * (set_key_limit: looked up under config_lock, so the caller holds no
 * lock of dbgate's) or the budget's key_* limits.  Never fails.
 */
extern int32 dbgate_key_hold(int32 budget, uint32 incarnation,
							 const char *key, int len, bool *overflowed);

/*
 * 'holders' of a pool entry that is free or being reclaimed: no hold can
 * be taken (dbgate_key_pin()).  Set by compare-and-swap from 0 under the
 * partition lock exclusive (the sweep), written back to 1 by the make once
 * the entry's identity is written.
 */
#define DBGATE_KEY_DEAD		0x80000000U

/*
 * A hold on entry e if it is still the one that was made as 'made' -- a
 * backend's cache of its last key's entry -- without any lock: holders
 * taken by compare-and-swap unless DEAD, then 'made' compared (an entry
 * is made anew only from DEAD, its identity and 'made' before its
 * holders).  false: nothing held (look the key up with dbgate_key_hold()).
 */
static inline bool
dbgate_key_pin(DbgateKey *e, uint64 made)
{
	uint32		old = pg_atomic_read_u32(&e->holders);

	do
	{
		if (old & DBGATE_KEY_DEAD)
			return false;
	} while (!pg_atomic_compare_exchange_u32(&e->holders, &old, old + 1));
	pg_read_barrier();
	if (e->made == made)
		return true;
	pg_atomic_fetch_sub_u32(&e->holders, 1);
	return false;
}

/* Give back a hold of dbgate_key_hold() or dbgate_key_pin(). */
static inline void
dbgate_key_unhold(DbgateKey *e)
{
	pg_atomic_fetch_sub_u32(&e->holders, 1);
}

/*
 * Count a statement active in entry e if its key has room (or 'force'):
 * returns whether it had room (with 'force' it is counted either way).
 */
static inline bool
dbgate_key_take_active(DbgateKey *e, bool force)
{
	uint32		old = pg_atomic_read_u32(&e->active);
	int32		max = e->lim.max_active;

	for (;;)
	{
		bool		room = (max <= 0 || old < (uint32) max);

		if (!room && !force)
			return false;
		if (pg_atomic_compare_exchange_u32(&e->active, &old, old + 1))
			return room;
	}
}

/* Key k's active statements (the views). */
static inline uint32
dbgate_key_active(int32 k)
{
	return pg_atomic_read_u32(&key_entry(k)->active);
}

static inline void
dbgate_key_untake_active(DbgateKey *e)
{
	pg_atomic_fetch_sub_u32(&e->active, 1);
}

/*
 * The install's side (under config_lock exclusive): each budget entry's
 * keyed state, then one refresh of every entry's limits.  own_limits()
 * answers whether a key has limits of its own, and which.
 */
typedef bool (*DbgateKeyOwnLimits) (int32 budget, const char *key, int len,
									DbgateKeyLimits *lim);
extern void dbgate_keytab_set_budget(int32 budget, uint32 incarnation,
									 bool keyed,
									 const DbgateKeyLimits *deflim);
extern void dbgate_keytab_refresh(DbgateKeyOwnLimits own_limits);

/* Whether entry e is live at now_ns: held, or its bucket not yet full. */
static inline bool
dbgate_key_is_live(DbgateKey *e, int64 now_ns)
{
	uint32		h;

	if (e->kind == DBGATE_KEY_FREE)
		return false;
	h = pg_atomic_read_u32(&e->holders);
	if (h != 0 && h != DBGATE_KEY_DEAD)
		return true;
	return e->lim.rate_interval_ns > 0 &&
		(int64) pg_atomic_read_u64(&e->rate_tat) > now_ns;
}

/* The partition lock of a hash (keytab.c's readers and the sweep). */
extern LWLock *dbgate_key_partition_lock(uint32 hash);

/* Readers: live keys per budget index ([max_budgets]); one entry copied
 * out if it is live (the view). */
extern void dbgate_keytab_count_live(int32 *live, int64 now_ns);
extern bool dbgate_keytab_read(int32 k, DbgateKey *copy, int64 now_ns);

/* Statements of budget (index, incarnation) counted under its overflow
 * key since its statistics were reset (dbgate.status keys_overflowed). */
extern uint64 dbgate_keytab_overflowed(int32 budget, uint32 incarnation);

/* Reset the statistics of budget b's entries (reset_stats). */
extern void dbgate_keytab_reset_stats(int32 budget, uint32 incarnation);

#endif							/* DBGATE_KEYTAB_H */
