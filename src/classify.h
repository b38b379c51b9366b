/*-------------------------------------------------------------------------
 *
 * classify.h
 *	  Which budget gates a backend (classify.c), and its per-backend cache.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DBGATE_CLASSIFY_H
#define DBGATE_CLASSIFY_H

#include "miscadmin.h"

#include "shmem.h"

/* dbgate.default_budget (dbgate.c defines the GUC) */
extern PGDLLIMPORT char *dbgate_default_budget;

/* How a backend was classified (dbgate.backends.classified_by). */
typedef enum DbgateRule
{
	DBGATE_BY_ROLE,				/* the session user's own assignment */
	DBGATE_BY_MEMBER,			/* that of a role it is a member of */
	DBGATE_BY_DATABASE,			/* that of the backend's database */
	DBGATE_BY_DEFAULT			/* dbgate.default_budget */
} DbgateRule;

typedef struct DbgateLookup
{
	int			budget;			/* budget index, -1 = not gated */
	uint32		incarnation;	/* of that budget */
	DbgateRule	rule;
	Oid			via;			/* DBGATE_BY_MEMBER: the assigned group */
	Oid			user;			/* the session user it was made for */
	bool		min_cost;		/* the budget had a min_cost (mincost.c):
								 * every configuration change makes the
								 * backend classify again */
	bool		reserves;		/* a level of its chain has a reservation
								 * (admission.c takes the way that reads
								 * the reservation words; a hint) */
	bool		quarantine;		/* the budget had quarantine entries
								 * (quarantine.c bumps the generation when
								 * a budget gets its first or loses its
								 * last) */
	bool		queryid;		/* its statements need query ids: it had
								 * runaway_after or quarantine entries
								 * (queryid.c) */
} DbgateLookup;

/*
 * The per-backend cache of the classification: valid while no catalog
 * invalidation arrived and the configuration generation and the session
 * user are the ones it was made for.
 */
typedef struct DbgateLookupCache
{
	bool		valid;
	Oid			user;
	uint64		generation;
	DbgateLookup result;
	bool		user_fixed;		/* the session user cannot change: the
								 * authenticated user is no superuser, whom
								 * SET SESSION AUTHORIZATION needs (a change
								 * of that clears the cache); queryid.c
								 * skips the comparison of 'user' then */
} DbgateLookupCache;

extern PGDLLIMPORT DbgateLookupCache dbgate_lookup_cache;
extern const DbgateLookup *dbgate_classify_slow(void);
extern void dbgate_invalidate_lookup(void);

/*
 * The budget that gates the current statement (budget -1: none), and why.
 * The statement path: two comparisons and one atomic read while nothing
 * changed.
 */
static inline const DbgateLookup *
dbgate_classify(void)
{
	const DbgateLookupCache *c = &dbgate_lookup_cache;

	if (likely(c->valid && c->user == GetSessionUserId() &&
			   c->generation == pg_atomic_read_u64(&dbgate_shared->generation)))
		return &c->result;
	return dbgate_classify_slow();
}

#endif							/* DBGATE_CLASSIFY_H */
