/*-------------------------------------------------------------------------
 *
 * gate.c
 *	  The gate: a run, a utility command or a fast-path call that starts
 *	  while this backend holds no slot is admitted to the budget its
 *	  session's classification names (admission.c), looked up and
 *	  admitted again while the lookup is out of date, and, for a budget
 *	  with quarantine entries, checked against the quarantine first.
 *
 * One of the files of this backend's slot (slot_internals.h; slot.c's
 * header has the rules).  gate() is on the statement path of every gated
 * statement (slot.c's ExecutorStart, and slotxact.c for utility commands
 * and calls): one call, as when it was slot.c's (it was never inlined),
 * with the admission's result taken into the slot inline
 * (slot_admitted()).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"

#include "admission.h"
#include "classify.h"
#include "demote.h"
#include "mincost.h"
#include "quarantine.h"
#include "shmem.h"
#include "slot_internals.h"

/*
 * Lookups of one admission before it goes on ungated.  A retry follows a
 * configuration change that the lookup raced with, and each one needs
 * another change committed meanwhile; this many in a row mean a
 * configuration that admission cannot take (which the install and the
 * classification never leave: budgets.c, classify.c).  Going on ungated,
 * with a WARNING, beats spinning until statement_timeout.
 */
#define GATE_MAX_RETRIES	1000

/* gate() goes on ungated: say so (a function apart keeps gate() small). */
static pg_noinline void
gate_gave_up(int budget, int retries)
{
	char		name[NAMEDATALEN];

	/* read without a lock: a name, for the message only */
	memcpy(name, dbgate_shared->budgets[budget].d.conf.name, NAMEDATALEN);
	name[NAMEDATALEN - 1] = '\0';
	ereport(WARNING,
			(errmsg("dbgate could not admit a statement to budget \"%s\" after %d attempts",
					name, retries),
			 errdetail("The statement runs ungated.")));
}

/*
 * The rest of gate() after an admission found the lookup out of date:
 * look up and admit again, GATE_MAX_RETRIES times at most (apart from
 * gate(), which stays as small as the statement path needs).
 */
static pg_noinline bool
gate_again(int budget, bool utility, QueryDesc *queryDesc)
{
	int			retries;

	for (retries = 1;; retries++)
	{
		const DbgateLookup *lk;
		DbgateAdmit r;

		if (retries >= GATE_MAX_RETRIES)
		{
			gate_gave_up(budget, retries);
			return false;
		}
		dbgate_invalidate_lookup();
		CHECK_FOR_INTERRUPTS();
		lk = dbgate_classify();
		if (lk->budget < 0)
			return false;
		budget = lk->budget;
		ensure_ref_space();
		r = dbgate_admit(lk, utility, queryDesc, &slot);
		if (r == DBGATE_ADMIT_SLOT)
		{
			slot_admitted(queryDesc);
			return true;
		}
		if (r == DBGATE_ADMIT_NONE)
			return false;
	}
}

/*
 * Admit to the budget lk names; a budget replaced between the lookup and
 * the admission is looked up again, so that every statement is gated by
 * the configuration in force.  Returns whether a slot is held.
 */
pg_noinline bool
gate(const DbgateLookup *lk, bool utility, QueryDesc *queryDesc)
{
	DbgateAdmit r;

	if (lk->budget < 0)
		return false;
	ensure_ref_space();
	r = dbgate_admit(lk, utility, queryDesc, &slot);
	if (likely(r == DBGATE_ADMIT_SLOT))
	{
		slot_admitted(queryDesc);
		return true;
	}
	if (r == DBGATE_ADMIT_NONE)
		return false;
	return gate_again(lk->budget, utility, queryDesc);
}

/*
 * gate_quarantined()'s retry: the admission found the lookup out of date
 * (its budget dropped, replaced, or changed under it), and it is made
 * again.  The quarantine check counts an arrival, so it is made once per
 * budget: for the same budget as before (src) only where its quarantine
 * sends the statement is looked up again (the runaway_budget, when it sent
 * it there: 'demoted'); another budget (src was dropped or replaced, the
 * session's assignment changed) is a new arrival, checked as such.
 * Returns the lookup to admit to (src or tgt), or NULL: not gated.
 */
static pg_noinline const DbgateLookup *
quarantine_lookup_again(QueryDesc *queryDesc, DbgateLookup *src,
						DbgateLookup *tgt, bool demoted)
{
	const DbgateLookup *lk;
	bool		same;

	dbgate_invalidate_lookup();
	CHECK_FOR_INTERRUPTS();
	lk = dbgate_classify();
	if (lk->budget < 0)
		return NULL;
	same = (lk->budget == src->budget && lk->incarnation == src->incarnation);
	*src = *lk;
	if (same)
		return (demoted && dbgate_demote_quarantine_target(src, tgt)) ?
			tgt : src;
	if (!src->quarantine)
		return src;
	return dbgate_quarantine_check(src, queryDesc, tgt);
}

/*
 * ExecutorStart of a statement whose budget has quarantine entries: the
 * quarantine check, then the gate of the budget it names (the statement's
 * own, or the runaway_budget of a 'demote' budget, whose slot then counts
 * as moved: demote.c).  As gate(), with its own retry: a lookup out of
 * date goes back through the quarantine (quarantine_lookup_again()), so
 * that a quarantined statement is never admitted to its own budget as if
 * it had not been checked, nor left uncounted as moved.
 */
pg_noinline void
gate_quarantined(const DbgateLookup *lk, QueryDesc *queryDesc)
{
	DbgateLookup src = *lk;		/* *lk is the cache, which a retry rewrites */
	DbgateLookup tgt;
	const DbgateLookup *g = dbgate_quarantine_check(&src, queryDesc, &tgt);
	int			retries;

	if (dbgate_mincost_bypass(g, queryDesc))
		return;
	for (retries = 1;; retries++)
	{
		DbgateAdmit r;

		ensure_ref_space();
		r = dbgate_admit(g, false, queryDesc, &slot);
		if (r == DBGATE_ADMIT_SLOT)
			break;
		if (r == DBGATE_ADMIT_NONE)
			return;
		if (retries >= GATE_MAX_RETRIES)
		{
			gate_gave_up(g->budget, retries);
			return;
		}
		g = quarantine_lookup_again(queryDesc, &src, &tgt, g == &tgt);
		if (g == NULL)
			return;
	}
	slot_admitted(queryDesc);
	add_ref(queryDesc, REF_RUN, queryDesc->plannedstmt);
	if (g == &tgt && slot_chain.idx[0] == tgt.budget &&
		slot_chain.inc[0] == tgt.incarnation)
	{
		dbgate_demote_quarantined(&slot, &src);
		dbgate_slot_has_limits = true;
		set_run_work();
	}
	if (running_refs == 0 && IsTransactionBlock() &&
		portal_statement(queryDesc->plannedstmt))
		slot_enter(SLOT_OPEN, 0);
}
