/*-------------------------------------------------------------------------
 *
 * quarantine.c
 *	  The quarantine table (1.3): queries held back after they ran away.
 *
 * The table itself is built here; until then this file only receives the
 * runaway worker's notes (runaway.c) and keeps nothing.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "runaway.h"

/*
 * A runaway of budget (index, incarnation) with query id 'queryid' (not 0)
 * in database 'dbid' at 'at', the budget having quarantine_ms > 0.  Called
 * by the runaway worker only.
 */
void
dbgate_quarantine_note_runaway(int budget, uint32 incarnation, Oid dbid,
							   uint64 queryid, TimestampTz at)
{
}
