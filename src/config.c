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
#include "confcheck.h"
#include "config.h"
#include "confimage.h"
#include "fields.h"
#include "keylimits.h"
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
	OP_UNASSIGN_DB,
	OP_SET_KEY_LIMIT,
	OP_RESET_KEY_LIMIT
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
	DbgateKeyLimitConf keylimit;	/* SET_KEY_LIMIT; RESET_KEY_LIMIT: budget
									 * and key ('flag': every key) */
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
	dbgate_image_check_parent(config, &op->conf, -1);
	dbgate_image_check_runaway_target(config, &op->conf);
	dbgate_image_check_key_by(config, &op->conf, -1);
	if (op->conf.reserved > 0)
		dbgate_image_check_reservations(config, op->conf.parent, &op->conf,
										-1);
	dbgate_image_add_budget(config, &op->conf);
	config->budgets[config->nbudgets - 1].src_index = -1;
	config->budgets[config->nbudgets - 1].src_incarnation = 0;
	warn_quarantine_inert(&op->conf);
}

/*
 * The key limits of a budget go when its key_by changes or is cleared
 * (the keys they name are of another kind now), with a NOTICE.
 */
static void
drop_keylimits(DbgateConfig *config, const char *budget, const char *why)
{
	int			n = dbgate_image_remove_keylimits_of(config, budget);

	if (n > 0 && apply_reports)
		ereport(NOTICE,
				(errmsg_plural("%d key limit of budget \"%s\" removed because %s",
							   "%d key limits of budget \"%s\" removed because %s",
							   n, n, budget, why)));
}

/*
 * set_key_limit (1.3): the budget exists and has key_by, a key limit's
 * max_active is at most the budget's, and there is room for a new one.
 * The values' own ranges are the SQL function's checks.
 */
static void
apply_set_key_limit(DbgateConfig *config, const PendingOp *op)
{
	const DbgateKeyLimitConf *k = &op->keylimit;
	int			bi = dbgate_image_find_budget(config, k->budget);
	int			ki;

	if (bi < 0)
		dbgate_image_unknown_budget(k->budget);
	if (config->budgets[bi].key_by[0] == '\0')
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("budget \"%s\" has no key_by", k->budget),
				 errhint("Set key_by with alter_budget first.")));
	if (k->max_active > config->budgets[bi].max_active)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("max_active of a key limit must not be over the budget's max_active"),
				 errdetail("Budget \"%s\" has max_active %d; the key limit would have %d.",
						   k->budget, config->budgets[bi].max_active,
						   k->max_active)));
	ki = dbgate_image_find_keylimit(config, k->budget, k->key);
	if (ki < 0 && config->nkeylimits >= dbgate_keylimits->max)
		ereport(ERROR,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 errmsg("too many key limits"),
				 errdetail("dbgate.max_key_limits is %d.", dbgate_keylimits->max),
				 errhint("Remove key limits with reset_key_limit, or raise dbgate.max_key_limits and restart the server.")));
	if (ki >= 0)
		config->keylimits[ki] = *k;
	else
		dbgate_image_add_keylimit(config, k);
}

/* reset_key_limit (1.3): one key's limits, or every key's of the budget. */
static void
apply_reset_key_limit(DbgateConfig *config, const PendingOp *op)
{
	const DbgateKeyLimitConf *k = &op->keylimit;
	int			ki;

	if (dbgate_image_find_budget(config, k->budget) < 0)
		dbgate_image_unknown_budget(k->budget);
	if (op->flag)
	{
		(void) dbgate_image_remove_keylimits_of(config, k->budget);
		return;
	}
	ki = dbgate_image_find_keylimit(config, k->budget, k->key);
	if (ki >= 0)
		dbgate_image_remove_keylimit(config, ki);
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
		dbgate_image_unknown_budget(op->conf.name);
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
		dbgate_image_check_parent(config, &altered, bi);
	if (strcmp(altered.runaway_budget, config->budgets[bi].runaway_budget) != 0)
		dbgate_image_check_runaway_target(config, &altered);
	dbgate_image_check_key_by(config, &altered, bi);
	if (altered.reserved > 0)
		dbgate_image_check_reservations(config, altered.parent, &altered, bi);
	if (altered.max_active < config->budgets[bi].max_active)
		dbgate_image_check_reservations(config, altered.name, &altered, bi);
	if (strcmp(altered.key_by, config->budgets[bi].key_by) != 0)
		drop_keylimits(config, altered.name, "its key_by changed");
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
		dbgate_image_unknown_budget(op->name);
	if (!op->flag)
	{
		dbgate_image_check_unassigned(config, op->name);
		dbgate_image_check_childless(config, op->name);
		dbgate_image_check_not_runaway_target(config, op->name);
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
	(void) dbgate_image_remove_keylimits_of(config, op->name);
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
		dbgate_image_unknown_budget(op->name);
	dbgate_image_check_assignable(config, op->name, op->oid, false);
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
		dbgate_image_unknown_budget(op->name);
	dbgate_image_check_assignable(config, op->name, op->oid, true);
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
		case OP_SET_KEY_LIMIT:
			apply_set_key_limit(config, op);
			break;
		case OP_RESET_KEY_LIMIT:
			apply_reset_key_limit(config, op);
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
dbgate_config_add_set_key_limit(const DbgateKeyLimitConf *k)
{
	PendingOp	op;

	memset(&op, 0, sizeof(op));
	op.kind = OP_SET_KEY_LIMIT;
	op.keylimit = *k;
	add_op(&op);
}

/* key NULL: every key limit of the budget */
void
dbgate_config_add_reset_key_limit(const char *budget, const char *key)
{
	PendingOp	op;

	memset(&op, 0, sizeof(op));
	op.kind = OP_RESET_KEY_LIMIT;
	strlcpy(op.keylimit.budget, budget, NAMEDATALEN);
	if (key != NULL)
		strlcpy(op.keylimit.key, key, sizeof(op.keylimit.key));
	op.flag = (key == NULL);
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
