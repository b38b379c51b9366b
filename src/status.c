/*-------------------------------------------------------------------------
 *
 * status.c
 *	  The functions behind the live views dbgate.status and dbgate.backends.
 *
 * Everything is copied out of shared memory under the locks first; names
 * are looked up and tuples built afterwards, with no lock held.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/float.h"
#include "utils/timestamp.h"

#include "classify.h"
#include "compat.h"			/* PG_FUNCTION_INFO_V1 exports on 15 too */
#include "dimdefs.h"
#include "install.h"
#include "keytab.h"
#include "queue.h"
#include "shmem.h"
#include "queuewait.h"

PG_FUNCTION_INFO_V1(dbgate_budget_status);
PG_FUNCTION_INFO_V1(dbgate_budget_status_1_1);
PG_FUNCTION_INFO_V1(dbgate_budget_status_1_2);
PG_FUNCTION_INFO_V1(dbgate_budget_status_1_3);
PG_FUNCTION_INFO_V1(dbgate_backend_status);
PG_FUNCTION_INFO_V1(dbgate_backend_status_1_1);
PG_FUNCTION_INFO_V1(dbgate_backend_status_1_2);
PG_FUNCTION_INFO_V1(dbgate_backend_status_1_3);
PG_FUNCTION_INFO_V1(dbgate_wait_histogram);

/* columns of 1.0, 1.1, 1.2 and 1.3 (each adds columns at the end) */
#define BUDGET_STATUS_COLS_1_0	17
#define BUDGET_STATUS_COLS_1_1	21
#define BUDGET_STATUS_COLS_1_2	26
#define BUDGET_STATUS_COLS		33
#define BACKEND_STATUS_COLS_1_0 6
#define BACKEND_STATUS_COLS_1_1 7
#define BACKEND_STATUS_COLS_1_2 8
#define BACKEND_STATUS_COLS		11
#define WAIT_HISTOGRAM_COLS		3

/* What one row of dbgate.status shows, copied out of shared memory. */
typedef struct StatusRow
{
	char		name[NAMEDATALEN];
	int32		max_active;
	int32		max_queued;
	uint64		st;
	uint32		peak_active;
	int32		peak_queued;
	uint64		admitted;
	uint64		after_wait;
	uint64		rejected_full;
	uint64		rejected_timeout;
	uint64		canceled;
	uint64		lock_holder;
	uint32		adaptive_limit; /* 0: the budget does not adapt */
	int32		keys;			/* live keys (1.3) */
	uint64		keys_overflowed;
	uint64		runaways;
	uint64		demoted_out;
	uint64		demoted_in;
	uint64		quarantined;
	uint64		wait_total_us;
	uint64		wait_max_us;
	uint64		active_time_us;
	TimestampTz stats_reset;
	int32		idle_in_xact;
	uint64		terminated_idle;
	uint64		would_queue;
	uint64		would_reject;
	/* 1.2 */
	uint64		oldest_wait_us;
	uint64		overdue;
	uint64		rate_limited;
	uint64		bypassed;
	uint64		memory_kb;
	int32		max_memory_mb;
	uint64		hist[DBGATE_HIST_BUCKETS];
} StatusRow;

/*
 * A budget with children shows only what a parent counts: active, queued,
 * their peaks, oldest_wait and memory_mb_active of its subtree, and what
 * it held back (would_queue, rate_limited); every other counter and its
 * histogram are 0 (SPEC).  Its own counts were reset when it got its first
 * child (budgets.c); this hides what statements admitted before that still
 * add (a kept slot returned later, a waiter that went on ungated).
 */
static void
parent_row(StatusRow *r)
{
	r->admitted = 0;
	r->after_wait = 0;
	r->rejected_full = 0;
	r->rejected_timeout = 0;
	r->canceled = 0;
	r->lock_holder = 0;
	r->wait_total_us = 0;
	r->wait_max_us = 0;
	r->active_time_us = 0;
	r->idle_in_xact = 0;
	r->terminated_idle = 0;
	r->would_reject = 0;
	r->overdue = 0;
	r->bypassed = 0;
	r->runaways = 0;
	r->demoted_out = 0;
	r->demoted_in = 0;
	r->quarantined = 0;
	memset(r->hist, 0, sizeof(r->hist));
}

/*
 * Copy what dbgate.status and dbgate.wait_histogram show of budget i.
 * Caller holds config_lock (shared).  One reading of the state word gives
 * consistent active and queued counts; the rest is copied under the
 * budget's tree lock.
 */
static void
copy_status(int i, StatusRow *r)
{
	DbgateBudget *b = &dbgate_shared->budgets[i].d;
	int			root;
	int			k;
	bool		parent;

	root = dbgate_admission_lock_tree(i);
	strlcpy(r->name, b->conf.name, NAMEDATALEN);
	r->max_active = b->conf.max_active;
	r->max_queued = b->conf.max_queued;
	r->max_memory_mb = b->conf.max_memory_mb;
	r->st = pg_atomic_read_u64(&b->state);
	r->peak_active = pg_atomic_read_u32(&b->peak_active);
	r->admitted = pg_atomic_read_u64(&b->admitted);
	r->active_time_us = pg_atomic_read_u64(&b->active_time_total_us);
	r->peak_queued = b->peak_queued;
	r->after_wait = pg_atomic_read_u64(&b->admitted_after_wait);
	r->rejected_full = b->rejected_full;
	r->rejected_timeout = b->rejected_timeout;
	r->canceled = b->canceled_waiting;
	r->lock_holder = b->admitted_lock_holder;
	r->wait_total_us = pg_atomic_read_u64(&b->wait_time_total_us);
	r->wait_max_us = pg_atomic_read_u64(&b->wait_time_max_us);
	r->stats_reset = b->stats_reset;
	r->terminated_idle = pg_atomic_read_u64(&b->terminated_idle);
	r->would_queue = pg_atomic_read_u64(&b->would_queue);
	r->would_reject = pg_atomic_read_u64(&b->would_reject);
	r->overdue = pg_atomic_read_u64(&b->admitted_overdue);
	r->rate_limited = pg_atomic_read_u64(&b->rate_limited);
	r->bypassed = pg_atomic_read_u64(&b->bypassed);
	r->memory_kb = pg_atomic_read_u64(&b->memory_kb_active);
	r->adaptive_limit = pg_atomic_read_u32(&b->adapt_limit);
	r->runaways = pg_atomic_read_u64(&b->runaways);
	r->demoted_out = pg_atomic_read_u64(&b->demoted_out);
	r->demoted_in = pg_atomic_read_u64(&b->demoted_in);
	r->quarantined = pg_atomic_read_u64(&b->quarantined);
	r->keys_overflowed = dbgate_keytab_overflowed(i, b->incarnation);
	for (k = 0; k < DBGATE_HIST_BUCKETS; k++)
		r->hist[k] = pg_atomic_read_u64(&b->wait_hist[k]);
	parent = (b->first_child >= 0);
	LWLockRelease(dbgate_budget_lock(root));
	r->oldest_wait_us = dbgate_admission_oldest_wait(i);
	r->idle_in_xact = dbgate_admission_idle_count(i);
	if (parent)
		parent_row(r);
}

/*
 * Start a set-returning function of ncols columns and copy the status of
 * every budget in use (under config_lock shared: a consistent set of
 * names).  Returns the rows, *nrows of them.
 */
static StatusRow *
status_rows(FunctionCallInfo fcinfo, int ncols, int *nrows)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	DbgateShared *sh;
	StatusRow  *rows;
	int32	   *live;
	int			i;

	dbgate_check_loaded();
	sh = dbgate_shared;
	InitMaterializedSRF(fcinfo, 0);
	if (rsinfo->setDesc->natts != ncols)
		elog(ERROR, "incorrect number of output columns: %d instead of %d",
			 rsinfo->setDesc->natts, ncols);

	rows = palloc(sizeof(StatusRow) * sh->max_budgets);
	live = palloc(sizeof(int32) * sh->max_budgets);
	*nrows = 0;
	LWLockAcquire(sh->config_lock, LW_SHARED);
	dbgate_keytab_count_live(live, dbgate_now_ns());
	for (i = 0; i < sh->max_budgets; i++)
	{
		if (sh->budgets[i].d.in_use)
		{
			rows[*nrows].keys = live[i];
			copy_status(i, &rows[(*nrows)++]);
		}
	}
	LWLockRelease(sh->config_lock);
	pfree(live);
	return rows;
}

static Datum
budget_status(FunctionCallInfo fcinfo, int ncols)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	int			nrows;
	StatusRow  *rows = status_rows(fcinfo, ncols, &nrows);
	int			i;

	for (i = 0; i < nrows; i++)
	{
		StatusRow  *r = &rows[i];
		Datum		values[BUDGET_STATUS_COLS];
		bool		nulls[BUDGET_STATUS_COLS];
		uint32		active = dbgate_st_active(r->st);

		memset(nulls, 0, sizeof(nulls));
		values[0] = CStringGetTextDatum(r->name);
		values[1] = Int32GetDatum(r->max_active);
		values[2] = Int32GetDatum((int32) active);
		values[3] = Int32GetDatum(r->max_queued);
		values[4] = Int32GetDatum((int32) dbgate_st_queued(r->st));
		values[5] = Int32GetDatum((int32) Max(r->peak_active, active));
		values[6] = Int32GetDatum(r->peak_queued);
		values[7] = Int64GetDatum((int64) r->admitted);
		values[8] = Int64GetDatum((int64) r->after_wait);
		values[9] = Int64GetDatum((int64) r->rejected_full);
		values[10] = Int64GetDatum((int64) r->rejected_timeout);
		values[11] = Int64GetDatum((int64) r->canceled);
		values[12] = Int64GetDatum((int64) r->lock_holder);
		values[13] = Float8GetDatum((double) r->wait_total_us / 1000.0);
		values[14] = Float8GetDatum((double) r->wait_max_us / 1000.0);
		values[15] = Float8GetDatum((double) r->active_time_us / 1000.0);
		values[16] = TimestampTzGetDatum(r->stats_reset);
		/* 1.1 */
		values[17] = Int32GetDatum(Min(r->idle_in_xact, (int32) active));
		values[18] = Int64GetDatum((int64) r->terminated_idle);
		values[19] = Int64GetDatum((int64) r->would_queue);
		values[20] = Int64GetDatum((int64) r->would_reject);
		/* 1.2 */
		if (ncols > BUDGET_STATUS_COLS_1_1)
		{
			values[21] = Float8GetDatum((double) r->oldest_wait_us / 1000.0);
			values[22] = Int64GetDatum((int64) r->overdue);
			values[23] = Int64GetDatum((int64) r->rate_limited);
			values[24] = Int64GetDatum((int64) r->bypassed);
			values[25] = Float8GetDatum((double) (int64) r->memory_kb / 1024.0);
		}
		/* 1.3 */
		if (ncols > BUDGET_STATUS_COLS_1_2)
		{
			values[26] = Int32GetDatum(r->keys);
			values[27] = Int64GetDatum((int64) r->keys_overflowed);
			values[28] = Int64GetDatum((int64) r->runaways);
			values[29] = Int64GetDatum((int64) r->demoted_out);
			values[30] = Int64GetDatum((int64) r->demoted_in);
			values[31] = Int64GetDatum((int64) r->quarantined);
			values[32] = Int32GetDatum((int32) r->adaptive_limit);
			nulls[32] = (r->adaptive_limit == 0);
		}
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}

Datum
dbgate_budget_status(PG_FUNCTION_ARGS)
{
	return budget_status(fcinfo, BUDGET_STATUS_COLS_1_0);
}

Datum
dbgate_budget_status_1_1(PG_FUNCTION_ARGS)
{
	return budget_status(fcinfo, BUDGET_STATUS_COLS_1_1);
}

Datum
dbgate_budget_status_1_2(PG_FUNCTION_ARGS)
{
	return budget_status(fcinfo, BUDGET_STATUS_COLS_1_2);
}

Datum
dbgate_budget_status_1_3(PG_FUNCTION_ARGS)
{
	return budget_status(fcinfo, BUDGET_STATUS_COLS);
}

/*
 * dbgate.wait_histogram: per budget, how long its admitted statements
 * waited in its queue, as cumulative buckets (Prometheus' convention:
 * each count includes the ones before; the last bucket's bound is
 * Infinity and its count is 'admitted').  Admissions without a wait count
 * in every bucket; waits are counted from the statement's arrival at the
 * gate.
 */
Datum
dbgate_wait_histogram(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	int			nrows;
	StatusRow  *rows = status_rows(fcinfo, WAIT_HISTOGRAM_COLS, &nrows);
	int			i;

	for (i = 0; i < nrows; i++)
	{
		StatusRow  *r = &rows[i];
		uint64		at_once;
		uint64		cum;
		int			k;

		/* counted without a common lock: never above 'admitted' */
		at_once = r->admitted > r->after_wait ? r->admitted - r->after_wait : 0;
		cum = at_once;
		for (k = 0; k <= DBGATE_HIST_BUCKETS; k++)
		{
			Datum		values[WAIT_HISTOGRAM_COLS];
			bool		nulls[WAIT_HISTOGRAM_COLS];

			memset(nulls, 0, sizeof(nulls));
			if (k < DBGATE_HIST_BUCKETS)
				cum += r->hist[k];
			values[0] = CStringGetTextDatum(r->name);
			values[1] = Float8GetDatum(k < DBGATE_HIST_BUCKETS ?
									   dbgate_hist_bounds_ms[k] :
									   get_float8_infinity());
			values[2] = Int64GetDatum((int64) (k < DBGATE_HIST_BUCKETS ?
											   Min(cum, r->admitted) :
											   r->admitted));
			tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values,
								 nulls);
		}
	}
	return (Datum) 0;
}

static const char *
row_state(uint8 state)
{
	switch (state)
	{
		case DBGATE_ROW_QUEUED:
			return "queued";
		case DBGATE_ROW_HELD:
			return "idle in transaction";
		default:
			return "active";
	}
}

static char *
classified_by(const DbgateBackendRow *row)
{
	switch ((DbgateRule) row->rule)
	{
		case DBGATE_BY_ROLE:
			return pstrdup("role");
		case DBGATE_BY_MEMBER:
			{
				char	   *group = GetUserNameFromId(row->via, true);

				return psprintf("member of %s", group ? group : "?");
			}
		case DBGATE_BY_DATABASE:
			return pstrdup("database");
		case DBGATE_BY_DEFAULT:
			return pstrdup("default");
	}
	return pstrdup("?");
}

/*
 * The columns of dbgate.backends that 1.3 added: its key (NULL without
 * one, and for the overflow key, which key_overflow shows), and where a
 * demoted statement was moved from.
 */
static void
backend_row_1_3(const DbgateBackendRow *row, char (*names)[NAMEDATALEN],
				Datum *values, bool *nulls)
{
	bool		held = (row->key_flags & DBGATE_KEYF_HELD) != 0;
	bool		over = (row->key_flags & DBGATE_KEYF_OVERFLOW) != 0;

	if (held && !over)
		values[8] = CStringGetTextDatum(row->key);
	else
		nulls[8] = true;
	if (held)
		values[9] = BoolGetDatum(over);
	else
		nulls[9] = true;
	if (row->demoted_from >= 0)
		values[10] = CStringGetTextDatum(names[row->demoted_from]);
	else
		nulls[10] = true;
}

static Datum
backend_status(FunctionCallInfo fcinfo, int ncols)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	DbgateShared *sh;
	DbgateBackendRow *rows;
	char		(*names)[NAMEDATALEN];
	int32	   *memory_mb;
	int			nrows = 0;
	int			i;

	dbgate_check_loaded();
	sh = dbgate_shared;
	InitMaterializedSRF(fcinfo, 0);
	if (rsinfo->setDesc->natts != ncols)
		elog(ERROR, "incorrect number of output columns: %d instead of %d",
			 rsinfo->setDesc->natts, ncols);

	/* a backend is queued in one budget or holds one slot: max_procs rows */
	rows = palloc(sizeof(DbgateBackendRow) * sh->max_procs);
	names = palloc(sizeof(*names) * sh->max_budgets);
	memory_mb = palloc(sizeof(int32) * sh->max_budgets);

	LWLockAcquire(sh->config_lock, LW_SHARED);
	for (i = 0; i < sh->max_budgets; i++)
	{
		DbgateBudget *b = &sh->budgets[i].d;

		if (!b->in_use)
			continue;
		strlcpy(names[i], b->conf.name, NAMEDATALEN);
		memory_mb[i] = b->conf.max_memory_mb;
	}
	for (i = 0; i < sh->max_budgets && nrows < sh->max_procs; i++)
	{
		if (!sh->budgets[i].d.in_use)
			continue;
		nrows += dbgate_admission_backends(i, rows + nrows,
										   sh->max_procs - nrows);
	}
	LWLockRelease(sh->config_lock);

	for (i = 0; i < nrows; i++)
	{
		Datum		values[BACKEND_STATUS_COLS];
		bool		nulls[BACKEND_STATUS_COLS];
		char	   *rolename;

		memset(nulls, 0, sizeof(nulls));
		values[0] = Int32GetDatum(rows[i].pid);
		rolename = GetUserNameFromId(rows[i].roleid, true);
		if (rolename)
		{
			NameData   *n = palloc(sizeof(NameData));

			namestrcpy(n, rolename);
			values[1] = NameGetDatum(n);
		}
		else
			nulls[1] = true;
		values[2] = CStringGetTextDatum(names[rows[i].budget]);
		values[3] = CStringGetTextDatum(row_state(rows[i].state));
		values[4] = TimestampTzGetDatum(rows[i].since);
		if (rows[i].state == DBGATE_ROW_QUEUED)
			values[5] = Int32GetDatum(rows[i].position);
		else
			nulls[5] = true;
		/* 1.1 */
		values[6] = CStringGetTextDatum(classified_by(&rows[i]));
		/* 1.2: the backend's grant; NULL where the budget has no limit */
		if (ncols > BACKEND_STATUS_COLS_1_1)
		{
			if (memory_mb[rows[i].budget] > 0)
				values[7] = Float8GetDatum((double) rows[i].memory_kb / 1024.0);
			else
				nulls[7] = true;
		}
		if (ncols > BACKEND_STATUS_COLS_1_2)
			backend_row_1_3(&rows[i], names, values, nulls);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}

Datum
dbgate_backend_status(PG_FUNCTION_ARGS)
{
	return backend_status(fcinfo, BACKEND_STATUS_COLS_1_0);
}

Datum
dbgate_backend_status_1_1(PG_FUNCTION_ARGS)
{
	return backend_status(fcinfo, BACKEND_STATUS_COLS_1_1);
}

Datum
dbgate_backend_status_1_2(PG_FUNCTION_ARGS)
{
	return backend_status(fcinfo, BACKEND_STATUS_COLS_1_2);
}

Datum
dbgate_backend_status_1_3(PG_FUNCTION_ARGS)
{
	return backend_status(fcinfo, BACKEND_STATUS_COLS);
}

/* ----------
 * dbgate.keys (1.3): one row per live key
 * ----------
 */
#define KEY_STATUS_COLS 11

PG_FUNCTION_INFO_V1(dbgate_key_status);

Datum
dbgate_key_status(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	DbgateShared *sh;
	char		(*names)[NAMEDATALEN];
	DbgateKey  *copy;
	int32		n;
	int32		k;
	int64		now_ns = dbgate_now_ns();

	dbgate_check_loaded();
	sh = dbgate_shared;
	InitMaterializedSRF(fcinfo, 0);
	if (rsinfo->setDesc->natts != KEY_STATUS_COLS)
		elog(ERROR, "incorrect number of output columns: %d instead of %d",
			 rsinfo->setDesc->natts, KEY_STATUS_COLS);
	names = palloc(sizeof(*names) * sh->max_budgets);
	copy = palloc(sizeof(DbgateKey));
	n = dbgate_keytab_entries();

	LWLockAcquire(sh->config_lock, LW_SHARED);
	for (k = 0; k < sh->max_budgets; k++)
	{
		if (sh->budgets[k].d.in_use)
			strlcpy(names[k], sh->budgets[k].d.conf.name, NAMEDATALEN);
		else
			names[k][0] = '\0';
	}
	for (k = 0; k < n; k++)
	{
		Datum		values[KEY_STATUS_COLS];
		bool		nulls[KEY_STATUS_COLS];
		DbgateBudget *b;

		if (!dbgate_keytab_read(k, copy, now_ns))
			continue;
		b = budget_entry(copy->budget);
		if (!b->in_use || b->incarnation != copy->incarnation)
			continue;
		memset(nulls, 0, sizeof(nulls));
		values[0] = CStringGetTextDatum(names[copy->budget]);
		if (copy->kind == DBGATE_KEY_OVERFLOW)
			nulls[1] = true;
		else
			values[1] = CStringGetTextDatum(copy->key);
		values[2] = Int32GetDatum((int32) pg_atomic_read_u32(&copy->active));
		values[3] = Int32GetDatum(Max(copy->queued, 0));
		values[4] = Int32GetDatum(copy->lim.max_active);
		values[5] = Int32GetDatum(copy->lim.max_queued);
		values[6] = Float8GetDatum(copy->lim.max_rate);
		values[7] = Int64GetDatum((int64) pg_atomic_read_u64(&copy->admitted));
		values[8] = Int64GetDatum((int64) pg_atomic_read_u64(&copy->rejected));
		values[9] = Int64GetDatum((int64) pg_atomic_read_u64(&copy->rate_limited));
		values[10] = TimestampTzGetDatum(copy->since);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	LWLockRelease(sh->config_lock);
	return (Datum) 0;
}
