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
 * check out (magic, version, sizes, CRC-32C, every value) never stops the
 * server: it is reported as a WARNING naming the file, renamed to
 * "dbgate.state.corrupt" for inspection, and the server starts with no
 * budgets (WAL replay then installs the changes logged after the last
 * checkpoint, if any).
 *
 * Layout (native byte order; the file never leaves its data directory, and
 * WAL is only replayed on the same platform):
 *	  header	magic, version, nbudgets, nroles, ndbs, flags (0), lsn
 *	  budgets	nbudgets x StateBudget
 *	  roles		nroles x StateRole
 *	  databases	ndbs x StateDb
 *	  crc		CRC-32C of everything before it
 * Version 1 (written by dbgate 1.0) has a header of magic, version,
 * nbudgets and nroles only, StateBudgetV1 records and no database section;
 * it is still read, the fields it lacks taking their defaults (lsn 0: every
 * logged change is newer).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "miscadmin.h"
#include "port/pg_crc32c.h"
#include "storage/fd.h"
#include "utils/memutils.h"

#include "compat.h"
#include "dbgate.h"

#define STATE_MAGIC		0x44424754	/* "DBGT" */
#define STATE_VERSION	2

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
	uint32		flags;			/* 0 */
	uint64		lsn;			/* WAL position the image is current at */
} StateHeader;

typedef struct StateBudgetV1
{
	char		name[NAMEDATALEN];
	int32		max_active;
	int32		max_queued;
	int32		queue_timeout_ms;
	int32		statement_timeout_ms;
	int32		lock_timeout_ms;
	int32		fair;
} StateBudgetV1;

typedef struct StateBudget
{
	StateBudgetV1 v1;
	int32		scope;
	int32		idle_timeout_ms;
	int32		parallel_workers;
	int32		utility;
	int32		enforce;
	int32		reserved;		/* 0 */
} StateBudget;

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

/* The longest encoding: the largest settings, every table full. */
#define STATE_MAX_SIZE \
	(sizeof(StateHeader) + sizeof(StateBudget) * (Size) DBGATE_MAX_BUDGETS_LIMIT + \
	 (sizeof(StateRole) + sizeof(StateDb)) * (Size) DBGATE_MAX_ROLES_LIMIT + \
	 sizeof(pg_crc32c))

/* ----------
 * Encoding and writing
 * ----------
 */

/*
 * Encode an image (current at WAL position 'lsn') into a palloc'd buffer.
 */
char *
dbgate_state_encode(const DbgateConfig *config, XLogRecPtr lsn, Size *lenp)
{
	StateHeader hdr;
	Size		len;
	char	   *buf;
	char	   *p;
	pg_crc32c	crc;
	int			i;

	memset(&hdr, 0, sizeof(hdr));
	hdr.magic = STATE_MAGIC;
	hdr.version = STATE_VERSION;
	hdr.nbudgets = config->nbudgets;
	hdr.nroles = config->nroles;
	hdr.ndbs = config->ndbs;
	hdr.flags = 0;
	hdr.lsn = lsn;

	len = sizeof(StateHeader) + sizeof(StateBudget) * config->nbudgets +
		sizeof(StateRole) * config->nroles +
		sizeof(StateDb) * config->ndbs + sizeof(pg_crc32c);
	buf = palloc_extended(len, MCXT_ALLOC_HUGE | MCXT_ALLOC_ZERO);
	p = buf;
	memcpy(p, &hdr, sizeof(hdr));
	p += sizeof(hdr);
	for (i = 0; i < config->nbudgets; i++)
	{
		const DbgateBudgetConf *c = &config->budgets[i];
		StateBudget sb;

		memset(&sb, 0, sizeof(sb));
		strlcpy(sb.v1.name, c->name, NAMEDATALEN);
		sb.v1.max_active = c->max_active;
		sb.v1.max_queued = c->max_queued;
		sb.v1.queue_timeout_ms = c->queue_timeout_ms;
		sb.v1.statement_timeout_ms = c->statement_timeout_ms;
		sb.v1.lock_timeout_ms = c->lock_timeout_ms;
		sb.v1.fair = c->fair ? 1 : 0;
		sb.scope = c->scope;
		sb.idle_timeout_ms = c->idle_timeout_ms;
		sb.parallel_workers = c->parallel_workers;
		sb.utility = c->utility ? 1 : 0;
		sb.enforce = c->enforce ? 1 : 0;
		memcpy(p, &sb, sizeof(sb));
		p += sizeof(sb);
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

static int
budget_name_cmp(const void *a, const void *b)
{
	return strcmp(((const DbgateBudgetConf *) a)->name,
				  ((const DbgateBudgetConf *) b)->name);
}

static int
role_conf_cmp(const void *a, const void *b)
{
	Oid			ra = ((const DbgateRoleConf *) a)->roleid;
	Oid			rb = ((const DbgateRoleConf *) b)->roleid;

	return (ra > rb) - (ra < rb);
}

static int
db_conf_cmp(const void *a, const void *b)
{
	Oid			da = ((const DbgateDbConf *) a)->dbid;
	Oid			db = ((const DbgateDbConf *) b)->dbid;

	return (da > db) - (da < db);
}

/* Is 'name' a budget of 'config', whose budgets are sorted by name? */
static bool
sorted_has_budget(const DbgateConfig *config, const char *name)
{
	DbgateBudgetConf key;

	strlcpy(key.name, name, NAMEDATALEN);
	return bsearch(&key, config->budgets, config->nbudgets,
				   sizeof(DbgateBudgetConf), budget_name_cmp) != NULL;
}

/*
 * Check and decode the records of a file whose header, size and checksum
 * are fine.  Returns false with 'why' filled in when a record is invalid.
 * The image comes out with its budgets sorted by name and its assignments
 * sorted by OID.
 */
static bool
decode_records(const char *p, uint32 version, uint32 nbudgets, uint32 nroles,
			   uint32 ndbs, DbgateConfig *config, char *why, size_t whylen)
{
	uint32		i;

	dbgate_image_alloc(config, nbudgets, nroles, ndbs);

	for (i = 0; i < nbudgets; i++)
	{
		StateBudget sb;
		DbgateBudgetConf *c;

		memset(&sb, 0, sizeof(sb));
		if (version == 1)
		{
			memcpy(&sb.v1, p, sizeof(StateBudgetV1));
			p += sizeof(StateBudgetV1);
			sb.scope = DBGATE_SCOPE_STATEMENT;
			sb.parallel_workers = -1;
			sb.enforce = 1;
		}
		else
		{
			memcpy(&sb, p, sizeof(sb));
			p += sizeof(sb);
		}
		if (!valid_name(sb.v1.name) || sb.v1.max_active < 1 ||
			sb.v1.max_queued < 0 || sb.v1.queue_timeout_ms < 0 ||
			sb.v1.statement_timeout_ms < 0 || sb.v1.lock_timeout_ms < 0 ||
			(sb.v1.fair != 0 && sb.v1.fair != 1) ||
			(sb.scope != DBGATE_SCOPE_STATEMENT &&
			 sb.scope != DBGATE_SCOPE_TRANSACTION) ||
			sb.idle_timeout_ms < 0 || sb.parallel_workers < -1 ||
			sb.parallel_workers > DBGATE_MAX_PARALLEL_WORKERS ||
			(sb.utility != 0 && sb.utility != 1) ||
			(sb.enforce != 0 && sb.enforce != 1))
		{
			snprintf(why, whylen, "Budget record %u has invalid values.", i + 1);
			return false;
		}
		c = &config->budgets[config->nbudgets++];
		memset(c, 0, sizeof(*c));
		strlcpy(c->name, sb.v1.name, NAMEDATALEN);
		c->max_active = sb.v1.max_active;
		c->max_queued = sb.v1.max_queued;
		c->queue_timeout_ms = sb.v1.queue_timeout_ms;
		c->statement_timeout_ms = sb.v1.statement_timeout_ms;
		c->lock_timeout_ms = sb.v1.lock_timeout_ms;
		c->fair = (sb.v1.fair == 1);
		c->scope = sb.scope;
		c->idle_timeout_ms = sb.idle_timeout_ms;
		c->parallel_workers = sb.parallel_workers;
		c->utility = (sb.utility == 1);
		c->enforce = (sb.enforce == 1);
		c->src_index = -1;
	}
	qsort(config->budgets, config->nbudgets, sizeof(DbgateBudgetConf),
		  budget_name_cmp);
	for (i = 1; i < config->nbudgets; i++)
	{
		if (strcmp(config->budgets[i - 1].name, config->budgets[i].name) == 0)
		{
			snprintf(why, whylen, "Budget \"%s\" appears twice.",
					 config->budgets[i].name);
			return false;
		}
	}

	for (i = 0; i < nroles; i++)
	{
		StateRole	sr;
		DbgateRoleConf *r;

		memcpy(&sr, p, sizeof(sr));
		p += sizeof(sr);
		if (!OidIsValid(sr.roleid) || !valid_name(sr.budget) ||
			!sorted_has_budget(config, sr.budget))
		{
			snprintf(why, whylen, "Role assignment record %u is invalid.", i + 1);
			return false;
		}
		r = &config->roles[config->nroles++];
		r->roleid = sr.roleid;
		strlcpy(r->budget, sr.budget, NAMEDATALEN);
	}
	qsort(config->roles, config->nroles, sizeof(DbgateRoleConf), role_conf_cmp);
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
		if (!OidIsValid(sd.dbid) || !valid_name(sd.budget) ||
			!sorted_has_budget(config, sd.budget))
		{
			snprintf(why, whylen, "Database assignment record %u is invalid.", i + 1);
			return false;
		}
		d = &config->dbs[config->ndbs++];
		d->dbid = sd.dbid;
		strlcpy(d->budget, sd.budget, NAMEDATALEN);
	}
	qsort(config->dbs, config->ndbs, sizeof(DbgateDbConf), db_conf_cmp);
	for (i = 1; i < config->ndbs; i++)
	{
		if (config->dbs[i - 1].dbid == config->dbs[i].dbid)
		{
			snprintf(why, whylen, "Database %u is assigned twice.",
					 config->dbs[i].dbid);
			return false;
		}
	}
	return true;
}

/*
 * A lowered dbgate.max_budgets or max_roles keeps what fits, with a
 * WARNING; the file is left as it is until the next committed change.
 */
static void
trim_to_capacity(DbgateConfig *config)
{
	int			i;
	int			n;

	if (config->nbudgets > dbgate_max_budgets)
	{
		ereport(WARNING,
				(errmsg("dbgate state file \"%s\" has %d budgets but dbgate.max_budgets is %d",
						DBGATE_STATE_FILE, config->nbudgets, dbgate_max_budgets),
				 errdetail("Only the first %d budgets are loaded.", dbgate_max_budgets),
				 errhint("Raise dbgate.max_budgets and restart the server before changing budgets, or the others are lost.")));
		config->nbudgets = dbgate_max_budgets;
		/* budgets are sorted by name: the assignments to the others go */
		for (i = 0, n = 0; i < config->nroles; i++)
		{
			if (sorted_has_budget(config, config->roles[i].budget))
				config->roles[n++] = config->roles[i];
		}
		config->nroles = n;
		for (i = 0, n = 0; i < config->ndbs; i++)
		{
			if (sorted_has_budget(config, config->dbs[i].budget))
				config->dbs[n++] = config->dbs[i];
		}
		config->ndbs = n;
	}
	if (config->nroles > dbgate_max_roles)
	{
		ereport(WARNING,
				(errmsg("dbgate state file \"%s\" has %d role assignments but dbgate.max_roles is %d",
						DBGATE_STATE_FILE, config->nroles, dbgate_max_roles),
				 errdetail("Only the first %d assignments are loaded.", dbgate_max_roles),
				 errhint("Raise dbgate.max_roles and restart the server before changing budgets, or the others are lost.")));
		config->nroles = dbgate_max_roles;
	}
	if (config->ndbs > dbgate_max_roles)
	{
		ereport(WARNING,
				(errmsg("dbgate state file \"%s\" has %d database assignments but dbgate.max_roles is %d",
						DBGATE_STATE_FILE, config->ndbs, dbgate_max_roles),
				 errdetail("Only the first %d assignments are loaded.", dbgate_max_roles),
				 errhint("Raise dbgate.max_roles and restart the server before changing budgets, or the others are lost.")));
		config->ndbs = dbgate_max_roles;
	}
}


/*
 * Decode an encoded image (a state file's or a WAL record's contents).
 * Returns false, with 'config' empty and 'why' saying what is wrong, when
 * the bytes do not check out.  Never throws but for lack of memory.
 */
bool
dbgate_state_decode(const char *buf, Size len, DbgateConfig *config,
					XLogRecPtr *lsn, char *why, size_t whylen)
{
	StateHeader hdr;
	Size		hdrsize;
	Size		budgetsize;
	Size		expected;
	pg_crc32c	crc,
				stored;

	dbgate_image_init(config);
	*lsn = InvalidXLogRecPtr;
	memset(&hdr, 0, sizeof(hdr));
	if (len < sizeof(StateHeaderV1) + sizeof(pg_crc32c))
	{
		snprintf(why, whylen, "The file is too short (%zu bytes).", len);
		return false;
	}
	memcpy(&hdr, buf, sizeof(StateHeaderV1));
	if (hdr.magic != STATE_MAGIC)
	{
		snprintf(why, whylen, "The file does not start with the dbgate magic number.");
		return false;
	}
	if (hdr.version == 1)
	{
		hdrsize = sizeof(StateHeaderV1);
		budgetsize = sizeof(StateBudgetV1);
	}
	else if (hdr.version == STATE_VERSION)
	{
		hdrsize = sizeof(StateHeader);
		budgetsize = sizeof(StateBudget);
		if (len < hdrsize + sizeof(pg_crc32c))
		{
			snprintf(why, whylen, "The file is too short (%zu bytes).", len);
			return false;
		}
		memcpy(&hdr, buf, sizeof(StateHeader));
	}
	else
	{
		snprintf(why, whylen, "The file has format version %u, expected 1 to %u.",
				 hdr.version, STATE_VERSION);
		return false;
	}

	/* never more than the largest settings allow: the writer checks them */
	if (hdr.nbudgets > DBGATE_MAX_BUDGETS_LIMIT ||
		hdr.nroles > DBGATE_MAX_ROLES_LIMIT ||
		hdr.ndbs > DBGATE_MAX_ROLES_LIMIT || hdr.flags != 0)
	{
		snprintf(why, whylen, "The file claims %u budgets, %u role and %u database assignments.",
				 hdr.nbudgets, hdr.nroles, hdr.ndbs);
		return false;
	}
	expected = hdrsize + budgetsize * (Size) hdr.nbudgets +
		sizeof(StateRole) * (Size) hdr.nroles +
		sizeof(StateDb) * (Size) hdr.ndbs + sizeof(pg_crc32c);
	if (len != expected)
	{
		snprintf(why, whylen, "The file has %zu bytes, expected %zu.",
				 len, expected);
		return false;
	}

	INIT_CRC32C(crc);
	COMP_CRC32C(crc, buf, expected - sizeof(pg_crc32c));
	FIN_CRC32C(crc);
	memcpy(&stored, buf + expected - sizeof(pg_crc32c), sizeof(stored));
	if (!EQ_CRC32C(crc, stored))
	{
		snprintf(why, whylen, "The checksum does not match.");
		return false;
	}

	if (!decode_records(buf + hdrsize, hdr.version, hdr.nbudgets, hdr.nroles,
						hdr.ndbs, config, why, whylen))
	{
		dbgate_image_free(config);
		return false;
	}
	*lsn = (XLogRecPtr) hdr.lsn;
	return true;
}

/* ----------
 * Reading the state file (postmaster, shared-memory start-up)
 * ----------
 */

/*
 * Read the state file into 'config' and the WAL position it is current at
 * into 'lsn'.  Returns false (with 'config' empty, 'lsn' invalid) when there
 * is no usable file.  Never throws but for lack of memory.
 */
bool
dbgate_state_load(DbgateConfig *config, XLogRecPtr *lsn)
{
	struct stat st;
	char	   *buf = NULL;
	int			fd;
	char		why[256];

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

	if (!dbgate_state_decode(buf, st.st_size, config, lsn, why, sizeof(why)))
	{
		pfree(buf);
		set_aside(why);
		return false;
	}
	pfree(buf);

	trim_to_capacity(config);

	ereport(LOG,
			(errmsg("dbgate loaded %d budgets, %d role assignments and %d database assignments from \"%s\"",
					config->nbudgets, config->nroles, config->ndbs,
					DBGATE_STATE_FILE)));
	return true;
}
