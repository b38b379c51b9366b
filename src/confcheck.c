/*-------------------------------------------------------------------------
 *
 * confcheck.c
 *	  The checks of a configuration image between budgets: assignments
 *	  left on a budget to be dropped, the hierarchy (parents, depth,
 *	  children), the reservations of a budget's children and the runaway
 *	  references (runaway_budget).
 *
 * Called by config.c's operations before they change the image (so that
 * an error leaves it as it was), on the transaction's image and again at
 * the replay of PRE_COMMIT on the configuration committed then.  The
 * checks of one budget's own fields are fields.c's.  Nothing here touches
 * shared memory, and no lock is taken.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "commands/dbcommands.h"
#include "miscadmin.h"
#include "utils/lsyscache.h"

#include "confcheck.h"
#include "confimage.h"
#include "fields.h"

static int
image_count_dbs_of(const DbgateConfig *config, const char *budget,
				   Oid *example)
{
	int			i;
	int			n = 0;

	for (i = 0; i < config->ndbs; i++)
	{
		if (strcmp(config->dbs[i].budget, budget) == 0)
		{
			if (n == 0)
				*example = config->dbs[i].dbid;
			n++;
		}
	}
	return n;
}

static int
image_count_roles_of(const DbgateConfig *config, const char *budget,
					 Oid *example)
{
	int			i;
	int			n = 0;

	for (i = 0; i < config->nroles; i++)
	{
		if (strcmp(config->roles[i].budget, budget) == 0)
		{
			if (n == 0)
				*example = config->roles[i].roleid;
			n++;
		}
	}
	return n;
}

void
dbgate_image_unknown_budget(const char *name)
{
	ereport(ERROR,
			(errcode(ERRCODE_UNDEFINED_OBJECT),
			 errmsg("budget \"%s\" does not exist", name)));
}

/*
 * drop_budget without force: no role and no database may be assigned.
 */
void
dbgate_image_check_unassigned(const DbgateConfig *config,
							  const char *budget)
{
	Oid			role = InvalidOid;
	Oid			db = InvalidOid;
	int			nroles = image_count_roles_of(config, budget, &role);
	int			ndbs = image_count_dbs_of(config, budget, &db);
	char	   *rolename;
	char	   *dbname;

	if (nroles == 0 && ndbs == 0)
		return;
	rolename = nroles > 0 ? GetUserNameFromId(role, true) : NULL;
	dbname = ndbs > 0 ? get_database_name(db) : NULL;

	if (ndbs == 0)
		ereport(ERROR,
				(errcode(ERRCODE_DEPENDENT_OBJECTS_STILL_EXIST),
				 errmsg("cannot drop budget \"%s\" because roles are assigned to it",
						budget),
				 errdetail_plural("%d role is assigned, including role \"%s\".",
								  "%d roles are assigned, including role \"%s\".",
								  nroles, nroles, rolename ? rolename : "?"),
				 errhint("Unassign the roles first, or use drop_budget(..., force => true).")));
	if (nroles == 0)
		ereport(ERROR,
				(errcode(ERRCODE_DEPENDENT_OBJECTS_STILL_EXIST),
				 errmsg("cannot drop budget \"%s\" because databases are assigned to it",
						budget),
				 errdetail_plural("%d database is assigned, including database \"%s\".",
								  "%d databases are assigned, including database \"%s\".",
								  ndbs, ndbs, dbname ? dbname : "?"),
				 errhint("Unassign the databases first, or use drop_budget(..., force => true).")));
	ereport(ERROR,
			(errcode(ERRCODE_DEPENDENT_OBJECTS_STILL_EXIST),
			 errmsg("cannot drop budget \"%s\" because roles and databases are assigned to it",
					budget),
			 errdetail("%d assignments remain, including role \"%s\" and database \"%s\".",
					   nroles + ndbs, rolename ? rolename : "?",
					   dbname ? dbname : "?"),
			 errhint("Unassign them first, or use drop_budget(..., force => true).")));
}

/* ----------
 * The hierarchy of budgets
 *
 * A budget names its parent (DbgateBudgetConf.parent, "" = top-level).
 * Every image that config.c's apply_op() leaves, and every image decoded
 * from the state file or WAL (persist.c), satisfies:
 *	  - a parent is a budget of the image;
 *	  - no budget is its own ancestor, and no chain from a budget up to its
 *		top-level ancestor has more than DBGATE_MAX_DEPTH budgets;
 *	  - a budget that has children has no role or database assigned;
 *	  - (1.3) the reservations of a budget's children add up to at most its
 *		max_active (a budget without parent reserves nothing: fields.c).
 *	  - (1.3) a runaway_budget is a budget of the image without children;
 *	  - (1.3) a budget with key_by has no children (a key is of the budget
 *		whose statements carry it).
 * (The runaway_budget rule is of the runaway references, checked like the hierarchy:
 * dbgate_image_check_runaway_target(), dbgate_image_check_parent(),
 * dbgate_image_check_not_runaway_target().)
 * The checks run on the image they change, so the replay at PRE_COMMIT on
 * the configuration committed then also catches conflicts with what other
 * sessions committed meanwhile.
 * ----------
 */

/* The index of the parent of budget 'bi', or -1 for a top-level budget. */
static int
image_parent(const DbgateConfig *config, int bi)
{
	const char *parent = config->budgets[bi].parent;

	return parent[0] == '\0' ? -1 : dbgate_image_find_budget(config, parent);
}

/*
 * The budgets from 'bi' up to its top-level ancestor, 'bi' included.
 * Returns -1 when 'stop' is among them (that is, 'bi' is 'stop' or one
 * of its descendants).
 */
static int
chain_length(const DbgateConfig *config, int bi, int stop)
{
	int			n = 0;

	while (bi >= 0 && n <= DBGATE_MAX_DEPTH)
	{
		if (bi == stop)
			return -1;
		n++;
		bi = image_parent(config, bi);
	}
	return n;
}

typedef struct BudgetSlot
{
	const char *name;
	int			index;
} BudgetSlot;

static int
budget_slot_cmp(const void *a, const void *b)
{
	return strcmp(((const BudgetSlot *) a)->name, ((const BudgetSlot *) b)->name);
}

/*
 * The levels of the subtree of budget 'bi': 1 for a budget without
 * children.  n log n in the number of budgets.
 */
static int
subtree_height(const DbgateConfig *config, int bi)
{
	int			n = config->nbudgets;
	BudgetSlot *sorted = palloc(sizeof(BudgetSlot) * Max(n, 1));
	int		   *parent = palloc(sizeof(int) * Max(n, 1));
	int			height = 1;
	int			j;

	for (j = 0; j < n; j++)
	{
		sorted[j].name = config->budgets[j].name;
		sorted[j].index = j;
	}
	qsort(sorted, n, sizeof(BudgetSlot), budget_slot_cmp);
	for (j = 0; j < n; j++)
	{
		BudgetSlot	key;
		BudgetSlot *found;

		key.name = config->budgets[j].parent;
		found = key.name[0] == '\0' ? NULL :
			bsearch(&key, sorted, n, sizeof(BudgetSlot), budget_slot_cmp);
		parent[j] = found ? found->index : -1;
	}
	for (j = 0; j < n; j++)
	{
		int			k = j;
		int			steps;

		for (steps = 0; k >= 0 && steps < DBGATE_MAX_DEPTH; steps++)
		{
			if (k == bi)
			{
				height = Max(height, steps + 1);
				break;
			}
			k = parent[k];
		}
	}
	pfree(sorted);
	pfree(parent);
	return height;
}

/* The number of children of budget 'name', and the first of them by name. */
static int
image_count_children(const DbgateConfig *config, const char *name,
					 const char **example)
{
	int			i;
	int			n = 0;

	for (i = 0; i < config->nbudgets; i++)
	{
		if (strcmp(config->budgets[i].parent, name) == 0)
		{
			if (n == 0 || strcmp(config->budgets[i].name, *example) < 0)
				*example = config->budgets[i].name;
			n++;
		}
	}
	return n;
}

/*
 * The first budget of the image other than 'except' whose runaway_budget
 * is 'name', or NULL; *n counts them.
 */
static const char *
image_runaway_referrer(const DbgateConfig *config, const char *name,
					   const char *except, int *n)
{
	const char *first = NULL;
	int			i;

	*n = 0;
	for (i = 0; i < config->nbudgets; i++)
	{
		const DbgateBudgetConf *c = &config->budgets[i];

		if (strcmp(c->runaway_budget, name) != 0 ||
			(except != NULL && strcmp(c->name, except) == 0))
			continue;
		if (first == NULL || strcmp(c->name, first) < 0)
			first = c->name;
		(*n)++;
	}
	return first;
}

/*
 * Budget 'c' (budget 'bi' of the image, or -1 for one being created) is to
 * have the parent it names: check the rules of the hierarchy.
 */
void
dbgate_image_check_parent(const DbgateConfig *config,
						  const DbgateBudgetConf *c, int bi)
{
	const char *parent = c->parent;
	int			pi;
	int			above;
	int			below;
	Oid			role = InvalidOid;
	Oid			db = InvalidOid;

	if (parent[0] == '\0')
		return;
	if (strcmp(parent, c->name) == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("budget \"%s\" cannot be its own parent", c->name)));
	pi = dbgate_image_find_budget(config, parent);
	if (pi < 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("parent budget \"%s\" does not exist", parent)));
	{
		int			n;
		const char *referrer = image_runaway_referrer(config, parent, NULL, &n);

		if (n > 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("budget \"%s\" cannot be a parent because it is a runaway_budget",
							parent),
					 errdetail("Budget \"%s\" moves its runaways to budget \"%s\".",
							   referrer, parent),
					 errhint("Only a budget without children can take runaways.")));
	}
	if (config->budgets[pi].key_by[0] != '\0')
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("budget \"%s\" cannot be a parent because it has key_by",
						parent),
				 errdetail("Budget \"%s\" has key_by '%s'.", parent,
						   config->budgets[pi].key_by),
				 errhint("Only a budget without children can have key_by: set key_by in the child budgets.")));
	above = chain_length(config, pi, bi);
	if (above < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("budget \"%s\" cannot have parent \"%s\"", c->name, parent),
				 errdetail("Budget \"%s\" is below budget \"%s\": the hierarchy would have a cycle.",
						   parent, c->name)));
	if (image_count_roles_of(config, parent, &role) > 0 ||
		image_count_dbs_of(config, parent, &db) > 0)
	{
		char	   *rolename = OidIsValid(role) ? GetUserNameFromId(role, true) : NULL;
		char	   *dbname = OidIsValid(db) ? get_database_name(db) : NULL;

		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("budget \"%s\" cannot be a parent because roles or databases are assigned to it",
						parent),
				 OidIsValid(role) ?
				 errdetail("Role \"%s\" is assigned to budget \"%s\".",
						   rolename ? rolename : "?", parent) :
				 errdetail("Database \"%s\" is assigned to budget \"%s\".",
						   dbname ? dbname : "?", parent),
				 errhint("Only budgets without children gate sessions: assign the roles and databases to a child budget.")));
	}
	below = bi >= 0 ? subtree_height(config, bi) : 1;
	if (above + below > DBGATE_MAX_DEPTH)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("budget hierarchy would be too deep"),
				 errdetail("With parent \"%s\", budget \"%s\" would be on a chain of %d budgets; at most %d are allowed.",
						   parent, c->name, above + below, DBGATE_MAX_DEPTH)));
}

/*
 * The children of budget 'parent' are to reserve at most its max_active.
 * 'c' is a budget as it is to be (budget 'bi' of the image, or -1 for one
 * being created): one of the children, or the parent itself.  Checked
 * before the image changes, so that an error leaves it as it was.
 */
void
dbgate_image_check_reservations(const DbgateConfig *config,
								const char *parent,
								const DbgateBudgetConf *c, int bi)
{
	int64		sum = 0;
	int32		max_active;
	int			pi;
	int			i;

	if (strcmp(c->name, parent) == 0)
		max_active = c->max_active;
	else
	{
		pi = dbgate_image_find_budget(config, parent);
		if (pi < 0)
			return;				/* dbgate_image_check_parent() reports it */
		max_active = config->budgets[pi].max_active;
	}
	for (i = 0; i < config->nbudgets; i++)
	{
		if (i != bi && strcmp(config->budgets[i].parent, parent) == 0)
			sum += config->budgets[i].reserved;
	}
	if (strcmp(c->parent, parent) == 0)
		sum += c->reserved;
	if (sum > max_active)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("the children of budget \"%s\" would reserve more slots than its max_active",
						parent),
				 errdetail("Its children would reserve %lld slots together; its max_active is %d.",
						   (long long) sum, max_active),
				 errhint("Lower the children's reserved, or raise the max_active of budget \"%s\".",
						 parent)));
}

/*
 * Budget 'c' is to name its runaway_budget: a budget of the image (42704)
 * that has no children (22023), since a demoted statement counts at every
 * level of its chain and only a budget without children has statements.
 */
void
dbgate_image_check_runaway_target(const DbgateConfig *config,
								  const DbgateBudgetConf *c)
{
	const char *child = NULL;
	int			n;

	if (c->runaway_budget[0] == '\0')
		return;
	if (dbgate_image_find_budget(config, c->runaway_budget) < 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("runaway budget \"%s\" does not exist", c->runaway_budget)));
	n = image_count_children(config, c->runaway_budget, &child);
	if (n > 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("budget \"%s\" cannot be a runaway_budget because it has child budgets",
						c->runaway_budget),
				 errdetail_plural("Budget \"%s\" is the parent of %d budget, \"%s\".",
								  "Budget \"%s\" is the parent of %d budgets, including \"%s\".",
								  n, c->runaway_budget, n, child),
				 errhint("Name a budget without children.")));
}

/*
 * drop_budget without force: no budget may have it as its runaway_budget
 * (2BP01).
 */
void
dbgate_image_check_not_runaway_target(const DbgateConfig *config,
									  const char *name)
{
	int			n;
	const char *referrer = image_runaway_referrer(config, name, name, &n);

	if (n == 0)
		return;
	ereport(ERROR,
			(errcode(ERRCODE_DEPENDENT_OBJECTS_STILL_EXIST),
			 errmsg("cannot drop budget \"%s\" because other budgets have it as their runaway_budget",
					name),
			 errdetail_plural("%d budget has it as its runaway_budget: \"%s\".",
							  "%d budgets have it as their runaway_budget, including \"%s\".",
							  n, n, referrer),
			 errhint("Give those budgets another runaway_budget first, or use drop_budget(..., force => true) to make their runaway_action 'log'.")));
}

/* A role or database is to be assigned to budget 'name': it must have no children. */
void
dbgate_image_check_assignable(const DbgateConfig *config, const char *name,
							  Oid oid, bool db)
{
	const char *child = NULL;
	int			n = image_count_children(config, name, &child);
	char	   *objname;

	if (n == 0)
		return;
	objname = db ? get_database_name(oid) : GetUserNameFromId(oid, true);
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 db ?
			 errmsg("cannot assign database \"%s\" to budget \"%s\" because it has child budgets",
					objname ? objname : "?", name) :
			 errmsg("cannot assign role \"%s\" to budget \"%s\" because it has child budgets",
					objname ? objname : "?", name),
			 errdetail_plural("Budget \"%s\" is the parent of %d budget, \"%s\".",
							  "Budget \"%s\" is the parent of %d budgets, including \"%s\".",
							  n, name, n, child),
			 errhint("Only budgets without children gate sessions: assign it to a child budget.")));
}

/* drop_budget without force: no budget may have it as its parent. */
void
dbgate_image_check_childless(const DbgateConfig *config,
							 const char *name)
{
	const char *child = NULL;
	int			n = image_count_children(config, name, &child);

	if (n == 0)
		return;
	ereport(ERROR,
			(errcode(ERRCODE_DEPENDENT_OBJECTS_STILL_EXIST),
			 errmsg("cannot drop budget \"%s\" because other budgets have it as their parent",
					name),
			 errdetail_plural("%d budget has it as its parent: \"%s\".",
							  "%d budgets have it as their parent, including \"%s\".",
							  n, n, child),
			 errhint("Drop the child budgets or give them another parent first, or use drop_budget(..., force => true) to make them top-level.")));
}

/*
 * Budget 'c' (budget 'bi' of the image, or -1 for one being created) is to
 * have key_by: it must have no children (a new budget has none).
 */
void
dbgate_image_check_key_by(const DbgateConfig *config,
						  const DbgateBudgetConf *c, int bi)
{
	const char *child = NULL;
	int			n;

	if (c->key_by[0] == '\0' || bi < 0)
		return;
	n = image_count_children(config, config->budgets[bi].name, &child);
	if (n == 0)
		return;
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("budget \"%s\" cannot have key_by because it has child budgets",
					c->name),
			 errdetail_plural("Budget \"%s\" is the parent of %d budget, \"%s\".",
							  "Budget \"%s\" is the parent of %d budgets, including \"%s\".",
							  n, c->name, n, child),
			 errhint("Only a budget without children can have key_by: set key_by in the child budgets.")));
}
