/*-------------------------------------------------------------------------
 *
 * queuewait.c
 *	  A statement in its budget's queue: the wait, its end (granted,
 *	  ungated, timed out), and leaving the queue on error or exit.
 *
 * One of the admission files (admission.c lists them and has the rules
 * that all of them follow); waiting.c queues the statement and calls
 * dbgate_wait_in_queue().
 *
 * A waiter's loop has three parts: sleep (latch, queue timeout, lock
 * check, its token), decide (under the tree lock: granted, ungated,
 * timed out, or run the grant step), act (without a lock: go on with the
 * slot, go on ungated, or raise the timeout error).  A waiter that leaves
 * the queue on error (cancel, statement_timeout) or at exit (terminate,
 * postmaster death) takes the tree lock and looks at its entry: if a slot
 * was granted meanwhile it returns it like a release, otherwise it unlinks
 * itself; then the grant step runs.  A queue timeout that races with a
 * grant is resolved in favour of the grant.  While it waits the statement
 * holds no snapshot (waitsnap.c).  What its admission dimensions keep for
 * it (a key) goes back on every way out without a slot.
 *
 * Locking: the tree lock is taken to decide (not when a slot was handed
 * over: the granter already moved our counts and unlinked us, and what is
 * left of our entry is ours alone) and to leave; it is never held while
 * sleeping, and every error is raised after it is released, with the
 * names it needs copied out first.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "libpq/libpq.h"
#include "miscadmin.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "utils/timestamp.h"

#include "admission.h"
#include "admission_internals.h"
#include "dimension.h"
#include "lockgraph.h"
#include "queue.h"
#include "queuewait.h"
#include "shmem.h"
#include "waitsnap.h"

/* What a waiter's decision step found. */
typedef enum WaitStep
{
	STEP_SLEEP,					/* nothing yet: sleep again */
	STEP_GRANTED,				/* a slot is ours */
	STEP_UNGATED,				/* the budget stopped gating us */
	STEP_TIMED_OUT				/* queue_timeout: out of the queue */
} WaitStep;

/* One wait in a queue. */
typedef struct QueueWait
{
	int			idx;
	uint32		incarnation;
	TimestampTz enqueued;
	TimestampTz deadline;		/* 0 = no queue timeout */
	TimestampTz next_lock_check;
	/* filled by the decision step for the action */
	bool		same;			/* the budget is still the one we queued in */
	int			waited_ms;
	int			limit_ms;
	char		name[NAMEDATALEN];
} QueueWait;


/* ----------
 * Waiting in a queue
 * ----------
 */

/*
 * Sleep until our latch is set, the next timed event (queue timeout, lock
 * check, our token) is due, or the client goes away.  Interrupts (cancel,
 * terminate, statement_timeout) are serviced here and end the wait by
 * ERROR/FATAL.
 */
static void
queue_sleep(const QueueWait *q)
{
	TimestampTz now = GetCurrentTimestamp();
	TimestampTz wake_at = q->next_lock_check;
	DbgateBudget *leaf = budget_entry(q->idx);
	long		sleep_ms;
	uint32		wait_event = dbgate_shared->wait_event_info;
	int			root = leaf->root;

	if (q->deadline != 0 && q->deadline < wake_at)
		wake_at = q->deadline;
	/* the tree's token waiter sleeps until its token is due (a hint) */
	if (root >= 0 && root < dbgate_shared->max_budgets &&
		budget_entry(root)->token_waiter == dbgate_my_procno)
	{
		int64		wait_ns = budget_entry(root)->token_due_ns - dbgate_now_ns();
		TimestampTz due = now + Max(wait_ns, 0) / 1000;

		if (due < wake_at)
			wake_at = due;
	}
	sleep_ms = (long) ((wake_at - now + 999) / 1000);
	if (sleep_ms < 0)
		sleep_ms = 0;

	if (FeBeWaitSet != NULL && MyProcPort != NULL &&
		WaitEventSetCanReportClosed())
	{
		WaitEvent	events[FeBeWaitSetNEvents];
		int			n,
					k;

		/*
		 * Wait on the backend's client wait set (latch, socket, postmaster
		 * death), as pq_check_connection() does, so that a client that went
		 * away does not keep its queue place: the session ends the way
		 * PostgreSQL ends it when it finds the connection lost (FATAL,
		 * "connection to client lost").
		 */
		ModifyWaitEvent(FeBeWaitSet, FeBeWaitSetSocketPos, WL_SOCKET_CLOSED,
						NULL);
		n = WaitEventSetWait(FeBeWaitSet, sleep_ms, events, lengthof(events),
							 wait_event);
		for (k = 0; k < n; k++)
		{
			if (events[k].events & WL_POSTMASTER_DEATH)
				ereport(FATAL,
						(errcode(ERRCODE_ADMIN_SHUTDOWN),
						 errmsg("terminating connection due to unexpected postmaster exit")));
			if (events[k].events & WL_SOCKET_CLOSED)
			{
				ClientConnectionLost = true;
				InterruptPending = true;
			}
		}
	}
	else
		(void) WaitLatch(MyLatch,
						 WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 sleep_ms, wait_event);
	ResetLatch(MyLatch);

	/* cancel, terminate and statement_timeout end the wait here */
	CHECK_FOR_INTERRUPTS();
}

/*
 * Decide what the wake-up means.  Takes the tree lock unless a slot was
 * handed to us (then the granter already moved our counts and unlinked us,
 * and what is left is ours alone).  For STEP_TIMED_OUT we are out of the
 * queue and q says why; for the other results but STEP_SLEEP our entry is
 * still QUEUED and the action finishes it.
 */
static WaitStep
queue_decide(QueueWait *q, TimestampTz now)
{
	DbgateBudget *b = budget_entry(q->idx);
	WaitStep	step = STEP_SLEEP;
	Wakeups		w;
	int			root;

	pg_read_barrier();
	if (dbgate_my_proc->granted)
	{
		q->same = (dbgate_st_tag(pg_atomic_read_u64(&b->state)) ==
				   dbgate_tag_of(q->incarnation));
		return STEP_GRANTED;
	}

	w.n = 0;
	root = dbgate_lock_tree(q->idx);
	/* a dropped entry may already serve another budget */
	q->same = (b->in_use && b->incarnation == q->incarnation);
	if (!dbgate_my_proc->granted && !dbgate_my_proc->released)
	{
		if (!pg_atomic_read_u32(&dbgate_shared->enabled))
		{
			/* dbgate.enabled = off lets every waiter through at once */
			dbgate_queue_remove(dbgate_my_procno);
			step = STEP_UNGATED;
			dbgate_grant_tree(root, now, &w);
		}
		else
			dbgate_grant_tree(root, now, &w);	/* our turn (non-fair), a token due */
	}
	if (step == STEP_SLEEP)
	{
		if (dbgate_my_proc->granted)
			step = STEP_GRANTED;
		else if (dbgate_my_proc->released)
			step = STEP_UNGATED;	/* the budget was dropped */
		else if (q->deadline != 0 && now >= q->deadline)
		{
			dbgate_queue_remove(dbgate_my_procno);
			if (budget_entry(root)->token_waiter == dbgate_my_procno)
				budget_entry(root)->token_waiter = -1;
			b->rejected_timeout++;
			dbgate_my_proc->state = DBGATE_PROC_IDLE;
			dbgate_my_proc->budget = -1;
			q->waited_ms = (int) ((now - q->enqueued) / 1000);
			q->limit_ms = b->conf.queue_timeout_ms;
			strlcpy(q->name, b->conf.name, NAMEDATALEN);
			step = STEP_TIMED_OUT;
			dbgate_grant_tree(root, now, &w);	/* we may have held others back */
		}
	}
	unlock_tree(root);
	wake_now(&w);
	return step;
}

/*
 * Sleep in the queue until a slot is ours, the budget stops gating us, or
 * an error ends the wait.  We are linked already.  Whatever ends the wait,
 * we are out of the queue afterwards.
 */
static WaitStep
queue_wait(QueueWait *q)
{
	volatile WaitStep step = STEP_SLEEP;

	PG_TRY();
	{
		/* granted while we joined? */
		step = queue_decide(q, GetCurrentTimestamp());
		while (step == STEP_SLEEP)
		{
			TimestampTz now;

			queue_sleep(q);
			now = GetCurrentTimestamp();
			step = queue_decide(q, now);
			if (step == STEP_SLEEP && now >= q->next_lock_check)
			{
				dbgate_lockgraph_check(q->idx, now);
				q->next_lock_check =
					TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
												Max(DeadlockTimeout, 1));
				SetLatch(MyLatch);	/* decide again at once */
			}
		}
	}
	PG_CATCH();
	{
		dbgate_admission_leave_queue();
		PG_RE_THROW();
	}
	PG_END_TRY();
	return step;
}

/* The bounds of the wait histogram's finite buckets, in microseconds. */
static const uint64 hist_bounds_us[DBGATE_HIST_BUCKETS] = {
	100, 500, 1000, 5000, 10000, 50000, 100000, 500000, 1000000, 5000000,
	10000000
};

/* ... and in milliseconds, as dbgate.wait_histogram shows them */
const double dbgate_hist_bounds_ms[DBGATE_HIST_BUCKETS] = {
	0.1, 0.5, 1, 5, 10, 50, 100, 500, 1000, 5000, 10000
};

/* Count an admission after a wait of waited_us at the statement's budget. */
static void
count_admitted_after_wait(DbgateBudget *b, uint64 waited_us)
{
	uint64		max = pg_atomic_read_u64(&b->wait_time_max_us);
	int			k;

	pg_atomic_fetch_add_u64(&b->admitted, 1);
	pg_atomic_fetch_add_u64(&b->admitted_after_wait, 1);
	pg_atomic_fetch_add_u64(&b->wait_time_total_us, waited_us);
	while (waited_us > max &&
		   !pg_atomic_compare_exchange_u64(&b->wait_time_max_us, &max,
										   waited_us))
		;
	for (k = 0; k < DBGATE_HIST_BUCKETS; k++)
	{
		if (waited_us <= hist_bounds_us[k])
		{
			pg_atomic_fetch_add_u64(&b->wait_hist[k], 1);
			break;
		}
	}
}

/*
 * Act on the end of a wait, with no lock held.  Returns whether we hold a
 * slot; throws the queue timeout error.
 */
static bool
queue_act(QueueWait *q, WaitStep step, DbgateAdmission *a)
{
	DbgateBudget *b = budget_entry(q->idx);
	uint64		waited_us = elapsed_us(q->enqueued, GetCurrentTimestamp());
	bool		granted = false;

	switch (step)
	{
		case STEP_GRANTED:
			{
				int			i;

				if (q->same)
				{
					count_admitted_after_wait(b, waited_us);
					if (dbgate_my_proc->overdue)
						pg_atomic_fetch_add_u64(&b->admitted_overdue, 1);
					for (i = 0; i < dbgate_my_proc->chain.n; i++)
					{
						if (dbgate_my_proc->token_levels & (1 << i))
							pg_atomic_fetch_add_u64(&budget_entry(dbgate_my_proc->chain.idx[i])->rate_limited, 1);
					}
					dbgate_read_limits(b, &a->lim);
				}
				else
					memset(&a->lim, 0, sizeof(a->lim));	/* dropped meanwhile */
				a->chain = dbgate_my_proc->chain;
				a->since = dbgate_my_proc->state_since;
				dbgate_my_proc->state = DBGATE_PROC_ACTIVE;
				pg_write_barrier();
				dbgate_my_proc->granted = false;
				granted = true;
			}
			break;

		case STEP_UNGATED:
			if (q->same)
				count_admitted_after_wait(b, waited_us);
			dbgate_my_proc->state = DBGATE_PROC_IDLE;
			dbgate_my_proc->budget = -1;
			dbgate_my_proc->released = false;
			break;

		case STEP_TIMED_OUT:
			dbgate_leave_dims();
			ereport(ERROR,
					(errcode(ERRCODE_TOO_MANY_CONNECTIONS),
					 errmsg("timed out waiting for a slot in budget \"%s\"",
							q->name),
					 errdetail("Waited %d ms in the queue; the queue timeout is %d ms.",
							   q->waited_ms, q->limit_ms)));
			break;

		case STEP_SLEEP:
			Assert(false);
			break;
	}
	return granted;
}

/*
 * Leave the queue because of an error or exit while waiting.  If a slot
 * was granted to us in the meantime, return it like a release.
 */
void
dbgate_admission_leave_queue(void)
{
	DbgateBudget *b;
	Wakeups		w;
	int			root;
	bool		same;
	bool		granted;

	/* only we move our entry into QUEUED: reading it without the lock is safe */
	if (dbgate_my_proc == NULL)
		return;
	if (dbgate_my_proc->state != DBGATE_PROC_QUEUED)
	{
		/* an error between the gate's enter and a queue (or exit) */
		if (dbgate_my_proc->state == DBGATE_PROC_IDLE)
			dbgate_leave_dims();
		return;
	}
	b = budget_entry(dbgate_my_proc->budget);
	w.n = 0;
	root = dbgate_lock_tree(dbgate_my_proc->budget);
	same = (b->in_use && b->incarnation == dbgate_my_proc->incarnation);
	granted = dbgate_my_proc->granted;
	if (!granted && !dbgate_my_proc->released && same)
		dbgate_queue_remove(dbgate_my_procno);
	if (same)
		b->canceled_waiting++;
	if (budget_entry(root)->token_waiter == dbgate_my_procno)
		budget_entry(root)->token_waiter = -1;
	if (!granted)
		dbgate_grant_tree(root, GetCurrentTimestamp(), &w);
	dbgate_my_proc->granted = false;
	dbgate_my_proc->released = false;
	dbgate_my_proc->state = DBGATE_PROC_IDLE;
	dbgate_my_proc->budget = -1;
	unlock_tree(root);
	wake_now(&w);

	/* the slot handed to us in that instant goes on to the next waiter */
	if (granted)
	{
		if (dbgate_my_proc->dim_held != 0)
			dbgate_dims_release(dbgate_my_proc, &dbgate_my_proc->chain);
		dbgate_admission_release(&dbgate_my_proc->chain, 0);
	}
	else
		dbgate_leave_dims();
}

/* ----------
 * The wait of a statement that waiting.c queued
 * ----------
 */

/*
 * Wait in the queue we joined, with no lock held, until a slot is ours or
 * the budget stops gating us (throws what ends the wait otherwise: the
 * queue timeout, cancel, terminate).  No snapshot is held back meanwhile
 * (waitsnap.c): a query's, the portal's of a gated utility command, or
 * that of a fast-path function call (no query descriptor, not a utility
 * command); it is taken again as the statement goes on, with a slot or
 * ungated.  Returns whether we hold a slot.
 */
bool
dbgate_wait_in_queue(const DbgateLookup *lk, bool utility,
					 QueryDesc *queryDesc, TimestampTz now,
					 const DbgateLimits *l, DbgateAdmission *a)
{
	QueueWait	q;
	WaitStep	step;
	bool		proceed;
	bool		snap_released;

	q.idx = lk->budget;
	q.incarnation = lk->incarnation;
	q.enqueued = now;
	q.deadline = (l->queue_timeout_ms > 0) ?
		TimestampTzPlusMilliseconds(now, l->queue_timeout_ms) : 0;
	q.next_lock_check = TimestampTzPlusMilliseconds(now, Max(DeadlockTimeout, 1));
	q.same = true;

	if (utility)
		snap_released = dbgate_waitsnap_utility_release();
	else if (queryDesc != NULL)
		snap_released = dbgate_waitsnap_release(queryDesc);
	else
		snap_released = dbgate_waitsnap_call_release();
	step = queue_wait(&q);
	proceed = queue_act(&q, step, a);
	if (snap_released && utility)
		dbgate_waitsnap_utility_retake();
	else if (snap_released && queryDesc != NULL)
		dbgate_waitsnap_retake(queryDesc);
	else if (snap_released)
		dbgate_waitsnap_call_retake();
	return proceed;
}

