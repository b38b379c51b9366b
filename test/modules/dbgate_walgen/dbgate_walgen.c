/*-------------------------------------------------------------------------
 *
 * dbgate_walgen.c
 *	  Test-only: log WAL records of dbgate's resource manager with contents
 *	  the test chooses, as another version of dbgate would log them.
 *
 * Used by the TAP tests (036_config_wal_formats, 056_fit_runaway) through
 * walgen_functions() of test/perl/DbgateTest.pm, which builds this module
 * with PGXS into the test's own directory and creates the functions from
 * the file it built; the module is never installed.  The server must have dbgate in
 * shared_preload_libraries (the resource manager is registered there).
 *
 *	  dbgate_walgen_image(bytea) returns xid
 *		log an IMAGE record whose data is the argument, as part of the
 *		current transaction (which gets an ID); returns that ID
 *	  dbgate_walgen_confirm(xid)
 *		log and flush a CONFIRM record for a transaction ID
 *
 * The record types and the resource manager ID are those of src/wal.c.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "access/xlog.h"
#include "access/xloginsert.h"
#include "fmgr.h"
#if PG_VERSION_NUM >= 160000
#include "varatt.h"
#endif

PG_MODULE_MAGIC;

#define DBGATE_RMGR_ID			219
#define XLOG_DBGATE_IMAGE		0x00
#define XLOG_DBGATE_CONFIRM		0x10

PG_FUNCTION_INFO_V1(dbgate_walgen_image);
PG_FUNCTION_INFO_V1(dbgate_walgen_confirm);

Datum
dbgate_walgen_image(PG_FUNCTION_ARGS)
{
	bytea	   *data = PG_GETARG_BYTEA_PP(0);
	TransactionId xid = GetCurrentTransactionId();

	XLogBeginInsert();
	XLogRegisterData(VARDATA_ANY(data), VARSIZE_ANY_EXHDR(data));
	(void) XLogInsert(DBGATE_RMGR_ID, XLOG_DBGATE_IMAGE);
	PG_RETURN_TRANSACTIONID(xid);
}

Datum
dbgate_walgen_confirm(PG_FUNCTION_ARGS)
{
	TransactionId xid = PG_GETARG_TRANSACTIONID(0);
	XLogRecPtr	end;

	XLogBeginInsert();
	XLogRegisterData((char *) &xid, sizeof(xid));
	end = XLogInsert(DBGATE_RMGR_ID, XLOG_DBGATE_CONFIRM);
	XLogFlush(end);
	PG_RETURN_VOID();
}
