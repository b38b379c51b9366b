/*-------------------------------------------------------------------------
 *
 * wal.h
 *	  WAL records of configuration changes (wal.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef DBGATE_WAL_H
#define DBGATE_WAL_H

#include "access/xlogdefs.h"

#include "confimage.h"

extern void dbgate_wal_init(void);
extern XLogRecPtr dbgate_wal_log_image(const DbgateConfig *config);
extern void dbgate_wal_log_confirm(TransactionId xid);

#endif							/* DBGATE_WAL_H */
