/*-------------------------------------------------------------------------
 *
 * waitsnap.c
 *	  A statement that waits in a queue holds no snapshot.
 *
 * By the time ExecutorStart runs, the portal has taken the statement's
 * snapshot, and with it the backend advertises an xmin: while the
 * statement waits in a queue, VACUUM and HOT pruning keep every row
 * version that the waiting snapshot could still see, for as long as the
 * wait lasts (up to the budget's queue_timeout, or without bound): a
 * queue of reporting statements would hold back vacuum like so many
 * long transactions.  (Measured on TPC-B at scale 1, where the queue's
 * xmin age fell from ~31 transactions to 2-3, it changed no throughput;
 * the point is the horizon, not speed.)
 *
 * In READ COMMITTED a statement may just as well take its snapshot when it
 * is admitted: that is the snapshot it would have had if its client had
 * sent it at that moment, and it is what the backend holds between two
 * statements of a transaction block (no xmin at all).  So when the
 * statement's snapshot is the only one the backend holds, it is given up
 * for the wait (dbgate_waitsnap_release) and a new one is taken on
 * admission (dbgate_waitsnap_retake), exactly as PortalStart and
 * PortalRunMulti take it: pushed as the active snapshot at the current
 * transaction nesting level and registered for the query descriptor.  The
 * callers then pop and unregister the new one where they would have
 * popped and unregistered the old.
 *
 * Nothing is changed where it would not help or might matter:
 *	  - REPEATABLE READ and SERIALIZABLE (the transaction snapshot holds
 *		the horizon anyway, and must not change);
 *	  - another snapshot is active underneath (a DO block, EXPLAIN ANALYZE,
 *		CREATE TABLE AS, a cursor opened by PL/pgSQL): the statement's
 *		snapshot is pushed back unchanged;
 *	  - the portal keeps a snapshot of its own (portalSnapshot of a
 *		procedure or non-atomic DO block, holdSnapshot of a statement with
 *		RETURNING), the query has a crosscheck snapshot, or the snapshot is
 *		referenced more than once.
 * If the wait ends in an error, the statement is aborted and the
 * transaction's abort processing cleans up the snapshot stack as usual.
 *
 * Gated utility commands (utility.c) wait in ProcessUtility, where there
 * is no query descriptor: their snapshot is the portal's, which
 * PortalRunUtility pushed before it called ProcessUtility (at the portal's
 * createLevel, remembered in portal->portalSnapshot, unregistered) and pops
 * after it returns -- unless the command popped it itself, as VACUUM does.
 * dbgate_waitsnap_utility_release() gives that snapshot up for the wait and
 * dbgate_waitsnap_utility_retake() takes a new one on admission exactly as
 * PortalRunUtility takes it (the same code in PostgreSQL 15 to 18), so that
 * PortalRunUtility, or the command, pops the new one.  The conditions are
 * those for queries: READ COMMITTED, no snapshot underneath, no
 * holdSnapshot, referenced once; and the active portal must be the one
 * running the command itself: a COPY ... FROM run by a procedure or a
 * non-atomic DO block runs on that portal's snapshot, which stays.
 *
 * A fast-path function call (slot.c) waits in the function-execute hook,
 * where the only snapshot is the one HandleFunctionRequest() pushed as
 * the active snapshot (unregistered) for the call, and pops after it:
 * dbgate_waitsnap_call_release() gives it up for the wait and
 * dbgate_waitsnap_call_retake() pushes a new one on admission, as
 * HandleFunctionRequest() pushes it (the same code in PostgreSQL 15 to
 * 18), under the same conditions.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/parallel.h"
#include "access/xact.h"
#include "executor/execdesc.h"
#include "nodes/plannodes.h"
#include "tcop/pquery.h"
#include "utils/portal.h"
#include "utils/snapmgr.h"

#include "utility.h"
#include "waitsnap.h"

/*
 * Before a queue wait: give up the statement's snapshot if it is the
 * only one the backend holds.  Returns true when it was given up; the
 * caller must then call dbgate_waitsnap_retake() before the statement
 * goes on.
 */
bool
dbgate_waitsnap_release(QueryDesc *queryDesc)
{
	Snapshot	snap;

	if (queryDesc == NULL || IsolationUsesXactSnapshot() ||
		IsInParallelMode())
		return false;
	snap = queryDesc->snapshot;
	if (snap == InvalidSnapshot ||
		queryDesc->crosscheck_snapshot != InvalidSnapshot ||
		!ActiveSnapshotSet() || GetActiveSnapshot() != snap ||
		snap->active_count != 1 || snap->regd_count != 1)
		return false;
	if (ActivePortal == NULL || ActivePortal->portalSnapshot != NULL ||
		ActivePortal->holdSnapshot != NULL)
		return false;

	PopActiveSnapshot();
	if (ActiveSnapshotSet())
	{
		/* an outer snapshot keeps the horizon anyway: change nothing */
		PushActiveSnapshot(snap);
		return false;
	}
	UnregisterSnapshot(snap);
	queryDesc->snapshot = InvalidSnapshot;
	/* the catalog snapshot would keep an xmin too; it is retaken on use */
	InvalidateCatalogSnapshot();
	return true;
}

/*
 * On admission after dbgate_waitsnap_release(): take the statement's
 * snapshot now.
 */
void
dbgate_waitsnap_retake(QueryDesc *queryDesc)
{
	PushActiveSnapshot(GetTransactionSnapshot());
	queryDesc->snapshot = RegisterSnapshot(GetActiveSnapshot());
}

/*
 * Is the portal running one gated utility command (and not, say, a DO
 * block or CALL whose statement is that command)?
 */
static bool
portal_runs_utility(Portal portal)
{
	PlannedStmt *pstmt;

	if (list_length(portal->stmts) != 1)
		return false;
	pstmt = linitial_node(PlannedStmt, portal->stmts);
	return pstmt->utilityStmt != NULL &&
		dbgate_utility_takes_slot(pstmt, PROCESS_UTILITY_TOPLEVEL);
}

/*
 * Before the queue wait of a gated utility command: give up the portal's
 * snapshot if it is the only one the backend holds.  Returns true when it
 * was given up; the caller must then call dbgate_waitsnap_utility_retake()
 * before the command goes on.
 */
bool
dbgate_waitsnap_utility_release(void)
{
	Portal		portal = ActivePortal;
	Snapshot	snap;

	if (portal == NULL || IsolationUsesXactSnapshot() || IsInParallelMode())
		return false;
	snap = portal->portalSnapshot;
	if (snap == InvalidSnapshot || portal->holdSnapshot != InvalidSnapshot ||
		!ActiveSnapshotSet() || GetActiveSnapshot() != snap ||
		snap->active_count != 1 || snap->regd_count != 0 ||
		!portal_runs_utility(portal))
		return false;

	/*
	 * Popping the last reference frees the snapshot: hold it by a
	 * registration while looking underneath, so that it can be pushed back
	 * unchanged (the active snapshot is always a copy, which
	 * PushActiveSnapshotWithLevel() pushes as it is).
	 */
	snap = RegisterSnapshot(snap);
	PopActiveSnapshot();
	if (ActiveSnapshotSet())
	{
		/* an outer snapshot keeps the horizon anyway: change nothing */
		PushActiveSnapshotWithLevel(snap, portal->createLevel);
		UnregisterSnapshot(snap);
		return false;
	}
	UnregisterSnapshot(snap);
	portal->portalSnapshot = InvalidSnapshot;
	/* the catalog snapshot would keep an xmin too; it is retaken on use */
	InvalidateCatalogSnapshot();
	return true;
}

/*
 * On admission after dbgate_waitsnap_utility_release(): take the portal's
 * snapshot now, as PortalRunUtility takes it.
 */
void
dbgate_waitsnap_utility_retake(void)
{
	Portal		portal = ActivePortal;

	PushActiveSnapshotWithLevel(GetTransactionSnapshot(), portal->createLevel);
	/* PushActiveSnapshotWithLevel() may have copied it */
	portal->portalSnapshot = GetActiveSnapshot();
}

/*
 * Before the queue wait of a fast-path function call: give up the call's
 * snapshot if it is the only one the backend holds.  Returns true when it
 * was given up; the caller must then call dbgate_waitsnap_call_retake()
 * before the call goes on.
 */
bool
dbgate_waitsnap_call_release(void)
{
	Snapshot	snap;

	if (IsolationUsesXactSnapshot() || IsInParallelMode() ||
		!ActiveSnapshotSet())
		return false;
	snap = GetActiveSnapshot();
	if (snap->active_count != 1 || snap->regd_count != 0)
		return false;

	/* held by a registration while looking underneath, as above */
	snap = RegisterSnapshot(snap);
	PopActiveSnapshot();
	if (ActiveSnapshotSet())
	{
		/* an outer snapshot keeps the horizon anyway: change nothing */
		PushActiveSnapshot(snap);
		UnregisterSnapshot(snap);
		return false;
	}
	UnregisterSnapshot(snap);
	/* the catalog snapshot would keep an xmin too; it is retaken on use */
	InvalidateCatalogSnapshot();
	return true;
}

/*
 * On admission after dbgate_waitsnap_call_release(): the call's snapshot,
 * taken now, as HandleFunctionRequest() takes it.
 */
void
dbgate_waitsnap_call_retake(void)
{
	PushActiveSnapshot(GetTransactionSnapshot());
}
