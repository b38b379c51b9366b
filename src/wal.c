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
 *	  - the next IMAGE record is replayed and the commit log says the
 *		transaction committed (its commit record came before: commits are
 *		serialised, so a transaction that logged an IMAGE record and did not
 *		commit before the next one was logged never will), or
 *	  - recovery ends (rm_cleanup) and the commit log says it committed.
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
 * dbgate on this server (see refuse_newer()); a damaged record is a PANIC.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/transam.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "access/xlog_internal.h"
#include "access/xloginsert.h"
#include "access/xlogreader.h"
#include "access/xlogrecovery.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "postmaster/bgworker.h"
#include "storage/ipc.h"
#include "utils/memutils.h"

#include "compat.h"
#include "dbgate.h"
#include "fields.h"

#define DBGATE_RMGR_ID			219

/* record types (the high bits of the info byte) */
#define XLOG_DBGATE_IMAGE		0x00
#define XLOG_DBGATE_CONFIRM		0x10

typedef struct DbgateConfirmRecord
{
	TransactionId xid;
} DbgateConfirmRecord;

static void dbgate_redo(XLogReaderState *record);
static void dbgate_desc(StringInfo buf, XLogReaderState *record);
static const char *dbgate_identify(uint8 info);
static void dbgate_redo_startup(void);
static void dbgate_redo_cleanup(void);
static void refuse_newer(XLogReaderState *record, uint32 format);

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
static void
dbgate_redo_startup(void)
{
	if (redo_context == NULL)
		redo_context = AllocSetContextCreate(TopMemoryContext,
											 "dbgate redo",
											 ALLOCSET_DEFAULT_SIZES);
	stash_valid = false;
	dbgate_image_init(&stash_image);
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
	if (TransactionIdDidCommit(stash_xid))
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

				(void) settle_stash();
				old = MemoryContextSwitchTo(redo_context);
				result = dbgate_state_decode(XLogRecGetData(record),
											 XLogRecGetDataLen(record),
											 &stash_image, &unused, &format,
											 why, sizeof(why));
				if (result == DBGATE_DECODE_NEWER)
					refuse_newer(record, format);
				if (result != DBGATE_DECODE_OK)
					elog(PANIC, "invalid dbgate configuration record at %X/%X: %s",
						 LSN_FORMAT_ARGS(record->ReadRecPtr), why);
				MemoryContextSwitchTo(old);
				stash_valid = true;
				stash_xid = XLogRecGetXid(record);
				stash_lsn = record->ReadRecPtr;
			}
			break;

		case XLOG_DBGATE_CONFIRM:
			{
				DbgateConfirmRecord rec;

				memcpy(&rec, XLogRecGetData(record), sizeof(rec));
				if (stash_valid && stash_xid == rec.xid)
				{
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
