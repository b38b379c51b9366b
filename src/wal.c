/*-------------------------------------------------------------------------
 *
 * wal.c
 *	  WAL records of configuration changes, and their redo.
 *
 * dbgate registers a custom WAL resource manager (DBGATE_RMGR_ID) so that
 * a committed configuration change travels with the WAL: crash recovery,
 * streaming and cascading standbys, and point-in-time recovery all see
 * exactly the committed changes, in commit order, at the WAL position of
 * their commit.
 *
 * How a change travels (config.c drives it from the transaction callbacks):
 *	  PRE_COMMIT  the committing transaction (holding the commit lock, which
 *				  serialises configuration commits) gets a transaction ID
 *				  and logs an IMAGE record: the complete new configuration,
 *				  encoded like the state file, with the transaction's ID in
 *				  the record header.  The temporary state file is written.
 *	  COMMIT	  after PostgreSQL's commit record is flushed: the state
 *				  file is renamed into place, the image installed, and a
 *				  CONFIRM record (the transaction ID) logged and flushed.
 * Redo (the startup process) keeps the image of the last IMAGE record
 * aside and installs it, and writes the state file, when
 *	  - the CONFIRM record of its transaction is replayed, or
 *	  - the next IMAGE record of another transaction is replayed and the
 *		commit log says the transaction committed (its commit record came
 *		before: commits are serialised, so a transaction that logged an
 *		IMAGE record and did not commit before another one was logged never
 *		will), or
 *	  - recovery ends (rm_cleanup) and the commit log says it committed.
 * What does not fit this server's dbgate.max_budgets and max_roles is left
 * out of the installed configuration by the rule of the state file's load
 * (confimage.c, dbgate_image_fit()), with a WARNING; the state file that
 * replay writes holds the whole image, as the primary's does.  The same
 * fit clears a runaway_budget that the image names and lacks, which the
 * decoder lets through for it (persist.c): such a record is replayed with
 * a WARNING, never refused as damaged.
 *
 * Budgets dropped and created again.  Replay matches the budgets of an
 * image with those installed by name (the primary's entries mean nothing
 * here), but a budget that one transaction dropped and created again is a
 * new budget on the primary: counters from zero, a full token bucket.  For
 * such a transaction the committing backend logs two IMAGE records, first
 * the configuration without those budgets, then the new configuration
 * (config.c).  An IMAGE record of the transaction whose image is set aside
 * replaces that image, and the budgets it has that the earlier image
 * lacked are marked as new ones (DBGATE_SRC_RECREATED), which the install
 * does not match by name.  The earlier record is never installed: both
 * precede the commit record.  A server without this rule (dbgate 1.1)
 * settles the earlier image at the later record as one whose transaction
 * has not committed, drops it, and installs the later one matched by name,
 * as it always did.
 * An image whose transaction aborted (an error after PRE_COMMIT, a crash
 * before the commit record) is therefore never installed: it is dropped
 * by the same checks.  The last two cases cover a crash between the
 * commit record and the CONFIRM record (a commit waiting for a synchronous
 * standby sits there).  A server that installed a change so at the end of
 * its recovery then logs the missing CONFIRM record from a background
 * worker, once it accepts writes, for the standbys streaming from it.
 *
 * Checkpoints.  The state file is the base from which recovery replays: it
 * must hold every change whose IMAGE record lies before the redo point of
 * the checkpoint recovery starts from.  From before its IMAGE record until
 * the state file is durably in place (or the transaction has aborted), the
 * committing backend sets DELAY_CHKPT_COMPLETE: a checkpoint whose redo
 * point falls in between cannot complete before the file is written, and a
 * checkpoint whose redo point comes earlier replays the IMAGE record.  The
 * commit record is flushed before the file is renamed, also with
 * synchronous_commit = off, so the file never holds a change whose commit
 * could be lost.  Replay writes the file at every change it installs, so a
 * standby's restart points and a promoted standby have the same base.
 *
 * The state file names the WAL position of the IMAGE record it holds.
 * Replay installs only images logged after it, so recovery never moves the
 * configuration back to an older one (a base backup copies the file while
 * the server runs: it may hold a change logged after the backup's start).
 * Point-in-time recovery restores the configuration as of the recovery
 * target, except when the backup's state file already holds a change
 * logged after the target; that is reported with a WARNING at the end of
 * recovery, and the file is then marked current at the end of recovery so
 * that the changes of the new timeline count as newer.
 *
 * The set-aside image survives restarts.  Replay restarts at the last
 * restartpoint, and a restartpoint may lie between an IMAGE record and the
 * record that settles it.  Not on the normal path: the committing backend
 * logs its CONFIRM record before it stops delaying checkpoints, so the
 * record of a checkpoint whose redo point follows the IMAGE record comes
 * after the CONFIRM.  But after a crash between a commit record and its
 * CONFIRM record, the primary logs the CONFIRM only after its
 * end-of-recovery checkpoint: a standby that makes a restartpoint at that
 * checkpoint and restarts before it replays the CONFIRM would have lost an
 * image kept in memory only, and would ignore the late CONFIRM (running
 * without the change until the next one).  So when an IMAGE record is
 * replayed, the set-aside image is also written to the file "dbgate.stash"
 * in the data directory: the record's data as logged, its transaction ID
 * and position, the names of the budgets marked as created again, with a
 * CRC-32C; through a temporary file, fsynced and
 * durably renamed before the next record is replayed, so before any
 * restartpoint can pass the record.  rm_startup takes the file back as
 * the set-aside image if
 *	  - its IMAGE record lies before the point where this replay starts
 *		(replay will not meet it again), and
 *	  - its position is after the state file's (not installed yet);
 * otherwise it removes the file: replay meets the record again (if it is
 * on this server's history), or the change is installed already.  From
 * there the CONFIRM record, a later IMAGE record or the end of recovery
 * settle it as above.  The end of recovery removes the file.  An install
 * by the CONFIRM record leaves it in place until the next IMAGE record
 * replaces it or the next start removes it: a base backup taken from a
 * standby that replays the CONFIRM meanwhile may copy the state file from
 * before the install and this file from after it, and must still find the
 * change (pg_basebackup copies both files, as it copies every file it does
 * not know; a server made from the backup judges the copied file against
 * the backup's start point like any other).
 *
 * The file never makes a server install a change that did not commit:
 *	  - it only ever becomes the set-aside image, which is installed only at
 *		its own CONFIRM record (logged after the commit record) or when the
 *		commit log says that its transaction committed;
 *	  - it is taken back only when its IMAGE record is on the history being
 *		replayed, so that its transaction ID names the same transaction.
 *		The file was written when this server replayed the record; each
 *		start whose replay begins at or before the record removes it; so
 *		it survives a start only if a restartpoint of this server passed
 *		the record on the history that contains it, and PostgreSQL goes on
 *		from a restartpoint only along that restartpoint's history (a
 *		server that replayed past a timeline fork cannot follow the other
 *		branch).  A base backup carries the file of the server it was taken
 *		from, whose history holds both the record and the backup's start
 *		point; pg_rewind copies it with the source's history likewise;
 *	  - a transaction ID older than the commit log's horizon (an image left
 *		unsettled for a very long time) counts as not committed: its status
 *		is gone, and looking it up would stop recovery.
 *
 * The orders of events, for one server (a standby, or a server in crash
 * or point-in-time recovery):
 *	  - restartpoint before the IMAGE record, restart: replay starts before
 *		the record; the file is removed and written again when the record
 *		is replayed again;
 *	  - restartpoint after the IMAGE record, restart before its CONFIRM: the
 *		file is taken back; the CONFIRM, a later IMAGE record or the end of
 *		recovery settle it;
 *	  - restart after the CONFIRM: the state file holds the change; the
 *		file is removed;
 *	  - a transaction of two IMAGE records (budgets created again): the
 *		file holds the later one with its marks once that is replayed.  A
 *		restart after the earlier one and before the later one replays
 *		both again: a restartpoint there is at a checkpoint record before
 *		the later one, whose redo point precedes the earlier one (a
 *		checkpoint whose redo point follows it waits for the transaction
 *		to stop delaying checkpoints, after its CONFIRM);
 *	  - a crash of the server itself while it writes the file: a temporary
 *		file is removed at the next start, and an older file is judged as
 *		above (its record precedes the one being replayed, which settles
 *		it when it is replayed again); a crash between an install and the
 *		removal of the file: the state file's position shows the change
 *		installed;
 *	  - a transaction that aborted: its image stays set aside, in memory and
 *		in the file, until the next IMAGE record or the end of recovery
 *		drops it;
 *	  - promotion and the end of point-in-time recovery: rm_cleanup settles
 *		by the commit log as of the end of recovery (a change committed
 *		after the recovery target is dropped) and removes the file.
 * Not covered: a recovery that replays no record at all calls no resource
 * manager (a standby promoted right after a restart at the last record it
 * has); the file then stays unsettled and the server runs without the
 * change, as it would have without the file, until a later recovery that
 * replays something settles it (installing it only if no change came
 * after it).
 *
 * The resource manager ID: custom resource managers have IDs 128 to 255;
 * 128 (RM_EXPERIMENTAL_ID) is meant for trying things out, so dbgate takes
 * 219 (0xDB) from the same range.  IDs are handed out by PostgreSQL's
 * public list of custom WAL resource managers (the wiki page
 * "CustomWALResourceManagers"), which does not list 219 for dbgate yet: it
 * must be registered there before a release.  Until then another
 * extension may take it; PostgreSQL then refuses to start with both
 * modules preloaded ("failed to register custom resource manager ... with
 * ID 219"), so a clash cannot go unnoticed.
 *
 * Formats: an IMAGE record is encoded like the state file (persist.c),
 * with its format version.  A record of a newer format than this library
 * reads stops recovery with FATAL and a message that says to upgrade
 * dbgate on this server (see refuse_newer()); a damaged record (one that
 * does not decode: persist.c's checks, which let through what a fit can
 * clear) is a PANIC.  Format 4 (1.3, unreleased) gained the key fields
 * (key_by, key_max_active, key_max_queued, key_max_rate, key_rate_burst)
 * in the middle of its budget record: an IMAGE record of format 4 logged
 * by an earlier build of 1.3 does not decode here.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "access/transam.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "access/xlog_internal.h"
#include "access/xloginsert.h"
#include "access/xlogreader.h"
#include "access/xlogrecovery.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "port/pg_crc32c.h"
#include "postmaster/bgworker.h"
#include "storage/fd.h"
#include "storage/ipc.h"
#include "utils/memutils.h"

#include "budgets.h"
#include "compat.h"
#include "confimage.h"
#include "fields.h"
#include "persist.h"
#include "shmem.h"
#include "wal.h"

#define DBGATE_RMGR_ID			219

/* record types (the high bits of the info byte) */
#define XLOG_DBGATE_IMAGE		0x00
#define XLOG_DBGATE_CONFIRM		0x10

typedef struct DbgateConfirmRecord
{
	TransactionId xid;
} DbgateConfirmRecord;

/* The set-aside image across restarts (see the file header). */
#define STASH_FILE		"dbgate.stash"
#define STASH_TMPFILE	"dbgate.stash.tmp"
#define STASH_MAGIC		0x44424753	/* "DBGS" */
#define STASH_VERSION	2

/*
 * The file: this header, then 'len' bytes of the IMAGE record's data as
 * logged, then (version 2) the number of budgets that the transaction
 * dropped and created again as a uint32 and their names (NAMEDATALEN bytes
 * each), then the CRC-32C of everything before it.  Native byte order.
 * Version 1 (no count and names) is read too.
 */
typedef struct StashFileHeader
{
	uint32		magic;
	uint32		version;
	TransactionId xid;			/* the IMAGE record's transaction */
	uint32		len;
	uint64		lsn;			/* the IMAGE record's start */
} StashFileHeader;

static void dbgate_redo(XLogReaderState *record);
static void dbgate_desc(StringInfo buf, XLogReaderState *record);
static const char *dbgate_identify(uint8 info);
static void dbgate_redo_startup(void);
static void dbgate_redo_cleanup(void);
static void refuse_newer(XLogReaderState *record, uint32 format);
static void forget_stash(void);

PGDLLEXPORT void dbgate_confirm_main(Datum main_arg);

static RmgrData dbgate_rmgr = {
	.rm_name = "dbgate",
	.rm_redo = dbgate_redo,
	.rm_desc = dbgate_desc,
	.rm_identify = dbgate_identify,
	.rm_startup = dbgate_redo_startup,
	.rm_cleanup = dbgate_redo_cleanup,
};

/* redo state (startup process) */
static MemoryContext redo_context = NULL;
static bool stash_valid = false;
static TransactionId stash_xid = InvalidTransactionId;
static XLogRecPtr stash_lsn = InvalidXLogRecPtr;
static DbgateConfig stash_image;

/*
 * Register the resource manager.  _PG_init, while preloading.
 */
void
dbgate_wal_init(void)
{
	RegisterCustomRmgr(DBGATE_RMGR_ID, &dbgate_rmgr);
}

/* ----------
 * Logging (the committing backend)
 * ----------
 */

/*
 * Log the complete new configuration as part of the current transaction
 * (an ID is assigned if it has none).  Returns the record's start position.
 */
XLogRecPtr
dbgate_wal_log_image(const DbgateConfig *config)
{
	char	   *buf;
	Size		len;

	(void) GetCurrentTransactionId();
	buf = dbgate_state_encode(config, InvalidXLogRecPtr, &len);
	XLogBeginInsert();
	XLogRegisterData(buf, len);
	(void) XLogInsert(DBGATE_RMGR_ID, XLOG_DBGATE_IMAGE);
	pfree(buf);
	return ProcLastRecPtr;
}

/*
 * Log that transaction 'xid' committed its change, and flush it so that
 * standbys apply the change at once.  Runs after commit: cannot fail but
 * with a PANIC of WAL writing itself.
 */
void
dbgate_wal_log_confirm(TransactionId xid)
{
	DbgateConfirmRecord rec;
	XLogRecPtr	end;

	rec.xid = xid;
	XLogBeginInsert();
	XLogRegisterData((char *) &rec, sizeof(rec));
	end = XLogInsert(DBGATE_RMGR_ID, XLOG_DBGATE_CONFIRM);
	XLogFlush(end);
}

/* ----------
 * Redo (the startup process)
 * ----------
 */

/* write() all of buf; false with errno set (ENOSPC for a short write) */
static bool
write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;

	while (len > 0)
	{
		ssize_t		n;

		errno = 0;
		n = write(fd, p, len);
		if (n <= 0)
		{
			if (n < 0 && errno == EINTR)
				continue;
			if (errno == 0)
				errno = ENOSPC;
			return false;
		}
		p += n;
		len -= n;
	}
	return true;
}

/*
 * Write the set-aside image's file durably: the data of the IMAGE record
 * at 'lsn' of transaction 'xid', and the names of the budgets of 'image'
 * (decoded from it) that the transaction created again.  Throws on
 * failure: recovery stops, as for any record that cannot be applied.
 */
static void
stash_file_write(TransactionId xid, XLogRecPtr lsn, const char *data,
				 uint32 len, const DbgateConfig *image)
{
	StashFileHeader hdr;
	pg_crc32c	crc;
	int			fd;
	uint32		nrecreated = 0;
	char	   *names = palloc(NAMEDATALEN * Max(image->nbudgets, 1));
	int			i;

	for (i = 0; i < image->nbudgets; i++)
	{
		if (image->budgets[i].src_index == DBGATE_SRC_RECREATED)
			memcpy(names + NAMEDATALEN * nrecreated++, image->budgets[i].name,
				   NAMEDATALEN);
	}
	memset(&hdr, 0, sizeof(hdr));
	hdr.magic = STASH_MAGIC;
	hdr.version = STASH_VERSION;
	hdr.xid = xid;
	hdr.len = len;
	hdr.lsn = lsn;
	INIT_CRC32C(crc);
	COMP_CRC32C(crc, &hdr, sizeof(hdr));
	COMP_CRC32C(crc, data, len);
	COMP_CRC32C(crc, &nrecreated, sizeof(nrecreated));
	COMP_CRC32C(crc, names, NAMEDATALEN * nrecreated);
	FIN_CRC32C(crc);

	fd = OpenTransientFile(STASH_TMPFILE,
						   O_WRONLY | O_CREAT | O_TRUNC | PG_BINARY);
	if (fd < 0)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not create file \"%s\": %m", STASH_TMPFILE)));
	if (!write_all(fd, &hdr, sizeof(hdr)) || !write_all(fd, data, len) ||
		!write_all(fd, &nrecreated, sizeof(nrecreated)) ||
		!write_all(fd, names, NAMEDATALEN * nrecreated) ||
		!write_all(fd, &crc, sizeof(crc)))
	{
		int			save_errno = errno;

		CloseTransientFile(fd);
		errno = save_errno;
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not write file \"%s\": %m", STASH_TMPFILE)));
	}
	if (CloseTransientFile(fd) != 0)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not close file \"%s\": %m", STASH_TMPFILE)));
	/* fsyncs the file before and the directory after the rename */
	(void) durable_rename(STASH_TMPFILE, STASH_FILE, ERROR);
	pfree(names);
}

/* Remove the set-aside image's file, if there is one. */
static void
stash_file_remove(void)
{
	struct stat st;

	if (stat(STASH_FILE, &st) != 0)
		return;
	(void) durable_unlink(STASH_FILE, WARNING);
}

/*
 * Mark budget 'name' of a decoded image (sorted by name) as created again
 * by its transaction.  Returns false if the image has no such budget.
 */
static bool
mark_recreated(DbgateConfig *image, const char *name)
{
	DbgateBudgetConf *c = bsearch(name, image->budgets, image->nbudgets,
								  sizeof(DbgateBudgetConf), dbgate_image_budget_cmp);

	if (c == NULL)
		return false;
	c->src_index = DBGATE_SRC_RECREATED;
	return true;
}

/* mark_recreated() for 'n' names of NAMEDATALEN bytes each, as stored */
static bool
mark_recreated_names(DbgateConfig *image, const char *names, uint32 n)
{
	uint32		i;

	for (i = 0; i < n; i++)
	{
		char		name[NAMEDATALEN];

		memcpy(name, names + (Size) NAMEDATALEN * i, NAMEDATALEN);
		name[NAMEDATALEN - 1] = '\0';
		if (!mark_recreated(image, name))
			return false;
	}
	return true;
}

/*
 * An IMAGE record of the transaction whose image is set aside: 'next'
 * replaces 'earlier'.  The transaction logged 'earlier' without the
 * budgets it dropped and created again (config.c), so a budget of 'next'
 * that 'earlier' lacks, or had marked, is such a budget: a new one.
 */
static void
mark_recreated_since(DbgateConfig *next, const DbgateConfig *earlier)
{
	int			i;

	for (i = 0; i < next->nbudgets; i++)
	{
		DbgateBudgetConf *c = &next->budgets[i];
		const DbgateBudgetConf *e = bsearch(c->name, earlier->budgets,
											earlier->nbudgets,
											sizeof(DbgateBudgetConf),
											dbgate_image_budget_cmp);

		if (e == NULL || e->src_index == DBGATE_SRC_RECREATED)
			c->src_index = DBGATE_SRC_RECREATED;
	}
}

/*
 * Read the file into the set-aside image.  Returns false, with a WARNING,
 * if the file cannot be read or does not check out.  Caller has made sure
 * the file exists.
 */
static bool
stash_file_read(void)
{
	StashFileHeader hdr;
	struct stat st;
	char	   *buf;
	pg_crc32c	crc;
	pg_crc32c	file_crc;
	char		why[256];
	int			fd;
	XLogRecPtr	unused;
	uint32		format;
	uint32		nrecreated = 0;
	Size		trailer;
	MemoryContext old;

	why[0] = '\0';
	fd = OpenTransientFile(STASH_FILE, O_RDONLY | PG_BINARY);
	if (fd < 0 || fstat(fd, &st) != 0)
	{
		snprintf(why, sizeof(why), "Could not read the file: %s.",
				 strerror(errno));
		if (fd >= 0)
			CloseTransientFile(fd);
		goto bad;
	}
	if (st.st_size < (off_t) (sizeof(hdr) + sizeof(crc)) ||
		(Size) st.st_size > MaxAllocSize)
	{
		snprintf(why, sizeof(why), "The file has an impossible size of %lld bytes.",
				 (long long) st.st_size);
		CloseTransientFile(fd);
		goto bad;
	}
	old = MemoryContextSwitchTo(redo_context);
	buf = palloc(st.st_size);
	MemoryContextSwitchTo(old);
	errno = 0;
	if (read(fd, buf, st.st_size) != st.st_size)
	{
		snprintf(why, sizeof(why), "Could not read the file: %s.",
				 errno ? strerror(errno) : "short read");
		CloseTransientFile(fd);
		goto bad;
	}
	CloseTransientFile(fd);

	memcpy(&hdr, buf, sizeof(hdr));
	if (hdr.version == 2 &&
		(Size) st.st_size >= sizeof(hdr) + (Size) hdr.len + sizeof(nrecreated) + sizeof(crc))
		memcpy(&nrecreated, buf + sizeof(hdr) + hdr.len, sizeof(nrecreated));
	trailer = hdr.version == 2 ?
		sizeof(nrecreated) + (Size) NAMEDATALEN * nrecreated : 0;
	if (hdr.magic != STASH_MAGIC || (hdr.version != 1 && hdr.version != 2) ||
		nrecreated > DBGATE_MAX_BUDGETS_LIMIT ||
		(Size) st.st_size != sizeof(hdr) + (Size) hdr.len + trailer + sizeof(crc) ||
		!TransactionIdIsNormal(hdr.xid) || hdr.lsn == InvalidXLogRecPtr)
	{
		snprintf(why, sizeof(why), "The file's header is invalid.");
		goto bad;
	}
	INIT_CRC32C(crc);
	COMP_CRC32C(crc, buf, sizeof(hdr) + hdr.len + trailer);
	FIN_CRC32C(crc);
	memcpy(&file_crc, buf + sizeof(hdr) + hdr.len + trailer, sizeof(file_crc));
	if (!EQ_CRC32C(crc, file_crc))
	{
		snprintf(why, sizeof(why), "The file's checksum does not match.");
		goto bad;
	}
	old = MemoryContextSwitchTo(redo_context);
	if (dbgate_state_decode(buf + sizeof(hdr), hdr.len, &stash_image,
							&unused, &format, why, sizeof(why)) !=
		DBGATE_DECODE_OK)
	{
		MemoryContextSwitchTo(old);
		goto bad;
	}
	MemoryContextSwitchTo(old);
	if (!mark_recreated_names(&stash_image,
							  buf + sizeof(hdr) + hdr.len + sizeof(nrecreated),
							  nrecreated))
	{
		snprintf(why, sizeof(why), "The file names a budget created again that its image lacks.");
		goto bad;
	}
	pfree(buf);
	stash_xid = hdr.xid;
	stash_lsn = (XLogRecPtr) hdr.lsn;
	return true;

bad:
	ereport(WARNING,
			(errmsg("dbgate file \"%s\" is invalid, ignoring it", STASH_FILE),
			 errdetail("%s", why),
			 errhint("A configuration change waiting for its confirmation record may be missing until the next change; check it with SELECT * FROM dbgate.budgets.")));
	MemoryContextReset(redo_context);
	dbgate_image_init(&stash_image);
	return false;
}

/*
 * Replay starts: take back the image set aside before a restart, if replay
 * will not meet its IMAGE record again and the state file does not hold
 * it (see the file header); otherwise remove the file.
 */
static void
stash_file_restore(void)
{
	/* the end of the last replayed record: replay goes on from there */
	XLogRecPtr	start = GetXLogReplayRecPtr(NULL);
	XLogRecPtr	state_lsn;
	struct stat st;

	/* a temporary file left by a crash mid-write was never in place */
	if (unlink(STASH_TMPFILE) != 0 && errno != ENOENT)
		ereport(WARNING,
				(errcode_for_file_access(),
				 errmsg("could not remove file \"%s\": %m", STASH_TMPFILE)));
	if (stat(STASH_FILE, &st) != 0)
		return;

	if (stash_file_read())
	{
		LWLockAcquire(dbgate_shared->config_lock, LW_SHARED);
		state_lsn = dbgate_shared->state_lsn;
		LWLockRelease(dbgate_shared->config_lock);
		if (stash_lsn < start && stash_lsn > state_lsn)
		{
			stash_valid = true;
			ereport(LOG,
					(errmsg("dbgate took back the configuration change of transaction %u logged at %X/%X, which waits for its confirmation",
							stash_xid, LSN_FORMAT_ARGS(stash_lsn))));
			return;
		}
		forget_stash();
	}
	stash_file_remove();
}

static void
dbgate_redo_startup(void)
{
	if (redo_context == NULL)
		redo_context = AllocSetContextCreate(TopMemoryContext,
											 "dbgate redo",
											 ALLOCSET_DEFAULT_SIZES);
	stash_valid = false;
	dbgate_image_init(&stash_image);
	stash_file_restore();
}

/*
 * Install the set-aside image and write the state file.  A failure to
 * write the file stops recovery (an ERROR in the startup process), as for
 * any WAL record that cannot be applied.
 */
static void
install_stash(void)
{
	bool		newer;

	LWLockAcquire(dbgate_shared->config_lock, LW_SHARED);
	newer = stash_lsn > dbgate_shared->state_lsn;
	LWLockRelease(dbgate_shared->config_lock);
	if (newer)
	{
		dbgate_state_write_temp(&stash_image, stash_lsn);
		dbgate_state_commit_temp(ERROR);
		dbgate_install_replayed(&stash_image, stash_lsn);
	}
}

static void
forget_stash(void)
{
	stash_valid = false;
	MemoryContextReset(redo_context);
	dbgate_image_init(&stash_image);
}

/*
 * Settle the set-aside image: install it if its transaction committed.
 * Called only when it can no longer commit later (see the file header).
 * Returns the transaction ID when the image was installed so (its CONFIRM
 * record is missing), else InvalidTransactionId.
 */
static TransactionId
settle_stash(void)
{
	TransactionId committed = InvalidTransactionId;

	if (!stash_valid)
		return InvalidTransactionId;
	/* an ID older than the commit log's horizon counts as not committed */
	if (!TransactionIdPrecedes(stash_xid, DBGATE_OLDEST_CLOG_XID()) &&
		TransactionIdDidCommit(stash_xid))
	{
		install_stash();
		committed = stash_xid;
	}
	forget_stash();
	return committed;
}

/*
 * After recovery installed a committed change whose CONFIRM record is
 * missing (a crash between the commit record and it), log that record
 * once the server accepts writes, so that the standbys streaming from this
 * server apply the change too.  A background worker does it: the startup
 * process cannot write WAL.
 */
static void
request_confirm(TransactionId xid)
{
	BackgroundWorker worker;

	memset(&worker, 0, sizeof(worker));
	worker.bgw_flags = BGWORKER_SHMEM_ACCESS;
	worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
	worker.bgw_restart_time = BGW_NEVER_RESTART;
	snprintf(worker.bgw_library_name, BGW_MAXLEN, "dbgate");
	snprintf(worker.bgw_function_name, BGW_MAXLEN, "dbgate_confirm_main");
	snprintf(worker.bgw_name, BGW_MAXLEN, "dbgate configuration confirmation");
	snprintf(worker.bgw_type, BGW_MAXLEN, "dbgate configuration confirmation");
	worker.bgw_main_arg = TransactionIdGetDatum(xid);
	if (!RegisterDynamicBackgroundWorker(&worker, NULL))
		ereport(WARNING,
				(errmsg("could not register background worker \"%s\"",
						worker.bgw_name),
				 errdetail("Standbys apply the configuration change of transaction %u at the next configuration change.",
						   xid),
				 errhint("Raise max_worker_processes.")));
}

/*
 * The background worker of request_confirm().
 */
void
dbgate_confirm_main(Datum main_arg)
{
	TransactionId xid = DatumGetTransactionId(main_arg);

	BackgroundWorkerUnblockSignals();
	dbgate_wal_log_confirm(xid);
	ereport(LOG,
			(errmsg("dbgate logged the confirmation of the configuration change of transaction %u",
					xid)));
	proc_exit(0);
}

/*
 * A configuration record of a format version newer than this library
 * reads: the primary runs a newer dbgate.  Replaying on without it would
 * leave this server with another configuration than its primary, so
 * recovery stops.  FATAL, not PANIC: the postmaster treats any failure of
 * the startup process alike ("shutting down due to startup process
 * failure", no restart), and FATAL leaves no core file and says plainly
 * what to do.  Nothing was installed from the record.
 */
static void
refuse_newer(XLogReaderState *record, uint32 format)
{
	ereport(FATAL,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("dbgate configuration record at %X/%X has format version %u, which this version of dbgate cannot replay",
					LSN_FORMAT_ARGS(record->ReadRecPtr), format),
			 errdetail("This version of dbgate replays format versions 1 to %d; the record was logged by a newer version of dbgate on the primary.",
					   DBGATE_FORMAT_CURRENT),
			 errhint("Upgrade dbgate on this server to the version of the primary, then start the server again.  Standbys are upgraded before their primary.")));
}

static void
dbgate_redo(XLogReaderState *record)
{
	uint8		info = XLogRecGetInfo(record) & ~XLR_INFO_MASK;
	MemoryContext old;

	if (redo_context == NULL)
		dbgate_redo_startup();

	switch (info)
	{
		case XLOG_DBGATE_IMAGE:
			{
				char		why[256];
				XLogRecPtr	unused;
				uint32		format;
				DbgateDecodeResult result;
				DbgateConfig next;
				TransactionId xid = XLogRecGetXid(record);
				bool		same = stash_valid && stash_xid == xid;

				/* an earlier image of the same transaction is not settled */
				if (!same)
					(void) settle_stash();
				old = MemoryContextSwitchTo(redo_context);
				result = dbgate_state_decode(XLogRecGetData(record),
											 XLogRecGetDataLen(record),
											 &next, &unused, &format,
											 why, sizeof(why));
				if (result == DBGATE_DECODE_NEWER)
					refuse_newer(record, format);
				if (result != DBGATE_DECODE_OK)
					elog(PANIC, "invalid dbgate configuration record at %X/%X: %s",
						 LSN_FORMAT_ARGS(record->ReadRecPtr), why);
				if (same)
					mark_recreated_since(&next, &stash_image);
				dbgate_image_free(&stash_image);
				MemoryContextSwitchTo(old);
				stash_image = next;
				stash_valid = true;
				stash_xid = xid;
				stash_lsn = record->ReadRecPtr;
				/* kept across a restart until settled */
				stash_file_write(stash_xid, stash_lsn, XLogRecGetData(record),
								 XLogRecGetDataLen(record), &stash_image);
			}
			break;

		case XLOG_DBGATE_CONFIRM:
			{
				DbgateConfirmRecord rec;

				memcpy(&rec, XLogRecGetData(record), sizeof(rec));
				if (stash_valid && stash_xid == rec.xid)
				{
					/* the file stays until the next IMAGE or start */
					install_stash();
					forget_stash();
				}
			}
			break;

		default:
			elog(PANIC, "dbgate_redo: unknown op code %u", info);
	}
}

/*
 * End of recovery: settle the set-aside image.  If the state file holds a
 * change logged after the end of recovery (point-in-time recovery to a
 * target before it), it is kept, said so, and from now on regarded as
 * current at the end of recovery: the changes logged on the new timeline
 * come after it.
 */
static void
dbgate_redo_cleanup(void)
{
	XLogRecPtr	replayed = GetXLogReplayRecPtr(NULL);
	XLogRecPtr	state_lsn;

	if (redo_context != NULL)
	{
		TransactionId unconfirmed = settle_stash();

		if (TransactionIdIsValid(unconfirmed))
			request_confirm(unconfirmed);
	}
	stash_file_remove();

	LWLockAcquire(dbgate_shared->config_lock, LW_SHARED);
	state_lsn = dbgate_shared->state_lsn;
	LWLockRelease(dbgate_shared->config_lock);
	if (state_lsn > replayed)
	{
		DbgateConfig config;

		ereport(WARNING,
				(errmsg("dbgate state file \"%s\" holds a configuration change logged after the end of recovery",
						DBGATE_STATE_FILE),
				 errdetail("The file is current at %X/%X; recovery ended at %X/%X.",
						   LSN_FORMAT_ARGS(state_lsn), LSN_FORMAT_ARGS(replayed)),
				 errhint("The configuration is kept as in the file; check it with SELECT * FROM dbgate.budgets.")));
		dbgate_snapshot_config(&config);
		dbgate_state_write_temp(&config, replayed);
		dbgate_state_commit_temp(ERROR);
		LWLockAcquire(dbgate_shared->config_lock, LW_EXCLUSIVE);
		dbgate_shared->state_lsn = replayed;
		LWLockRelease(dbgate_shared->config_lock);
		dbgate_image_free(&config);
	}
}

/* ----------
 * Description (pg_waldump, pg_walinspect)
 * ----------
 */
static void
dbgate_desc(StringInfo buf, XLogReaderState *record)
{
	uint8		info = XLogRecGetInfo(record) & ~XLR_INFO_MASK;

	if (info == XLOG_DBGATE_IMAGE)
	{
		DbgateConfig config;
		XLogRecPtr	unused;
		uint32		format;
		char		why[256];

		switch (dbgate_state_decode(XLogRecGetData(record),
									XLogRecGetDataLen(record),
									&config, &unused, &format,
									why, sizeof(why)))
		{
			case DBGATE_DECODE_OK:
				appendStringInfo(buf, "format %u, budgets %d, role assignments %d, database assignments %d",
								 format, config.nbudgets, config.nroles, config.ndbs);
				dbgate_image_free(&config);
				break;
			case DBGATE_DECODE_NEWER:
				appendStringInfo(buf, "format %u, newer than this version of dbgate reads",
								 format);
				break;
			case DBGATE_DECODE_INVALID:
				appendStringInfo(buf, "invalid: %s", why);
				break;
		}
	}
	else if (info == XLOG_DBGATE_CONFIRM)
	{
		DbgateConfirmRecord rec;

		memcpy(&rec, XLogRecGetData(record), sizeof(rec));
		appendStringInfo(buf, "xid %u", rec.xid);
	}
}

static const char *
dbgate_identify(uint8 info)
{
	switch (info & ~XLR_INFO_MASK)
	{
		case XLOG_DBGATE_IMAGE:
			return "IMAGE";
		case XLOG_DBGATE_CONFIRM:
			return "CONFIRM";
	}
	return NULL;
}
