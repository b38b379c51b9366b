/*-------------------------------------------------------------------------
 *
 * persist.c
 *	  The state file: budgets and role assignments across restarts.
 *
 * The file "dbgate.state" in the data directory holds the committed
 * configuration.  It is replaced as a whole: written to "dbgate.state.tmp",
 * fsynced, then durably renamed over the old one (fsync of file, rename,
 * fsync of the directory).  It is read in the shared-memory start-up hook,
 * that is at server start and after every crash restart, before any
 * backend can run a statement, so budgets gate from the first connection.
 *
 * A missing file means no budgets.  A file that cannot be read or does not
 * check out (magic, version, sizes, CRC-32C, every value) never stops the
 * server: it is reported as a WARNING naming the file, renamed to
 * "dbgate.state.corrupt" for inspection, and the server starts with no
 * budgets.
 *
 * Layout (native byte order; the file never leaves its data directory):
 *	  header	magic, version, nbudgets, nroles, ndbs, reserved
 *	  budgets	nbudgets x StateBudget
 *	  roles		nroles x StateRole
 *	  databases	ndbs x StateDb
 *	  crc		CRC-32C of everything before it
 * Version 1 (written by dbgate 1.0) has neither ndbs nor reserved in the
 * header, StateBudgetV1 records and no database section; it is still read,
 * the fields it lacks taking their defaults.
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
	uint32		reserved;		/* 0 */
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

/* ----------
 * Writing
 * ----------
 */

/*
 * Write the configuration to the temporary file and fsync it.  Throws on
 * failure (the committing transaction then aborts and nothing changes).
 */
void
dbgate_state_write_temp(const DbgateConfig *config)
{
	StateHeader hdr;
	Size		len;
	char	   *buf;
	char	   *p;
	pg_crc32c	crc;
	int			fd;
	int			i;

	hdr.magic = STATE_MAGIC;
	hdr.version = STATE_VERSION;
	hdr.nbudgets = config->nbudgets;
	hdr.nroles = config->nroles;
	hdr.ndbs = config->ndbs;
	hdr.reserved = 0;

	len = sizeof(StateHeader) + sizeof(StateBudget) * config->nbudgets +
		sizeof(StateRole) * config->nroles +
		sizeof(StateDb) * config->ndbs + sizeof(pg_crc32c);
	buf = palloc0(len);
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
 * Make the temporary file the state file.  Runs after commit: reports
 * problems at LOG level and returns false instead of throwing.
 */
bool
dbgate_state_commit_temp(void)
{
	return durable_rename(DBGATE_STATE_TMPFILE, DBGATE_STATE_FILE, LOG) == 0;
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
 * Reading (postmaster, shared-memory start-up)
 *
 * Linear in the size of the file apart from sorting: the checks for
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
 * Read the state file into 'config'.  Returns false (with 'config' empty)
 * when there is no usable file.  Never throws.
 */
bool
dbgate_state_load(DbgateConfig *config)
{
	struct stat st;
	char	   *buf = NULL;
	int			fd;
	StateHeader hdr;
	Size		hdrsize;
	Size		budgetsize;
	Size		expected;
	pg_crc32c	crc,
				stored;
	char		why[256];

	dbgate_image_init(config);

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

	/* the header says how long the file must be */
	memset(&hdr, 0, sizeof(hdr));
	if (st.st_size < (off_t) (sizeof(StateHeaderV1) + sizeof(pg_crc32c)) ||
		read(fd, &hdr, sizeof(StateHeaderV1)) != sizeof(StateHeaderV1))
	{
		snprintf(why, sizeof(why), "The file is too short (%lld bytes).",
				 (long long) st.st_size);
		CloseTransientFile(fd);
		set_aside(why);
		return false;
	}
	if (hdr.magic != STATE_MAGIC)
	{
		snprintf(why, sizeof(why), "The file does not start with the dbgate magic number.");
		CloseTransientFile(fd);
		set_aside(why);
		return false;
	}
	if (hdr.version == 1)
	{
		hdrsize = sizeof(StateHeaderV1);
		budgetsize = sizeof(StateBudgetV1);
		hdr.ndbs = 0;
	}
	else if (hdr.version == STATE_VERSION)
	{
		hdrsize = sizeof(StateHeader);
		budgetsize = sizeof(StateBudget);
	}
	else
	{
		snprintf(why, sizeof(why), "The file has format version %u, expected 1 to %u.",
				 hdr.version, STATE_VERSION);
		CloseTransientFile(fd);
		set_aside(why);
		return false;
	}

	buf = palloc(hdrsize);
	memcpy(buf, &hdr, sizeof(StateHeaderV1));
	if (hdrsize > sizeof(StateHeaderV1) &&
		read(fd, buf + sizeof(StateHeaderV1), hdrsize - sizeof(StateHeaderV1)) !=
		(ssize_t) (hdrsize - sizeof(StateHeaderV1)))
	{
		snprintf(why, sizeof(why), "The file is too short (%lld bytes).",
				 (long long) st.st_size);
		CloseTransientFile(fd);
		goto bad;
	}
	memcpy(&hdr, buf, hdrsize);
	pfree(buf);
	buf = NULL;

	/* never more than the largest settings allow: the writer checks them */
	if (hdr.nbudgets > DBGATE_MAX_BUDGETS_LIMIT ||
		hdr.nroles > DBGATE_MAX_ROLES_LIMIT ||
		hdr.ndbs > DBGATE_MAX_ROLES_LIMIT ||
		(hdr.version >= 2 && hdr.reserved != 0))
	{
		snprintf(why, sizeof(why), "The file claims %u budgets, %u role and %u database assignments.",
				 hdr.nbudgets, hdr.nroles, hdr.ndbs);
		CloseTransientFile(fd);
		goto bad;
	}
	expected = hdrsize + budgetsize * (Size) hdr.nbudgets +
		sizeof(StateRole) * (Size) hdr.nroles +
		sizeof(StateDb) * (Size) hdr.ndbs + sizeof(pg_crc32c);
	if ((Size) st.st_size != expected)
	{
		snprintf(why, sizeof(why), "The file has %lld bytes, expected %zu.",
				 (long long) st.st_size, expected);
		CloseTransientFile(fd);
		goto bad;
	}

	buf = palloc_extended(expected, MCXT_ALLOC_HUGE | MCXT_ALLOC_NO_OOM);
	if (buf == NULL)
	{
		snprintf(why, sizeof(why), "Out of memory reading %zu bytes.", expected);
		CloseTransientFile(fd);
		goto bad;
	}
	memcpy(buf, &hdr, hdrsize);
	errno = 0;
	if (read(fd, buf + hdrsize, expected - hdrsize) != (ssize_t) (expected - hdrsize))
	{
		snprintf(why, sizeof(why), "Could not read the file: %s.",
				 errno ? strerror(errno) : "short read");
		CloseTransientFile(fd);
		goto bad;
	}
	CloseTransientFile(fd);

	INIT_CRC32C(crc);
	COMP_CRC32C(crc, buf, expected - sizeof(pg_crc32c));
	FIN_CRC32C(crc);
	memcpy(&stored, buf + expected - sizeof(pg_crc32c), sizeof(stored));
	if (!EQ_CRC32C(crc, stored))
	{
		snprintf(why, sizeof(why), "The checksum does not match.");
		goto bad;
	}

	if (!decode_records(buf + hdrsize, hdr.version, hdr.nbudgets, hdr.nroles,
						hdr.ndbs, config, why, sizeof(why)))
		goto bad;
	pfree(buf);

	trim_to_capacity(config);

	ereport(LOG,
			(errmsg("dbgate loaded %d budgets, %d role assignments and %d database assignments from \"%s\"",
					config->nbudgets, config->nroles, config->ndbs,
					DBGATE_STATE_FILE)));
	return true;

bad:
	if (buf)
		pfree(buf);
	dbgate_image_free(config);
	set_aside(why);
	return false;
}
