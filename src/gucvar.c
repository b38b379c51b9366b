/*-------------------------------------------------------------------------
 *
 * gucvar.c
 *	  A built-in integer setting tightened for a while (a statement's run,
 *	  the planning of a statement) without the GUC machinery.
 *
 * The budget's lock_timeout (timeouts.c) and parallel_workers cap
 * (parallel.c) change what the server reads from the variable behind a
 * GUC (LockTimeout, max_parallel_workers_per_gather) for a bounded stretch
 * of work, and put the session's value back afterwards.  Setting the
 * variable directly costs a few instructions; going through the GUC API
 * (a nesting level, set_config_option(), AtEOXact_GUC()) cost about 10,000
 * instructions per statement on PostgreSQL 15, and it would also change
 * what the statement's own settings mean: a SET LOCAL made inside the run
 * would be undone at its end, as at the exit of a function with a SET
 * clause.  So the variable is set directly, on every version, and the
 * rules below keep what the statement itself does to the setting.
 *
 * Rules
 *	  - While the override is in place, the GUC record is marked as set by
 *		role InvalidOid (its srole, "the role that set the current value").
 *		No SET can produce that mark: set_config_option() records
 *		GetUserId() for a SET of a statement, BOOTSTRAP_SUPERUSERID or the
 *		setting's own role otherwise, never InvalidOid (15 to 18).  The mark
 *		goes wherever GUC copies the current value's origin (the prior and
 *		masked values of a stack entry, with their srole), so it also tells
 *		a saved override value from a saved value of the statement's.  The
 *		mark must not be the context: a SECURITY DEFINER function owned by
 *		a superuser sets values in context PGC_SUSET.  The record's context
 *		(scontext) is left as it is.
 *	  - A SET or SET LOCAL inside the stretch (set_config() in a query, a
 *		function with a SET clause) goes through GUC, which saves the value
 *		it replaces -- the override's -- on the GUC stack.  When the
 *		override ends, every stack entry made meanwhile that saved the
 *		override's value gets the session's value instead, so that popping
 *		it at function exit, commit or abort restores what the session
 *		really had.
 *	  - The current value is put back only if it is still the override's
 *		(the record still carries the mark); a value the statement set
 *		stays.
 *	  - Parallel workers get the leader's settings from SerializeGUCState(),
 *		which skips a setting whose source is PGC_S_DEFAULT.  An override
 *		that must reach the workers (a budget's lowered work_mem, see
 *		memgrant.c) therefore also marks a default-sourced record as set by
 *		the session for the stretch (on PostgreSQL 16 and later this puts it
 *		on guc.c's list of non-default settings, see compat.h), and every
 *		place that gets the session's value back gets its source back too.
 *		The worker sets the value with the leader's source and srole.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/guc.h"
#include "utils/guc_tables.h"

#include "compat.h"
#include "gucvar.h"

/* The role an override is marked with: see the file header. */
#define OVERRIDE_SROLE	InvalidOid

/*
 * Set the variable of GUC record rec (of type int) to value.
 */
void
dbgate_guc_override_apply(DbgateGucOverride *o, struct config_generic *rec,
						  int *variable, int value)
{
	o->rec = rec;
	o->variable = variable;
	o->applied = true;
	o->value = value;
	o->session = *o->variable;
	o->session_srole = rec->srole;
	o->session_source = (int) rec->source;
	o->moved_source = false;
	o->stack = rec->stack;
	o->stack_state = rec->stack ? (int) rec->stack->state : -1;
	*o->variable = value;
	rec->srole = OVERRIDE_SROLE;
}

/*
 * A record whose source is not PGC_S_DEFAULT, other than rec: one already
 * on guc.c's list of non-default settings (compat.h).  data_directory is
 * set by the postmaster of every server; any other will do as well.
 */
static struct config_generic *
nondefault_anchor(struct config_generic *rec)
{
	static struct config_generic *anchor = NULL;
	struct config_generic **vars;
	int			n;
	int			i;

	if (anchor != NULL && anchor != rec && anchor->source != PGC_S_DEFAULT)
		return anchor;
	anchor = dbgate_find_guc("data_directory");
	if (anchor != NULL && anchor != rec && anchor->source != PGC_S_DEFAULT)
		return anchor;
	vars = dbgate_guc_variables(&n);
	for (i = 0; i < n; i++)
	{
		if (vars[i] != rec && vars[i]->source != PGC_S_DEFAULT)
			return anchor = vars[i];
	}
	return anchor = NULL;
}

/*
 * As dbgate_guc_override_apply(), and the value also goes to the parallel
 * workers launched while the override is in place (see the file header).
 */
void
dbgate_guc_override_apply_to_workers(DbgateGucOverride *o,
									 struct config_generic *rec,
									 int *variable, int value)
{
	dbgate_guc_override_apply(o, rec, variable, value);
	if (rec->source == PGC_S_DEFAULT &&
		dbgate_guc_set_source(rec, PGC_S_SESSION, nondefault_anchor(rec)))
		o->moved_source = true;
}

/* Does a saved GUC value hold the override's value? */
static inline bool
is_override(const DbgateGucOverride *o, int value, Oid srole)
{
	return value == o->value && srole == OVERRIDE_SROLE;
}

/*
 * Undo dbgate_guc_override_apply().
 */
void
dbgate_guc_override_restore(DbgateGucOverride *o)
{
	struct config_generic *rec = o->rec;
	GucStack   *e;

	if (!o->applied)
		return;

	/*
	 * Stack entries made meanwhile (above the entry that was on top when
	 * the override was applied) saved the override's value: give them the
	 * session's.
	 */
	for (e = rec->stack; e != NULL && e != o->stack; e = e->prev)
	{
		if (is_override(o, e->prior.val.intval, e->srole))
		{
			e->prior.val.intval = o->session;
			e->srole = o->session_srole;
			if (o->moved_source)
				e->source = (GucSource) o->session_source;
		}
		if (e->state == GUC_SET_LOCAL &&
			is_override(o, e->masked.val.intval, e->masked_srole))
		{
			e->masked.val.intval = o->session;
			e->masked_srole = o->session_srole;
		}
	}

	/*
	 * The entry that was on top may have turned from SET into SET LOCAL
	 * meanwhile, saving the then current value (the override's) as the SET
	 * value to come back to.
	 */
	e = o->stack;
	if (e != NULL && e == rec->stack && e->state == GUC_SET_LOCAL &&
		o->stack_state != (int) GUC_SET_LOCAL &&
		is_override(o, e->masked.val.intval, e->masked_srole))
	{
		e->masked.val.intval = o->session;
		e->masked_srole = o->session_srole;
	}

	/* the current value: the session's again, unless one was set meanwhile */
	if (is_override(o, *o->variable, rec->srole))
	{
		*o->variable = o->session;
		rec->srole = o->session_srole;
		if (o->moved_source && rec->source == PGC_S_SESSION)
			(void) dbgate_guc_set_source(rec, (GucSource) o->session_source,
										 NULL);
	}
	o->applied = false;
	o->moved_source = false;
}
