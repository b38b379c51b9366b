/*-------------------------------------------------------------------------
 *
 * queryid.c
 *	  Query ids (1.3): one id per statement for the quarantine and the
 *	  runaway timer.
 *
 * The id of a statement: dbgate_statement_queryid() (queryid.h) has the
 * rule; dbgate_command_queryid is the command around the run, kept by
 * dbgate.c's ProcessUtility hook for the commands that run a query of
 * their own (dbgate_queryid_command()), put back on every exit.
 *
 * Nothing here takes a lock, allocates or reads a clock; the state is the
 * backend's (no shared memory is written).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "queryid.h"

uint64		dbgate_command_queryid = UINT64CONST(0);
