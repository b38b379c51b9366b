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
 *	  header	magic, version, nbudgets, nroles
 *	  budgets	nbudgets x StateBudget
 *	  roles		nroles x StateRole
 *	  crc		CRC-32C of everything before it
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
#define STATE_VERSION	1

typedef struct StateHeader
{
	uint32		magic;
	uint32		version;
	uint32		nbudgets;
	uint32		nroles;
} StateHeader;

typedef struct StateBudget
{
	char		name[NAMEDATALEN];
	int32		max_active;
	int32		max_queued;
	int32		queue_timeout_ms;
	int32		statement_timeout_ms;
	int32		lock_timeout_ms;
	int32		fair;
} StateBudget;

typedef struct StateRole
{
	uint32		roleid;
	char		budget[NAMEDATALEN];
} StateRole;

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

	len = sizeof(StateHeader) + sizeof(StateBudget) * config->nbudgets +
		sizeof(StateRole) * config->nroles + sizeof(pg_crc32c);
	buf = palloc0(len);
	p = buf;
	memcpy(p, &hdr, sizeof(hdr));
	p += sizeof(hdr);
	for (i = 0; i < config->nbudgets; i++)
	{
		const DbgateBudgetConf *c = &config->budgets[i];
		StateBudget sb;

		memset(&sb, 0, sizeof(sb));
		strlcpy(sb.name, c->name, NAMEDATALEN);
		sb.max_active = c->max_active;
		sb.max_queued = c->max_queued;
		sb.queue_timeout_ms = c->queue_timeout_ms;
		sb.statement_timeout_ms = c->statement_timeout_ms;
		sb.lock_timeout_ms = c->lock_timeout_ms;
		sb.fair = c->fair ? 1 : 0;
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
	INIT_CRC32C(crc);
	COMP_CRC32C(crc, buf, p - buf);
	FIN_CRC32C(crc);
	memcpy(p, &crc, sizeof(crc));

	fd = OpenTransientFile(DBGATE_STATE_TMPFILE,
						   O_WRONLY | O_CREAT | O_TRUNC | PG_BINARY);
	if (fd < 0)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not create dbgate state file \"%s\": %m",
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
				 errmsg("could not write dbgate state file \"%s\": %m",
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
				 errmsg("could not fsync dbgate state file \"%s\": %m",
						DBGATE_STATE_TMPFILE)));
	}
	if (CloseTransientFile(fd) != 0)
	{
		unlink(DBGATE_STATE_TMPFILE);
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not close dbgate state file \"%s\": %m",
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
				 errmsg("could not remove dbgate state file \"%s\": %m",
						DBGATE_STATE_TMPFILE)));
}

/* ----------
 * Reading (postmaster, shared-memory start-up)
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
	Size		expected;
	pg_crc32c	crc,
				stored;
	const char *p;
	uint32		i;
	char		why[256];

	dbgate_config_init(config);

	/* a temporary file left by a crash mid-commit was never committed */
	(void) unlink(DBGATE_STATE_TMPFILE);

	if (stat(DBGATE_STATE_FILE, &st) != 0)
	{
		if (errno == ENOENT)
			return false;
		snprintf(why, sizeof(why), "could not stat the file: %s",
				 strerror(errno));
		set_aside(why);
		return false;
	}
	if (st.st_size < (off_t) (sizeof(StateHeader) + sizeof(pg_crc32c)) ||
		st.st_size > (off_t) 64 * 1024 * 1024)
	{
		snprintf(why, sizeof(why), "The file has an impossible size of %lld bytes.",
				 (long long) st.st_size);
		set_aside(why);
		return false;
	}

	fd = OpenTransientFile(DBGATE_STATE_FILE, O_RDONLY | PG_BINARY);
	if (fd < 0)
	{
		snprintf(why, sizeof(why), "could not open the file: %s", strerror(errno));
		set_aside(why);
		return false;
	}
	buf = palloc(st.st_size);
	if (read(fd, buf, st.st_size) != st.st_size)
	{
		snprintf(why, sizeof(why), "could not read the file: %s",
				 errno ? strerror(errno) : "short read");
		CloseTransientFile(fd);
		pfree(buf);
		set_aside(why);
		return false;
	}
	CloseTransientFile(fd);

	memcpy(&hdr, buf, sizeof(hdr));
	if (hdr.magic != STATE_MAGIC)
	{
		snprintf(why, sizeof(why), "The file does not start with the dbgate magic number.");
		goto bad;
	}
	if (hdr.version != STATE_VERSION)
	{
		snprintf(why, sizeof(why), "The file has format version %u, expected %u.",
				 hdr.version, STATE_VERSION);
		goto bad;
	}
	if (hdr.nbudgets > 1000000 || hdr.nroles > 10000000)
	{
		snprintf(why, sizeof(why), "The file claims %u budgets and %u roles.",
				 hdr.nbudgets, hdr.nroles);
		goto bad;
	}
	expected = sizeof(StateHeader) + sizeof(StateBudget) * (Size) hdr.nbudgets +
		sizeof(StateRole) * (Size) hdr.nroles + sizeof(pg_crc32c);
	if ((Size) st.st_size != expected)
	{
		snprintf(why, sizeof(why), "The file has %lld bytes, expected %zu.",
				 (long long) st.st_size, expected);
		goto bad;
	}
	INIT_CRC32C(crc);
	COMP_CRC32C(crc, buf, expected - sizeof(pg_crc32c));
	FIN_CRC32C(crc);
	memcpy(&stored, buf + expected - sizeof(pg_crc32c), sizeof(stored));
	if (!EQ_CRC32C(crc, stored))
	{
		snprintf(why, sizeof(why), "The checksum does not match.");
		goto bad;
	}

	config->maxbudgets = Max(hdr.nbudgets, 1);
	config->budgets = palloc0(sizeof(DbgateBudgetConf) * config->maxbudgets);
	config->maxroles = Max(hdr.nroles, 1);
	config->roles = palloc0(sizeof(DbgateRoleConf) * config->maxroles);

	p = buf + sizeof(StateHeader);
	for (i = 0; i < hdr.nbudgets; i++)
	{
		StateBudget sb;
		DbgateBudgetConf *c;

		memcpy(&sb, p, sizeof(sb));
		p += sizeof(sb);
		if (!valid_name(sb.name) || sb.max_active < 1 || sb.max_queued < 0 ||
			sb.queue_timeout_ms < 0 || sb.statement_timeout_ms < 0 ||
			sb.lock_timeout_ms < 0 || (sb.fair != 0 && sb.fair != 1))
		{
			snprintf(why, sizeof(why), "Budget record %u has invalid values.", i + 1);
			goto bad;
		}
		if (dbgate_config_find_budget(config, sb.name) >= 0)
		{
			snprintf(why, sizeof(why), "Budget \"%s\" appears twice.", sb.name);
			goto bad;
		}
		c = &config->budgets[config->nbudgets++];
		memset(c, 0, sizeof(*c));
		strlcpy(c->name, sb.name, NAMEDATALEN);
		c->max_active = sb.max_active;
		c->max_queued = sb.max_queued;
		c->queue_timeout_ms = sb.queue_timeout_ms;
		c->statement_timeout_ms = sb.statement_timeout_ms;
		c->lock_timeout_ms = sb.lock_timeout_ms;
		c->fair = (sb.fair == 1);
		c->scope = DBGATE_SCOPE_STATEMENT;
		c->parallel_workers = -1;
		c->enforce = true;
		c->src_index = -1;
	}
	for (i = 0; i < hdr.nroles; i++)
	{
		StateRole	sr;
		DbgateRoleConf *r;

		memcpy(&sr, p, sizeof(sr));
		p += sizeof(sr);
		if (!OidIsValid(sr.roleid) || !valid_name(sr.budget) ||
			dbgate_config_find_budget(config, sr.budget) < 0 ||
			dbgate_config_find_role(config, sr.roleid) >= 0)
		{
			snprintf(why, sizeof(why), "Role assignment record %u is invalid.", i + 1);
			goto bad;
		}
		r = &config->roles[config->nroles++];
		r->roleid = sr.roleid;
		strlcpy(r->budget, sr.budget, NAMEDATALEN);
	}
	pfree(buf);

	/* a lowered dbgate.max_budgets / max_roles keeps what fits */
	if (config->nbudgets > dbgate_max_budgets)
	{
		ereport(WARNING,
				(errmsg("dbgate state file \"%s\" has %d budgets but dbgate.max_budgets is %d",
						DBGATE_STATE_FILE, config->nbudgets, dbgate_max_budgets),
				 errdetail("Only the first %d budgets are loaded.", dbgate_max_budgets),
				 errhint("Raise dbgate.max_budgets and restart the server before changing budgets, or the others are lost.")));
		config->nbudgets = dbgate_max_budgets;
		for (i = config->nroles; i > 0; i--)
		{
			if (dbgate_config_find_budget(config, config->roles[i - 1].budget) < 0)
				config->roles[i - 1] = config->roles[--config->nroles];
		}
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

	ereport(LOG,
			(errmsg("dbgate loaded %d budgets and %d role assignments from \"%s\"",
					config->nbudgets, config->nroles, DBGATE_STATE_FILE)));
	return true;

bad:
	if (buf)
		pfree(buf);
	if (config->budgets)
		pfree(config->budgets);
	if (config->roles)
		pfree(config->roles);
	dbgate_config_init(config);
	set_aside(why);
	return false;
}
