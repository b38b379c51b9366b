/*-------------------------------------------------------------------------
 *
 * quarantine.c
 *	  The quarantine table (1.3): queries held back in a budget after they
 *	  ran away, and the SQL functions and view of it.
 *
 * An entry is (budget index and incarnation, database, query id) with the
 * time it ends ('until'), how many runaways made or extended it, how many
 * statements arrived while it was live ('hits', 'last_hit') and the first
 * DBGATE_QUARANTINE_TEXT bytes of the text of the statement that ran away.
 * Entries come from two places:
 *	  - the runaway worker (runaway.c), for a runaway of a budget with
 *		quarantine > 0 and a query id other than 0: the entry is made, or
 *		its 'until' moved on to the runaway's time + quarantine.  The text is
 *		the backend's current activity as the worker reads it (moments after
 *		the runaway, while the statement still runs, unless it was canceled
 *		first: then it may already be the next statement's);
 *	  - quarantine_add(), for a committed budget without children: 'until'
 *		is now + duration, with no text.
 * An entry is live while 'until' is ahead and its budget still has the
 * incarnation it was made for: dropping a budget (also dropping and
 * creating the name again) ends its entries at the commit, since the
 * lookup and the view compare incarnations.  The worker frees entries that
 * ended about once a second (dbgate_quarantine_tick()).  When the table is
 * full, a new entry takes the place of the one that would end first.
 *
 * The statement path
 * ------------------
 * A budget's quarantine_n counts its live entries (written under the lock
 * below, brought up to date by every change and by the tick).  The
 * classification caches whether it was non-zero (DbgateLookup.quarantine),
 * and the generation is bumped whenever a budget's count goes from 0 or to
 * 0, so a budget without entries costs its statements nothing: no lock, no
 * lookup.  For a budget with entries, a statement that would take a slot
 * (not one under a slot already held) is looked up by its query id under
 * the lock shared (one bucket's chain), before the min_cost bypass and
 * before the gate.  An entry of its query that had not ended when the
 * statement started is compared with the clock, which is read only then
 * (a statement of a DO block or a procedure may start long after the
 * block's start, which is GetCurrentStatementStartTimestamp()'s, and the
 * worker frees an ended entry only at its next tick).  On a hit the
 * statement is counted in the entry's 'hits' and the budget's 'quarantined',
 * and refused with 53000 when the budget's runaway_action is 'cancel'
 * (never in shadow mode); with 'log' it goes on to the gate as usual;
 * with 'demote' it is gated by the budget's runaway_budget instead, and
 * counts as moved there (demote.c).
 *
 * Query ids are those PostgreSQL computes for pg_stat_statements, computed
 * for the statements of budgets with runaway_after or quarantine entries
 * only, where PostgreSQL computes none (queryid.c).  A statement's id is
 * dbgate_statement_queryid()'s, on both sides: the runaway that makes the
 * entry and the repeat that is looked up (a cursor's FETCH runs under its
 * DECLARE's id, which is what the DECLARE of a repeat is looked up by).
 * With compute_query_id = off they are 0 and nothing is quarantined.
 *
 * Persistence: entries are per server (a standby keeps its own).  At a
 * clean shutdown the worker writes the live entries to "dbgate.quarantine"
 * in the data directory (the budget by name); at its start it reads them
 * back for the budgets of those names and removes the file, so that a
 * crash restart (which writes nothing) starts with none.
 *
 * Locking: quarantine_lock (DbgateShared, shmem.h) protects the entries' keys,
 * 'until', 'runaways' and text, and the budgets' quarantine_n; 'hits' and
 * 'last_hit' are atomics written under the lock shared.  Lock order:
 * config_lock before quarantine_lock; no budget lock is taken with it.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <unistd.h>

#include "access/xact.h"
#include "commands/dbcommands.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "port/pg_crc32c.h"
#include "storage/fd.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "utils/backend_status.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"
#include "mb/pg_wchar.h"

#include "compat.h"				/* PG_FUNCTION_INFO_V1 exports on 15 too */
#include "demote.h"
#include "fields.h"
#include "quarantine.h"
#include "queryid.h"
#include "shmem.h"

PG_FUNCTION_INFO_V1(dbgate_quarantine_add);
PG_FUNCTION_INFO_V1(dbgate_quarantine_remove);
PG_FUNCTION_INFO_V1(dbgate_quarantine_view);

#define QUARANTINE_FILE		"dbgate.quarantine"
#define QUARANTINE_TMPFILE	"dbgate.quarantine.tmp"
#define QUARANTINE_MAGIC	0x44425141	/* "DBQA" */
#define QUARANTINE_VERSION	1

/* What the file holds of an entry, followed by query_len bytes of text. */
typedef struct QuarantineFileEntry
{
	char		budget[NAMEDATALEN];
	Oid			dbid;
	int32		query_len;
	uint64		queryid;
	TimestampTz until;
	uint64		runaways;
	uint64		hits;
	TimestampTz last_hit;
} QuarantineFileEntry;

typedef struct QuarantineFileHeader
{
	uint32		magic;
	uint32		version;
	uint32		count;
	uint32		pad;
} QuarantineFileHeader;

/* The table and its buckets (quarantine.h) */
static DbgateQuarantineShared *qsh = NULL;

/* ----------
 * Shared memory
 * ----------
 */

/* Hash buckets of the quarantine table: a power of 2, at least its size. */
static Size
quarantine_buckets(void)
{
	Size		n = 1;

	while (n < (Size) dbgate_max_quarantine)
		n <<= 1;
	return n;
}

static Size
quarantine_shmem_size(void)
{
	Size		size;

	size = CACHELINEALIGN(sizeof(DbgateQuarantineShared));
	size = add_size(size, mul_size(dbgate_max_quarantine,
								   sizeof(DbgateQuarantineEntry)));
	size = add_size(size, mul_size(quarantine_buckets(), sizeof(int32)));
	return size;
}

void
dbgate_quarantine_shmem_request(void)
{
	RequestAddinShmemSpace(quarantine_shmem_size());
}

/* Every entry free (a new segment: server start, crash restart). */
void
dbgate_quarantine_shmem_init(void)
{
	bool		found;
	char	   *base;

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	qsh = ShmemInitStruct("dbgate quarantine", quarantine_shmem_size(),
						  &found);
	if (!found)
	{
		int			q;

		memset(qsh, 0, quarantine_shmem_size());
		qsh->max = dbgate_max_quarantine;
		base = (char *) qsh + CACHELINEALIGN(sizeof(DbgateQuarantineShared));
		qsh->entries = (DbgateQuarantineEntry *) base;
		base += mul_size(qsh->max, sizeof(DbgateQuarantineEntry));
		qsh->buckets = (int32 *) base;
		qsh->mask = (uint32) quarantine_buckets() - 1;
		for (q = 0; q < qsh->max; q++)
		{
			qsh->entries[q].next = -1;
			pg_atomic_init_u64(&qsh->entries[q].hits, 0);
			pg_atomic_init_u64(&qsh->entries[q].last_hit, 0);
		}
		for (q = 0; q <= (int) qsh->mask; q++)
			qsh->buckets[q] = -1;
	}
	LWLockRelease(AddinShmemInitLock);
}

/* ----------
 * The table
 * ----------
 */

/* Is entry e live at 'now' (its budget still the incarnation it was made for)? */
static inline bool
entry_live(const DbgateQuarantineEntry *e, TimestampTz now)
{
	const DbgateBudget *b;

	if (!e->in_use || e->until <= now)
		return false;
	b = &dbgate_shared->budgets[e->budget].d;
	return b->in_use && b->incarnation == e->incarnation;
}

static inline uint32
key_bucket(int budget, Oid dbid, uint64 queryid)
{
	/* query ids are hashes already */
	return ((uint32) queryid ^ (uint32) (queryid >> 32) ^ dbid ^
			((uint32) budget * 0x9E3779B1)) & qsh->mask;
}

/* The entry of this key, or -1.  Lock held. */
static int
find_entry(int budget, uint32 incarnation, Oid dbid, uint64 queryid)
{
	int			i;

	for (i = qsh->buckets[key_bucket(budget, dbid, queryid)];
		 i >= 0; i = qsh->entries[i].next)
	{
		DbgateQuarantineEntry *e = &qsh->entries[i];

		if (e->queryid == queryid && e->budget == budget &&
			e->incarnation == incarnation && e->dbid == dbid)
			return i;
	}
	return -1;
}

/* Free entry i (in use): out of its bucket.  Lock held exclusive. */
static void
free_entry(int i)
{
	DbgateQuarantineEntry *e = &qsh->entries[i];
	int32	   *link = &qsh->buckets[key_bucket(e->budget, e->dbid,
														   e->queryid)];

	Assert(e->in_use);
	while (*link != i)
	{
		Assert(*link >= 0);
		link = &qsh->entries[*link].next;
	}
	*link = e->next;
	e->next = -1;
	e->in_use = false;
}

/*
 * A place for a new entry, freed: a free one, else one that is no longer
 * live, else the one that would end first.  Lock held exclusive.
 */
static int
place_for_entry(TimestampTz now)
{
	int			victim = -1;
	int			i;

	for (i = 0; i < qsh->max; i++)
	{
		DbgateQuarantineEntry *e = &qsh->entries[i];

		if (!e->in_use)
			return i;
		if (!entry_live(e, now))
		{
			free_entry(i);
			return i;
		}
		if (victim < 0 || e->until < qsh->entries[victim].until)
			victim = i;
	}
	if (victim >= 0)
		free_entry(victim);
	return victim;
}

/* Make entry i anew for this key.  Lock held exclusive. */
static void
fill_entry(int i, int budget, uint32 incarnation, Oid dbid, uint64 queryid,
		   TimestampTz until, const char *query, int query_len)
{
	DbgateQuarantineEntry *e = &qsh->entries[i];
	int32	   *head = &qsh->buckets[key_bucket(budget, dbid, queryid)];

	Assert(!e->in_use);
	e->in_use = true;
	e->next = *head;
	*head = i;
	e->budget = budget;
	e->incarnation = incarnation;
	e->dbid = dbid;
	e->queryid = queryid;
	e->until = until;
	e->runaways = 0;
	pg_atomic_write_u64(&e->hits, 0);
	pg_atomic_write_u64(&e->last_hit, 0);
	e->query_len = -1;
	if (query != NULL)
	{
		Assert(query_len >= 0 && query_len <= DBGATE_QUARANTINE_TEXT);
		memcpy(e->query, query, query_len);
		e->query_len = query_len;
	}
}

/*
 * Free the entries that are no longer live and count each budget's live
 * ones; bump the generation when a budget's count went from or to 0, so
 * that backends classify again and see whether to look their statements
 * up.  Lock held exclusive.
 */
static void
recount(TimestampTz now)
{
	DbgateShared *sh = dbgate_shared;
	uint32	   *n = palloc0(sizeof(uint32) * sh->max_budgets);
	bool		flip = false;
	int			i;

	for (i = 0; i < qsh->max; i++)
	{
		DbgateQuarantineEntry *e = &qsh->entries[i];

		if (!e->in_use)
			continue;
		if (!entry_live(e, now))
			free_entry(i);
		else
			n[e->budget]++;
	}
	for (i = 0; i < sh->max_budgets; i++)
	{
		pg_atomic_uint32 *c = &sh->budgets[i].d.quarantine_n;
		uint32		old = pg_atomic_read_u32(c);

		if (old != n[i])
		{
			pg_atomic_write_u32(c, n[i]);
			if ((old == 0) != (n[i] == 0))
				flip = true;
		}
	}
	pfree(n);
	if (flip)
		pg_atomic_fetch_add_u64(&sh->generation, 1);
}

/*
 * The length of the first DBGATE_QUARANTINE_TEXT bytes of s that ends on a
 * character boundary (in UTF-8; other encodings may lose a character more).
 */
static int
clip_text(const char *s)
{
	int			len = strlen(s);

	if (len <= DBGATE_QUARANTINE_TEXT)
		return len;
	len = DBGATE_QUARANTINE_TEXT;
	while (len > 0 && (((unsigned char) s[len]) & 0xC0) == 0x80)
		len--;
	return len;
}

/* ----------
 * The runaway worker's side
 * ----------
 */

void
dbgate_quarantine_note_runaway(int budget, uint32 incarnation,
							   int32 quarantine_ms, Oid dbid, uint64 queryid,
							   TimestampTz at, int pid)
{
	DbgateShared *sh = dbgate_shared;
	TimestampTz until = TimestampTzPlusMilliseconds(at, quarantine_ms);
	TimestampTz now = GetCurrentTimestamp();
	const char *text = NULL;
	int			i;

	if (qsh->max == 0 || queryid == 0)
		return;

	/* the statement's text, as the backend shows it (outside the lock) */
	if (pid != 0)
	{
		text = pgstat_get_backend_current_activity(pid, false);
		if (text != NULL && text[0] == '<')
			text = NULL;		/* "<command string not enabled>" and such */
	}

	LWLockAcquire(sh->quarantine_lock, LW_EXCLUSIVE);
	i = find_entry(budget, incarnation, dbid, queryid);
	if (i < 0)
	{
		i = place_for_entry(now);
		if (i >= 0)
			fill_entry(i, budget, incarnation, dbid, queryid, until,
					   text, text ? clip_text(text) : 0);
	}
	else if (qsh->entries[i].until < until)
		qsh->entries[i].until = until;
	if (i >= 0)
		qsh->entries[i].runaways++;
	recount(now);
	LWLockRelease(sh->quarantine_lock);
}

void
dbgate_quarantine_tick(void)
{
	DbgateShared *sh = dbgate_shared;
	TimestampTz now;
	bool		any = false;
	int			i;

	if (qsh->max == 0)
		return;
	now = GetCurrentTimestamp();
	/* nothing to do (the common case): no lock */
	for (i = 0; i < qsh->max && !any; i++)
		any = qsh->entries[i].in_use;
	for (i = 0; i < sh->max_budgets && !any; i++)
		any = (pg_atomic_read_u32(&sh->budgets[i].d.quarantine_n) != 0);
	if (!any)
		return;
	LWLockAcquire(sh->quarantine_lock, LW_EXCLUSIVE);
	recount(now);
	LWLockRelease(sh->quarantine_lock);
}

/*
 * The live entries into the file (at a clean shutdown).  Failures are
 * logged; the entries are then lost, as after a crash.
 */
void
dbgate_quarantine_save(void)
{
	DbgateShared *sh = dbgate_shared;
	TimestampTz now = GetCurrentTimestamp();
	QuarantineFileHeader h;
	StringInfoData buf;
	pg_crc32c	crc;
	FILE	   *f;
	int			i;

	if (qsh->max == 0)
		return;
	initStringInfo(&buf);
	memset(&h, 0, sizeof(h));
	h.magic = QUARANTINE_MAGIC;
	h.version = QUARANTINE_VERSION;
	appendBinaryStringInfo(&buf, (char *) &h, sizeof(h));

	LWLockAcquire(sh->config_lock, LW_SHARED);
	LWLockAcquire(sh->quarantine_lock, LW_SHARED);
	for (i = 0; i < qsh->max; i++)
	{
		DbgateQuarantineEntry *e = &qsh->entries[i];
		QuarantineFileEntry fe;

		if (!entry_live(e, now))
			continue;
		memset(&fe, 0, sizeof(fe));
		strlcpy(fe.budget, sh->budgets[e->budget].d.conf.name, NAMEDATALEN);
		fe.dbid = e->dbid;
		fe.query_len = e->query_len;
		fe.queryid = e->queryid;
		fe.until = e->until;
		fe.runaways = e->runaways;
		fe.hits = pg_atomic_read_u64(&e->hits);
		fe.last_hit = (TimestampTz) pg_atomic_read_u64(&e->last_hit);
		appendBinaryStringInfo(&buf, (char *) &fe, sizeof(fe));
		if (e->query_len > 0)
			appendBinaryStringInfo(&buf, e->query, e->query_len);
		((QuarantineFileHeader *) buf.data)->count++;
	}
	LWLockRelease(sh->quarantine_lock);
	LWLockRelease(sh->config_lock);

	if (((QuarantineFileHeader *) buf.data)->count == 0)
	{
		pfree(buf.data);
		return;
	}
	INIT_CRC32C(crc);
	COMP_CRC32C(crc, buf.data, buf.len);
	FIN_CRC32C(crc);

	f = AllocateFile(QUARANTINE_TMPFILE, PG_BINARY_W);
	if (f == NULL ||
		fwrite(buf.data, 1, buf.len, f) != (size_t) buf.len ||
		fwrite(&crc, sizeof(crc), 1, f) != 1 ||
		fflush(f) != 0 ||
		pg_fsync(fileno(f)) != 0)
	{
		ereport(LOG,
				(errcode_for_file_access(),
				 errmsg("could not write file \"%s\": %m", QUARANTINE_TMPFILE),
				 errdetail("The quarantined queries are not kept across the restart.")));
		if (f != NULL)
			FreeFile(f);
		unlink(QUARANTINE_TMPFILE);
		pfree(buf.data);
		return;
	}
	FreeFile(f);
	(void) durable_rename(QUARANTINE_TMPFILE, QUARANTINE_FILE, LOG);
	pfree(buf.data);
}

/* The file's entries back into the table (the worker's start), then no file. */
void
dbgate_quarantine_load(void)
{
	DbgateShared *sh = dbgate_shared;
	TimestampTz now = GetCurrentTimestamp();
	QuarantineFileHeader h;
	char	   *data;
	long		len;
	long		pos;
	pg_crc32c	crc;
	FILE	   *f;
	uint32		k;
	uint32		loaded = 0;

	f = AllocateFile(QUARANTINE_FILE, PG_BINARY_R);
	if (f == NULL)
		return;					/* none: a crash, or nothing was kept */
	if (fseek(f, 0, SEEK_END) != 0 || (len = ftell(f)) < 0 ||
		fseek(f, 0, SEEK_SET) != 0)
		len = -1;
	data = len > 0 ? palloc(len) : NULL;
	if (len < (long) (sizeof(h) + sizeof(crc)) ||
		fread(data, 1, len, f) != (size_t) len)
		len = -1;
	FreeFile(f);
	if (len > 0)
	{
		INIT_CRC32C(crc);
		COMP_CRC32C(crc, data, len - sizeof(crc));
		FIN_CRC32C(crc);
		memcpy(&h, data, sizeof(h));
		if (!EQ_CRC32C(crc, *(pg_crc32c *) (data + len - sizeof(crc))) ||
			h.magic != QUARANTINE_MAGIC || h.version != QUARANTINE_VERSION)
			len = -1;
	}
	if (len <= 0)
	{
		ereport(LOG,
				(errmsg("file \"%s\" is not a quarantine table of this dbgate: ignored",
						QUARANTINE_FILE)));
		unlink(QUARANTINE_FILE);
		return;
	}

	pos = sizeof(h);
	LWLockAcquire(sh->config_lock, LW_SHARED);
	LWLockAcquire(sh->quarantine_lock, LW_EXCLUSIVE);
	for (k = 0; k < h.count; k++)
	{
		QuarantineFileEntry fe;
		int			budget;
		uint32		inc;
		int			i;

		if (pos + (long) sizeof(fe) > len - (long) sizeof(crc))
			break;
		memcpy(&fe, data + pos, sizeof(fe));
		pos += sizeof(fe);
		if (fe.query_len > DBGATE_QUARANTINE_TEXT ||
			pos + Max(fe.query_len, 0) > len - (long) sizeof(crc))
			break;
		fe.budget[NAMEDATALEN - 1] = '\0';
		budget = dbgate_find_budget(fe.budget);
		if (budget >= 0 && fe.until > now && fe.queryid != 0 &&
			sh->budgets[budget].d.first_child < 0)
		{
			inc = sh->budgets[budget].d.incarnation;
			i = find_entry(budget, inc, fe.dbid, fe.queryid);
			if (i < 0)
			{
				i = place_for_entry(now);
				if (i >= 0)
					fill_entry(i, budget, inc, fe.dbid, fe.queryid, fe.until,
							   fe.query_len > 0 ? data + pos : NULL,
							   Max(fe.query_len, 0));
			}
			if (i >= 0)
			{
				DbgateQuarantineEntry *e = &qsh->entries[i];

				e->until = Max(e->until, fe.until);
				e->runaways = Max(e->runaways, fe.runaways);
				if (pg_atomic_read_u64(&e->hits) < fe.hits)
					pg_atomic_write_u64(&e->hits, fe.hits);
				if ((TimestampTz) pg_atomic_read_u64(&e->last_hit) < fe.last_hit)
					pg_atomic_write_u64(&e->last_hit, (uint64) fe.last_hit);
				loaded++;
			}
		}
		pos += Max(fe.query_len, 0);
	}
	recount(now);
	LWLockRelease(sh->quarantine_lock);
	LWLockRelease(sh->config_lock);
	pfree(data);
	unlink(QUARANTINE_FILE);
	if (loaded > 0)
		ereport(LOG,
				(errmsg("dbgate: %u quarantined queries kept across the restart",
						loaded)));
}

/* ----------
 * The statement path
 * ----------
 */

const DbgateLookup *
dbgate_quarantine_check(const DbgateLookup *lk, const QueryDesc *queryDesc,
						DbgateLookup *target)
{
	DbgateShared *sh = dbgate_shared;
	uint64		queryid = dbgate_statement_queryid(dbgate_command_queryid,
												   queryDesc->plannedstmt);
	TimestampTz start;
	TimestampTz now = 0;
	TimestampTz until = 0;
	DbgateBudget *b;
	DbgateLimits lim;
	bool		hit = false;
	int			i;

	if (queryid == 0 || qsh->max == 0)
		return lk;
	/* an entry that had not ended at the statement's start: and now? */
	start = GetCurrentStatementStartTimestamp();
	LWLockAcquire(sh->quarantine_lock, LW_SHARED);
	i = find_entry(lk->budget, lk->incarnation, MyDatabaseId, queryid);
	if (i >= 0 && qsh->entries[i].until > start &&
		qsh->entries[i].until > (now = GetCurrentTimestamp()))
	{
		DbgateQuarantineEntry *e = &qsh->entries[i];

		hit = true;
		until = e->until;
		pg_atomic_fetch_add_u64(&e->hits, 1);
		pg_atomic_write_u64(&e->last_hit, (uint64) now);
	}
	LWLockRelease(sh->quarantine_lock);
	if (!hit)
		return lk;

	b = &sh->budgets[lk->budget].d;
	pg_atomic_fetch_add_u64(&b->quarantined, 1);
	dbgate_read_limits(b, &lim);
	if (!lim.enforce)
		return lk;				/* shadow: only counted */
	if (lim.runaway_cancel)
	{
		char		name[NAMEDATALEN];

		/* a name, for the message only */
		memcpy(name, b->conf.name, NAMEDATALEN);
		name[NAMEDATALEN - 1] = '\0';
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_RESOURCES),
				 errmsg("query %lld is quarantined in budget \"%s\" until %s",
						(long long) queryid, name, timestamptz_to_str(until)),
				 errdetail("A statement of this query ran longer than the budget's runaway_after."),
				 errhint("dbgate.quarantine_remove() ends the quarantine.")));
	}
	/* demote.c: 'demote' gates it by the runaway_budget */
	if (dbgate_demote_quarantine_target(lk, target))
		return target;
	return lk;
}

/* ----------
 * SQL functions
 * ----------
 */

static void
require_table(void)
{
	dbgate_check_loaded();
	if (qsh->max == 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("the quarantine table is off"),
				 errhint("Set dbgate.max_quarantine above 0 and restart the server.")));
}

static void
require_arg(FunctionCallInfo fcinfo, int argno, const char *argname)
{
	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must not be null", argname)));
}

/*
 * The committed budget of that name: its index and incarnation (42704 if
 * there is none; 22023 if it has children, which admit nothing of their
 * own).
 */
static int
committed_budget(text *t, uint32 *incarnation, bool leaf)
{
	DbgateShared *sh = dbgate_shared;
	char		name[NAMEDATALEN];
	int			idx;
	bool		parent = false;

	dbgate_budget_name_from_text(t, name, "budget name", false);
	LWLockAcquire(sh->config_lock, LW_SHARED);
	idx = dbgate_find_budget(name);
	if (idx >= 0)
	{
		*incarnation = sh->budgets[idx].d.incarnation;
		parent = (sh->budgets[idx].d.first_child >= 0);
	}
	LWLockRelease(sh->config_lock);
	if (idx < 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("budget \"%s\" does not exist", name),
				 errdetail("Quarantines are kept for committed budgets only.")));
	if (leaf && parent)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("budget \"%s\" has children", name),
				 errdetail("The statements of a tree are gated by the budgets without children.")));
	return idx;
}

/*
 * quarantine_add(budget, queryid, duration): hold the query back in that
 * budget and the current database for duration from now (replacing the
 * end of an entry that is there).  Not transactional.
 */
Datum
dbgate_quarantine_add(PG_FUNCTION_ARGS)
{
	DbgateShared *sh;
	uint32		inc = 0;
	int			budget;
	int64		queryid;
	Interval   *iv;
	double		us;
	TimestampTz now = GetCurrentTimestamp();
	TimestampTz until;
	int			i;

	require_table();
	sh = dbgate_shared;
	require_arg(fcinfo, 0, "budget name");
	require_arg(fcinfo, 1, "queryid");
	require_arg(fcinfo, 2, "duration");
	queryid = PG_GETARG_INT64(1);
	iv = PG_GETARG_INTERVAL_P(2);
	if (queryid == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("queryid must not be 0"),
				 errdetail("Query id 0 means that no query id was computed; such statements are never quarantined.")));
	if (!DBGATE_INTERVAL_IS_FINITE(iv))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("duration must be finite")));
	us = (double) iv->time +
		((double) iv->day + (double) iv->month * DAYS_PER_MONTH) *
		(double) USECS_PER_DAY;
	if (us <= 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("duration must be positive")));
	/* ten years at most: far enough, and no overflow */
	us = Min(us, 10.0 * 365 * USECS_PER_DAY);
	until = now + (TimestampTz) us;
	budget = committed_budget(PG_GETARG_TEXT_PP(0), &inc, true);

	LWLockAcquire(sh->quarantine_lock, LW_EXCLUSIVE);
	i = find_entry(budget, inc, MyDatabaseId, (uint64) queryid);
	if (i >= 0 && !entry_live(&qsh->entries[i], now))
	{
		free_entry(i);
		i = -1;
	}
	if (i < 0)
	{
		i = place_for_entry(now);
		Assert(i >= 0);
		fill_entry(i, budget, inc, MyDatabaseId, (uint64) queryid, until,
				   NULL, 0);
	}
	else
		qsh->entries[i].until = until;
	recount(now);
	LWLockRelease(sh->quarantine_lock);
	PG_RETURN_VOID();
}

/*
 * quarantine_remove(budget, queryid): end the live entries that match
 * (NULL matches all), in every database; how many ended.
 */
Datum
dbgate_quarantine_remove(PG_FUNCTION_ARGS)
{
	DbgateShared *sh;
	int			budget = -1;
	uint32		inc = 0;
	bool		any_query = PG_ARGISNULL(1);
	uint64		queryid = any_query ? 0 : (uint64) PG_GETARG_INT64(1);
	TimestampTz now = GetCurrentTimestamp();
	int64		ended = 0;
	int			i;

	require_table();
	sh = dbgate_shared;
	if (!PG_ARGISNULL(0))
		budget = committed_budget(PG_GETARG_TEXT_PP(0), &inc, false);

	LWLockAcquire(sh->quarantine_lock, LW_EXCLUSIVE);
	for (i = 0; i < qsh->max; i++)
	{
		DbgateQuarantineEntry *e = &qsh->entries[i];

		if (!entry_live(e, now))
			continue;
		if (budget >= 0 && (e->budget != budget || e->incarnation != inc))
			continue;
		if (!any_query && e->queryid != queryid)
			continue;
		free_entry(i);
		ended++;
	}
	recount(now);
	LWLockRelease(sh->quarantine_lock);
	PG_RETURN_INT64(ended);
}

/* The view dbgate.quarantine: the live entries. */
Datum
dbgate_quarantine_view(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	DbgateShared *sh;
	DbgateQuarantineEntry *copy;
	char	   (*names)[NAMEDATALEN];
	TimestampTz now = GetCurrentTimestamp();
	int			n = 0;
	int			i;

	dbgate_check_loaded();
	sh = dbgate_shared;
	InitMaterializedSRF(fcinfo, 0);
	if (qsh->max == 0)
		return (Datum) 0;

	copy = palloc(sizeof(DbgateQuarantineEntry) * qsh->max);
	names = palloc(NAMEDATALEN * qsh->max);
	LWLockAcquire(sh->config_lock, LW_SHARED);
	LWLockAcquire(sh->quarantine_lock, LW_SHARED);
	for (i = 0; i < qsh->max; i++)
	{
		DbgateQuarantineEntry *e = &qsh->entries[i];
		DbgateQuarantineEntry *c = &copy[n];

		if (!entry_live(e, now))
			continue;
		c->dbid = e->dbid;
		c->queryid = e->queryid;
		c->until = e->until;
		c->runaways = e->runaways;
		pg_atomic_init_u64(&c->hits, pg_atomic_read_u64(&e->hits));
		pg_atomic_init_u64(&c->last_hit, pg_atomic_read_u64(&e->last_hit));
		c->query_len = e->query_len;
		if (e->query_len > 0)
			memcpy(c->query, e->query, e->query_len);
		strlcpy(names[n], sh->budgets[e->budget].d.conf.name, NAMEDATALEN);
		n++;
	}
	LWLockRelease(sh->quarantine_lock);
	LWLockRelease(sh->config_lock);

	for (i = 0; i < n; i++)
	{
		DbgateQuarantineEntry *c = &copy[i];
		Datum		values[8];
		bool		nulls[8];
		char	   *dbname = get_database_name(c->dbid);
		TimestampTz last_hit = (TimestampTz) pg_atomic_read_u64(&c->last_hit);

		memset(nulls, 0, sizeof(nulls));
		if (dbname != NULL)
		{
			Name		nm = palloc0(NAMEDATALEN);

			strlcpy(NameStr(*nm), dbname, NAMEDATALEN);
			values[0] = NameGetDatum(nm);
		}
		else
			nulls[0] = true;	/* the database was dropped */
		values[1] = CStringGetTextDatum(names[i]);
		values[2] = Int64GetDatum((int64) c->queryid);
		/*
		 * The text as the backend showed it: a whole-character prefix, shown
		 * only if it is valid in this database's encoding (it may be another
		 * database's)
		 */
		nulls[3] = true;
		if (c->query_len >= 0)
		{
			int			len = pg_mbcliplen(c->query, c->query_len,
										   c->query_len);

			if (pg_verifymbstr(c->query, len, true))
			{
				values[3] = PointerGetDatum(cstring_to_text_with_len(c->query, len));
				nulls[3] = false;
			}
		}
		values[4] = TimestampTzGetDatum(c->until);
		values[5] = Int64GetDatum((int64) c->runaways);
		values[6] = Int64GetDatum((int64) pg_atomic_read_u64(&c->hits));
		if (last_hit != 0)
			values[7] = TimestampTzGetDatum(last_hit);
		else
			nulls[7] = true;
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}
