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
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "compat.h"
#include "dbgate.h"

PG_FUNCTION_INFO_V1(dbgate_budget_status);
PG_FUNCTION_INFO_V1(dbgate_backend_status);

#define BUDGET_STATUS_COLS	17
#define BACKEND_STATUS_COLS 6

Datum
dbgate_budget_status(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	DbgateShared *sh;
	int			i;

	dbgate_check_loaded();
	sh = dbgate_shared;
	InitMaterializedSRF(fcinfo, 0);
	Assert(rsinfo->setDesc->natts == BUDGET_STATUS_COLS);

	LWLockAcquire(sh->config_lock, LW_SHARED);
	for (i = 0; i < sh->max_budgets; i++)
	{
		DbgateBudget *b = &sh->budgets[i].d;
		Datum		values[BUDGET_STATUS_COLS];
		bool		nulls[BUDGET_STATUS_COLS];
		uint64		st;
		uint32		peak_active;
		uint64		admitted;
		uint64		active_time_us;
		int32		peak_queued;
		uint64		after_wait,
					rejected_full,
					rejected_timeout,
					canceled,
					lock_holder,
					wait_total_us,
					wait_max_us;
		TimestampTz stats_reset;

		if (!b->in_use)
			continue;

		/*
		 * One reading of the state word gives consistent active and queued
		 * counts; the rest is copied under the budget lock.
		 */
		LWLockAcquire(dbgate_budget_lock(i), LW_SHARED);
		st = pg_atomic_read_u64(&b->state);
		peak_active = pg_atomic_read_u32(&b->peak_active);
		admitted = pg_atomic_read_u64(&b->admitted);
		active_time_us = pg_atomic_read_u64(&b->active_time_total_us);
		peak_queued = b->peak_queued;
		after_wait = pg_atomic_read_u64(&b->admitted_after_wait);
		rejected_full = b->rejected_full;
		rejected_timeout = b->rejected_timeout;
		canceled = b->canceled_waiting;
		lock_holder = b->admitted_lock_holder;
		wait_total_us = pg_atomic_read_u64(&b->wait_time_total_us);
		wait_max_us = pg_atomic_read_u64(&b->wait_time_max_us);
		stats_reset = b->stats_reset;
		LWLockRelease(dbgate_budget_lock(i));

		memset(nulls, 0, sizeof(nulls));
		values[0] = CStringGetTextDatum(b->conf.name);
		values[1] = Int32GetDatum(b->conf.max_active);
		values[2] = Int32GetDatum((int32) dbgate_st_active(st));
		values[3] = Int32GetDatum(b->conf.max_queued);
		values[4] = Int32GetDatum((int32) dbgate_st_queued(st));
		values[5] = Int32GetDatum((int32) Max(peak_active, dbgate_st_active(st)));
		values[6] = Int32GetDatum(peak_queued);
		values[7] = Int64GetDatum((int64) admitted);
		values[8] = Int64GetDatum((int64) after_wait);
		values[9] = Int64GetDatum((int64) rejected_full);
		values[10] = Int64GetDatum((int64) rejected_timeout);
		values[11] = Int64GetDatum((int64) canceled);
		values[12] = Int64GetDatum((int64) lock_holder);
		values[13] = Float8GetDatum((double) wait_total_us / 1000.0);
		values[14] = Float8GetDatum((double) wait_max_us / 1000.0);
		values[15] = Float8GetDatum((double) active_time_us / 1000.0);
		values[16] = TimestampTzGetDatum(stats_reset);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	LWLockRelease(sh->config_lock);
	return (Datum) 0;
}

typedef struct BackendRow
{
	int32		pid;
	Oid			roleid;
	int			budget;
	bool		queued;
	TimestampTz since;
	int32		position;
} BackendRow;

Datum
dbgate_backend_status(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	DbgateShared *sh;
	BackendRow *rows;
	char	   (*names)[NAMEDATALEN];
	int			nrows = 0;
	int			i;

	dbgate_check_loaded();
	sh = dbgate_shared;
	InitMaterializedSRF(fcinfo, 0);
	Assert(rsinfo->setDesc->natts == BACKEND_STATUS_COLS);

	rows = palloc(sizeof(BackendRow) * sh->max_procs);
	names = palloc(sizeof(*names) * sh->max_budgets);

	LWLockAcquire(sh->config_lock, LW_SHARED);
	for (i = 0; i < sh->max_budgets; i++)
	{
		DbgateBudget *b = &sh->budgets[i].d;
		int			p;
		int			pos = 0;

		if (!b->in_use)
			continue;
		strlcpy(names[i], b->conf.name, NAMEDATALEN);

		/* one consistent picture per budget */
		LWLockAcquire(dbgate_budget_lock(i), LW_SHARED);
		for (p = b->queue_head; p >= 0; p = sh->procs[p].d.next)
		{
			DbgateProc *e = &sh->procs[p].d;
			BackendRow *row = &rows[nrows++];

			row->pid = e->pid;
			row->roleid = e->roleid;
			row->budget = i;
			row->queued = true;
			row->since = e->state_since;
			row->position = ++pos;
			if (nrows >= sh->max_procs)
				break;
		}
		for (p = 0; p < sh->max_procs && nrows < sh->max_procs; p++)
		{
			DbgateProc *e = &sh->procs[p].d;
			BackendRow *row;

			if (e->budget != i || e->incarnation != b->incarnation)
				continue;
			/* a granted waiter already holds its slot */
			if (!(e->state == DBGATE_PROC_ACTIVE ||
				  (e->state == DBGATE_PROC_QUEUED && e->granted)))
				continue;
			row = &rows[nrows++];
			row->pid = e->pid;
			row->roleid = e->roleid;
			row->budget = i;
			row->queued = false;
			row->since = e->state_since;
			row->position = 0;
		}
		LWLockRelease(dbgate_budget_lock(i));
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
		values[3] = CStringGetTextDatum(rows[i].queued ? "queued" : "active");
		values[4] = TimestampTzGetDatum(rows[i].since);
		if (rows[i].queued)
			values[5] = Int32GetDatum(rows[i].position);
		else
			nulls[5] = true;
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}
