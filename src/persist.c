/*-------------------------------------------------------------------------
 *
 * persist.c
 *	  The state file, and the encoding of a configuration image.
 *
 * A configuration image is encoded the same way in the state file and in
 * the WAL records of configuration changes (wal.c).
 *
 * The file "dbgate.state" in the data directory holds the configuration
 * installed at the WAL position it names: the base from which crash
 * recovery, a standby and point-in-time recovery replay the configuration
 * changes logged after it (see wal.c for why every checkpoint finds it up
 * to date).  It is replaced as a whole: written to "dbgate.state.tmp",
 * fsynced, then durably renamed over the old one (fsync of file, rename,
 * fsync of the directory).  A committing transaction writes it (the
 * temporary file before its commit record, the rename after); WAL replay
 * writes it for every change it installs.  It is read in the shared-memory
 * start-up hook, at server start and after every crash restart, before any
 * backend can run a statement, so budgets gate from the first connection.
 *
 * A missing file means no budgets.  A file that cannot be read or does not
 * check out (magic, sizes, CRC-32C, every value) never stops the server:
 * it is reported as a WARNING naming the file, renamed to
 * "dbgate.state.corrupt" for inspection, and the server starts with no
 * budgets (WAL replay then installs the changes logged after the last
 * checkpoint, if any).  A file of a format version newer than this library
 * reads (written by a newer dbgate, then downgraded) is different: starting
 * without its budgets would silently drop a configuration that is fine, so
 * the server refuses to start (FATAL, in the postmaster) and the file is
 * left as it is.
 *
 * Layout (native byte order; the file never leaves its data directory, and
 * WAL is only replayed on the same platform):
 *	  header	magic, version, nbudgets, nroles, ndbs, nkeylimits, lsn
 *	  budgets	nbudgets budget records
 *	  roles		nroles x StateRole
 *	  databases	ndbs x StateDb
 *	  key limits	nkeylimits x StateKeyLimit (version 4)
 *	  crc		CRC-32C of everything before it
 * In versions 2 and 3 the header's nkeylimits is 'flags', always 0.
 * A budget record is the name (NAMEDATALEN bytes) followed by the fields
 * stored in the file's format version, in the order of the table of
 * fields (fields.c: those whose 'format' is at most the version), each in
 * the encoding of its kind, and zero bytes up to a multiple of 8 bytes:
 *	  version 1 (dbgate 1.0)	the six 1.0 fields as int32: 88 bytes
 *	  version 2 (dbgate 1.1)	also the five 1.1 fields as int32, and 4
 *								bytes of padding: 112 bytes
 *	  version 3 (dbgate 1.2)	also the eight 1.2 fields: 208 bytes
 *	  version 4 (dbgate 1.3)	every field (the twelve 1.3 fields too:
 *								reserved, key_by in DBGATE_KEY_BY_LEN
 *								bytes, key_max_active, key_max_queued,
 *								key_max_rate, key_rate_burst, runaway_after,
 *								runaway_action, runaway_budget, quarantine,
 *								adapt, adapt_min): 392 bytes
 * Version 4 is not yet released: builds of 1.3 before the key fields wrote
 * it without them (seven 1.3 fields, 296 bytes) and without key limits,
 * and this library reads such a record as invalid (its size does not
 * match).  A key limit names a budget of the image with key_by, its key
 * has at most DBGATE_KEY_MAXLEN bytes, and its values are -1 (NULL) or in
 * the ranges of the budget's key_* fields; no budget and key appear twice.
 * Version 1 has a header of magic, version, nbudgets and nroles only and
 * no database section.  Every version is read; the fields a version lacks
 * take their defaults (version 1: lsn 0, every logged change is newer).
 *
 * The encoder writes the oldest version that holds the image, but never
 * version 1 (which has no WAL position): version 2 while every field that
 * versions 3 and 4 added has its default, version 3 while every field that
 * version 4 added has.  So a 1.2 primary that uses none of the 1.2 fields
 * writes WAL records that a 1.1 standby still replays, and a 1.3 server
 * that uses none of the 1.3 fields ones that 1.2 replays.
 *
 * Decoding checks every value with the checks of the SQL functions
 * (fields.c), and the rules of the hierarchy of budgets (config.c): a
 * parent is a budget of the image, there is no cycle and no chain of more
 * than DBGATE_MAX_DEPTH budgets, and no budget that has children has an
 * assignment.  One rule of config.c is not enforced here: a runaway_budget
 * that is not a budget of the image.  Every image decoded is fitted to the
 * server before it is installed (confimage.c, dbgate_image_fit(): the load
 * below, WAL replay in budgets.c), and the fit clears such a reference with
 * a WARNING, as for a runaway_budget it leaves out itself.  Earlier
 * builds of dbgate 1.3 fitted without clearing it and then wrote such
 * images (state file and WAL records); refusing them would set the file
 * aside and start with no budgets, or stop recovery at the record at every
 * start.  A runaway_budget with children is still refused: no fit makes
 * one.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <fcntl.h>
#include <math.h>
#include <sys/stat.h>
#include <unistd.h>

#include "miscadmin.h"
#include "port/pg_crc32c.h"
#include "storage/fd.h"
#include "utils/memutils.h"

#include "confimage.h"
#include "fields.h"
#include "keylimits.h"
#include "persist.h"
#include "shmem.h"

#define STATE_MAGIC		0x44424754	/* "DBGT" */

typedef struct StateHeaderV1
{
	uint32		magic;
	uint32		version;
	uint32		nbudgets;
	uint32		nroles;
} StateHeaderV1;

typedef struct StateHeader
{
	uint32		magic;
	uint32		version;
	uint32		nbudgets;
	uint32		nroles;
	uint32		ndbs;
	uint32		nkeylimits;		/* version 4; before it: flags, 0 */
	uint64		lsn;			/* WAL position the image is current at */
} StateHeader;

/* budget records are padded to a multiple of this */
#define RECORD_ALIGN	8

typedef struct StateRole
{
	uint32		roleid;
	char		budget[NAMEDATALEN];
} StateRole;

typedef struct StateDb
{
	uint32		dbid;
	char		budget[NAMEDATALEN];
} StateDb;

/* a key limit (version 4): -1 stands for SQL NULL; 216 bytes */
typedef struct StateKeyLimit
{
	char		budget[NAMEDATALEN];
	char		key[DBGATE_KEY_MAXLEN + 1];
	int32		max_active;
	int32		max_queued;
	int32		rate_burst;
	int32		pad;			/* 0 */
	double		max_rate;
} StateKeyLimit;

/* The longest encoding: the largest settings, every table full. */
#define STATE_MAX_SIZE \
	(sizeof(StateHeader) + \
	 budget_record_size(DBGATE_FORMAT_CURRENT) * (Size) DBGATE_MAX_BUDGETS_LIMIT + \
	 (sizeof(StateRole) + sizeof(StateDb)) * (Size) DBGATE_MAX_ROLES_LIMIT + \
	 sizeof(StateKeyLimit) * (Size) DBGATE_MAX_KEY_LIMITS_LIMIT + \
	 sizeof(pg_crc32c))

/* The size of a budget record of format 'version'. */
static Size
budget_record_size(uint32 version)
{
	Size		size = NAMEDATALEN;
	int			i;

	for (i = 0; i < DBGATE_NFIELDS; i++)
	{
		if (dbgate_fields[i].format <= version)
			size += dbgate_field_stored_size(i);
	}
	return TYPEALIGN(RECORD_ALIGN, size);
}

/* The oldest format version that holds every field of 'config'. */
static uint32
oldest_format(const DbgateConfig *config)
{
	uint32		version = DBGATE_FORMAT_OLDEST_WRITTEN;
	int			b;
	int			i;

	if (config->nkeylimits > 0)
		return 4;				/* key limits, of budgets with key_by */

	for (b = 0; b < config->nbudgets; b++)
	{
		for (i = 0; i < DBGATE_NFIELDS; i++)
		{
			if (dbgate_fields[i].format > version &&
				!dbgate_field_is_default(i, &config->budgets[b]))
				version = dbgate_fields[i].format;
		}
	}
	return version;
}

/* ----------
 * Encoding and writing
 * ----------
 */

/*
 * Encode an image (current at WAL position 'lsn') into a palloc'd buffer,
 * in the oldest format version that holds it.
 */
char *
dbgate_state_encode(const DbgateConfig *config, XLogRecPtr lsn, Size *lenp)
{
	StateHeader hdr;
	Size		recsize;
	Size		len;
	char	   *buf;
	char	   *p;
	pg_crc32c	crc;
	int			i;

	memset(&hdr, 0, sizeof(hdr));
	hdr.magic = STATE_MAGIC;
	hdr.version = oldest_format(config);
	hdr.nbudgets = config->nbudgets;
	hdr.nroles = config->nroles;
	hdr.ndbs = config->ndbs;
	hdr.nkeylimits = config->nkeylimits;
	hdr.lsn = lsn;
	recsize = budget_record_size(hdr.version);

	len = sizeof(StateHeader) + recsize * config->nbudgets +
		sizeof(StateRole) * config->nroles +
		sizeof(StateDb) * config->ndbs +
		sizeof(StateKeyLimit) * config->nkeylimits + sizeof(pg_crc32c);
	buf = palloc_extended(len, MCXT_ALLOC_HUGE | MCXT_ALLOC_ZERO);
	p = buf;
	memcpy(p, &hdr, sizeof(hdr));
	p += sizeof(hdr);
	for (i = 0; i < config->nbudgets; i++)
	{
		const DbgateBudgetConf *c = &config->budgets[i];
		char	   *q = p;
		int			f;

		strlcpy(q, c->name, NAMEDATALEN);
		q += NAMEDATALEN;
		for (f = 0; f < DBGATE_NFIELDS; f++)
		{
			if (dbgate_fields[f].format > hdr.version)
				continue;
			dbgate_field_store(f, c, q);
			q += dbgate_field_stored_size(f);
		}
		Assert(q <= p + recsize);
		p += recsize;			/* the padding stays zero */
	}
	for (i = 0; i < config->nroles; i++)
	{
		StateRole	sr;

		memset(&sr, 0, sizeof(sr));
		sr.roleid = config->roles[i].roleid;
		strlcpy(sr.budget, config->roles[i].budget, NAMEDATALEN);
		memcpy(p, &sr, sizeof(sr));
		p += sizeof(sr);
	}
	for (i = 0; i < config->ndbs; i++)
	{
		StateDb		sd;

		memset(&sd, 0, sizeof(sd));
		sd.dbid = config->dbs[i].dbid;
		strlcpy(sd.budget, config->dbs[i].budget, NAMEDATALEN);
		memcpy(p, &sd, sizeof(sd));
		p += sizeof(sd);
	}
	for (i = 0; i < config->nkeylimits; i++)
	{
		const DbgateKeyLimitConf *k = &config->keylimits[i];
		StateKeyLimit sk;

		memset(&sk, 0, sizeof(sk));
		strlcpy(sk.budget, k->budget, NAMEDATALEN);
		strlcpy(sk.key, k->key, sizeof(sk.key));
		sk.max_active = k->max_active;
		sk.max_queued = k->max_queued;
		sk.rate_burst = k->rate_burst;
		sk.max_rate = k->max_rate;
		memcpy(p, &sk, sizeof(sk));
		p += sizeof(sk);
	}
	INIT_CRC32C(crc);
	COMP_CRC32C(crc, buf, p - buf);
	FIN_CRC32C(crc);
	memcpy(p, &crc, sizeof(crc));
	*lenp = len;
	return buf;
}

/*
 * Write the configuration to the temporary file and fsync it.  Throws on
 * failure (a committing transaction then aborts and nothing changes).
 */
void
dbgate_state_write_temp(const DbgateConfig *config, XLogRecPtr lsn)
{
	Size		len;
	char	   *buf;
	int			fd;

	buf = dbgate_state_encode(config, lsn, &len);

	fd = OpenTransientFile(DBGATE_STATE_TMPFILE,
						   O_WRONLY | O_CREAT | O_TRUNC | PG_BINARY);
	if (fd < 0)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not create file \"%s\": %m",
						DBGATE_STATE_TMPFILE)));

	errno = 0;
	if (write(fd, buf, len) != (ssize_t) len)
	{
		int			save_errno = errno;

		CloseTransientFile(fd);
		unlink(DBGATE_STATE_TMPFILE);
		errno = save_errno ? save_errno : ENOSPC;
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not write file \"%s\": %m",
						DBGATE_STATE_TMPFILE)));
	}
	if (pg_fsync(fd) != 0)
	{
		int			save_errno = errno;

		CloseTransientFile(fd);
		unlink(DBGATE_STATE_TMPFILE);
		errno = save_errno;
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not fsync file \"%s\": %m",
						DBGATE_STATE_TMPFILE)));
	}
	if (CloseTransientFile(fd) != 0)
	{
		unlink(DBGATE_STATE_TMPFILE);
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not close file \"%s\": %m",
						DBGATE_STATE_TMPFILE)));
	}
	pfree(buf);
}

/*
 * Make the temporary file the state file (durably).  Problems are reported
 * at 'elevel' (durable_rename's own messages).
 */
void
dbgate_state_commit_temp(int elevel)
{
	(void) durable_rename(DBGATE_STATE_TMPFILE, DBGATE_STATE_FILE, elevel);
}

void
dbgate_state_discard_temp(void)
{
	if (unlink(DBGATE_STATE_TMPFILE) != 0 && errno != ENOENT)
		ereport(LOG,
				(errcode_for_file_access(),
				 errmsg("could not remove file \"%s\": %m",
						DBGATE_STATE_TMPFILE)));
}

/* ----------
 * Decoding
 *
 * Linear in the size of the image apart from sorting: the checks for
 * duplicates and for assignments to unknown budgets sort and search
 * instead of comparing every record with every other one.
 * ----------
 */
static bool
valid_name(const char *name)
{
	size_t		len = strnlen(name, NAMEDATALEN);

	return len > 0 && len < NAMEDATALEN;
}

static void
set_aside(const char *why)
{
	ereport(WARNING,
			(errmsg("dbgate state file \"%s\" is invalid, starting with no budgets",
					DBGATE_STATE_FILE),
			 errdetail("%s", why),
			 errhint("The file was renamed to \"%s\" for inspection.",
					 DBGATE_STATE_BADFILE)));
	(void) durable_rename(DBGATE_STATE_FILE, DBGATE_STATE_BADFILE, LOG);
}

/*
 * The index of budget 'name' in 'config', whose budgets are sorted by
 * name, or -1.
 */
static int
sorted_find_budget(const DbgateConfig *config, const char *name)
{
	DbgateBudgetConf key;
	DbgateBudgetConf *found;

	strlcpy(key.name, name, NAMEDATALEN);
	found = bsearch(&key, config->budgets, config->nbudgets,
					sizeof(DbgateBudgetConf), dbgate_image_budget_cmp);
	return found ? (int) (found - config->budgets) : -1;
}

/*
 * Decode one budget record of format 'version' into 'c', with every check
 * of the SQL functions.  Returns false when the record is invalid.
 */
static bool
decode_budget(const char *p, uint32 version, DbgateBudgetConf *c)
{
	const char *end = p + budget_record_size(version);
	int			f;

	memset(c, 0, sizeof(*c));
	if (!valid_name(p))
		return false;
	strlcpy(c->name, p, NAMEDATALEN);
	p += NAMEDATALEN;
	dbgate_conf_set_defaults(c);
	for (f = 0; f < DBGATE_NFIELDS; f++)
	{
		if (dbgate_fields[f].format > version)
			continue;			/* not stored: its default */
		if (!dbgate_field_load(f, p, c) || !dbgate_field_valid(f, c))
			return false;
		p += dbgate_field_stored_size(f);
	}
	for (; p < end; p++)
	{
		if (*p != 0)
			return false;		/* padding */
	}
	if (dbgate_conf_problem(c) != NULL)
		return false;
	c->src_index = -1;
	return true;
}

/*
 * The rules of the hierarchy (see config.c) on an image whose budgets are
 * sorted by name: every parent exists, no chain is longer than
 * DBGATE_MAX_DEPTH (which also excludes cycles), the reservations of a
 * budget's children add up to at most its max_active, a budget with key_by
 * has no children, a runaway_budget has no children (one that does not
 * exist is left to the fit: see the file header).  Marks the budgets that have children in 'has_children'.
 */
static bool
check_hierarchy(const DbgateConfig *config, bool *has_children, char *why,
				size_t whylen)
{
	int64	   *reserved = palloc0(sizeof(int64) * Max(config->nbudgets, 1));
	int			i;

	for (i = 0; i < config->nbudgets; i++)
	{
		const DbgateBudgetConf *c = &config->budgets[i];
		int			depth = 1;
		int			k = i;

		while (config->budgets[k].parent[0] != '\0')
		{
			int			parent = sorted_find_budget(config, config->budgets[k].parent);

			if (parent < 0)
			{
				snprintf(why, whylen, "The parent \"%s\" of budget \"%s\" does not exist.",
						 config->budgets[k].parent, config->budgets[k].name);
				return false;
			}
			if (k == i)
			{
				has_children[parent] = true;
				reserved[parent] += c->reserved;
			}
			if (++depth > DBGATE_MAX_DEPTH)
			{
				snprintf(why, whylen, "Budget \"%s\" is on a chain of more than %d budgets, or on a cycle.",
						 c->name, DBGATE_MAX_DEPTH);
				return false;
			}
			k = parent;
		}
	}
	for (i = 0; i < config->nbudgets; i++)
	{
		const DbgateBudgetConf *c = &config->budgets[i];
		int			target;

		if (c->runaway_budget[0] == '\0')
			continue;
		target = sorted_find_budget(config, c->runaway_budget);
		if (target < 0)
			continue;			/* cleared by dbgate_image_fit() */
		if (has_children[target])
		{
			snprintf(why, whylen, "The runaway_budget \"%s\" of budget \"%s\" has children.",
					 c->runaway_budget, c->name);
			return false;
		}
	}
	for (i = 0; i < config->nbudgets; i++)
	{
		if (has_children[i] && config->budgets[i].key_by[0] != '\0')
		{
			snprintf(why, whylen, "Budget \"%s\" has key_by and children.",
					 config->budgets[i].name);
			return false;
		}
		if (reserved[i] > config->budgets[i].max_active)
		{
			snprintf(why, whylen, "The children of budget \"%s\" reserve %lld slots, more than its max_active %d.",
					 config->budgets[i].name, (long long) reserved[i],
					 config->budgets[i].max_active);
			return false;
		}
	}
	pfree(reserved);
	return true;
}

/* An assignment names a budget of the image that has no children. */
static bool
valid_assignment(const DbgateConfig *config, const bool *has_children,
				 const char *budget)
{
	int			b;

	if (!valid_name(budget))
		return false;
	b = sorted_find_budget(config, budget);
	return b >= 0 && !has_children[b];
}

static bool
valid_keylimit(const DbgateConfig *config, const StateKeyLimit *sk)
{
	int			b;

	if (!valid_name(sk->budget) ||
		strnlen(sk->key, sizeof(sk->key)) >= sizeof(sk->key) || sk->pad != 0)
		return false;
	b = sorted_find_budget(config, sk->budget);
	if (b < 0 || config->budgets[b].key_by[0] == '\0')
		return false;
	if (sk->max_active < -1 || sk->max_queued < -1 ||
		(sk->rate_burst != -1 &&
		 (sk->rate_burst < 1 || sk->rate_burst > DBGATE_MAX_BURST)))
		return false;
	if (sk->max_rate == -1 || sk->max_rate == 0)
		return true;
	return !isnan(sk->max_rate) && sk->max_rate >= DBGATE_MIN_RATE &&
		sk->max_rate <= DBGATE_MAX_RATE;
}

/* The key limits (version 4), after the budgets they name. */
static bool
decode_keylimits(const char *p, uint32 nkeylimits, DbgateConfig *config,
				 char *why, size_t whylen)
{
	uint32		i;

	if (nkeylimits == 0)
		return true;
	dbgate_image_alloc_keylimits(config, nkeylimits);
	for (i = 0; i < nkeylimits; i++)
	{
		StateKeyLimit sk;
		DbgateKeyLimitConf *k = &config->keylimits[config->nkeylimits++];

		memcpy(&sk, p, sizeof(sk));
		p += sizeof(sk);
		if (!valid_keylimit(config, &sk))
		{
			snprintf(why, whylen, "Key limit record %u is invalid.", i + 1);
			return false;
		}
		memset(k, 0, sizeof(*k));
		strlcpy(k->budget, sk.budget, NAMEDATALEN);
		strlcpy(k->key, sk.key, sizeof(k->key));
		k->max_active = sk.max_active;
		k->max_queued = sk.max_queued;
		k->max_rate = sk.max_rate;
		k->rate_burst = sk.rate_burst;
	}
	qsort(config->keylimits, config->nkeylimits, sizeof(DbgateKeyLimitConf),
		  dbgate_image_keylimit_cmp);
	for (i = 1; i < config->nkeylimits; i++)
	{
		if (dbgate_image_keylimit_cmp(&config->keylimits[i - 1],
									  &config->keylimits[i]) == 0)
		{
			snprintf(why, whylen, "Key \"%s\" of budget \"%s\" has two key limits.",
					 config->keylimits[i].key, config->keylimits[i].budget);
			return false;
		}
	}
	return true;
}

/*
 * Check and decode the records of a file whose header, size and checksum
 * are fine.  Returns false with 'why' filled in when a record is invalid.
 * The image comes out with its budgets sorted by name and its assignments
 * sorted by OID.
 */
static bool
decode_records(const char *p, uint32 version, uint32 nbudgets, uint32 nroles,
			   uint32 ndbs, uint32 nkeylimits, DbgateConfig *config, char *why,
			   size_t whylen)
{
	Size		recsize = budget_record_size(version);
	bool	   *has_children;
	uint32		i;

	dbgate_image_alloc(config, nbudgets, nroles, ndbs);

	for (i = 0; i < nbudgets; i++)
	{
		if (!decode_budget(p, version, &config->budgets[config->nbudgets]))
		{
			snprintf(why, whylen, "Budget record %u has invalid values.", i + 1);
			return false;
		}
		config->nbudgets++;
		p += recsize;
	}
	qsort(config->budgets, config->nbudgets, sizeof(DbgateBudgetConf),
		  dbgate_image_budget_cmp);
	for (i = 1; i < config->nbudgets; i++)
	{
		if (strcmp(config->budgets[i - 1].name, config->budgets[i].name) == 0)
		{
			snprintf(why, whylen, "Budget \"%s\" appears twice.",
					 config->budgets[i].name);
			return false;
		}
	}
	has_children = palloc0(sizeof(bool) * Max(config->nbudgets, 1));
	if (!check_hierarchy(config, has_children, why, whylen))
		return false;

	for (i = 0; i < nroles; i++)
	{
		StateRole	sr;
		DbgateRoleConf *r;

		memcpy(&sr, p, sizeof(sr));
		p += sizeof(sr);
		if (!OidIsValid(sr.roleid) ||
			!valid_assignment(config, has_children, sr.budget))
		{
			snprintf(why, whylen, "Role assignment record %u is invalid.", i + 1);
			return false;
		}
		r = &config->roles[config->nroles++];
		r->roleid = sr.roleid;
		strlcpy(r->budget, sr.budget, NAMEDATALEN);
	}
	qsort(config->roles, config->nroles, sizeof(DbgateRoleConf), dbgate_image_role_cmp);
	for (i = 1; i < config->nroles; i++)
	{
		if (config->roles[i - 1].roleid == config->roles[i].roleid)
		{
			snprintf(why, whylen, "Role %u is assigned twice.",
					 config->roles[i].roleid);
			return false;
		}
	}

	for (i = 0; i < ndbs; i++)
	{
		StateDb		sd;
		DbgateDbConf *d;

		memcpy(&sd, p, sizeof(sd));
		p += sizeof(sd);
		if (!OidIsValid(sd.dbid) ||
			!valid_assignment(config, has_children, sd.budget))
		{
			snprintf(why, whylen, "Database assignment record %u is invalid.", i + 1);
			return false;
		}
		d = &config->dbs[config->ndbs++];
		d->dbid = sd.dbid;
		strlcpy(d->budget, sd.budget, NAMEDATALEN);
	}
	qsort(config->dbs, config->ndbs, sizeof(DbgateDbConf), dbgate_image_db_cmp);
	for (i = 1; i < config->ndbs; i++)
	{
		if (config->dbs[i - 1].dbid == config->dbs[i].dbid)
		{
			snprintf(why, whylen, "Database %u is assigned twice.",
					 config->dbs[i].dbid);
			return false;
		}
	}
	pfree(has_children);
	return decode_keylimits(p, nkeylimits, config, why, whylen);
}

/*
 * A lowered dbgate.max_budgets or max_roles keeps what fits, by the rule
 * that WAL replay follows too (confimage.c), with a WARNING; the file is
 * left as it is until the next committed change.  The same fit clears a
 * runaway_budget that the file names and lacks (see the file header).
 */
static void
trim_to_capacity(DbgateConfig *config)
{
	char	   *what = psprintf("state file \"%s\"", DBGATE_STATE_FILE);

	(void) dbgate_image_fit(config, dbgate_max_budgets, dbgate_max_roles, what,
							"Raise dbgate.max_budgets and dbgate.max_roles and restart the server before changing budgets, or what was left out is lost.");
	(void) dbgate_image_fit_keylimits(config, dbgate_max_key_limits, what,
									  "Raise dbgate.max_key_limits and restart the server before changing budgets, or what was left out is lost.");
	pfree(what);
}


/*
 * Decode an encoded image (a state file's or a WAL record's contents).
 * Returns DBGATE_DECODE_INVALID, with 'config' empty and 'why' saying what
 * is wrong, when the bytes do not check out, and DBGATE_DECODE_NEWER when
 * they start like an image of a format version newer than this library
 * reads.  '*format' is the format version found (0 if none).  Never
 * throws but for lack of memory.
 */
DbgateDecodeResult
dbgate_state_decode(const char *buf, Size len, DbgateConfig *config,
					XLogRecPtr *lsn, uint32 *format, char *why, size_t whylen)
{
	StateHeader hdr;
	Size		hdrsize;
	Size		expected;
	pg_crc32c	crc,
				stored;

	dbgate_image_init(config);
	*lsn = InvalidXLogRecPtr;
	*format = 0;
	memset(&hdr, 0, sizeof(hdr));
	if (len < sizeof(StateHeaderV1) + sizeof(pg_crc32c))
	{
		snprintf(why, whylen, "The file is too short (%zu bytes).", len);
		return DBGATE_DECODE_INVALID;
	}
	memcpy(&hdr, buf, sizeof(StateHeaderV1));
	if (hdr.magic != STATE_MAGIC)
	{
		snprintf(why, whylen, "The file does not start with the dbgate magic number.");
		return DBGATE_DECODE_INVALID;
	}
	*format = hdr.version;
	if (hdr.version > DBGATE_FORMAT_CURRENT)
	{
		snprintf(why, whylen, "The file has format version %u; this version of dbgate reads versions 1 to %d.",
				 hdr.version, DBGATE_FORMAT_CURRENT);
		return DBGATE_DECODE_NEWER;
	}
	if (hdr.version == 1)
		hdrsize = sizeof(StateHeaderV1);
	else if (hdr.version >= 2)
	{
		hdrsize = sizeof(StateHeader);
		if (len < hdrsize + sizeof(pg_crc32c))
		{
			snprintf(why, whylen, "The file is too short (%zu bytes).", len);
			return DBGATE_DECODE_INVALID;
		}
		memcpy(&hdr, buf, sizeof(StateHeader));
	}
	else
	{
		snprintf(why, whylen, "The file has format version %u, expected 1 to %d.",
				 hdr.version, DBGATE_FORMAT_CURRENT);
		return DBGATE_DECODE_INVALID;
	}

	/* never more than the largest settings allow: the writer checks them */
	if (hdr.nbudgets > DBGATE_MAX_BUDGETS_LIMIT ||
		hdr.nroles > DBGATE_MAX_ROLES_LIMIT ||
		hdr.ndbs > DBGATE_MAX_ROLES_LIMIT ||
		hdr.nkeylimits > (hdr.version >= 4 ? DBGATE_MAX_KEY_LIMITS_LIMIT : 0))
	{
		snprintf(why, whylen, "The file claims %u budgets, %u role and %u database assignments.",
				 hdr.nbudgets, hdr.nroles, hdr.ndbs);
		return DBGATE_DECODE_INVALID;
	}
	expected = hdrsize + budget_record_size(hdr.version) * (Size) hdr.nbudgets +
		sizeof(StateRole) * (Size) hdr.nroles +
		sizeof(StateDb) * (Size) hdr.ndbs +
		sizeof(StateKeyLimit) * (Size) hdr.nkeylimits + sizeof(pg_crc32c);
	if (len != expected)
	{
		snprintf(why, whylen, "The file has %zu bytes, expected %zu.",
				 len, expected);
		return DBGATE_DECODE_INVALID;
	}

	INIT_CRC32C(crc);
	COMP_CRC32C(crc, buf, expected - sizeof(pg_crc32c));
	FIN_CRC32C(crc);
	memcpy(&stored, buf + expected - sizeof(pg_crc32c), sizeof(stored));
	if (!EQ_CRC32C(crc, stored))
	{
		snprintf(why, whylen, "The checksum does not match.");
		return DBGATE_DECODE_INVALID;
	}

	if (!decode_records(buf + hdrsize, hdr.version, hdr.nbudgets, hdr.nroles,
						hdr.ndbs, hdr.nkeylimits, config, why, whylen))
	{
		dbgate_image_free(config);
		return DBGATE_DECODE_INVALID;
	}
	*lsn = (XLogRecPtr) hdr.lsn;
	return DBGATE_DECODE_OK;
}

/* ----------
 * Reading the state file (postmaster, shared-memory start-up)
 * ----------
 */

/*
 * A state file of a newer format: refuse to start, leave the file.
 */
static void
refuse_newer(uint32 format)
{
	ereport(FATAL,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("dbgate state file \"%s\" has format version %u, which this version of dbgate cannot read",
					DBGATE_STATE_FILE, format),
			 errdetail("This version of dbgate reads format versions 1 to %d; the file was written by a newer version.",
					   DBGATE_FORMAT_CURRENT),
			 errhint("Install the version of dbgate that wrote the file, or a newer one.  The file is left as it is; starting without it would start without its budgets.")));
}

/*
 * Whether the file starts like a state file of a newer format.
 */
static bool
starts_newer(int fd, uint32 *format)
{
	StateHeaderV1 hdr;

	if (pg_pread(fd, &hdr, sizeof(hdr), 0) != sizeof(hdr))
		return false;
	*format = hdr.version;
	return hdr.magic == STATE_MAGIC && hdr.version > DBGATE_FORMAT_CURRENT;
}

/*
 * Read the state file into 'config' and the WAL position it is current at
 * into 'lsn'.  Returns false (with 'config' empty, 'lsn' invalid) when there
 * is no usable file.  Never throws but for lack of memory, and FATAL for a
 * file of a newer format.
 */
bool
dbgate_state_load(DbgateConfig *config, XLogRecPtr *lsn)
{
	struct stat st;
	char	   *buf = NULL;
	int			fd;
	char		why[256];
	uint32		format;
	DbgateDecodeResult result;

	dbgate_image_init(config);
	*lsn = InvalidXLogRecPtr;

	/* a temporary file left by a crash mid-commit was never committed */
	(void) unlink(DBGATE_STATE_TMPFILE);

	fd = OpenTransientFile(DBGATE_STATE_FILE, O_RDONLY | PG_BINARY);
	if (fd < 0)
	{
		if (errno == ENOENT)
			return false;
		snprintf(why, sizeof(why), "Could not open the file: %s.", strerror(errno));
		set_aside(why);
		return false;
	}
	if (fstat(fd, &st) != 0)
	{
		snprintf(why, sizeof(why), "Could not stat the file: %s.", strerror(errno));
		CloseTransientFile(fd);
		set_aside(why);
		return false;
	}
	if (starts_newer(fd, &format))
	{
		CloseTransientFile(fd);
		refuse_newer(format);
	}
	if ((Size) st.st_size > STATE_MAX_SIZE)
	{
		snprintf(why, sizeof(why), "The file has an impossible size of %lld bytes.",
				 (long long) st.st_size);
		CloseTransientFile(fd);
		set_aside(why);
		return false;
	}

	buf = palloc_extended(Max(st.st_size, 1), MCXT_ALLOC_HUGE);
	errno = 0;
	if (read(fd, buf, st.st_size) != st.st_size)
	{
		snprintf(why, sizeof(why), "Could not read the file: %s.",
				 errno ? strerror(errno) : "short read");
		CloseTransientFile(fd);
		pfree(buf);
		set_aside(why);
		return false;
	}
	CloseTransientFile(fd);

	result = dbgate_state_decode(buf, st.st_size, config, lsn, &format,
								 why, sizeof(why));
	pfree(buf);
	if (result == DBGATE_DECODE_NEWER)
		refuse_newer(format);	/* changed while we read it */
	if (result != DBGATE_DECODE_OK)
	{
		set_aside(why);
		return false;
	}

	trim_to_capacity(config);

	ereport(LOG,
			(errmsg("dbgate loaded %d budgets, %d role assignments and %d database assignments from \"%s\"",
					config->nbudgets, config->nroles, config->ndbs,
					DBGATE_STATE_FILE)));
	return true;
}
