/*-------------------------------------------------------------------------
 *
 * persist.h
 *	  The state file in the data directory, and the encoding of an image
 *	  (persist.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef DBGATE_PERSIST_H
#define DBGATE_PERSIST_H

#include "access/xlogdefs.h"

#include "confimage.h"

#define DBGATE_STATE_FILE		"dbgate.state"
#define DBGATE_STATE_TMPFILE	"dbgate.state.tmp"
#define DBGATE_STATE_BADFILE	"dbgate.state.corrupt"

extern char *dbgate_state_encode(const DbgateConfig *config, XLogRecPtr lsn,
								 Size *lenp);

/* what dbgate_state_decode() found */
typedef enum DbgateDecodeResult
{
	DBGATE_DECODE_OK,
	DBGATE_DECODE_INVALID,		/* damaged, or not a dbgate image */
	DBGATE_DECODE_NEWER			/* a format version newer than this library's */
} DbgateDecodeResult;

extern DbgateDecodeResult dbgate_state_decode(const char *buf, Size len,
											  DbgateConfig *config,
											  XLogRecPtr *lsn, uint32 *format,
											  char *why, size_t whylen);
extern bool dbgate_state_load(DbgateConfig *config, XLogRecPtr *lsn);
extern void dbgate_state_write_temp(const DbgateConfig *config, XLogRecPtr lsn);
extern void dbgate_state_commit_temp(int elevel);
extern void dbgate_state_discard_temp(void);

#endif							/* DBGATE_PERSIST_H */
