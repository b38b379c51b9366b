/*-------------------------------------------------------------------------
 *
 * config.c
 *	  Transactional configuration changes.
 *
 * The SQL functions do not touch shared memory.  Each validated change is
 * recorded as a pending operation of the current (sub)transaction.  At its
 * first change a transaction copies the installed configuration (the base
 * image) and from then on sees that copy with its own operations applied
 * (the transaction image): dbgate.budgets and the validation of later calls
 * use it, so another session's commit can never make a read fail.  A
 * transaction that has changed nothing sees the installed configuration.
 *
 * Commit is two-phase:
 *	  PRE_COMMIT  take the commit lock (serialising configuration commits), replay
 *				  the pending operations on the configuration installed now
 *				  (another session may have committed meanwhile: a conflict
 *				  such as a budget created twice fails this commit with the
 *				  usual SQLSTATE), check capacity, log the result in WAL as
 *				  part of the transaction (wal.c) and write it to a
 *				  temporary state file, fsynced.  Any failure here is an
 *				  ordinary ERROR: the transaction aborts, nothing changed
 *				  (the logged image is never installed, see wal.c).
 *	  COMMIT	  flush the commit record, durably rename the temporary file
 *				  over the state file, install the image in shared memory
 *				  and log that the change committed.  Nothing here can fail
 *				  with an ERROR.  The commit lock goes with the transaction's
 *				  other locks, after these callbacks.
 *	  ABORT		  remove the temporary file.
 * The commit lock is a heavyweight lock, like the one NOTIFY takes at
 * commit: waiting for it can be canceled, is covered by the deadlock
 * detector and shows in pg_locks (an advisory lock of database 0, which no
 * user advisory lock can be, with keys 'dbga', 'te' and field 4 = 5).
 * Subtransactions: an aborted subtransaction's operations are forgotten
 * (they are the newest ones; the transaction image is rebuilt from the base
 * image and the remaining operations when it is next needed), a committed
 * one's are handed to its parent.  PREPARE TRANSACTION is refused
 * when configuration changes are pending.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "access/xlog.h"
#include "commands/dbcommands.h"
#include "miscadmin.h"
#include "nodes/pg_list.h"
#include "storage/lock.h"
#include "storage/proc.h"
#include "utils/memutils.h"

#include "budgets.h"
#include "compat.h"
#include "config.h"
#include "confimage.h"
#include "fields.h"
#include "persist.h"
#include "shmem.h"
#include "wal.h"

typedef enum PendingKind
{
	OP_CREATE,
	OP_ALTER,
	OP_DROP,
	OP_ASSIGN,
	OP_UNASSIGN,
	OP_ASSIGN_DB,
	OP_UNASSIGN_DB
} PendingKind;

typedef struct PendingOp
{
	PendingKind kind;
	SubTransactionId subid;
	DbgateBudgetConf conf;		/* CREATE: all; ALTER: name + masked fields */
	uint32		mask;			/* ALTER */
	bool		flag;			/* DROP: force */
	Oid			oid;			/* (UN)ASSIGN: role; (UN)ASSIGN_DB: database */
	char		name[NAMEDATALEN];	/* DROP, ASSIGN, ASSIGN_DB: budget name */
} PendingOp;

/* all of these live in TopTransactionContext */
static List *pending_ops = NIL;
static DbgateConfig *base_image = NULL; /* installed at the first change */
static DbgateConfig *txn_image = NULL;	/* base + pending_ops; NULL: rebuild */
static DbgateConfig *prepared_image = NULL; /* between PRE_COMMIT and COMMIT */

bool		dbgate_config_busy = false; /* pending_ops, or a commit under way */
static bool temp_written = false;
static bool delaying_checkpoint = false;	/* we set DELAY_CHKPT_COMPLETE */
static XLogRecPtr prepared_lsn = InvalidXLogRecPtr; /* of its IMAGE record */
static TransactionId prepared_xid = InvalidTransactionId;

/* ----------
 * Applying operations to an image
 * ----------
 */
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

static void
unknown_budget(const char *name)
{
	ereport(ERROR,
			(errcode(ERRCODE_UNDEFINED_OBJECT),
			 errmsg("budget \"%s\" does not exist", name)));
}

/*
 * drop_budget without force: no role and no database may be assigned.
 */
static void
check_unassigned(const DbgateConfig *config, const char *budget)
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
 * Every image that apply_op() leaves, and every image decoded from the
 * state file or WAL (persist.c), satisfies:
 *	  - a parent is a budget of the image;
 *	  - no budget is its own ancestor, and no chain from a budget up to its
 *		top-level ancestor has more than DBGATE_MAX_DEPTH budgets;
 *	  - a budget that has children has no role or database assigned;
 *	  - (1.3) the reservations of a budget's children add up to at most its
 *		max_active (a budget without parent reserves nothing: fields.c).
 *	  - (1.3) a runaway_budget is a budget of the image without children.
 * (The last one is of the runaway references, checked like the hierarchy:
 * check_runaway_target(), check_parent(), check_not_runaway_target().)
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
static void
check_parent(const DbgateConfig *config, const DbgateBudgetConf *c, int bi)
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
static void
check_reservations(const DbgateConfig *config, const char *parent,
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
			return;				/* check_parent() reports it */
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
static void
check_runaway_target(const DbgateConfig *config, const DbgateBudgetConf *c)
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
static void
check_not_runaway_target(const DbgateConfig *config, const char *name)
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
static void
check_assignable(const DbgateConfig *config, const char *name, Oid oid,
				 bool db)
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
static void
check_childless(const DbgateConfig *config, const char *name)
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
 * Whether apply_op() reports what it does besides errors (WARNINGs): only
 * when an operation is first applied (add_op), not when the transaction's
 * image is rebuilt or the operations are replayed at commit.
 */
static bool apply_reports = false;

/*
 * A quarantine that this server cannot apply is accepted (it is
 * configuration, replicated, and may take effect after a restart or on
 * another server), with a WARNING that says why it does nothing here: no
 * quarantine table, or no query ids in this session (quarantine.c,
 * queryid.c).
 */
static void
warn_quarantine_inert(const DbgateBudgetConf *c)
{
	if (!apply_reports || c->quarantine_ms <= 0)
		return;
	if (dbgate_max_quarantine == 0)
		ereport(WARNING,
				(errmsg("quarantine of budget \"%s\" has no effect", c->name),
				 errdetail("dbgate.max_quarantine is 0: this server keeps no quarantine table."),
				 errhint("Set dbgate.max_quarantine above 0 and restart the server.")));
	else if (compute_query_id == COMPUTE_QUERY_ID_OFF)
		ereport(WARNING,
				(errmsg("quarantine of budget \"%s\" has no effect", c->name),
				 errdetail("compute_query_id is off: statements have no query id, and none is quarantined."),
				 errhint("Set compute_query_id to auto (the default) or on.")));
}

/* create_budget: a new budget, checked as a whole. */
static void
apply_create(DbgateConfig *config, const PendingOp *op)
{
	dbgate_conf_check(&op->conf);
	if (dbgate_image_find_budget(config, op->conf.name) >= 0)
		ereport(ERROR,
				(errcode(ERRCODE_DUPLICATE_OBJECT),
				 errmsg("budget \"%s\" already exists", op->conf.name)));
	if (config->nbudgets >= dbgate_shared->max_budgets)
		ereport(ERROR,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 errmsg("too many budgets"),
				 errdetail("dbgate.max_budgets is %d.",
						   dbgate_shared->max_budgets),
				 errhint("Drop a budget, or raise dbgate.max_budgets and restart the server.")));
	check_parent(config, &op->conf, -1);
	check_runaway_target(config, &op->conf);
	if (op->conf.reserved > 0)
		check_reservations(config, op->conf.parent, &op->conf, -1);
	dbgate_image_add_budget(config, &op->conf);
	config->budgets[config->nbudgets - 1].src_index = -1;
	config->budgets[config->nbudgets - 1].src_incarnation = 0;
	warn_quarantine_inert(&op->conf);
}

/* alter_budget: the fields of the mask changed, the result checked. */
static void
apply_alter(DbgateConfig *config, const PendingOp *op)
{
	DbgateBudgetConf altered;
	int			bi;
	int			f;

	bi = dbgate_image_find_budget(config, op->conf.name);
	if (bi < 0)
		unknown_budget(op->conf.name);
	altered = config->budgets[bi];
	for (f = 0; f < DBGATE_NFIELDS; f++)
	{
		if (op->mask & DBGATE_FIELD_BIT(f))
			dbgate_field_copy(f, &altered, &op->conf);
	}
	/* parent => '' without reserved => ...: the orphan reserves nothing */
	if (altered.parent[0] == '\0' && altered.reserved > 0 &&
		!(op->mask & DBGATE_FIELD_BIT(dbgate_field_index("reserved"))))
	{
		if (apply_reports)
			ereport(WARNING,
					(errmsg("budget \"%s\" has no parent any more: its reserved %d is set to 0",
							altered.name, altered.reserved)));
		altered.reserved = 0;
	}
	dbgate_conf_check(&altered);
	if (strcmp(altered.parent, config->budgets[bi].parent) != 0)
		check_parent(config, &altered, bi);
	if (strcmp(altered.runaway_budget, config->budgets[bi].runaway_budget) != 0)
		check_runaway_target(config, &altered);
	if (altered.reserved > 0)
		check_reservations(config, altered.parent, &altered, bi);
	if (altered.max_active < config->budgets[bi].max_active)
		check_reservations(config, altered.name, &altered, bi);
	config->budgets[bi] = altered;
	if (op->mask & DBGATE_FIELD_BIT(dbgate_field_index("quarantine")))
		warn_quarantine_inert(&altered);
}

/*
 * drop_budget: the budget and its assignments; with force its children
 * become top-level, without it neither may exist.
 */
static void
apply_drop(DbgateConfig *config, const PendingOp *op)
{
	int			bi;
	int			ri;

	bi = dbgate_image_find_budget(config, op->name);
	if (bi < 0)
		unknown_budget(op->name);
	if (!op->flag)
	{
		check_unassigned(config, op->name);
		check_childless(config, op->name);
		check_not_runaway_target(config, op->name);
	}
	/* force: the children become top-level, and reserve nothing */
	for (ri = 0; ri < config->nbudgets; ri++)
	{
		DbgateBudgetConf *child = &config->budgets[ri];

		if (strcmp(child->parent, op->name) != 0)
			continue;
		memset(child->parent, 0, NAMEDATALEN);
		if (child->reserved > 0 && apply_reports)
			ereport(WARNING,
					(errmsg("budget \"%s\" has no parent any more: its reserved %d is set to 0",
							child->name, child->reserved)));
		child->reserved = 0;
	}
	/* force: no budget demotes its runaways to it any more */
	for (ri = 0; ri < config->nbudgets; ri++)
	{
		DbgateBudgetConf *c = &config->budgets[ri];

		if (ri == bi || strcmp(c->runaway_budget, op->name) != 0)
			continue;
		if (apply_reports)
			ereport(WARNING,
					(errmsg("budget \"%s\" loses its runaway_budget \"%s\"%s",
							c->name, op->name,
							c->runaway_action == DBGATE_RUNAWAY_DEMOTE ?
							": its runaway_action is set to 'log'" : "")));
		memset(c->runaway_budget, 0, NAMEDATALEN);
		if (c->runaway_action == DBGATE_RUNAWAY_DEMOTE)
			c->runaway_action = DBGATE_RUNAWAY_LOG;
	}
	for (ri = config->nroles - 1; ri >= 0; ri--)
	{
		if (strcmp(config->roles[ri].budget, op->name) == 0)
			dbgate_image_remove_role(config, ri);
	}
	for (ri = config->ndbs - 1; ri >= 0; ri--)
	{
		if (strcmp(config->dbs[ri].budget, op->name) == 0)
			dbgate_image_remove_db(config, ri);
	}
	dbgate_image_remove_budget(config, bi);
}

/* assign_role: a new assignment, or another budget for an assigned role. */
static void
apply_assign(DbgateConfig *config, const PendingOp *op)
{
	int			ri;

	if (dbgate_image_find_budget(config, op->name) < 0)
		unknown_budget(op->name);
	check_assignable(config, op->name, op->oid, false);
	ri = dbgate_image_find_role(config, op->oid);
	if (ri >= 0)
		strlcpy(config->roles[ri].budget, op->name, NAMEDATALEN);
	else
	{
		if (config->nroles >= dbgate_shared->max_roles)
			ereport(ERROR,
					(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
					 errmsg("too many role assignments"),
					 errdetail("dbgate.max_roles is %d.",
							   dbgate_shared->max_roles),
					 errhint("Raise dbgate.max_roles and restart the server.")));
		dbgate_image_add_role(config, op->oid, op->name);
	}
}

/* assign_database: the same for a database. */
static void
apply_assign_db(DbgateConfig *config, const PendingOp *op)
{
	int			ri;

	if (dbgate_image_find_budget(config, op->name) < 0)
		unknown_budget(op->name);
	check_assignable(config, op->name, op->oid, true);
	ri = dbgate_image_find_db(config, op->oid);
	if (ri >= 0)
		strlcpy(config->dbs[ri].budget, op->name, NAMEDATALEN);
	else
	{
		if (config->ndbs >= dbgate_shared->max_roles)
			ereport(ERROR,
					(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
					 errmsg("too many database assignments"),
					 errdetail("dbgate.max_roles is %d.",
							   dbgate_shared->max_roles),
					 errhint("Raise dbgate.max_roles and restart the server.")));
		dbgate_image_add_db(config, op->oid, op->name);
	}
}

/*
 * Apply one operation to an image, with the errors of the SQL interface.
 * Every error is raised before the image is changed, so an image stays
 * intact when an operation fails.
 */
static void
apply_op(DbgateConfig *config, const PendingOp *op)
{
	int			ri;

	switch (op->kind)
	{
		case OP_CREATE:
			apply_create(config, op);
			break;
		case OP_ALTER:
			apply_alter(config, op);
			break;
		case OP_DROP:
			apply_drop(config, op);
			break;
		case OP_ASSIGN:
			apply_assign(config, op);
			break;
		case OP_UNASSIGN:
			/* replayed after a concurrent unassign: nothing left to do */
			ri = dbgate_image_find_role(config, op->oid);
			if (ri >= 0)
				dbgate_image_remove_role(config, ri);
			break;
		case OP_ASSIGN_DB:
			apply_assign_db(config, op);
			break;
		case OP_UNASSIGN_DB:
			ri = dbgate_image_find_db(config, op->oid);
			if (ri >= 0)
				dbgate_image_remove_db(config, ri);
			break;
	}
}

/*
 * The transaction image, (re)built from the base image if need be.  Only
 * while operations are pending.
 */
static DbgateConfig *
transaction_image(void)
{
	MemoryContext old;
	ListCell   *lc;

	Assert(pending_ops != NIL && base_image != NULL);
	if (txn_image != NULL)
		return txn_image;

	old = MemoryContextSwitchTo(TopTransactionContext);
	txn_image = palloc(sizeof(DbgateConfig));
	dbgate_image_copy(txn_image, base_image);
	/* these were applied to the same image before: they cannot fail */
	foreach(lc, pending_ops)
		apply_op(txn_image, (PendingOp *) lfirst(lc));
	MemoryContextSwitchTo(old);
	return txn_image;
}

/*
 * The configuration as the current transaction sees it, as a copy of its
 * own (the caller frees it with dbgate_image_free).
 */
void
dbgate_config_current(DbgateConfig *config)
{
	if (pending_ops == NIL)
		dbgate_snapshot_config(config);
	else
		dbgate_image_copy(config, transaction_image());
}

/* Whether a role or database is assigned in what the transaction sees. */
static bool
is_assigned(Oid oid, bool db)
{
	DbgateConfig config;
	bool		found;

	if (pending_ops != NIL)
	{
		const DbgateConfig *img = transaction_image();

		return (db ? dbgate_image_find_db(img, oid) :
				dbgate_image_find_role(img, oid)) >= 0;
	}
	dbgate_snapshot_config(&config);
	found = (db ? dbgate_image_find_db(&config, oid) :
			 dbgate_image_find_role(&config, oid)) >= 0;
	dbgate_image_free(&config);
	return found;
}

/*
 * Validate an operation against what the transaction sees, apply it to the
 * transaction image and record it.
 */
static void
add_op(PendingOp *op)
{
	MemoryContext old;
	PendingOp  *copy;

	old = MemoryContextSwitchTo(TopTransactionContext);
	if (pending_ops == NIL)
	{
		/* the first change (or the first after all were rolled back) */
		base_image = palloc(sizeof(DbgateConfig));
		dbgate_snapshot_config(base_image);
		txn_image = palloc(sizeof(DbgateConfig));
		dbgate_image_copy(txn_image, base_image);
	}
	else
		(void) transaction_image();

	apply_reports = true;
	PG_TRY();
	{
		apply_op(txn_image, op);	/* throws on invalid input */
	}
	PG_FINALLY();
	{
		apply_reports = false;
	}
	PG_END_TRY();

	copy = palloc(sizeof(PendingOp));
	memcpy(copy, op, sizeof(PendingOp));
	copy->subid = GetCurrentSubTransactionId();
	pending_ops = lappend(pending_ops, copy);
	dbgate_config_busy = true;
	MemoryContextSwitchTo(old);
}

void
dbgate_config_add_create(const DbgateBudgetConf *conf)
{
	PendingOp	op;

	memset(&op, 0, sizeof(op));
	op.kind = OP_CREATE;
	op.conf = *conf;
	add_op(&op);
}

void
dbgate_config_add_alter(const char *name, const DbgateBudgetConf *values,
						uint32 mask)
{
	PendingOp	op;

	memset(&op, 0, sizeof(op));
	op.kind = OP_ALTER;
	op.conf = *values;
	strlcpy(op.conf.name, name, NAMEDATALEN);
	op.mask = mask;
	add_op(&op);
}

void
dbgate_config_add_drop(const char *name, bool force)
{
	PendingOp	op;

	memset(&op, 0, sizeof(op));
	op.kind = OP_DROP;
	strlcpy(op.name, name, NAMEDATALEN);
	op.flag = force;
	add_op(&op);
}

void
dbgate_config_add_assign(Oid roleid, const char *budget)
{
	PendingOp	op;

	memset(&op, 0, sizeof(op));
	op.kind = OP_ASSIGN;
	op.oid = roleid;
	strlcpy(op.name, budget, NAMEDATALEN);
	add_op(&op);
}

/*
 * Record an unassignment.  Returns false (and records nothing) when the
 * role has no assignment in what the transaction sees.
 */
bool
dbgate_config_add_unassign(Oid roleid)
{
	PendingOp	op;

	if (!is_assigned(roleid, false))
		return false;

	memset(&op, 0, sizeof(op));
	op.kind = OP_UNASSIGN;
	op.oid = roleid;
	add_op(&op);
	return true;
}

void
dbgate_config_add_assign_db(Oid dbid, const char *budget)
{
	PendingOp	op;

	memset(&op, 0, sizeof(op));
	op.kind = OP_ASSIGN_DB;
	op.oid = dbid;
	strlcpy(op.name, budget, NAMEDATALEN);
	add_op(&op);
}

/* As dbgate_config_add_unassign(), for a database. */
bool
dbgate_config_add_unassign_db(Oid dbid)
{
	PendingOp	op;

	if (!is_assigned(dbid, true))
		return false;

	memset(&op, 0, sizeof(op));
	op.kind = OP_UNASSIGN_DB;
	op.oid = dbid;
	add_op(&op);
	return true;
}

/*
 * DROP ROLE and DROP DATABASE remove the object's assignment in the same
 * transaction, so that no stale entry can be inherited by a future object
 * with the same OID.
 */
void
dbgate_config_role_dropped(Oid roleid)
{
	(void) dbgate_config_add_unassign(roleid);
}

void
dbgate_config_database_dropped(Oid dbid)
{
	(void) dbgate_config_add_unassign_db(dbid);
}

/* ----------
 * Transaction callbacks
 * ----------
 */
static void
forget_pending(void)
{
	/* all of it lives in TopTransactionContext, which goes away */
	pending_ops = NIL;
	base_image = NULL;
	txn_image = NULL;
	prepared_image = NULL;
	dbgate_config_busy = false;
}

/*
 * Serialise configuration commits of the whole instance.  Held until the
 * end of the transaction.
 */
static void
lock_commit(void)
{
	LOCKTAG		tag;

	SET_LOCKTAG_ADVISORY(tag, InvalidOid, 0x64626761, 0x7465, 5);
	(void) LockAcquire(&tag, ExclusiveLock, false, false);
}

/*
 * A budget that this transaction dropped and created again is a new budget
 * (src_index -1 under the name of an installed one): its counters start
 * from zero and its token bucket full.  Replay matches budgets by name,
 * so for such a transaction the configuration without those budgets (as
 * if they had been dropped last, with force) is logged first, in the same
 * transaction: replay takes a budget that the last image of a transaction
 * has and an earlier one of it lacks as new (wal.c).  A server that does
 * not know this (dbgate 1.1) drops the earlier image as one whose
 * transaction never committed, as it drops any image followed by another,
 * and installs the last one as before.  Caller holds the commit lock, so
 * the installed configuration cannot change meanwhile.
 */
static void
log_without_recreated(const DbgateConfig *config)
{
	DbgateConfig without;
	bool	   *recreated = palloc0(sizeof(bool) * Max(config->nbudgets, 1));
	int			n = 0;
	int			i;

	LWLockAcquire(dbgate_shared->config_lock, LW_SHARED);
	for (i = 0; i < config->nbudgets; i++)
	{
		if (config->budgets[i].src_index < 0 &&
			dbgate_find_budget(config->budgets[i].name) >= 0)
		{
			recreated[i] = true;
			n++;
		}
	}
	LWLockRelease(dbgate_shared->config_lock);

	if (n > 0)
	{
		dbgate_image_copy(&without, config);
		for (i = 0; i < config->nbudgets; i++)
		{
			PendingOp	op;

			if (!recreated[i])
				continue;
			memset(&op, 0, sizeof(op));
			op.kind = OP_DROP;
			strlcpy(op.name, config->budgets[i].name, NAMEDATALEN);
			op.flag = true;
			/* a budget of the image, dropped with force: cannot fail */
			apply_op(&without, &op);
		}
		(void) dbgate_wal_log_image(&without);
		dbgate_image_free(&without);
	}
	pfree(recreated);
}

static void
pre_commit(void)
{
	DbgateConfig *config;
	MemoryContext old;
	ListCell   *lc;

	lock_commit();

	/* replay on what is installed now: conflicts fail here */
	old = MemoryContextSwitchTo(TopTransactionContext);
	config = palloc(sizeof(DbgateConfig));
	dbgate_snapshot_config(config);
	foreach(lc, pending_ops)
		apply_op(config, (PendingOp *) lfirst(lc));
	MemoryContextSwitchTo(old);

	/* apply_op() enforces both capacities; state them once more */
	Assert(config->nbudgets <= dbgate_shared->max_budgets);
	Assert(config->nroles <= dbgate_shared->max_roles);

	/*
	 * Log the image as part of this transaction, then write the temporary
	 * state file naming its position.  No checkpoint may complete from here
	 * until the state file is in place or the transaction has aborted (see
	 * wal.c).
	 */
	MyProc->delayChkptFlags |= DELAY_CHKPT_COMPLETE;
	delaying_checkpoint = true;
	log_without_recreated(config);
	prepared_lsn = dbgate_wal_log_image(config);
	prepared_xid = GetTopTransactionId();

	temp_written = true;
	dbgate_state_write_temp(config, prepared_lsn);
	prepared_image = config;
}

static void
stop_delaying_checkpoint(void)
{
	if (delaying_checkpoint)
	{
		MyProc->delayChkptFlags &= ~DELAY_CHKPT_COMPLETE;
		delaying_checkpoint = false;
	}
}

void
dbgate_config_xact_callback(XactEvent event)
{
	switch (event)
	{
		case XACT_EVENT_PRE_COMMIT:
			if (pending_ops != NIL && dbgate_shared != NULL)
				pre_commit();
			break;

		case XACT_EVENT_COMMIT:
			if (prepared_image != NULL)
			{
				HOLD_INTERRUPTS();

				/*
				 * The commit record is durable before the state file holds
				 * the change, whatever synchronous_commit says.  A committed
				 * change that cannot be made durable is a PANIC: crash
				 * recovery then replays it from WAL.
				 */
				XLogFlush(XactLastCommitEnd);
				dbgate_state_commit_temp(PANIC);
				temp_written = false;
				dbgate_install_config(prepared_image, prepared_lsn);
				dbgate_wal_log_confirm(prepared_xid);
				stop_delaying_checkpoint();
				RESUME_INTERRUPTS();
			}
			forget_pending();
			break;

		case XACT_EVENT_ABORT:
			if (temp_written)
			{
				dbgate_state_discard_temp();
				temp_written = false;
			}
			stop_delaying_checkpoint();
			forget_pending();
			break;

		case XACT_EVENT_PRE_PREPARE:
			if (pending_ops != NIL)
				ereport(ERROR,
						(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
						 errmsg("cannot PREPARE a transaction that has changed dbgate budgets")));
			break;

		case XACT_EVENT_PREPARE:
			forget_pending();
			break;

		default:
			break;
	}
}

void
dbgate_config_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
							   SubTransactionId parentSubid)
{
	ListCell   *lc;

	if (pending_ops == NIL)
		return;

	switch (event)
	{
		case SUBXACT_EVENT_ABORT_SUB:
			foreach(lc, pending_ops)
			{
				PendingOp  *op = (PendingOp *) lfirst(lc);

				if (op->subid >= mySubid)
				{
					pending_ops = foreach_delete_current(pending_ops, lc);
					txn_image = NULL;	/* rebuilt when next needed */
				}
			}
			break;

		case SUBXACT_EVENT_COMMIT_SUB:
			foreach(lc, pending_ops)
			{
				PendingOp  *op = (PendingOp *) lfirst(lc);

				if (op->subid == mySubid)
					op->subid = parentSubid;
			}
			break;

		default:
			break;
	}
}
