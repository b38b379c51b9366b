/*-------------------------------------------------------------------------
 *
 * slot_internals.h
 *	  What the files of this backend's slot share: slot.c (the state
 *	  machine, the references, the clocks, the executor runs), gate.c (the
 *	  admission of a run, a utility command or a call) and slotxact.c (the
 *	  transaction's edges, utility commands and fast-path calls).
 *
 * Included by those three files only; the rest of dbgate sees slot.h.
 * slot.c's header has the rules.  The helpers are static inline, as they
 * were when the three were one file: the statement path uses them and
 * compiles to the same instructions; the state is plain variables of the
 * library, hidden from outside it as every symbol of dbgate is.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DBGATE_SLOT_INTERNALS_H
#define DBGATE_SLOT_INTERNALS_H

#include "access/xact.h"
#include "executor/execdesc.h"
#include "fmgr.h"
#include "nodes/plannodes.h"
#include "tcop/pquery.h"
#include "utils/fmgrprotos.h"
#include "utils/portal.h"

#include "admission.h"
#include "classify.h"
#include "demote.h"
#include "memgrant.h"
#include "queryid.h"
#include "shmem.h"
#include "slot.h"

typedef enum SlotState
{
	SLOT_NONE,
	SLOT_RUNNING,
	SLOT_OPEN,
	SLOT_KEPT
} SlotState;

/* What a reference stands for. */
typedef enum RefKind
{
	REF_RUN,					/* an executor run (key: its QueryDesc) */
	REF_UTILITY,				/* a gated utility command */
	REF_CALL,					/* a fast-path function call */
	REF_PORTAL					/* a portal with statements still to run */
} RefKind;

typedef struct SlotRef
{
	const void *key;			/* QueryDesc, Portal, or &utility_key */
	RefKind		kind;
	PlannedStmt *pstmt;			/* REF_RUN: the statement as started */
	uint64		command_queryid;	/* REF_RUN: the command it started in
									 * (queryid.h) */
	SubTransactionId create_subid;	/* subxact of its start */
	SubTransactionId run_subid; /* subxact of the ExecutorRun/Finish in
								 * progress, or InvalidSubTransactionId */
} SlotRef;

#define INLINE_REFS 8

/* The references (slot.c) */
extern DBGATE_HIDDEN SlotRef inline_refs[INLINE_REFS];
extern DBGATE_HIDDEN SlotRef *refs;
extern DBGATE_HIDDEN int	maxrefs;
extern DBGATE_HIDDEN int	running_refs;		/* refs with run_subid set */
extern DBGATE_HIDDEN char utility_key;
extern DBGATE_HIDDEN bool utility_running;
extern DBGATE_HIDDEN const void *portal_ref;	/* the portal of a REF_PORTAL */

/* the slot: what its admission gave (chain, the budget's limits, when) */
extern DBGATE_HIDDEN SlotState slot_state;
extern DBGATE_HIDDEN DbgateAdmission slot;

#define slot_chain			(slot.chain)
#define slot_admitted_at	(slot.since)
#define slot_limits			(slot.lim)

/*
 * Clocks (slot.c): DO blocks and CALLs in progress, the run that took the
 * slot inside one.
 */
extern DBGATE_HIDDEN int	block_depth;
extern DBGATE_HIDDEN const QueryDesc *block_taker;
extern DBGATE_HIDDEN TimestampTz kept_since;	/* when the slot last became KEPT */

/* Per-backend set-up: -1 not yet, 0 never gated, 1 a client backend. */
extern DBGATE_HIDDEN int	gateable;

/* slot.c */
extern DBGATE_HIDDEN void slot_enter(SlotState to, TimestampTz since);
extern DBGATE_HIDDEN void grow_refs(void);
extern DBGATE_HIDDEN bool backend_init_slow(void);
extern DBGATE_HIDDEN void backend_exit(int code, Datum arg);
extern DBGATE_HIDDEN bool call_running;		/* a fast-path call runs under the slot */

/* gate.c */
extern DBGATE_HIDDEN bool gate(const DbgateLookup *lk, bool utility,
								QueryDesc *queryDesc);
extern DBGATE_HIDDEN void gate_quarantined(const DbgateLookup *lk, QueryDesc *queryDesc);

/* slotxact.c */
extern DBGATE_HIDDEN void drop_all_refs(void);

/* Whether this backend is gated at all: decided once (backend_init_slow()). */
static inline bool
backend_init(void)
{
	if (likely(gateable >= 0))
		return gateable == 1;
	return backend_init_slow();
}

static inline void
set_run_work(void)
{
	dbgate_run_work = dbgate_slot_has_limits || dbgate_refs_span_subxacts ||
		slot_state == SLOT_OPEN;
}

static inline void
ensure_ref_space(void)
{
	if (unlikely(dbgate_nrefs >= maxrefs))
		grow_refs();
}

/* Caller has called ensure_ref_space(). */
static inline void
add_ref(const void *key, RefKind kind, PlannedStmt *pstmt)
{
	SlotRef    *r = &refs[dbgate_nrefs++];

	r->key = key;
	r->kind = kind;
	r->pstmt = pstmt;
	/* queryid.c: a cursor's FETCHes run under its DECLARE's id */
	r->command_queryid = dbgate_command_queryid;
	r->create_subid = GetCurrentSubTransactionId();
	r->run_subid = InvalidSubTransactionId;
	if (kind == REF_PORTAL)
		portal_ref = key;
}

static inline int
find_ref(const void *key)
{
	int			i;

	/* newest first: executor runs mostly end in LIFO order */
	for (i = dbgate_nrefs - 1; i >= 0; i--)
	{
		if (refs[i].key == key)
			return i;
	}
	return -1;
}

static inline void
remove_ref(int i)
{
	if (refs[i].run_subid != InvalidSubTransactionId)
		running_refs--;
	if (refs[i].kind == REF_PORTAL)
		portal_ref = NULL;
	refs[i] = refs[--dbgate_nrefs];
	if (dbgate_nrefs == 0 && dbgate_refs_span_subxacts)
	{
		dbgate_refs_span_subxacts = false;
		set_run_work();
	}
}

/* Is pstmt a statement of the active portal itself (not a nested query)? */
static inline bool
portal_statement(const PlannedStmt *pstmt)
{
	Portal		p = ActivePortal;

	return p != NULL && p->stmts != NIL &&
		((const PlannedStmt *) linitial(p->stmts) == pstmt ||
		 list_member_ptr(p->stmts, pstmt));
}

/*
 * A statement of the active portal ended: if it was the portal's last one,
 * the portal's reference goes.
 */
static inline void
portal_statement_done(const PlannedStmt *pstmt)
{
	int			i;

	if (likely(portal_ref == NULL) || ActivePortal != portal_ref ||
		ActivePortal->stmts == NIL ||
		(const PlannedStmt *) llast(ActivePortal->stmts) != pstmt)
		return;
	i = find_ref(portal_ref);
	if (i >= 0)
		remove_ref(i);
}

/*
 * admitted: the admission filled in 'slot' for queryDesc (NULL: a utility
 * command, a fast-path call).  Inline in its callers (gate.c).
 */
static pg_attribute_always_inline void
slot_admitted(const QueryDesc *queryDesc)
{
	/*
	 * memgrant.c: what the slot's memory grants need (in shadow mode they
	 * are counted, and lower nothing); ExecutorRun and ExecutorFinish then
	 * have work to do (dbgate_run_begin()).
	 */
	if (unlikely(slot_limits.max_memory_mb > 0))
		dbgate_memgrant_slot_taken(&slot_chain, slot_limits.grant_max_active,
								   slot_limits.max_memory_mb,
								   slot_limits.enforce,
								   slot_limits.runaway_demote &&
								   slot_limits.enforce);
	if (!slot_limits.enforce)
	{
		/* shadow mode applies no limit */
		slot_limits.statement_timeout_ms = 0;
		slot_limits.lock_timeout_ms = 0;
		slot_limits.idle_timeout_ms = 0;
		slot_limits.max_memory_mb = 0;
		/* runaway.c: a shadow budget's runaways are only logged */
		slot_limits.runaway_cancel = false;
		slot_limits.runaway_demote = false;
		slot_limits.limit_flags = dbgate_limit_flags(&slot_limits);
	}
	dbgate_slot_has_limits = ((slot_limits.limit_flags & DBGATE_LIM_SLOT) != 0 ||
							  dbgate_memgrant_slot);
	slot_state = SLOT_RUNNING;
	dbgate_slot_busy = true;
	/* no reference yet, so no subtransaction spans one */
	dbgate_run_work = dbgate_slot_has_limits;
	/* clocks: inside a block, this run counts from the admission */
	if (unlikely(block_depth > 0))
		block_taker = queryDesc;
}

/*
 * demote.c: the slot was moved (or may have been): its chain and limits
 * as they are now.
 */
static inline void
slot_adopt(void)
{
	if (likely(!(dbgate_demote_my_flags() & (DBGATE_MV_BUSY | DBGATE_MV_DONE))))
		return;
	dbgate_demote_adopt_slow(&slot);
	dbgate_slot_has_limits = ((slot_limits.limit_flags & DBGATE_LIM_SLOT) != 0 ||
							  dbgate_memgrant_slot);
}

/*
 * unreferenced: the last reference went away; keep the slot to the end of
 * the transaction, or return it.
 */
static inline void
slot_unreferenced(void)
{
	if (slot_limits.scope == DBGATE_SCOPE_TRANSACTION ||
		TransactionIdIsValid(GetTopTransactionIdIfAny()))
		slot_enter(SLOT_KEPT, GetCurrentTimestamp());
	else
		slot_enter(SLOT_NONE, 0);
}

/*
 * Is the run that starts outside any portal part of the commit?  Deferred
 * triggers fired by COMMIT or PREPARE TRANSACTION run outside any portal
 * and inside a trigger; a query that a parse, plan, bind or fast-path call
 * runs is in no trigger until it has been admitted (the triggers of its
 * writes then run under its slot).  After PRE_COMMIT nothing the client
 * sent runs any more.
 */
static inline bool
in_commit(void)
{
	LOCAL_FCINFO(fcinfo, 0);

	if (dbgate_xact_committing)
		return true;
	InitFunctionCallInfoData(*fcinfo, NULL, 0, InvalidOid, NULL, NULL);
	return DatumGetInt32(pg_trigger_depth(fcinfo)) > 0;
}

#endif							/* DBGATE_SLOT_INTERNALS_H */
