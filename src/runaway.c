/*-------------------------------------------------------------------------
 *
 * runaway.c
 *	  Runaway statements (1.3): a statement of a budget with runaway_after
 *	  that has executed that long is counted, logged and acted on.
 *
 * The way from the statement to the action
 * ----------------------------------------
 *	  timer		The statement path arms no clock of its own: the runaway
 *				deadline is a timeout of PostgreSQL's timeout.c, armed
 *				where the budget's statement_timeout is (timeouts.c: around
 *				the outermost ExecutorRun and ExecutorFinish of a run under
 *				a slot), counted from the same start (the admission, or the
 *				statement's own start under a slot already held: slot.c,
 *				"Clocks", also for the statements of a block), and armed
 *				together with it by one enable_timeouts(), so that both cost
 *				one clock read and at most one setitimer.  Idle time never
 *				counts: nothing is armed between statements.  A statement
 *				whose clock has already run out (a later run of the same
 *				statement: a rule's next action, ExecutorFinish after
 *				ExecutorRun) is not armed again, so a statement runs away
 *				once.
 *	  handler	In signal context, whatever the backend is doing.  It writes
 *				the facts (budget index and incarnation, pid, database, the
 *				statement's query id as it was at its start (queryid.h),
 *				when the clock started and when it ran out, the action
 *				taken) into the backend's shared record, between two steps
 *				of the record's sequence word with write barriers, and sets
 *				the latch of the runaway worker.  For 'cancel' it also asks
 *				for the statement's cancel as PostgreSQL's own
 *				StatementTimeoutHandler does (SIGINT to the backend and its
 *				process group) and sets dbgate_runaway_cancel_fired.  It
 *				takes no lock, allocates nothing and calls nothing but
 *				GetCurrentTimestamp(), kill() and SetLatch().
 *	  worker	"dbgate runaway worker" (a background worker started with the
 *				postmaster, so also on a standby, and restarted after a crash
 *				restart) wakes on its latch, reads each record whose sequence
 *				moved, and for each runaway whose budget still has the same
 *				incarnation: counts it in the budget's 'runaways', emits the
 *				LOG line and tells the quarantine table (quarantine.c) when
 *				the budget has a quarantine and the query id is not 0.  The
 *				worker, not the backend, is the place for what must happen
 *				within 100 ms whatever the backend is doing: a 'demote' move
 *				of the slot goes here, after the count.
 *	  cancel	The SIGINT makes PostgreSQL raise its own cancel (57014,
 *				"canceling statement due to user request") at the backend's
 *				next interrupt check, exactly where it would raise its
 *				statement_timeout.  The run that armed the timer catches
 *				errors anyway (dbgate.c's PG_TRY around ExecutorRun and
 *				ExecutorFinish, to undo the budget's limits), and there,
 *				while dbgate_runaway_cancel_fired is set, a 57014 is thrown
 *				again with the message that names the budget and its
 *				runaway_after (dbgate_runaway_rethrow()).  That was chosen
 *				over the alternatives: an error context callback cannot
 *				change the primary message, and emit_log_hook is called
 *				only for errors that reach the server log (not with
 *				log_min_messages above ERROR) and never for an error that a
 *				handler above the statement catches, which would see
 *				PostgreSQL's wording in SQLERRM.  Rewritten in the catch,
 *				the error is the same for the client, the log and any
 *				exception block around the statement.  Not rewritten: a
 *				handler inside the statement itself (a PL/pgSQL block that
 *				catches query_canceled) sees PostgreSQL's message; the
 *				statement then goes on, and is not canceled again.  A cancel
 *				that fires just as the run ends, before an interrupt check
 *				noticed it, is raised with the same message when the timer
 *				is disarmed (dbgate_runaway_report_cancel()).
 *	  parallel	Parallel workers hold no slot and arm nothing: the leader's
 *				cancel ends them, and a 'log' is about the leader's
 *				statement.
 *
 * Shadow budgets (enforce = false): every action acts as 'log' (the
 * runaway is still counted and logged).  'demote' of an enforcing budget
 * is the move of move.c, made by this worker.
 *
 * Fast-path function calls and gated utility commands arm no runaway
 * timer (no ExecutorRun wraps them).
 *
 * Shared state and its protocol (no lock)
 * ---------------------------------------
 * DbgateRunawayRec, one per proc number (runaway.h): 'seq' and the facts
 * are written only by the backend's handler (plain stores: the handler
 * never runs twice at once, and never while the backend writes the
 * record); 'seq' is odd while it writes, and seq / 2 is the number of
 * runaways recorded.  'taken' is written only by the worker: how many of
 * them it has counted.  The worker reads seq, the facts and seq again
 * (read barriers between); a record read while it changed is read again
 * at the next wake-up.  Runaways of one backend that follow each other
 * faster than the worker wakes (a runaway_after of a few ms) are all
 * counted, at the budget of the last one, with one LOG line for them.
 * runaway_shared->latch is the worker's latch, set by the worker
 * when it starts and cleared when it exits; a handler that finds none
 * leaves the record for the worker's start (it scans every record once a
 * second as well).  A crash restart starts with every record empty.
 *
 * The worker reads a budget's identity and configuration under
 * config_lock shared, and counts with an atomic addition.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <signal.h>
#include <unistd.h>

#include "access/xact.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/lwlock.h"
#include "storage/proc.h"
#include "storage/shmem.h"
#include "utils/memutils.h"
#include "utils/timeout.h"

#include "compat.h"
#include "demote.h"
#include "move.h"
#include "quarantine.h"
#include "runaway.h"
#include "shmem.h"

volatile sig_atomic_t dbgate_runaway_cancel_fired = false;

/* The records and the worker's latch (runaway.h) */
static DbgateRunawayShared *runaway_shared = NULL;

/*
 * What the handler records (runaway.h: set by the inline
 * dbgate_runaway_prepare() before the timer is armed), the backend's
 * record, and the statement that last ran away.
 */
TimeoutId	dbgate_runaway_timeout_id = MAX_TIMEOUTS;	/* registered at first use */
static volatile DbgateRunawayRec *my_rec = NULL;
DbgateRunawayArmed dbgate_runaway_armed;
#define armed dbgate_runaway_armed

/* ----------
 * Shared memory
 * ----------
 */
static Size
runaway_shmem_size(void)
{
	return add_size(CACHELINEALIGN(sizeof(DbgateRunawayShared)),
					mul_size((Size) MaxBackends, sizeof(DbgateRunawayPadded)));
}

void
dbgate_runaway_shmem_request(void)
{
	RequestAddinShmemSpace(runaway_shmem_size());
}

/* Every record empty, no worker yet (a new segment: start, crash restart). */
void
dbgate_runaway_shmem_init(void)
{
	bool		found;

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	runaway_shared = ShmemInitStruct("dbgate runaway", runaway_shmem_size(),
									 &found);
	if (!found)
	{
		memset(runaway_shared, 0, runaway_shmem_size());
		runaway_shared->latch = NULL;
		runaway_shared->recs = (DbgateRunawayPadded *)
			((char *) runaway_shared +
			 CACHELINEALIGN(sizeof(DbgateRunawayShared)));
	}
	LWLockRelease(AddinShmemInitLock);
}

/* ----------
 * The backend's side
 * ----------
 */

/* The timer's handler: signal context, see the file header. */
static void
runaway_timeout_handler(void)
{
	volatile DbgateRunawayRec *r = my_rec;
	Latch	   *latch;
	/*
	 * shadow budgets had runaway_cancel and runaway_demote cleared at
	 * admission (slot.c); a slot moved already acts as 'log' (demote.c)
	 */
	int32		action = armed.lim->runaway_cancel ?
		DBGATE_RUNAWAY_CANCEL : DBGATE_RUNAWAY_LOG;
	uint32		ticket = 0;

	if (armed.lim->runaway_demote && action == DBGATE_RUNAWAY_LOG &&
		(ticket = dbgate_demote_ask()) != 0)
		action = DBGATE_RUNAWAY_DEMOTE;

	r->seq = r->seq + 1;
	pg_write_barrier();
	r->budget = armed.chain->idx[0];
	r->incarnation = armed.chain->inc[0];
	r->pid = MyProcPid;
	r->dbid = MyDatabaseId;
	r->action = action;
	r->after_ms = armed.lim->runaway_after_ms;
	r->ticket = ticket;
	r->queryid = armed.queryid;
	r->start = armed.start;
	r->at = GetCurrentTimestamp();
	pg_write_barrier();
	r->seq = r->seq + 1;
	armed.fired_start = armed.start;

	if (action == DBGATE_RUNAWAY_CANCEL)
	{
		/* as PostgreSQL's StatementTimeoutHandler */
		dbgate_runaway_cancel_fired = true;
#ifdef HAVE_SETSID
		kill(-MyProcPid, SIGINT);
#endif
		kill(MyProcPid, SIGINT);
	}

	latch = runaway_shared->latch;
	if (latch != NULL)
		SetLatch(latch);
}

/* dbgate_runaway_prepare()'s first call in the backend */
void
dbgate_runaway_register(const DbgateChain *c, const DbgateLimits *l)
{
	armed.chain = c;
	armed.lim = l;
	my_rec = &runaway_shared->recs[DBGATE_MY_PROCNO()].d;
	dbgate_runaway_timeout_id = RegisterTimeout(USER_TIMEOUT,
												runaway_timeout_handler);
}

/* "1s", "1500ms", "2min": runaway_after as the message names it */
static void
format_after(char *buf, size_t len, int32 ms)
{
	if (ms % 60000 == 0)
		snprintf(buf, len, "%dmin", ms / 60000);
	else if (ms % 1000 == 0)
		snprintf(buf, len, "%ds", ms / 1000);
	else
		snprintf(buf, len, "%dms", ms);
}

/*
 * The message of the cancel, for the budget that the handler recorded
 * (its name read without a lock).
 */
static char *
cancel_message(void)
{
	volatile DbgateRunawayRec *r = my_rec;
	DbgateBudget *b = &dbgate_shared->budgets[r->budget].d;
	char		name[NAMEDATALEN];
	char		after[32];

	/* a name, for the message only */
	memcpy(name, b->conf.name, NAMEDATALEN);
	name[NAMEDATALEN - 1] = '\0';
	format_after(after, sizeof(after), r->after_ms);
	return psprintf("canceling statement because it ran longer than runaway_after (%s) of budget \"%s\"",
					after, name);
}

void
dbgate_runaway_report_cancel(void)
{
	if (likely(!dbgate_runaway_cancel_fired))
		return;
	dbgate_runaway_cancel_fired = false;
	if (!QueryCancelPending || QueryCancelHoldoffCount != 0)
		return;					/* noticed already, or not to be noticed now */
	QueryCancelPending = false;
	ereport(ERROR,
			(errcode(ERRCODE_QUERY_CANCELED),
			 errmsg_internal("%s", cancel_message())));
}

void
dbgate_runaway_rethrow(void)
{
	MemoryContext old;
	ErrorData  *edata;

	/* demote.c: a cancel for the timeouts of the budget it was moved to */
	if (!dbgate_runaway_cancel_fired)
	{
		dbgate_demote_rethrow();
		return;
	}
	dbgate_runaway_cancel_fired = false;
	/* the copy lives until the (sub)transaction's abort cleans up */
	old = MemoryContextSwitchTo(CurTransactionContext);
	edata = CopyErrorData();
	if (edata->sqlerrcode != ERRCODE_QUERY_CANCELED)
	{
		/* another error came first: it goes on as it is */
		FreeErrorData(edata);
		MemoryContextSwitchTo(old);
		return;
	}
	FlushErrorState();
	edata->message = cancel_message();
	MemoryContextSwitchTo(old);
	ReThrowError(edata);
}

/* ----------
 * The runaway worker
 * ----------
 */

void
dbgate_runaway_register_worker(void)
{
	BackgroundWorker w;

	memset(&w, 0, sizeof(w));
	w.bgw_flags = BGWORKER_SHMEM_ACCESS;
	/* from the start: on a standby as well */
	w.bgw_start_time = BgWorkerStart_PostmasterStart;
	w.bgw_restart_time = 1;
	snprintf(w.bgw_library_name, BGW_MAXLEN, "dbgate");
	snprintf(w.bgw_function_name, BGW_MAXLEN, "dbgate_runaway_worker_main");
	snprintf(w.bgw_name, BGW_MAXLEN, "dbgate runaway worker");
	snprintf(w.bgw_type, BGW_MAXLEN, "dbgate runaway worker");
	RegisterBackgroundWorker(&w);
}

static const char *
action_name(int32 action)
{
	switch (action)
	{
		case DBGATE_RUNAWAY_CANCEL:
			return "cancel";
		case DBGATE_RUNAWAY_DEMOTE:
			return "demote";
		default:
			return "log";
	}
}

/*
 * 'demote': move the slot (demote.c), trying again for a while when the
 * backend is counting a memory grant (a few instructions).  Returns
 * whether it moved; *target names where.
 */
static bool
demote(int procno, const DbgateRunawayRec *f, char *target)
{
	int			tries;

	for (tries = 0; tries < 1000; tries++)
	{
		int			r = dbgate_move_slot(procno, f->ticket, f->budget,
										   f->incarnation, f->start, target);

		if (r >= 0)
			return r == 1;
		pg_usleep(20L);
	}
	return false;
}

/* One record's new runaways: count, move, log, tell the quarantine table. */
static void
handle_runaway(int procno, const DbgateRunawayRec *f, uint32 n)
{
	DbgateShared *sh = dbgate_shared;
	DbgateBudget *b;
	char		name[NAMEDATALEN];
	char		target[NAMEDATALEN];
	char		action[NAMEDATALEN + 32];
	int32		quarantine_ms = 0;
	bool		same = false;
	TimestampTz now = GetCurrentTimestamp();

	if (f->budget < 0 || f->budget >= sh->max_budgets)
		return;
	b = &sh->budgets[f->budget].d;
	LWLockAcquire(sh->config_lock, LW_SHARED);
	if (b->in_use && b->incarnation == f->incarnation)
	{
		same = true;
		memcpy(name, b->conf.name, NAMEDATALEN);
		quarantine_ms = b->conf.quarantine_ms;
		pg_atomic_fetch_add_u64(&b->runaways, n);
	}
	LWLockRelease(sh->config_lock);
	if (!same)
		return;					/* the budget was dropped meanwhile */

	snprintf(action, sizeof(action), "%s", action_name(f->action));
	if (f->action == DBGATE_RUNAWAY_DEMOTE)
	{
		if (demote(procno, f, target))
			snprintf(action, sizeof(action), "demote to \"%s\"", target);
		else
			snprintf(action, sizeof(action), "demote: not moved");
	}

	ereport(LOG,
			(errmsg("runaway statement in budget \"%s\": pid %d, query id %lld, elapsed %lld ms (runaway_after %d ms, action %s)",
					name, f->pid, (long long) f->queryid,
					(long long) ((now - f->start) / 1000),
					f->after_ms, action),
			 n > 1 ? errdetail("%u runaways of this backend are counted.", n) : 0));

	if (quarantine_ms > 0 && f->queryid != 0)
		dbgate_quarantine_note_runaway(f->budget, f->incarnation,
									   quarantine_ms, f->dbid, f->queryid,
									   f->at, f->pid);
}

/* Read every record whose sequence moved; returns false if one was busy. */
static bool
scan_records(void)
{
	DbgateShared *sh = dbgate_shared;
	bool		complete = true;
	int			i;

	for (i = 0; i < sh->max_procs; i++)
	{
		volatile DbgateRunawayRec *r = &runaway_shared->recs[i].d;
		DbgateRunawayRec f;
		uint32		s1;
		uint32		s2;
		uint32		n;

		s1 = r->seq;
		if (s1 / 2 == r->taken)
			continue;
		if (s1 & 1)
		{
			complete = false;	/* the handler is writing: next time */
			continue;
		}
		pg_read_barrier();
		f.budget = r->budget;
		f.incarnation = r->incarnation;
		f.pid = r->pid;
		f.dbid = r->dbid;
		f.action = r->action;
		f.after_ms = r->after_ms;
		f.ticket = r->ticket;
		f.queryid = r->queryid;
		f.start = r->start;
		f.at = r->at;
		pg_read_barrier();
		s2 = r->seq;
		if (s2 != s1)
		{
			complete = false;
			continue;
		}
		n = s1 / 2 - r->taken;
		r->taken = s1 / 2;
		handle_runaway(i, &f, n);
	}
	return complete;
}

static void
worker_exit(int code, Datum arg)
{
	runaway_shared->latch = NULL;
}

void
dbgate_runaway_worker_main(Datum arg)
{
	TimestampTz last_tick = 0;
	MemoryContext loop_cxt;

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, SignalHandlerForShutdownRequest);
	BackgroundWorkerUnblockSignals();

	if (dbgate_shared == NULL)
		proc_exit(0);
	on_shmem_exit(worker_exit, (Datum) 0);
	runaway_shared->latch = MyLatch;
	pg_memory_barrier();
	/* what a pass of the loop allocates (quarantine.c) lives until the next */
	loop_cxt = AllocSetContextCreate(TopMemoryContext, "dbgate runaway worker",
									 ALLOCSET_DEFAULT_SIZES);
	MemoryContextSwitchTo(loop_cxt);
	/* the quarantined queries of before a clean restart (quarantine.c) */
	dbgate_quarantine_load();

	for (;;)
	{
		bool		complete;
		TimestampTz now;
		long		watch_ms;
		long		timeout;

		MemoryContextReset(loop_cxt);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
		if (ShutdownRequestPending)
			break;
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
		}
		complete = scan_records();
		/* demote.c: the target's timeouts of demoted statements */
		watch_ms = dbgate_move_watch();
		now = GetCurrentTimestamp();
		if (now - last_tick >= USECS_PER_SEC || now < last_tick)
		{
			dbgate_quarantine_tick();
			last_tick = now;
		}
		timeout = complete ? 1000L : 5L;
		if (watch_ms >= 0)
			timeout = Min(timeout, watch_ms);
		(void) WaitLatch(MyLatch,
						 WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 timeout, PG_WAIT_EXTENSION);
	}
	/* a clean shutdown (or a SIGTERM of the worker alone) keeps them */
	dbgate_quarantine_save();
	/* exit code 1: restarted unless the server is shutting down */
	proc_exit(1);
}
