/*-------------------------------------------------------------------------
 *
 * classify.c
 *	  Which budget gates a backend, and the per-backend cache of the answer.
 *
 * Rules
 * -----
 * Superusers are never gated.  Otherwise a backend's budget is that of its
 * session user (never the current user: SET ROLE and SECURITY DEFINER
 * functions change nothing), by the first rule that gives one:
 *	  1. the session user's own assignment (role map);
 *	  2. the assignment of a role the session user is a member of, directly
 *		 or through other roles, whether or not the membership inherits
 *		 privileges: the nearest such role (fewest membership steps); among
 *		 equally near assigned roles, the one whose name sorts first (byte
 *		 order, as role names sort in the catalog);
 *	  3. the assignment of the backend's database (database map);
 *	  4. dbgate.default_budget, if it names a budget without children;
 *	  5. none: not gated.
 * Only memberships recorded in pg_auth_members count (GRANT role TO role);
 * the implicit membership of a database's owner in pg_database_owner does
 * not.
 *
 * Cache
 * -----
 * The answer is kept per backend and reused while nothing it depends on
 * changed:
 *	  - the shared configuration generation, bumped by every installed
 *		configuration change (budgets, role map, database map);
 *	  - the session user (SET SESSION AUTHORIZATION);
 *	  - dbgate.default_budget (its assign hook calls
 *		dbgate_invalidate_lookup());
 *	  - pg_authid (superuser status; role names decide ties) and
 *		pg_auth_members (GRANT and REVOKE of membership): syscache
 *		invalidation callbacks clear the cache.  A change of a pg_auth_members
 *		row is announced to every catalog cache on that catalog, so one
 *		callback, on the cache the walk reads, sees all of them.
 * PostgreSQL delivers invalidations at the start of every transaction and
 * whenever a lock is taken, so a committed GRANT or REVOKE counts from the
 * next statement of every other backend that starts a transaction (or takes
 * a lock it did not hold yet).
 *
 * The statement path (dbgate_classify() with a valid cache) reads one
 * atomic counter and compares two values and a flag: no catalog access, no
 * lock, no allocation.  Only the slow path, after a change, reads the
 * catalogs and takes config_lock shared, never both at once.
 *
 * Besides the budget, the answer carries what the statement path tests
 * of it without reading the budget: min_cost, reservations in the chain,
 * quarantine entries, and whether its statements need query ids
 * (queryid.c).  When that last one turns on, the backend's cached plans
 * are marked invalid (ResetPlanCache()), so that statements parsed without
 * an id are parsed again, with one, at their next use.
 *
 * The slow path runs in ExecutorStart, in the planner, in ProcessUtility
 * and in post_parse_analyze_hook (queryid.c),
 * always inside a transaction, and must not fail in normal operation: it
 * looks up only rows it found a moment ago and copes with their absence (a
 * role dropped meanwhile), and allocates nothing while holding the lock.
 * The cache becomes valid only when no invalidation arrived while the slow
 * path read the catalogs; otherwise the next statement looks again.
 *
 * Walk
 * ----
 * Breadth-first over pg_auth_members from the session user (syscache
 * AUTHMEMMEMROLE: the rows of one member), one level of membership steps at
 * a time; after each level the role map is searched for that level's
 * roles, and the walk stops at the first level with an assigned role.  A
 * role reached once is not visited again: this bounds cycles (which
 * PostgreSQL refuses to create anyway) and the duplicate rows that
 * PostgreSQL 16+ records for one membership granted by several grantors.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/pg_auth_members.h"
#include "catalog/pg_authid.h"
#include "miscadmin.h"
#include "nodes/pg_list.h"
#include "utils/catcache.h"
#include "utils/inval.h"
#include "utils/plancache.h"
#include "utils/syscache.h"

#include "classify.h"
#include "compat.h"
#include "shmem.h"

/* GUC dbgate.default_budget (dbgate.c) */
char	   *dbgate_default_budget = NULL;

/* backend-local lookup cache; its fast path is dbgate_classify() (classify.h) */
DbgateLookupCache dbgate_lookup_cache = {
	false, InvalidOid, 0, {-1, 0, DBGATE_BY_ROLE, InvalidOid}, false
};
static uint32 lookup_invals = 0;	/* invalidations received so far */
static bool lookup_callbacks_registered = false;

/* An assigned role found by the walk. */
typedef struct Candidate
{
	Oid			roleid;
	int32		budget;
	uint32		incarnation;
} Candidate;

static void
catalog_callback(Datum arg, int cacheid, uint32 hashvalue)
{
	dbgate_lookup_cache.valid = false;
	lookup_invals++;
}

void
dbgate_invalidate_lookup(void)
{
	dbgate_lookup_cache.valid = false;
	lookup_invals++;
}

/*
 * An assignment names a budget without children (config.c and persist.c
 * see to that).  Admission refuses a budget with children and has the
 * statement classified again, so a map entry that broke the rule would
 * have it classified again for ever: it counts as no assignment.  Caller
 * must hold config_lock.
 */
static inline int
assigned_budget(int idx)
{
	if (dbgate_shared->budgets[idx].d.first_child >= 0)
	{
		Assert(false);
		return -1;
	}
	return idx;
}

/*
 * The budget index assigned to roleid, or -1.  Caller must hold config_lock.
 */
static int
rolemap_find(Oid roleid)
{
	DbgateShared *sh = dbgate_shared;
	int			lo = 0,
				hi = sh->nroles - 1;

	while (lo <= hi)
	{
		int			mid = lo + (hi - lo) / 2;
		Oid			r = sh->roles[mid].roleid;

		if (r == roleid)
			return assigned_budget(sh->roles[mid].budget);
		if (r < roleid)
			lo = mid + 1;
		else
			hi = mid - 1;
	}
	return -1;
}

/*
 * The budget index assigned to database dbid, or -1.  Caller must hold
 * config_lock.
 */
static int
dbmap_find(Oid dbid)
{
	DbgateShared *sh = dbgate_shared;
	int			lo = 0,
				hi = sh->ndbs - 1;

	if (sh->dbs == NULL)
		return -1;
	while (lo <= hi)
	{
		int			mid = lo + (hi - lo) / 2;
		Oid			d = sh->dbs[mid].dbid;

		if (d == dbid)
			return assigned_budget(sh->dbs[mid].budget);
		if (d < dbid)
			lo = mid + 1;
		else
			hi = mid - 1;
	}
	return -1;
}

static inline void
set_result(DbgateLookup *out, int idx, DbgateRule rule, Oid via)
{
	out->budget = idx;
	out->incarnation = dbgate_shared->budgets[idx].d.incarnation;
	out->rule = rule;
	out->via = via;
}

/*
 * Of the roles in 'level', the assigned one that rule 2 picks.  Returns
 * false when none of them is assigned.
 */
static bool
pick_assigned(List *level, DbgateLookup *out)
{
	DbgateShared *sh = dbgate_shared;
	Candidate  *cands;
	int			ncands = 0;
	int			best = 0;
	ListCell   *lc;

	/* allocated before the lock is taken: nothing may fail under it */
	cands = palloc(sizeof(Candidate) * list_length(level));

	LWLockAcquire(sh->config_lock, LW_SHARED);
	foreach(lc, level)
	{
		Oid			roleid = lfirst_oid(lc);
		int			idx = rolemap_find(roleid);

		if (idx < 0)
			continue;
		cands[ncands].roleid = roleid;
		cands[ncands].budget = idx;
		cands[ncands].incarnation = sh->budgets[idx].d.incarnation;
		ncands++;
	}
	LWLockRelease(sh->config_lock);

	if (ncands > 1)
	{
		/* equally near: the name that sorts first */
		NameData	best_name;
		bool		have_best = false;
		int			i;

		for (i = 0; i < ncands; i++)
		{
			HeapTuple	tup = SearchSysCache1(AUTHOID,
											  ObjectIdGetDatum(cands[i].roleid));
			Form_pg_authid form;

			/* dropped meanwhile: its invalidation makes us look again */
			if (!HeapTupleIsValid(tup))
				continue;
			form = (Form_pg_authid) GETSTRUCT(tup);
			if (!have_best ||
				strcmp(NameStr(form->rolname), NameStr(best_name)) < 0)
			{
				best_name = form->rolname;
				best = i;
				have_best = true;
			}
			ReleaseSysCache(tup);
		}
	}

	if (ncands > 0)
	{
		out->budget = cands[best].budget;
		out->incarnation = cands[best].incarnation;
		out->rule = DBGATE_BY_MEMBER;
		out->via = cands[best].roleid;
	}
	pfree(cands);
	return ncands > 0;
}

/*
 * Rule 2: walk the roles the user is a member of, nearest first.
 */
static bool
find_by_membership(Oid user, DbgateLookup *out)
{
	List	   *visited = list_make1_oid(user);
	List	   *level = list_make1_oid(user);
	bool		found = false;

	while (level != NIL && !found)
	{
		List	   *next = NIL;
		ListCell   *lc;

		foreach(lc, level)
		{
			CatCList   *memlist;
			int			i;

			memlist = SearchSysCacheList1(AUTHMEMMEMROLE,
										  ObjectIdGetDatum(lfirst_oid(lc)));
			for (i = 0; i < memlist->n_members; i++)
			{
				HeapTuple	tup = &memlist->members[i]->tuple;
				Oid			roleid = ((Form_pg_auth_members) GETSTRUCT(tup))->roleid;

				if (list_member_oid(visited, roleid))
					continue;
				visited = lappend_oid(visited, roleid);
				next = lappend_oid(next, roleid);
			}
			ReleaseSysCacheList(memlist);
		}
		list_free(level);
		level = next;
		if (level != NIL)
			found = pick_assigned(level, out);
	}
	list_free(level);
	list_free(visited);
	return found;
}

/*
 * Rules 1 to 5 for a user that is not a superuser.
 */
static void
classify_user(Oid user, DbgateLookup *out)
{
	DbgateShared *sh = dbgate_shared;
	bool		any_roles;
	int			idx;

	/* 1. the user's own assignment */
	LWLockAcquire(sh->config_lock, LW_SHARED);
	idx = rolemap_find(user);
	if (idx >= 0)
		set_result(out, idx, DBGATE_BY_ROLE, InvalidOid);
	any_roles = (sh->nroles > 0);
	LWLockRelease(sh->config_lock);
	if (idx >= 0)
		return;

	/* 2. a role it is a member of (no walk when no role is assigned) */
	if (any_roles && find_by_membership(user, out))
		return;

	/* 3. the database, 4. the default budget */
	LWLockAcquire(sh->config_lock, LW_SHARED);
	idx = dbmap_find(MyDatabaseId);
	if (idx >= 0)
		set_result(out, idx, DBGATE_BY_DATABASE, InvalidOid);
	else if (dbgate_default_budget != NULL && dbgate_default_budget[0] != '\0')
	{
		idx = dbgate_find_budget(dbgate_default_budget);
		/* a budget with children has no statements of its own */
		if (idx >= 0 && sh->budgets[idx].d.first_child < 0)
			set_result(out, idx, DBGATE_BY_DEFAULT, InvalidOid);
	}
	LWLockRelease(sh->config_lock);
}

/*
 * Does a level of budget idx's chain take its parent's slot through a
 * reservation (queue.c)?  Read without a lock, as a hint for the statement
 * path: every configuration change makes the backend classify again, and
 * a stale answer costs only the guarantee of one admission, never a slot
 * (admission.c).
 */
static bool
chain_reserves(int idx)
{
	int			n;

	for (n = 0; idx >= 0 && idx < dbgate_shared->max_budgets &&
		 n < DBGATE_MAX_DEPTH; n++)
	{
		DbgateBudget *b = &dbgate_shared->budgets[idx].d;

		if (b->lim.resv)
			return true;
		idx = b->lim.parent;
	}
	return false;
}

/*
 * dbgate_classify() found the cache out of date: classify again.
 */
const DbgateLookup *
dbgate_classify_slow(void)
{
	DbgateLookupCache *c = &dbgate_lookup_cache;
	Oid			user = GetSessionUserId();
	uint64		generation = pg_atomic_read_u64(&dbgate_shared->generation);
	DbgateLookup result = {-1, 0, DBGATE_BY_ROLE, InvalidOid, InvalidOid, false, false, false, false};
	uint32		invals = lookup_invals;
	bool		had_queryid = c->result.queryid;

	if (!lookup_callbacks_registered)
	{
		CacheRegisterSyscacheCallback(AUTHOID, catalog_callback, (Datum) 0);
		CacheRegisterSyscacheCallback(AUTHMEMMEMROLE, catalog_callback,
									  (Datum) 0);
		lookup_callbacks_registered = true;
	}

	/* superusers are the administrator's reserve: never gated */
	if (!superuser_arg(user))
		classify_user(user, &result);
	/* mincost.c: the statement path tests this, not the budget */
	if (result.budget >= 0)
	{
		result.min_cost =
			(dbgate_shared->budgets[result.budget].d.conf.min_cost != 0);
		result.reserves = chain_reserves(result.budget);
		/* quarantine.c: whether the statements are looked up */
		result.quarantine =
			(pg_atomic_read_u32(&dbgate_shared->budgets[result.budget].d.quarantine_n) != 0);
		/* queryid.c: whether its statements need query ids */
		result.queryid = result.quarantine ||
			dbgate_shared->budgets[result.budget].d.conf.runaway_after_ms > 0;
	}

	/*
	 * queryid.c: statements parsed while the budget needed no query ids (a
	 * prepared statement, PL/pgSQL's cached plans) are parsed again, with
	 * one, at their next use, unless PostgreSQL computes them anyway (or
	 * never: compute_query_id = off)
	 */
	if (result.queryid && !had_queryid && !IsQueryIdEnabled() &&
		compute_query_id != COMPUTE_QUERY_ID_OFF)
		ResetPlanCache();

	/*
	 * Valid only if no invalidation arrived while the catalogs were read
	 * (and never after an error, which leaves the cache invalid).
	 */
	result.user = user;
	c->result = result;
	c->generation = generation;
	c->user = user;
	c->user_fixed = !superuser_arg(GetAuthenticatedUserId());
	c->valid = (lookup_invals == invals);
	return &c->result;
}
