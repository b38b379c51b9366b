# Soak test with fault injection.
#
# 71 client sessions in twenty roles and fourteen budgets with statements
# (plus an ungated role; two more budgets are parents)
# run a random mix of short and long statements, errors, savepoints,
# cursors (also WITH HOLD), DO blocks and procedures that commit, prepared
# statements and the extended protocol, COPY, parallel queries, triggers,
# SET ROLE, row lock conflicts and timeouts, write transactions of several
# statements on a few hot rows (lock waits, deadlocks, savepoints rolled
# back), and pauses inside transactions that keep a slot (idle in
# transaction, some longer than an idle_in_transaction_timeout); some
# disconnect while queued.  Meanwhile this script cancels and terminates
# random active, queued and idle-in-transaction backends, raises and lowers
# limits, drops and re-creates a budget, changes its scope and idle timeout,
# unassigns and assigns roles, turns dbgate.enabled off for a moment (not in
# the last epoch), and once (or more, in long runs) kills a backend with
# SIGKILL so that the server goes through a crash restart.  A monitor
# samples dbgate.status and dbgate.backends every 25 ms.  The clients,
# the monitor and the checks are in test/soak/Soak/.
#
# Budgets:
#   soak_a  B = 2, Q = 3, fair, queue_timeout 400 ms, scope 'statement'
#           (the sessions' statement_timeout is 2 s), runaway_after
#           1200 ms with 'cancel' and quarantine 2 s (1.3; the quarantine
#           table holds 8 entries)           roles soak_a1, soak_a2
#   soak_b  B = 1, Q = 2, non-fair, statement_timeout 1500 ms, lock_timeout
#           300 ms, scope 'statement'                roles soak_b1, soak_b2
#   soak_d  B = 2, Q = 3, fair, queue_timeout 600 ms, scope 'transaction',
#           idle_in_transaction_timeout 500 or 800 ms
#                                                    roles soak_d1, soak_d2
#           (soak_d2's sessions set their own idle_in_transaction_session_
#           timeout: 250 ms, tighter than the budget's, or 60 s)
#   soak_c  dropped, re-created, altered (also its scope and idle timeout),
#           its roles unassigned and assigned again all the time
#                                                    roles soak_c1, soak_c2
#           (soak_c2 has dbgate.default_budget = 'soak_c' as well)
#   soak_free is never gated.
# max_active and max_queued of soak_a, soak_b and soak_d go up and down
# under load.
#
# Demotion (1.3):
#   soak_e  B = 1 to 3, Q = 1 to 4, fair, queue_timeout 400 ms, scope
#           'statement', runaway_after 600 or 800 ms with 'demote' (at
#           times 'log') to soak_s, quarantine 1 s or none
#                                                    roles soak_e1, soak_e2
#   soak_s  its runaway_budget: B = 1 or 2, Q = 1 to 4, fair,
#           queue_timeout 600 ms, statement_timeout 1500 or 2000 ms (a
#           demoted statement gets it, counted from its admission),
#           lock_timeout 250 ms                      role soak_s1
#   Their limits, soak_e's runaway fields and soak_s's statement_timeout
#   change under load, most often while a statement is demoted; demoted
#   statements are canceled and terminated, the crash restart most often
#   kills one; in epochs before the last soak_e demotes to soak_c for a
#   while, which is dropped with force meanwhile (soak_e's runaway_action
#   becomes 'log'); the references are refused where they must be (22023,
#   42704, and 2BP01 for a drop without force).
#
# The 1.2 dimensions (their clients run short statements, but the children
# of parents the whole mix):
#   soak_l  B = 2, Q = 4, fair, queue_order 'lifo', overtake_limit 100 or
#           250 ms, queue_timeout 5 s, statement_timeout 300 ms
#                                                    roles soak_l1, soak_l2
#           (no statement keeps a slot while its client thinks, so a slot
#           is held at most about 300 ms: the bound of a 'lifo' wait below)
#   soak_r  B = 3, Q = 4, fair, queue_timeout 1 s, max_rate 8, 15 or 30
#           per second, rate_burst 1, 3 or 6               role soak_r1
#   soak_p  parent, B = 2 to 4, of
#     soak_h1  B = 3, Q = 3, weight 3, 'fifo' or 'lifo', adapt 'on' (1.3:
#              its adaptive limit moves between 1 and 3)    role soak_h1u
#     soak_h2  B = 2, Q = 3, weight 1, max_rate 0 or 20, reserved 1
#                                                          role soak_h2u
#   soak_q  parent, B = 1 to 3, max_rate 10, 25 or 50, rate_burst 2 or 4,
#           dropped with force (its children become top-level) and
#           created again, of
#     soak_h3  B = 2, Q = 2, weight 2, scope 'transaction', moves between
#              soak_p, soak_q and top-level                role soak_h3u
#     soak_h4  B = 2, Q = 2, weight 1, 'lifo' (overtake_limit 100 ms),
#              top-level while soak_q is gone              role soak_h4u
#     soak_m   B = 1 to 3, Q = 3, weight 2, max_memory_mb 4, 8 or 16,
#              min_cost 100: cheap reads pass, sorts and hashes get
#              memory grants                               role soak_m1
#   (children: queue_timeout 800 ms; weights change under load)
#
# Keys (1.3):
#   soak_k  B = 3, Q = 6, fair, queue_timeout 500 ms, key_by
#           'setting:app.tenant', key_max_active 1, key_max_queued 2; the
#           key 'hot' has a key limit of its own (max_active 1 or 2,
#           max_queued 3), set, changed and reset under load
#                                                    role soak_k1
#           (its clients set a tenant before each operation: 'hot', one of
#           three warm keys, or most often a new key; the server's
#           dbgate.max_keys is 2, so the table of keys fills and new keys
#           go to the budget's overflow key)
#   The monitor samples dbgate.keys too.  In every sample: the live keys
#   with an entry of the shared pool are at most dbgate.max_keys, a
#   budget has at most one overflow row, and each key's active and queued
#   are within the limits it ever had (1 and 2, 'hot' 2 and 3; read from
#   one row).  At the end: no key of soak_k is live (no key has a rate),
#   and soak_k's counters agree with its clients' as every checked
#   budget's (a key's 53300 is a rejected_full of the budget); after a
#   crash restart it has no live key and keys_overflowed is 0, and
#   dbgate.key_limits is as committed (as dbgate.budgets, checked with
#   it).  Not checked for soak_k: the order of its queue (the cross-key
#   order needs the keys of the waiters, which the samples do not have)
#   and that a free slot is taken at once (a waiter may wait for its key
#   while a slot is free).
#
# Checks: the invariants of every sample (Soak::Check, and Soak::Check12
# for trees, queue order and rate); at the end every budget, parents too,
# drains and dbgate.backends is empty; the counters of every budget with
# statements but soak_c since the last crash restart agree with what the
# clients observed: per admission, not per statement (a statement under a
# kept slot is no admission and is never queued or rejected), exactly for
# rejections and for sessions ended by the budget's idle timeout
# (terminated_idle; a session that saw only a lost connection while it
# kept a slot may have been one), within bounds where a canceled or
# terminated statement may or may not have been admitted; a session idle longer than
# its idle timeout in a transaction that keeps a slot is ended; after each
# crash restart every counter of every level is 0 (a parent's active and
# peak_active: the slots kept for its children's reservations) and the
# configuration (1.2 and 1.3 runaway fields too) is as committed; the
# server log has no crash other than the deliberate ones.  Figures are
# printed at the end.
#
# What "exact" means for the counters of 1.2, at the end (since the last
# crash restart) and, where said, in every sample:
#   parents (soak_p, soak_q): admitted, admitted_after_wait, rejected_full,
#     rejected_timeout, canceled_waiting, admitted_lock_holder,
#     terminated_idle, admitted_overdue, wait_time_total, wait_time_max,
#     active_time_total and every bucket of dbgate.wait_histogram are 0
#     (in every sample too): statements are counted at their own budget;
#     active and queued are those of the subtree (Soak::Check12);
#   admitted_overdue: 0 in every sample and at the end in every budget
#     that was never 'lifo'; in soak_l, between the admissions that waited
#     more than 500 ms (histogram) less lock-holder admissions, and those
#     that waited more than 50 ms (its overtake_limit is 100 or 250 ms:
#     only an overdue waiter is chosen after waiting that long, and only
#     an overdue one can be; the lower bound assumes that a woken waiter
#     counts its admission within 250 ms of being chosen); never above
#     admitted_after_wait;
#   rejected_timeout of soak_l: 0, and so the clients' count (a 'lifo'
#     wait is bounded well below its queue_timeout), and wait_time_max and
#     the histogram within that bound;
#   rate_limited: 0 in every sample and at the end in every budget that
#     never had a rate (it is counted at the level whose token was
#     missing: soak_h3 and soak_h4 never count it, soak_q does); at a
#     leaf at most admitted_after_wait, at soak_q at most its children's;
#     soak_r's above 0 (its clients ask for far more than its rate);
#   admissions of soak_r (admitted - admitted_lock_holder) at most
#     rate x time + burst summed over the stretches between its changes
#     of max_rate or rate_burst since the epoch began, plus one per client
#     session (an admission counted late) and, per stretch, the one token
#     that the tree's token waiter may take as of the time it was due and
#     rate x 2 ms (DBGATE_DIM_CATCHUP_NS: what src/rate.c allows however
#     late a waiter wakes, see Soak::Check12); over any window of samples
#     the same for soak_r, soak_h2 and soak_q's subtree (Soak::Check12);
#   would_queue and would_reject: 0 everywhere (no budget is in shadow
#     mode);
#   runaways and quarantined (1.3): in soak_a between the runaway cancels
#     (57014 naming runaway_after) and the quarantine refusals (53000) that
#     its clients saw, and those plus its clients' other failures (a cancel
#     or a termination that came first); in soak_e (see below); 0 in every
#     other budget;
#   demotion (1.3; the last epoch, in which soak_e demotes only to soak_s):
#     soak_e.demoted_out = soak_s.demoted_in >= 1, at most soak_e.runaways;
#     soak_e.runaways at most its clients' statements that ran
#     runaway_after or longer, and with soak_e.quarantined at least its
#     pg_sleep()s of more than any runaway_after that were admitted and
#     ended normally (each ran that long under its slot, so the budget's
#     timer fired); soak_e.quarantined at least its clients' rejections
#     by soak_s (a quarantined statement is gated by soak_s); demoted_in
#     and demoted_out 0 elsewhere; the admissions of soak_e and soak_s
#     together as exact as those of one budget (a quarantined statement of
#     soak_e is an admission of soak_s), each alone within that and
#     soak_e.quarantined; peak_active at most max_active + lock-holder
#     admissions + demoted_in; in every sample a demoted statement counts
#     in soak_s beyond its limits only (Soak::Check) and shows the budget
#     it came from;
#   bypassed: in soak_m (min_cost 100) between the reads below it that its
#     clients saw run (their costs are about 1; its sorts and hashes cost
#     300 and more) and those plus the ones canceled, timed out or lost;
#     0 in every other budget; no read below min_cost is ever queued or
#     rejected (the clients check);
#   memory_mb_active: 0 everywhere after the drain; in every sample at
#     most max_memory_mb, each slot's grant at most max_memory_mb /
#     max_active, a parent's the sum of its children's (Soak::Check12);
#   wait_histogram: cumulative, its last bucket equal to admitted, its
#     first at least the admissions that did not wait, and every
#     admission of a budget with a queue_timeout within queue_timeout +
#     1 s.
#
# Time in the verdicts.  The checks are states that the test observes (a
# sample, a counter, what a client saw), not events per second: a rate is
# held to what src/rate.c allows whatever the wake-up delays (see
# Soak::Check12), a lock-holder admission excuses a slot over the limit
# as long as that slot may be held (not for a window of seconds), a
# runaway that must have been counted is a sleep longer than
# runaway_after that ended normally (not a time the client measured), and
# the load goes on past SOAK_DURATION until the last epoch has produced
# what the checks need (an overdue 'lifo' admission, a rate that held a
# statement back, a cheap read, a demotion, a change of soak_e while a
# statement is demoted, an admission in every budget, 5 monitor samples
# per second of SOAK_DURATION), nudged towards it, for at most 120 s (or
# SOAK_DURATION) more.  What is left are bounds on how long something may
# last, hang detectors far above what they bound: a slot free while
# statements wait (starve_limit, 2 s: a lost wake-up), a parent that
# disagrees with its children (persist, 1 s: a statement caught between
# two levels), a waiter's age and oldest_wait (its queue_timeout + 2 s),
# a kept slot idle (its idle timeout + 4 s), any row (30 s), the waits of
# the histogram and wait_time_max (queue_timeout + 1 s or 2 s), a 'lifo'
# wait ($L_WAIT_MAX), the lower bound of soak_l's admitted_overdue (a
# woken waiter counts its admission within 250 ms of being chosen), the
# backends' reload of dbgate.enabled (0.5 s and 2 s), one statement
# (60 s), the clients' stop (90 s) and the drain (30 s).  A state cannot
# tell these from a slow machine: dbgate counts a wait when the waiter
# runs again (not when it is granted the slot) and shows no waiter as
# chosen, and a backend's reload of the configuration is not visible.
#
# Environment:
#   SOAK_SEED=<n>        random seed (default 1); printed at the start
#   SOAK_DURATION=<s>    seconds of load, at least (default 20; see above)
#   SOAK_LONG=1          480 s of load (check.sh allows 600 s per TAP file by
#                        default; raise CHECK_TIMEOUT for longer runs)
#   SOAK_CRASHES=<n>     crash restarts (default 1 per 150 s, at least 1)
# The timing of the server and the clients is not reproducible; the seed
# makes every random choice of the clients and of the fault injection the
# same again.

use strict;
use warnings FATAL => 'all';

use FindBin;
use lib "$FindBin::RealBin/../soak";

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use Time::HiRes qw(time sleep);

BEGIN
{
	if (!eval { require DBI; require DBD::Pg; 1 })
	{
		plan skip_all =>
		  'DBI and DBD::Pg are needed (Debian package libdbd-pg-perl)';
	}
}

use DbgateLoad;
use Soak::Common qw(write_epoch dsn);
use Soak::Client;
use Soak::Monitor;
use Soak::Check qw(check_samples scan_log);
use Soak::Check12;

my $seed = $ENV{SOAK_SEED} // 1;
my $duration = $ENV{SOAK_DURATION} // ($ENV{SOAK_LONG} ? 480 : 20);
my $ncrashes = $ENV{SOAK_CRASHES} // ($duration >= 300 ? int($duration / 150) : 1);
die "SOAK_SEED must be an integer\n" unless $seed =~ /^\d+$/;
die "SOAK_DURATION must be a number of seconds\n" unless $duration =~ /^\d+$/;
note "soak: SOAK_SEED=$seed SOAK_DURATION=$duration SOAK_CRASHES=$ncrashes";
diag "soak: seed $seed, $duration s of load, $ncrashes crash restart(s); "
  . "repeat the choices with SOAK_SEED=$seed";
srand($seed);

# ---------------------------------------------------------------------
# Cluster, roles, budgets

# (1.3) dbgate.max_keys: the table of keys fills at once
my $MAX_KEYS = 2;

my $node = PostgreSQL::Test::Cluster->new('soak');
$node->init;
$node->append_conf(
	'postgresql.conf', qq{
shared_preload_libraries = 'dbgate'
max_connections = 120
deadlock_timeout = '100ms'
restart_after_crash = on
log_min_error_statement = panic
log_statement = none
dbgate.max_quarantine = 8
dbgate.max_keys = $MAX_KEYS
});
$node->start;

my @PARENTS = qw(soak_p soak_q);
my @CHILDREN = qw(soak_h1 soak_h2 soak_h3 soak_h4 soak_m);
my @BUDGETS = (qw(soak_a soak_b soak_c soak_d soak_e soak_s soak_l soak_r soak_k), @PARENTS, @CHILDREN);
# counters compared with the clients'
my @CHECKED = (qw(soak_a soak_b soak_d soak_e soak_s soak_l soak_r soak_k), @CHILDREN);
my %ROLE_BUDGET = (
	soak_l1 => 'soak_l',
	soak_l2 => 'soak_l',
	soak_r1 => 'soak_r',
	soak_h1u => 'soak_h1',
	soak_h2u => 'soak_h2',
	soak_h3u => 'soak_h3',
	soak_h4u => 'soak_h4',
	soak_m1 => 'soak_m',
	soak_a1 => 'soak_a',
	soak_a2 => 'soak_a',
	soak_b1 => 'soak_b',
	soak_b2 => 'soak_b',
	soak_c1 => 'soak_c',
	soak_c2 => 'soak_c',
	soak_d1 => 'soak_d',
	soak_d2 => 'soak_d',
	soak_e1 => 'soak_e',
	soak_e2 => 'soak_e',
	soak_s1 => 'soak_s',
	soak_k1 => 'soak_k');
# role, class, number of sessions, the sessions' own
# idle_in_transaction_session_timeout in ms (taken in turn)
my @SESSIONS = (
	[ soak_a1 => 'a', 6, [0] ],
	[ soak_a2 => 'a', 5, [0] ],
	[ soak_b1 => 'b', 4, [0] ],
	[ soak_b2 => 'b', 3, [0] ],
	[ soak_d1 => 'd', 4, [0] ],
	[ soak_d2 => 'd', 3, [ 250, 60000 ] ],
	[ soak_e1 => 'e', 4, [0] ],
	[ soak_e2 => 'e', 3, [0] ],
	[ soak_s1 => 's', 2, [0] ],
	[ soak_c1 => 'c', 2, [0] ],
	[ soak_c2 => 'c', 2, [0] ],
	[ soak_free => 'free', 3, [0] ],
	[ soak_l1 => 'l', 3, [0] ],
	[ soak_l2 => 'l', 2, [0] ],
	[ soak_r1 => 'r', 4, [0] ],
	[ soak_h1u => 'h', 3, [0] ],
	[ soak_h2u => 'h', 3, [0] ],
	[ soak_h3u => 'h', 2, [0] ],
	[ soak_h4u => 'h', 2, [0] ],
	[ soak_m1 => 'm', 3, [0] ],
	[ soak_k1 => 'k', 8, [0] ]);
my %QT_MS = (
	soak_a => 400,
	soak_b => 0,
	soak_d => 600,
	soak_e => 400,
	soak_s => 600,
	soak_l => 5000,
	soak_r => 1000,
	soak_k => 500,
	map { $_ => 800 } @CHILDREN);
# soak_c's statement_timeout is 0 or 2 s (see create_c_sql); soak_s's is
# 1500 or 2000 ms, and applies to the statements demoted to it from soak_e
# (counted from their admission)
my %BUDGET_ST_MS = (soak_a => 0, soak_b => 1500, soak_c => 2000, soak_d => 0, soak_l => 300,
	soak_e => 1500, soak_s => 1500, soak_k => 0);
my %SESSION_ST_MS = (a => 2000, b => 0, c => 3000, d => 3000, free => 3000,
	l => 6000, r => 3000, h => 3000, m => 3000, e => 3000, s => 3000, k => 3000);
my %SCOPE = (soak_a => 'statement', soak_b => 'statement', soak_d => 'transaction',
	soak_e => 'statement', soak_s => 'statement',
	soak_l => 'statement', soak_r => 'statement', soak_h1 => 'statement',
	soak_h2 => 'statement', soak_h3 => 'transaction', soak_h4 => 'statement',
	soak_m => 'statement', soak_k => 'statement');
# the longest pg_sleep() of the clients of a budget (default 2.3 s)
my %SLEEP_MAX = (soak_l => 0.25, soak_r => 0.3, soak_k => 0.3);
# the values soak_d's idle_in_transaction_timeout takes
my @D_IDLE_MS = (500, 800);
my %SENTINEL = (
	soak_a => { max_active => 9 },
	soak_b => { max_queued => 9 },
	soak_d => { max_queued => 9 },
	map { $_ => { max_queued => 9 } } qw(soak_e soak_s soak_l soak_r soak_k), @CHILDREN);
# (1.3) soak_e's runaway_after takes these values (ms); its statements
# wait at most its queue_timeout (400 ms), those quarantined in it wait in
# soak_s's queue (600 ms at most)
my @E_RA_MS = (600, 800);
# a statement of soak_e that ran this long (ms) was demoted or is counted
# as a runaway
my $E_LONG_MS = $E_RA_MS[0] - 20;
# a pg_sleep() of soak_e of at least this long (ms), admitted and ended
# normally, ran that long under its slot: a runaway (or quarantined, and
# so gated by soak_s); the longest runaway_after and 50 ms, so that the
# budget's timer is due well before the sleep can end, whatever the clocks'
# granularity
my $E_SURE_MS = $E_RA_MS[-1] + 50;
# the budgets soak_e may demote to (soak_c only in epochs before the last)
my %E_TARGETS = (soak_s => $QT_MS{soak_s}, soak_c => undef);
# The longest a statement of soak_l can wait (s): overtake_limit (at most
# 250 ms), then the slots released until the waiters overdue before it
# are served: at most max_queued (4) releases, each within one statement
# (at most its statement_timeout of 300 ms, 400 ms with the time an
# ending statement takes), plus one statement more for each lowering of
# max_active meanwhile (two are allowed for), plus scheduling.
my $L_WAIT_MAX = 0.25 + (4 + 2) * 0.4 + 0.35;
# how far back a waiter granted with the tree's token waiter may take its
# token (s): DBGATE_DIM_CATCHUP_NS of src/dimdefs.h (see Soak::Check12)
my $TOKEN_CATCHUP = 0.002;
# which budgets' rates a client's statements may meet
my %RATED_BY = (soak_r => ['soak_r'], soak_h2 => ['soak_h2'],
	soak_h3 => ['soak_q'], soak_h4 => ['soak_q']);

# the committed configuration, as this script knows it
my %cfg = (
	soak_a => {
		max_active => 2,
		max_queued => 3,
		runaway_after => 1200,
		runaway_action => 'cancel',
		quarantine => 2000
	},
	soak_b => { max_active => 1, max_queued => 2 },
	soak_d => { max_active => 2, max_queued => 3, idle_in_transaction_timeout => 500 },
	soak_e => {
		max_active => 2,
		max_queued => 3,
		runaway_after => 600,
		runaway_action => 'demote',
		runaway_budget => 'soak_s',
		quarantine => 1000
	},
	soak_s => { max_active => 1, max_queued => 3, statement_timeout => 2000 },
	soak_c => {
		max_active => 2,
		max_queued => 2,
		queue_timeout => 1000,
		statement_timeout => 0,
		lock_timeout => 200,
		fair => 1,
		scope => 'statement',
		idle_in_transaction_timeout => 0
	},
	soak_l => { max_active => 2, max_queued => 4, queue_order => 'lifo', overtake_limit => 100 },
	soak_r => { max_active => 3, max_queued => 4, max_rate => 15, rate_burst => 3 },
	soak_k => { max_active => 3, max_queued => 6 },
	soak_p => { max_active => 3, max_queued => 0 },
	soak_q => { max_active => 2, max_queued => 0, max_rate => 25, rate_burst => 4 },
	soak_h1 => { max_active => 3, max_queued => 3, parent => 'soak_p', weight => 3 },
	soak_h2 => { max_active => 2, max_queued => 3, parent => 'soak_p', weight => 1, reserved => 1 },
	soak_h3 => { max_active => 2, max_queued => 2, parent => 'soak_q', weight => 2 },
	soak_h4 => {
		max_active => 2,
		max_queued => 2,
		parent => 'soak_q',
		weight => 1,
		queue_order => 'lifo',
		overtake_limit => 100
	},
	soak_m => {
		max_active => 2,
		max_queued => 3,
		parent => 'soak_p',
		weight => 2,
		max_memory_mb => 8,
		min_cost => 100
	});
my %c_roles = (soak_c1 => 1, soak_c2 => 1);    # assigned to soak_c
my $c_exists = 1;
# (1.3) the max_active of the key limit of soak_k's key 'hot' as committed
# (0: none, reset: it has soak_k's key_max_active 1 and key_max_queued 2);
# its max_queued is 3
my $k_hot = 2;
my $q_exists = 1;

# The 1.2 fields as dbgate.budgets shows them, when %cfg does not say.
my %DEFAULT12 = (
	parent => '',
	weight => 1,
	queue_order => 'fifo',
	overtake_limit => 100,
	max_rate => 0,
	rate_burst => 1,
	max_memory_mb => 0,
	min_cost => 0);
# and the 1.3 fields of runaways (ms for the durations)
my %DEFAULT13 = (
	runaway_after => 0,
	runaway_action => 'log',
	runaway_budget => '',
	quarantine => 0);

# The timeline of the configuration for Soak::Check12: budget -> field ->
# { init => value, ev => [[t0, t1, value], ...] } (committed between t0
# and t1).
my %timeline;
for my $b (@BUDGETS)
{
	next unless $cfg{$b};
	for my $f (
		qw(parent weight queue_order overtake_limit max_rate rate_burst max_active
		max_memory_mb reserved))
	{
		next unless defined $cfg{$b}{$f};
		$timeline{$b}{$f} = { init => $cfg{$b}{$f}, ev => [] };
	}
}
$timeline{$_}{parent} //= { init => '', ev => [] } for @CHILDREN;
$timeline{soak_q}{exists} = { init => 1, ev => [] };
$timeline{soak_h1}{queue_order} = { init => 'fifo', ev => [] };
$timeline{soak_h2}{max_rate} = { init => 0, ev => [] };
$timeline{soak_h2}{rate_burst} = { init => 1, ev => [] };

my $setup = q{
CREATE EXTENSION dbgate;
CREATE TABLE soak_hot (id int PRIMARY KEY, v int NOT NULL);
INSERT INTO soak_hot SELECT g, 0 FROM generate_series(1, 4) g;
GRANT SELECT, UPDATE ON soak_hot TO PUBLIC;
CREATE FUNCTION soak_fail() RETURNS int LANGUAGE plpgsql
  AS $$BEGIN RAISE EXCEPTION 'soak failure'; END$$;
CREATE FUNCTION soak_nested(n int) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE s bigint := 0;
BEGIN
  FOR i IN 1 .. n LOOP
    s := s + (SELECT count(*) FROM soak_hot);
    PERFORM pg_sleep(0.001);
  END LOOP;
  RETURN s;
END$$;
CREATE PROCEDURE soak_loop(k int) LANGUAGE plpgsql AS $$
DECLARE r record;
BEGIN
  FOR r IN SELECT g FROM generate_series(1, k) g LOOP
    PERFORM pg_sleep(0.002);
    RAISE NOTICE 'soak_step';
    COMMIT;
  END LOOP;
END$$;
CREATE FUNCTION soak_trig() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM count(*) FROM soak_hot;
  RETURN NULL;
END$$;
CREATE TRIGGER soak_hot_after AFTER UPDATE ON soak_hot
  FOR EACH ROW EXECUTE FUNCTION soak_trig();
CREATE FUNCTION soak_secdef() RETURNS bigint LANGUAGE sql SECURITY DEFINER
  AS $$SELECT count(*) FROM soak_hot$$;
-- pg_sleep() declared stable: a cheap read of soak_m that takes its time
-- (min_cost gates a plan that calls a volatile function; it trusts this one)
CREATE FUNCTION soak_nap(float8) RETURNS void STABLE STRICT LANGUAGE internal
  AS 'pg_sleep';
CREATE PROCEDURE soak_proc(k int, ms int, fail bool) LANGUAGE plpgsql AS $$
BEGIN
  FOR i IN 1 .. k LOOP
    PERFORM pg_sleep(ms / 1000.0);
    RAISE NOTICE 'soak_step';
    COMMIT;
  END LOOP;
  IF fail THEN
    PERFORM 1 / (random() * 0)::int;
  END IF;
END$$;
SELECT dbgate.create_budget('soak_a', 2, 3, queue_timeout => '400ms',
                            scope => 'statement', runaway_after => '1200ms',
                            runaway_action => 'cancel', quarantine => '2s');
SELECT dbgate.create_budget('soak_b', 1, 2, statement_timeout => '1500ms',
                            lock_timeout => '300ms', fair => false);
SELECT dbgate.create_budget('soak_c', 2, 2, queue_timeout => '1s',
                            lock_timeout => '200ms');
SELECT dbgate.create_budget('soak_d', 2, 3, queue_timeout => '600ms',
                            scope => 'transaction',
                            idle_in_transaction_timeout => '500ms');
SELECT dbgate.create_budget('soak_s', 1, 3, queue_timeout => '600ms',
                            statement_timeout => '2000ms',
                            lock_timeout => '250ms');
SELECT dbgate.create_budget('soak_e', 2, 3, queue_timeout => '400ms',
                            runaway_after => '600ms', runaway_action => 'demote',
                            runaway_budget => 'soak_s', quarantine => '1s');
SELECT dbgate.create_budget('soak_l', 2, 4, queue_timeout => '5s',
                            statement_timeout => '300ms',
                            queue_order => 'lifo', overtake_limit => '100ms');
SELECT dbgate.create_budget('soak_r', 3, 4, queue_timeout => '1s',
                            max_rate => 15, rate_burst => 3);
SELECT dbgate.create_budget('soak_p', 3);
SELECT dbgate.create_budget('soak_q', 2, max_rate => 25, rate_burst => 4);
SELECT dbgate.create_budget('soak_h1', 3, 3, queue_timeout => '800ms',
                            parent => 'soak_p', weight => 3, adapt => 'on');
SELECT dbgate.create_budget('soak_h2', 2, 3, queue_timeout => '800ms',
                            parent => 'soak_p', weight => 1, reserved => 1);
SELECT dbgate.create_budget('soak_h3', 2, 2, queue_timeout => '800ms',
                            parent => 'soak_q', weight => 2,
                            scope => 'transaction');
SELECT dbgate.create_budget('soak_h4', 2, 2, queue_timeout => '800ms',
                            parent => 'soak_q', weight => 1,
                            queue_order => 'lifo', overtake_limit => '100ms');
SELECT dbgate.create_budget('soak_m', 2, 3, queue_timeout => '800ms',
                            parent => 'soak_p', weight => 2,
                            max_memory_mb => 8, min_cost => 100);
SELECT dbgate.create_budget('soak_k', 3, 6, queue_timeout => '500ms',
                            key_by => 'setting:app.tenant',
                            key_max_active => 1, key_max_queued => 2);
SELECT dbgate.set_key_limit('soak_k', 'hot', max_active => 2, max_queued => 3);
};
$setup .= "CREATE ROLE $_->[0] LOGIN;\n" for @SESSIONS;
$setup .= "SELECT dbgate.assign_role('$_', '$ROLE_BUDGET{$_}');\n"
  for sort keys %ROLE_BUDGET;
$setup .= "GRANT soak_free TO $_;\n" for sort keys %ROLE_BUDGET;
# unassigned, soak_c2 falls back to its default budget (while soak_c exists)
$setup .= "ALTER ROLE soak_c2 SET dbgate.default_budget = 'soak_c';\n";
$setup .= "SELECT dbgate.reset_stats();\n";
$node->safe_psql('postgres', $setup);
my @epoch_t0 = (time);    # when each epoch's counters started

my $superuser = $node->safe_psql('postgres', 'SELECT current_user');
my ($host, $port) = ($node->host, $node->port);

# ---------------------------------------------------------------------
# Run directory and child processes

# DbgateLoad: the run directory tmp_check/soak, made anew, and the forked
# processes (stopped when the test dies early)
my $load = DbgateLoad->new('soak', duration => $duration);
my $dir = $load->dir;
my $epoch = 0;
write_epoch($dir, $epoch, 'running');

my $monitor_pid = $load->spawn(
	'monitor',
	sub {
		Soak::Monitor::run(
			dir => $dir,
			host => $host,
			port => $port,
			superuser => $superuser,
			interval => 0.025);
	});

my %client_pids;
my $id = 0;
my $d_idle_max = (sort { $b <=> $a } @D_IDLE_MS)[0];
for my $s (@SESSIONS)
{
	my ($role, $class, $n, $own_idle) = @$s;
	for my $i (1 .. $n)
	{
		$id++;
		my $budget = $ROLE_BUDGET{$role} // '';
		my $own = $own_idle->[ ($i - 1) % @$own_idle ];
		# soak_d's timeout applies where it is the tighter one; a kept
		# slot keeps the value of its admission
		my $counted = $budget eq 'soak_d' && ($own == 0 || $own > $d_idle_max);
		my $limit =
			$budget ne 'soak_d' ? $own
		  : $counted ? $d_idle_max
		  :            $own;
		my $client = Soak::Client->new(
			id => $id,
			role => $role,
			class => $class,
			budget => $ROLE_BUDGET{$role},
			checked => (grep { $_ eq $budget } @CHECKED) ? 1 : 0,
			scope => $SCOPE{$budget} // 'statement',
			own_idle_ms => $own,
			idle_counted => $counted ? 1 : 0,
			idle_limit_ms => $limit,
			qt_ms => $QT_MS{ $ROLE_BUDGET{$role} // '' } // 0,
			budget_st_ms => $BUDGET_ST_MS{ $ROLE_BUDGET{$role} // '' } // 0,
			session_st_ms => $SESSION_ST_MS{$class},
			sleep_max => $SLEEP_MAX{$budget},
			may_have_parent => (grep { $_ eq $budget } @CHILDREN) ? 1 : 0,
			rated_by => { map { $_ => 1 } @{ $RATED_BY{$budget} // [] } },
			targets => $budget eq 'soak_e' ? \%E_TARGETS : {},
			ra_long_ms => $budget eq 'soak_e' ? $E_LONG_MS : 0,
			ra_sure_ms => $budget eq 'soak_e' ? $E_SURE_MS : 0,
			host => $host,
			port => $port,
			dir => $dir,
			seed => $seed * 1000 + $id,
			superuser => $superuser);
		my $pid = $load->spawn("client $id", sub { $client->run });
		$client_pids{$pid} = $id;
	}
}
my $nclients = $id;

# ---------------------------------------------------------------------
# Fault injection

my @admin_fails;
my %faults;         # kind -> count
my %lowerings;      # budget -> field -> [[t_before, t_after], ...]
my %changes;        # budget -> field -> [[t_before, t_after, new value], ...]
my @killed;         # pids killed with SIGKILL
my %epoch_max;      # epoch -> budget -> field -> highest value in effect
my @epoch_status;   # epoch -> status rows just before the crash
my @crash_checks;   # epoch -> list of problems found after the restart
my @restart_seconds;
my @gate_windows;   # [t_off, t_on] of each time dbgate.enabled went off

# every fault and change, with the time, for reading after a failure
open(my $events, '>', "$dir/events.log") or die "events.log: $!";
$events->autoflush(1);

sub event
{
	my ($t0, $what) = @_;
	printf $events "%.6f %.6f epoch %d: %s\n", $t0, time, $epoch, $what;
	return;
}

sub fault
{
	my ($kind, $detail) = @_;
	$faults{$kind}++;
	event(time, $kind . (defined $detail ? ": $detail" : ''));
	return;
}

sub admin_connect
{
	return DBI->connect(dsn($host, $port), $superuser, '',
		{ AutoCommit => 1, RaiseError => 0, PrintError => 0, PrintWarn => 0 });
}
my $admin = admin_connect() or die "admin connection: $DBI::errstr";

sub admin_fail
{
	my ($what) = @_;
	push @admin_fails, "$what: " . ($admin->errstr // 'no error text');
	return;
}

# run one admin statement; failures are collected and fail the test
sub adm
{
	my ($sql) = @_;
	my $r = $admin->do($sql);
	admin_fail($sql) unless defined $r;
	return defined $r;
}

sub note_max
{
	for my $b (@CHECKED, grep { $cfg{$_} } @PARENTS)
	{
		for my $f (qw(max_active max_queued))
		{
			my $m = \$epoch_max{$epoch}{$b}{$f};
			$$m = $cfg{$b}{$f} if !defined $$m || $cfg{$b}{$f} > $$m;
		}
	}
	return;
}
note_max();

sub interval_sql
{
	my ($ms) = @_;
	return "'${ms}ms'";
}

# the configuration in dbgate.budgets must be the committed one
sub config_problems
{
	my @p;
	my $rows = $admin->selectall_hashref(
		'SELECT budget, max_active, max_queued, '
		  . 'extract(epoch FROM queue_timeout) * 1000 AS qt, '
		  . 'extract(epoch FROM statement_timeout) * 1000 AS st, '
		  . 'extract(epoch FROM lock_timeout) * 1000 AS lt, '
		  . 'fair::int AS fair, array_to_string(roles, \',\') AS roles, scope, '
		  . 'extract(epoch FROM idle_in_transaction_timeout) * 1000 AS it, '
		  . 'coalesce(parent, \'\') AS parent, weight, queue_order, '
		  . 'extract(epoch FROM overtake_limit) * 1000 AS overtake_limit, '
		  . 'max_rate, rate_burst, max_memory_mb, min_cost, '
		  . 'extract(epoch FROM runaway_after) * 1000 AS runaway_after, runaway_action, '
		  . 'coalesce(runaway_budget, \'\') AS runaway_budget, '
		  . 'extract(epoch FROM quarantine) * 1000 AS quarantine '
		  . 'FROM dbgate.budgets', 'budget');
	return ('cannot read dbgate.budgets: ' . ($admin->errstr // '')) unless $rows;
	my %want = %cfg;
	delete $want{soak_c} unless $c_exists;
	delete $want{soak_q} unless $q_exists;
	for my $b (sort keys %want)
	{
		my $r = $rows->{$b};
		if (!$r) { push @p, "budget $b is missing"; next; }
		for my $f (qw(max_active max_queued))
		{
			push @p, "$b.$f is $r->{$f}, committed $cfg{$b}{$f}"
			  if $r->{$f} != $cfg{$b}{$f};
		}
		my %roles = map { $_ => 1 } split /,/, $r->{roles};
		my @want_roles =
		  $b eq 'soak_c'
		  ? grep { $c_roles{$_} } sort keys %c_roles
		  : grep { $ROLE_BUDGET{$_} eq $b } sort keys %ROLE_BUDGET;
		push @p, "$b has roles {$r->{roles}}, committed {@want_roles}"
		  unless join(',', sort keys %roles) eq join(',', @want_roles);
		my $scope = $cfg{$b}{scope} // $SCOPE{$b} // 'statement';
		push @p, "$b.scope is $r->{scope}, committed $scope"
		  if $r->{scope} ne $scope;
		my $it = $cfg{$b}{idle_in_transaction_timeout} // 0;
		push @p, "$b.idle_in_transaction_timeout is $r->{it} ms, committed $it ms"
		  if abs($r->{it} - $it) > 0.001;
		for my $f (sort(keys %DEFAULT12), sort(keys %DEFAULT13))
		{
			my $w = $cfg{$b}{$f} // $DEFAULT12{$f} // $DEFAULT13{$f};
			my $same = $w =~ /^[\d.]+$/ ? abs($r->{$f} - $w) < 0.001 : $r->{$f} eq $w;
			push @p, "$b.$f is $r->{$f}, committed $w" unless $same;
		}
		push @p, "$b.statement_timeout is $r->{st} ms, committed $cfg{$b}{statement_timeout} ms"
		  if $b eq 'soak_s' && abs($r->{st} - $cfg{$b}{statement_timeout}) > 0.001;
	}
	if ($c_exists)
	{
		my $r = $rows->{soak_c};
		for my $f ([ qt => 'queue_timeout' ], [ st => 'statement_timeout' ],
			[ lt => 'lock_timeout' ], [ fair => 'fair' ])
		{
			my ($col, $k) = @$f;
			push @p, "soak_c.$k is $r->{$col}, committed $cfg{soak_c}{$k}"
			  if $r && abs($r->{$col} - $cfg{soak_c}{$k}) > 0.001;
		}
	}
	for my $b (sort keys %$rows)
	{
		push @p, "unexpected budget $b" unless $want{$b};
	}
	# (1.3) the key limits
	my $kl = $admin->selectrow_array(
		q{SELECT coalesce(string_agg(format('%s:%s:%s:%s', budget, key, max_active, max_queued), ' '), '')
		    FROM dbgate.key_limits});
	my $want_kl = $k_hot ? "soak_k:hot:$k_hot:3" : '';
	push @p, 'cannot read dbgate.key_limits: ' . ($admin->errstr // '') unless defined $kl;
	push @p, "dbgate.key_limits is {$kl}, committed {$want_kl}"
	  if defined $kl && $kl ne $want_kl;
	return @p;
}

sub pick
{
	my @l = @_;
	return $l[ int(rand(@l)) ];
}

# cancel or terminate a random active or queued backend
sub hit_backend
{
	my ($how) = @_;
	my $want = pick('active', 'active', 'queued', 'queued', 'idle in transaction', 'demoted');
	my $rows = $admin->selectall_arrayref(
		q{SELECT pid, CASE WHEN demoted_from IS NOT NULL THEN 'demoted' ELSE state END
		  FROM dbgate.backends ORDER BY pid});
	return admin_fail('read dbgate.backends') unless $rows;
	return unless @$rows;
	my @cand = grep { $_->[1] eq $want } @$rows;
	@cand = @$rows unless @cand;
	my ($pid, $state) = @{ pick(@cand) };
	my $fn = $how eq 'cancel' ? 'pg_cancel_backend' : 'pg_terminate_backend';
	my $t0 = time;
	adm("SELECT $fn($pid)") or return;
	$faults{"$how $state"}++;
	event($t0, "$how $state backend $pid");
	return;
}

sub alter
{
	my ($budget, $field, $value) = @_;
	my $old = $cfg{$budget}{$field};
	my $t0 = time;
	my $ok = adm("SELECT dbgate.alter_budget('$budget', $field => $value)");
	my $t1 = time;
	return unless $ok;
	$cfg{$budget}{$field} = $value;
	push @{ $lowerings{$budget}{$field} }, [ $t0, $t1 ] if $value < $old;
	push @{ $changes{$budget}{$field} }, [ $t0, $t1, $value ];
	tl($budget, $field, $t0, $t1, $value);
	$faults{ 'alter ' . ($value < $old ? 'down' : 'up') }++;
	event($t0, "alter $budget $field $old -> $value");
	note_max();
	return;
}

# a committed change of FIELD of BUDGET to VALUE, between t0 and t1
sub tl
{
	my ($budget, $field, $t0, $t1, $value) = @_;
	push @{ $timeline{$budget}{$field}{ev} }, [ $t0, $t1, $value ]
	  if $timeline{$budget}{$field};
	return;
}

sub alter_ab
{
	my $budget = pick(qw(soak_a soak_b soak_d));
	my $field = pick(qw(max_active max_queued));
	if ($budget eq 'soak_d' && rand() < 0.3)
	{
		# a kept slot keeps the idle timeout of its admission
		my $v = pick(grep { $_ != $cfg{soak_d}{idle_in_transaction_timeout} } @D_IDLE_MS);
		my $t0 = time;
		adm("SELECT dbgate.alter_budget('soak_d', idle_in_transaction_timeout => '${v}ms')")
		  or return;
		event($t0, "alter soak_d idle_in_transaction_timeout "
			  . "$cfg{soak_d}{idle_in_transaction_timeout} -> $v");
		$cfg{soak_d}{idle_in_transaction_timeout} = $v;
		$faults{'alter soak_d idle timeout'}++;
		return;
	}
	my %range = (
		soak_a => { max_active => [ 1, 3 ], max_queued => [ 1, 4 ] },
		soak_b => { max_active => [ 1, 2 ], max_queued => [ 0, 3 ] },
		soak_d => { max_active => [ 1, 3 ], max_queued => [ 1, 4 ] });
	my ($lo, $hi) = @{ $range{$budget}{$field} };
	my @v = grep { $_ != $cfg{$budget}{$field} } $lo .. $hi;
	alter($budget, $field, pick(@v));
	return;
}

sub sql_config
{
	my ($c) = @_;
	return join(', ', map { "$_ $c->{$_}" } sort keys %$c);
}

sub create_c_sql
{
	my %c = (
		max_active => 1 + int(rand(3)),
		max_queued => int(rand(4)),
		queue_timeout => pick(0, 500, 1000),
		statement_timeout => pick(0, 2000),
		lock_timeout => pick(0, 200),
		fair => pick(0, 1),
		scope => pick('statement', 'transaction'),
		idle_in_transaction_timeout => pick(0, 400, 1000));
	my $sql = sprintf(
		"SELECT dbgate.create_budget('soak_c', %d, %d, queue_timeout => %s, "
		  . "statement_timeout => %s, lock_timeout => %s, fair => %s, "
		  . "scope => '%s', idle_in_transaction_timeout => %s);",
		$c{max_active}, $c{max_queued}, interval_sql($c{queue_timeout}),
		interval_sql($c{statement_timeout}), interval_sql($c{lock_timeout}),
		$c{fair} ? 'true' : 'false', $c{scope},
		interval_sql($c{idle_in_transaction_timeout}));
	$sql .= "SELECT dbgate.assign_role('$_', 'soak_c');" for qw(soak_c1 soak_c2);
	return ($sql, \%c);
}

# drop / re-create / alter soak_c, unassign and assign its roles
sub churn_c
{
	my $r = rand();
	if (!$c_exists)
	{
		my ($sql, $c) = create_c_sql();
		my $t0 = time;
		if (adm("BEGIN; $sql COMMIT;"))
		{
			push @{ $changes{soak_c}{$_} }, [ $t0, time, $c->{$_} ]
			  for qw(max_active max_queued);
			$cfg{soak_c} = $c;
			$c_exists = 1;
			%c_roles = (soak_c1 => 1, soak_c2 => 1);
			fault('create budget', sql_config($c));
		}
		else { adm('ROLLBACK'); }
	}
	elsif ($r < 0.25)
	{
		if (adm("SELECT dbgate.drop_budget('soak_c', force => true)"))
		{
			$c_exists = 0;
			%c_roles = ();
			fault('drop budget');
			lose_runaway_budget('soak_c');
		}
	}
	elsif ($r < 0.5)
	{
		# Dropped and created again in one transaction, the budget never
		# stops existing for other sessions: dbgate applies it like an
		# alter (waiters stay queued, counters go on), so a smaller limit
		# counts as a lowering.
		my ($sql, $c) = create_c_sql();
		my $t0 = time;
		if (adm("BEGIN; SELECT dbgate.drop_budget('soak_c', force => true); $sql COMMIT;"))
		{
			for my $f (qw(max_active max_queued))
			{
				push @{ $lowerings{soak_c}{$f} }, [ $t0, time ]
				  if $c->{$f} < $cfg{soak_c}{$f};
				push @{ $changes{soak_c}{$f} }, [ $t0, time, $c->{$f} ];
			}
			$cfg{soak_c} = $c;
			%c_roles = (soak_c1 => 1, soak_c2 => 1);
			fault('drop and re-create budget', sql_config($c));
			lose_runaway_budget('soak_c');
		}
		else { adm('ROLLBACK'); }
	}
	elsif ($r < 0.7)
	{
		if ($c_roles{soak_c2})
		{
			adm("SELECT dbgate.unassign_role('soak_c2')") or return;
			delete $c_roles{soak_c2};
			fault('unassign role');
		}
		else
		{
			adm("SELECT dbgate.assign_role('soak_c2', 'soak_c')") or return;
			$c_roles{soak_c2} = 1;
			fault('assign role');
		}
	}
	elsif ($r < 0.8)
	{
		my $field = pick(qw(max_active max_queued));
		my @v = grep { $_ != $cfg{soak_c}{$field} }
		  ($field eq 'max_active' ? (1 .. 3) : (0 .. 3));
		alter('soak_c', $field, pick(@v));
	}
	else
	{
		# scope and idle timeout: slots already held keep those of their
		# admission
		my ($field, $v, $sqlv);
		if (rand() < 0.5)
		{
			$field = 'scope';
			$v = $cfg{soak_c}{scope} eq 'statement' ? 'transaction' : 'statement';
			$sqlv = "'$v'";
		}
		else
		{
			$field = 'idle_in_transaction_timeout';
			$v = pick(grep { $_ != $cfg{soak_c}{$field} } (0, 400, 1000));
			$sqlv = interval_sql($v);
		}
		my $t0 = time;
		adm("SELECT dbgate.alter_budget('soak_c', $field => $sqlv)") or return;
		event($t0, "alter soak_c $field $cfg{soak_c}{$field} -> $v");
		$cfg{soak_c}{$field} = $v;
		$faults{ 'alter soak_c ' . ($field eq 'scope' ? 'scope' : 'idle timeout') }++;
	}
	return;
}

# (1.3) a drop with force of the runaway_budget of soak_e: it loses it, and
# 'demote' becomes 'log'
sub lose_runaway_budget
{
	my ($dropped) = @_;
	my $e = $cfg{soak_e};
	return unless $e->{runaway_budget} eq $dropped;
	event(time, "soak_e loses its runaway_budget $dropped"
		  . ($e->{runaway_action} eq 'demote' ? ", its runaway_action 'demote' -> 'log'" : ''));
	$e->{runaway_budget} = '';
	$e->{runaway_action} = 'log' if $e->{runaway_action} eq 'demote';
	$faults{"drop of soak_e's runaway_budget with force"}++;
	return;
}

# ---- the 1.3 demotion: soak_e demotes its runaways to soak_s

# alter13(BUDGET, [FIELD, VALUE], ...): one committed change of the runaway
# fields (durations in ms) or of soak_s's statement_timeout; true if it
# committed
sub alter13
{
	my ($budget, @fields) = @_;
	my $sql = join(', ',
		map { "$_->[0] => " . ($_->[1] =~ /^\d+$/ ? "'$_->[1]ms'" : "'$_->[1]'") } @fields);
	my $t0 = time;
	adm("SELECT dbgate.alter_budget('$budget', $sql)") or return 0;
	for my $f (@fields)
	{
		my ($field, $v) = @$f;
		my $old = $cfg{$budget}{$field} // $DEFAULT13{$field} // '';
		event($t0, "alter $budget $field '$old' -> '$v'");
		$cfg{$budget}{$field} = $v;
	}
	$faults{ 'alter ' . join(' and ', map { $_->[0] } @fields) }++;
	return 1;
}

# a call that must fail with STATE (and a message matching RE); nothing
# changes
sub refused
{
	my ($sql, $state, $re) = @_;
	my $r = $admin->do($sql);
	my ($st, $err) = ($admin->state // '', $admin->errstr // '');
	if (defined $r) { push @admin_fails, "$sql succeeded, expected SQLSTATE $state"; }
	elsif ($st ne $state || (defined $re && $err !~ $re))
	{
		push @admin_fails, "$sql failed with $st ($err), expected SQLSTATE $state";
	}
	return;
}

# how many statements are demoted now
sub demoted_now
{
	my ($n) = $admin->selectrow_array(
		'SELECT count(*) FROM dbgate.backends WHERE demoted_from IS NOT NULL');
	return $n // 0;
}

# soak_e and soak_s: their limits, soak_e's runaway_after, runaway_action,
# quarantine and runaway_budget (soak_c, in epochs before the last, which
# is then dropped with force or not), soak_s's statement_timeout, and the
# calls that the references between them must refuse.  Most changes wait
# (a moment) for a statement to be demoted first.
sub alter_e
{
	if (rand() < 0.6)
	{
		my $t0 = time;
		sleep 0.05 while !demoted_now() && time - $t0 < 1.5;
	}
	my $demoted = demoted_now();
	my $e = $cfg{soak_e};
	my $r = rand();
	# (soak_c as the target, more often while it may be one)
	$r = 0.8 if $epoch < $ncrashes && $c_exists && rand() < 0.3;
	# (nothing to put back in the last epoch: another field)
	$r = 0.7
	  if $r >= 0.72 && $r < 0.87 && $epoch >= $ncrashes
	  && $e->{runaway_budget} eq 'soak_s' && $e->{runaway_action} eq 'demote';
	my $changed = 0;
	if ($r < 0.3)
	{
		my %range = (
			soak_e => { max_active => [ 1, 3 ], max_queued => [ 1, 4 ] },
			soak_s => { max_active => [ 1, 2 ], max_queued => [ 1, 4 ] });
		my $b = pick(qw(soak_e soak_s));
		my $f = pick(qw(max_active max_queued));
		my ($lo, $hi) = @{ $range{$b}{$f} };
		alter($b, $f, other($cfg{$b}{$f}, $lo .. $hi));
		$changed = 1;
	}
	elsif ($r < 0.45)
	{
		$changed = alter13('soak_e', [ runaway_after => other($e->{runaway_after}, @E_RA_MS) ]);
	}
	elsif ($r < 0.55)
	{
		$changed = alter13('soak_s',
			[ statement_timeout => other($cfg{soak_s}{statement_timeout}, 1500, 2000) ]);
	}
	elsif ($r < 0.65)
	{
		if ($e->{runaway_action} eq 'demote') { $changed = alter13('soak_e', [ runaway_action => 'log' ]); }
		elsif ($e->{runaway_budget} ne '') { $changed = alter13('soak_e', [ runaway_action => 'demote' ]); }
		else
		{
			$changed = alter13('soak_e', [ runaway_action => 'demote' ],
				[ runaway_budget => 'soak_s' ]);
		}
	}
	elsif ($r < 0.72)
	{
		$changed = alter13('soak_e', [ quarantine => other($e->{quarantine}, 0, 1000) ]);
	}
	elsif ($r < 0.87)
	{
		# soak_c as the runaway_budget, in epochs before the last (its
		# counters start again whenever it is re-created); it may be
		# dropped with force meanwhile (churn_c)
		if ($e->{runaway_budget} eq 'soak_c' || $epoch >= $ncrashes || !$c_exists)
		{
			$changed = alter13('soak_e', [ runaway_budget => 'soak_s' ],
				[ runaway_action => 'demote' ]);
		}
		else
		{
			$changed = alter13('soak_e', [ runaway_budget => 'soak_c' ]);
			# without force, a runaway_budget is not dropped (in a
			# transaction without its roles, so that they are not what
			# refuses it)
			if ($changed && adm('BEGIN'))
			{
				adm("SELECT dbgate.unassign_role(r::regrole) FROM unnest(ARRAY['soak_c1', 'soak_c2']::name[]) r "
					  . "WHERE r IN (SELECT unnest(roles) FROM dbgate.budgets WHERE budget = 'soak_c')");
				refused("SELECT dbgate.drop_budget('soak_c')", '2BP01', qr/runaway_budget/);
				adm('ROLLBACK');
			}
		}
	}
	else
	{
		# refused, changing nothing: itself (22023), a budget with children
		# (22023), one that does not exist (42704); no runaway_budget for
		# 'demote' (22023); a runaway_budget made a parent (22023); a
		# runaway_budget dropped without force (2BP01)
		refused(q{SELECT dbgate.alter_budget('soak_e', runaway_budget => 'soak_e')}, '22023');
		refused(q{SELECT dbgate.alter_budget('soak_e', runaway_budget => 'soak_p')}, '22023');
		refused(q{SELECT dbgate.alter_budget('soak_e', runaway_budget => 'soak_nothere')},
			'42704');
		refused(q{SELECT dbgate.alter_budget('soak_e', runaway_action => 'demote', runaway_budget => '')},
			'22023');
		if ($e->{runaway_budget} eq 'soak_s')
		{
			refused(q{SELECT dbgate.alter_budget('soak_h3', parent => 'soak_s')}, '22023',
				qr/runaway_budget/);
			if (adm('BEGIN'))
			{
				adm("SELECT dbgate.unassign_role('soak_s1')");
				refused("SELECT dbgate.drop_budget('soak_s')", '2BP01', qr/runaway_budget/);
				adm('ROLLBACK');
			}
		}
		$faults{'refused runaway_budget changes'}++;
		push @admin_fails, map { "after the refused changes of soak_e: $_" } config_problems();
	}
	$faults{'change of soak_e or soak_s while a statement was demoted'}++
	  if $changed && $demoted;
	return;
}

# In an epoch before the last: soak_e demotes to soak_c, which is dropped
# with force while a statement is demoted to it (after a drop without
# force was refused): soak_e's runaway_action becomes 'log', the statement
# goes on without a budget (and the drain finds no slot left).
sub demote_to_c
{
	churn_c() unless $c_exists;
	return unless $c_exists;
	alter13('soak_e', [ runaway_budget => 'soak_c' ], [ runaway_action => 'demote' ]) or return;
	my ($t0, $pid) = (time, undef);
	while (!$pid && time - $t0 < 8)
	{
		($pid) = $admin->selectrow_array(
			q{SELECT pid FROM dbgate.backends
			   WHERE budget = 'soak_c' AND demoted_from = 'soak_e' LIMIT 1});
		sleep 0.05 unless $pid;
	}
	if (adm('BEGIN'))
	{
		adm("SELECT dbgate.unassign_role(r::regrole) FROM unnest(ARRAY['soak_c1', 'soak_c2']::name[]) r "
			  . "WHERE r IN (SELECT unnest(roles) FROM dbgate.budgets WHERE budget = 'soak_c')");
		refused("SELECT dbgate.drop_budget('soak_c')", '2BP01', qr/runaway_budget/);
		adm('ROLLBACK');
	}
	adm("SELECT dbgate.drop_budget('soak_c', force => true)") or return;
	$c_exists = 0;
	%c_roles = ();
	fault('drop budget', 'the runaway_budget of soak_e'
		  . ($pid ? ", with backend $pid demoted to it" : ''));
	lose_runaway_budget('soak_c');
	$faults{'soak_c dropped with force while a statement was demoted to it'}++ if $pid;
	push @admin_fails, map { "after soak_c was dropped with force: $_" } config_problems();
	return;
}

# ---- (1.3) keys: the limit of soak_k's key 'hot' under load

sub alter_k
{
	my $t0 = time;
	my ($sql, $new);
	if ($k_hot && rand() < 0.25)
	{
		($sql, $new) = (q{SELECT dbgate.reset_key_limit('soak_k', 'hot')}, 0);
	}
	else
	{
		$new = $k_hot == 1 ? 2 : 1;
		$sql = "SELECT dbgate.set_key_limit('soak_k', 'hot', max_active => $new, max_queued => 3)";
	}
	adm($sql) or return;
	$k_hot = $new;
	$faults{'key limit of soak_k\'s hot ' . ($new ? 'set' : 'reset')}++;
	event($t0, $sql);
	return;
}

# ---- the 1.2 dimensions

sub sql_value
{
	my ($field, $v) = @_;
	return "'${v}ms'" if $field eq 'overtake_limit';
	return "'$v'" if $field eq 'parent' || $field eq 'queue_order';
	return $v;
}

# alter12(BUDGET, [FIELD, VALUE], ...): one committed change of fields
# that take no part in the limits of Soak::Check (values as %cfg keeps
# them); returns true if it committed.
sub alter12
{
	my ($budget, @fields) = @_;
	my $sql = join(', ', map { "$_->[0] => " . sql_value(@$_) } @fields);
	my $t0 = time;
	adm("SELECT dbgate.alter_budget('$budget', $sql)") or return 0;
	my $t1 = time;
	for my $f (@fields)
	{
		my ($field, $v) = @$f;
		my $old = $cfg{$budget}{$field} // $DEFAULT12{$field};
		event($t0, "alter $budget $field '$old' -> '$v'");
		$cfg{$budget}{$field} = $v;
		tl($budget, $field, $t0, $t1, $v);
	}
	$faults{ 'alter ' . join(' and ', map { $_->[0] } @fields) }++;
	return 1;
}

sub other
{
	my ($cur, @v) = @_;
	return pick(grep { $_ ne $cur } @v);
}

# soak_l: its limits and its overtake_limit (its order stays 'lifo')
sub alter_l
{
	my $r = rand();
	my $c = $cfg{soak_l};
	if ($r < 0.4) { alter('soak_l', 'max_active', other($c->{max_active}, 1 .. 3)); }
	elsif ($r < 0.7) { alter('soak_l', 'max_queued', other($c->{max_queued}, 2 .. 4)); }
	else { alter12('soak_l', [ overtake_limit => other($c->{overtake_limit}, 100, 250) ]); }
	return;
}

# soak_r: its rate, burst and limits
sub alter_r
{
	my $r = rand();
	my $c = $cfg{soak_r};
	if ($r < 0.35) { alter12('soak_r', [ max_rate => other($c->{max_rate}, 8, 15, 30) ]); }
	elsif ($r < 0.6) { alter12('soak_r', [ rate_burst => other($c->{rate_burst}, 1, 3, 6) ]); }
	elsif ($r < 0.8) { alter('soak_r', 'max_active', other($c->{max_active}, 2 .. 4)); }
	else { alter('soak_r', 'max_queued', other($c->{max_queued}, 2 .. 5)); }
	return;
}

# soak_m: its memory and its limit (its min_cost stays: the clients know
# which of their statements pass)
sub alter_m
{
	my $c = $cfg{soak_m};
	if (rand() < 0.5) { alter12('soak_m', [ max_memory_mb => other($c->{max_memory_mb}, 4, 8, 16) ]); }
	else { alter('soak_m', 'max_active', other($c->{max_active}, 1 .. 3)); }
	return;
}

# The trees: soak_h3 moves, weights, the order of soak_h1, the rates of
# soak_h2 and soak_q, the limits of the parents and of soak_h1, soak_q
# dropped with force and created again, a rolled-back change.
sub churn_tree
{
	my $r = rand();
	my @parents = ('soak_p', ($q_exists ? 'soak_q' : ()), '');
	if ($r < 0.22)
	{
		alter12('soak_h3', [ parent => other($cfg{soak_h3}{parent}, @parents) ]);
	}
	elsif ($r < 0.34)
	{
		my $c = pick(@CHILDREN);
		alter12($c, [ weight => other($cfg{$c}{weight}, 1, 2, 3, 5) ]);
	}
	elsif ($r < 0.42)
	{
		alter12('soak_h1',
			[ queue_order => other($cfg{soak_h1}{queue_order} // 'fifo', 'fifo', 'lifo') ]);
	}
	elsif ($r < 0.50)
	{
		if ($cfg{soak_h2}{max_rate} // 0) { alter12('soak_h2', [ max_rate => 0 ]); }
		else { alter12('soak_h2', [ max_rate => 20 ], [ rate_burst => 2 ]); }
	}
	elsif ($r < 0.58)
	{
		return unless $q_exists;
		alter12('soak_q', [ max_rate => other($cfg{soak_q}{max_rate}, 10, 25, 50) ],
			[ rate_burst => pick(2, 4) ]);
	}
	elsif ($r < 0.72)
	{
		my %range = (soak_p => [ 2 .. 4 ], soak_q => [ 1 .. 3 ], soak_h1 => [ 2 .. 4 ]);
		my $b = pick(grep { $cfg{$_} } qw(soak_p soak_q soak_h1));
		alter($b, 'max_active', other($cfg{$b}{max_active}, @{ $range{$b} }));
	}
	elsif ($r < 0.84)
	{
		toggle_q();
	}
	elsif ($r < 0.92)
	{
		return unless $q_exists && $cfg{soak_h4}{parent} eq '';
		alter12('soak_h4', [ parent => 'soak_q' ]);
	}
	else
	{
		rolled_back_tree_change();
	}
	return;
}

# soak_q dropped with force (its children become top-level), or created
# again (soak_h4 under it at once, or later)
sub toggle_q
{
	if ($q_exists)
	{
		my $t0 = time;
		adm("SELECT dbgate.drop_budget('soak_q', force => true)") or return;
		my $t1 = time;
		$q_exists = 0;
		delete $cfg{soak_q};
		tl('soak_q', 'exists', $t0, $t1, 0);
		for my $c (@CHILDREN)
		{
			next unless $cfg{$c}{parent} eq 'soak_q';
			$cfg{$c}{parent} = '';
			tl($c, 'parent', $t0, $t1, '');
		}
		fault('drop parent with force', 'soak_q');
		return;
	}
	my %c = (
		max_active => 1 + int(rand(3)),
		max_queued => 0,
		max_rate => pick(10, 25, 50),
		rate_burst => pick(2, 4));
	my $attach = rand() < 0.5;
	my $sql = sprintf("BEGIN; SELECT dbgate.create_budget('soak_q', %d, max_rate => %s, "
		  . "rate_burst => %d);", @c{qw(max_active max_rate rate_burst)});
	$sql .= "SELECT dbgate.alter_budget('soak_h4', parent => 'soak_q');" if $attach;
	my $t0 = time;
	if (!adm("$sql COMMIT;"))
	{
		adm('ROLLBACK');
		return;
	}
	my $t1 = time;
	$q_exists = 1;
	$cfg{soak_q} = \%c;
	tl('soak_q', 'exists', $t0, $t1, 1);
	tl('soak_q', $_, $t0, $t1, $c{$_}) for qw(max_active max_rate rate_burst);
	push @{ $changes{soak_q}{max_active} }, [ $t0, $t1, $c{max_active} ];
	if ($attach)
	{
		$cfg{soak_h4}{parent} = 'soak_q';
		tl('soak_h4', 'parent', $t0, $t1, 'soak_q');
	}
	note_max();
	fault('create parent', sql_config(\%c) . ($attach ? ', soak_h4 under it' : ''));
	return;
}

# changes of the tree and of 1.2 fields rolled back leave no trace
sub rolled_back_tree_change
{
	my $to = other($cfg{soak_h3}{parent}, 'soak_p', ($q_exists ? 'soak_q' : ()), '');
	adm('BEGIN') or return;
	my $ok = adm("SELECT dbgate.alter_budget('soak_h3', parent => '$to')");
	$ok &&= adm("SELECT dbgate.alter_budget('soak_h1', weight => 77, queue_order => 'lifo', "
		  . "overtake_limit => '7ms')");
	$ok &&= adm("SELECT dbgate.alter_budget('soak_r', max_rate => 999, rate_burst => 99)");
	$ok &&= adm("SELECT dbgate.drop_budget('soak_q', force => true)") if $q_exists;
	if ($ok)
	{
		my ($inside) = $admin->selectrow_array(
			"SELECT coalesce(parent, '') || ':' || (SELECT count(*) FROM dbgate.budgets "
			  . "WHERE budget = 'soak_q') FROM dbgate.budgets WHERE budget = 'soak_h3'");
		my $want = ($q_exists && $to eq 'soak_q' ? '' : $to) . ':0';
		push @admin_fails,
		  "inside the transaction dbgate.budgets shows soak_h3's parent and soak_q as "
		  . ($inside // 'NULL') . ", expected $want"
		  unless defined $inside && $inside eq $want;
	}
	adm('ROLLBACK');
	push @admin_fails, map { "after a rolled-back change of the tree: $_" } config_problems();
	fault('rolled-back change of the tree');
	return;
}

# a change that is rolled back must leave no trace
sub rolled_back_change
{
	my $budget = pick(@CHECKED);
	my ($field) = keys %{ $SENTINEL{$budget} };
	my $v = $SENTINEL{$budget}{$field};
	adm('BEGIN') or return;
	if (adm("SELECT dbgate.alter_budget('$budget', $field => $v)"))
	{
		my ($inside) = $admin->selectrow_array(
			"SELECT $field FROM dbgate.budgets WHERE budget = '$budget'");
		push @admin_fails,
		  "inside the transaction dbgate.budgets shows $budget.$field = "
		  . ($inside // 'NULL') . ", expected $v"
		  unless defined $inside && $inside == $v;
	}
	adm('ROLLBACK');
	my ($after) = $admin->selectrow_array(
		"SELECT $field FROM dbgate.budgets WHERE budget = '$budget'");
	push @admin_fails,
	  "after ROLLBACK dbgate.budgets shows $budget.$field = "
	  . ($after // 'NULL') . ", committed $cfg{$budget}{$field}"
	  unless defined $after && $after == $cfg{$budget}{$field};
	fault('rolled-back change');
	return;
}

# dbgate.enabled off for a moment: queued statements go on ungated.  Not in
# the last epoch, whose counters are compared with the clients' view (a
# statement that runs ungated is not admitted).
sub gate_off_and_on
{
	return if $epoch >= $ncrashes;
	my $t0 = time;
	write_gate($t0, 9999999999);
	adm('ALTER SYSTEM SET dbgate.enabled = off') or return;
	adm('SELECT pg_reload_conf()');
	sleep(0.2 + rand(0.4));
	adm('ALTER SYSTEM RESET dbgate.enabled');
	adm('SELECT pg_reload_conf()');
	# until every backend has reloaded, some still run ungated
	write_gate($t0, time + 0.5);
	push @gate_windows, [ $t0, time + 0.5 ];
	fault('dbgate.enabled off and on');
	return;
}

# tell the clients when the gate was off (see Soak::Client::gate_toggled)
sub write_gate
{
	my ($off, $on) = @_;
	open(my $fh, '>', "$dir/gate.tmp") or die "gate.tmp: $!";
	printf $fh "%.6f %.6f\n", $off, $on;
	close $fh;
	rename("$dir/gate.tmp", "$dir/gate") or die "gate: $!";
	return;
}

sub status_rows
{
	my ($dbh) = @_;
	return $dbh->selectall_hashref('SELECT * FROM dbgate.status', 'budget');
}

# SIGKILL one client backend; wait for the crash restart; check that every
# counter starts from 0 and the configuration survived; start a new epoch.
# The victim is a backend of soak_a (those clients never disconnect on
# their own) or of soak_h1 (its slots are taken at two levels), active or
# queued, or most often (1.3) a statement of soak_e demoted to soak_s; the
# kill counts once the server log reports it.
sub crash
{
	$epoch_status[$epoch] = status_rows($admin);
	write_epoch($dir, $epoch, 'pending');
	my ($victim, $t_kill, $was_demoted);
	my $demoted = rand() < 0.7;
	for my $try (1 .. 30)
	{
		if (!$admin || !$admin->ping)
		{
			sleep 0.2;
			$admin = admin_connect() or next;
		}
		my $rows = $admin->selectall_arrayref(
			$demoted && $try <= 15
			? 'SELECT pid FROM dbgate.backends WHERE demoted_from IS NOT NULL ORDER BY pid'
			: "SELECT pid FROM dbgate.backends WHERE role IN ('soak_a1', 'soak_a2', 'soak_h1u') "
			  . 'ORDER BY pid');
		my @pids = map { $_->[0] } @{ $rows // [] };
		if (!@pids)
		{
			sleep($demoted && $try <= 15 ? 0.2 : 0.05);
			next;
		}
		my $pid = pick(@pids);
		my $log_offset = -s $node->logfile;
		$t_kill = time;
		next unless kill 'KILL', $pid;
		my $seen = 0;
		for (1 .. 100)
		{
			my $log = slurp_file($node->logfile, $log_offset);
			if ($log =~ /\(PID $pid\) was terminated by signal 9/)
			{
				$seen = 1;
				last;
			}
			sleep 0.1;
		}
		if ($seen)
		{
			$victim = $pid;
			$was_demoted = $demoted && $try <= 15;
			last;
		}
		# it exited on its own just before: no crash, try another one
	}
	BAIL_OUT('could not crash the server with kill -9 of a client backend')
	  unless $victim;
	push @killed, $victim;
	fault('crash (kill -9)', "backend $victim" . ($was_demoted ? ', a demoted statement' : ''));
	$faults{'crash (kill -9) of a demoted statement'}++ if $was_demoted;
	$admin->disconnect if $admin;

	# back when no client backend from before the kill is left
	my $deadline = time + 120;
	my $back = 0;
	while (time < $deadline)
	{
		sleep 0.2;
		$admin = admin_connect() or next;
		my ($old) = $admin->selectrow_array(
			"SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend' "
			  . "AND backend_start < to_timestamp($t_kill)");
		if (defined $old && $old == 0) { $back = 1; last; }
		$admin->disconnect;
	}
	my @problems;
	if (!$back)
	{
		BAIL_OUT("server did not come back within 120 s after kill -9 of $victim");
	}
	push @restart_seconds, time - $t_kill;

	my $st = status_rows($admin) // {};
	for my $b (sort keys %$st)
	{
		for my $c (
			qw(active queued admitted admitted_after_wait rejected_full
			rejected_timeout canceled_waiting admitted_lock_holder peak_active peak_queued
			idle_in_transaction terminated_idle wait_time_total wait_time_max
			active_time_total would_queue would_reject oldest_wait admitted_overdue
			rate_limited bypassed memory_mb_active runaways demoted_out demoted_in
			quarantined keys keys_overflowed)
		  )
		{
			push @problems, "after the crash restart $b.$c = $st->{$b}{$c}"
			  if $st->{$b}{$c} !=
			  ($c eq 'active' || $c eq 'peak_active' ? kept_idle($b) : 0);
		}
	}
	my ($nb) = $admin->selectrow_array('SELECT count(*) FROM dbgate.backends');
	push @problems, "after the crash restart dbgate.backends has $nb rows"
	  if ($nb // -1) != 0;
	my ($nh) = $admin->selectrow_array(
		'SELECT count(*) FROM dbgate.wait_histogram WHERE count <> 0');
	push @problems, "after the crash restart dbgate.wait_histogram has $nh buckets that are not 0"
	  if ($nh // -1) != 0;
	push @problems, map { "after the crash restart: $_" } config_problems();
	$crash_checks[$epoch] = \@problems;

	# the last epoch's counters of demotion are exact: soak_e demotes to
	# soak_s all through it (no client is connected yet)
	if ($epoch + 1 >= $ncrashes
		&& ($cfg{soak_e}{runaway_budget} ne 'soak_s' || $cfg{soak_e}{runaway_action} ne 'demote'))
	{
		alter13('soak_e', [ runaway_budget => 'soak_s' ], [ runaway_action => 'demote' ]);
	}

	adm('SELECT dbgate.reset_stats()');
	$epoch++;
	$epoch_t0[$epoch] = time;
	note_max();
	write_epoch($dir, $epoch, 'running');
	event($t_kill, "epoch $epoch running");
	return;
}

# What the checks at the end need the last epoch's load to have produced:
# a check of an order, a rate or a count proves nothing when its situation
# never arose.  The load goes on past $duration until all of it has been
# seen (a state, however long the machine takes to get there), and is
# nudged towards it meanwhile: a standing queue in soak_l (one slot,
# overtake_limit 100 ms), a low rate in soak_r (8 per second, burst 1),
# soak_e demoting to soak_s, and a change of soak_e while a statement is
# demoted.  After extra_max() s more (DbgateLoad) the load stops anyway,
# and the checks that lack their situation fail.
my $MIN_SAMPLES = $load->min_samples;

# what the last epoch still lacks (see above)
sub premises_missing
{
	my $st = status_rows($admin) // {};
	my @m;
	for my $b (@CHECKED)
	{
		push @m, "$b admitted nothing" unless ($st->{$b}{admitted} // 0) > 0;
	}
	push @m, 'soak_l admitted no overdue waiter'
	  unless ($st->{soak_l}{admitted_overdue} // 0) > 0;
	push @m, "soak_r's rate held nothing back" unless ($st->{soak_r}{rate_limited} // 0) > 0;
	push @m, 'no cheap read of soak_m passed' unless ($st->{soak_m}{bypassed} // 0) > 0;
	push @m, 'soak_e demoted nothing' unless ($st->{soak_e}{demoted_out} // 0) > 0;
	push @m, 'soak_k counted nothing under its overflow key'
	  unless ($st->{soak_k}{keys_overflowed} // 0) > 0;
	push @m, 'the key limit of soak_k\'s hot was never changed'
	  unless grep { /^key limit of soak_k/ } keys %faults;
	push @m, 'soak_e or soak_s was never changed while a statement was demoted'
	  unless $faults{'change of soak_e or soak_s while a statement was demoted'};
	push @m, $load->samples_lacking;
	return @m;
}

# towards what is missing (faults like the others, recorded the same way)
sub nudge
{
	my %m = map { $_ => 1 } @_;
	if ($m{'soak_l admitted no overdue waiter'})
	{
		alter('soak_l', 'max_active', 1) if $cfg{soak_l}{max_active} != 1;
		alter12('soak_l', [ overtake_limit => 100 ]) if $cfg{soak_l}{overtake_limit} != 100;
	}
	if ($m{"soak_r's rate held nothing back"})
	{
		alter12('soak_r', [ max_rate => 8 ]) if $cfg{soak_r}{max_rate} != 8;
		alter12('soak_r', [ rate_burst => 1 ]) if $cfg{soak_r}{rate_burst} != 1;
	}
	if (($m{'soak_e demoted nothing'}
			|| $m{'soak_e or soak_s was never changed while a statement was demoted'})
		&& ($cfg{soak_e}{runaway_action} ne 'demote' || $cfg{soak_e}{runaway_budget} ne 'soak_s'))
	{
		alter13('soak_e', [ runaway_budget => 'soak_s' ], [ runaway_action => 'demote' ]);
	}
	if ($m{'soak_e or soak_s was never changed while a statement was demoted'} && demoted_now())
	{
		$faults{'change of soak_e or soak_s while a statement was demoted'}++
		  if alter13('soak_e',
			[ runaway_after => other($cfg{soak_e}{runaway_after}, @E_RA_MS) ]);
	}
	return;
}

my $t_start = $load->start;
my @crash_at =
  map { $t_start + $duration * (($_ - 0.5) / $ncrashes) * (0.8 + rand(0.3)) }
  1 .. $ncrashes;
# (1.3) soak_e demotes to soak_c a few seconds before each crash restart
# (not before 5 s of load: its statements must have started running)
my @demote_c_at = map { $_ - 8 > $t_start + 5 ? $_ - 8 : $t_start + 5 } @crash_at;
while (1)
{
	last if !@crash_at && $load->done(\&premises_missing, \&nudge);
	if (@demote_c_at && time >= $demote_c_at[0])
	{
		shift @demote_c_at;
		demote_to_c();
		next;
	}
	if (@crash_at && time >= $crash_at[0])
	{
		shift @crash_at;
		crash();
		next;
	}
	sleep(0.1 + rand(0.25));
	my $r = rand();
	if ($r < 0.28) { hit_backend('cancel'); }
	elsif ($r < 0.38) { hit_backend('terminate'); }
	elsif ($r < 0.49) { alter_ab(); }
	elsif ($r < 0.57) { churn_c(); }
	elsif ($r < 0.59) { rolled_back_change(); }
	elsif ($r < 0.61) { gate_off_and_on(); }
	elsif ($r < 0.66) { alter_l(); }
	elsif ($r < 0.71) { alter_r(); }
	elsif ($r < 0.83) { churn_tree(); }
	elsif ($r < 0.87) { alter_m(); }
	elsif ($r < 0.97) { alter_e(); }
	alter_k() if rand() < 0.08;
	if ($r >= 0.38 && $r < 0.97 && ($r < 0.59 || $r >= 0.61) && rand() < 0.2)
	{
		push @admin_fails, config_problems();
	}
}
my $load_seconds = $load->report('the last epoch', 1);

# ---------------------------------------------------------------------
# What an idle budget shows as active (and, right after a start, as
# peak_active): a parent the reservations of its children (1.3), as the
# configuration now says.
sub kept_idle
{
	my ($b) = @_;
	my $n = 0;
	for my $c (@CHILDREN)
	{
		$n += $cfg{$c}{reserved} // 0 if ($cfg{$c}{parent} // '') eq $b;
	}
	return $n;
}

# Stop the load, drain

my @stragglers = $load->stop_clients(\%client_pids, 90);
my $t_stop = $load->stopped_at;
ok(!@stragglers, 'every client stops within 90 s')
  or diag "clients still running: @stragglers";
ok(!-e "$dir/died", 'no client or monitor process died')
  or diag slurp_file("$dir/died");

my %drained;
my $drain_deadline = time + 30;
while (1)
{
	my $st = status_rows($admin) // {};
	my ($nb) = $admin->selectrow_array('SELECT count(*) FROM dbgate.backends');
	my $busy = grep {
		$st->{$_}{active} != kept_idle($_) || $st->{$_}{queued} != 0
	} keys %$st;
	if (!$busy && defined $nb && $nb == 0)
	{
		%drained = (ok => 1, seconds => time - $t_stop);
		last;
	}
	if (time > $drain_deadline)
	{
		%drained = (
			ok => 0,
			detail => join('; ',
				(map { "$_: active $st->{$_}{active} queued $st->{$_}{queued}" }
				  sort keys %$st),
				"backends rows: " . ($nb // '?')));
		last;
	}
	sleep 0.1;
}
ok($drained{ok},
	'every budget drains to active = 0 (a parent: its children\'s reservations, nothing held '
	  . 'for a \'lifo\' child), queued = 0, and dbgate.backends is empty')
  or diag $drained{detail};
# (1.3) no key has a rate: once nothing holds a key, no key is live
is($admin->selectrow_array(
		q{SELECT count(*) || ' keys, ' || coalesce(sum(active), 0) || ' active, ' || coalesce(sum(queued), 0) || ' queued; status: '
		       || (SELECT keys FROM dbgate.status WHERE budget = 'soak_k') FROM dbgate.keys}),
	'0 keys, 0 active, 0 queued; status: 0',
	'(1.3) after the drain no key is live: dbgate.keys is empty, soak_k has no keys');
# the adaptive limit (1.3) stayed between adapt_min and max_active through
# the churn, the cancels and the crash restart
like($node->safe_psql('postgres',
		q{SELECT s.adaptive_limit BETWEEN b.adapt_min AND b.max_active
		  FROM dbgate.status s JOIN dbgate.budgets b USING (budget) WHERE budget = 'soak_h1'}),
	qr/^t$/, 'soak_h1 (adapt on): its adaptive limit is between adapt_min and max_active');

$load->stop_monitor($monitor_pid);

# (1.3) dbgate.keys in every sample: the table never over its capacity
# (the shared pool: dbgate.max_keys keys without a limit of their own;
# 'hot' may have an entry of the pool of keys with limits; one overflow
# row per budget), and each row within the limits its key ever had
# (compared within one row only: a sample is not one reading of all rows)
{
	my $K = \%Soak::Monitor::K;
	my ($nsamples, $full, $over, @bad) = (0, 0, 0);
	open(my $fh, '<', "$dir/monitor.samples") or die "monitor.samples: $!";
	while (my $line = <$fh>)
	{
		chomp $line;
		my ($t, undef, undef, undef, $kj) = split /\t/, $line, -1;
		next unless defined $kj;
		$nsamples++;
		my $rows = Soak::Monitor::read_rows($kj);
		my (%plain, %ovf, $others);
		for my $r (@$rows)
		{
			my ($b, $k, $a, $q, $ma, $mq) = @$r[ @$K{qw(budget key active queued max_active max_queued)} ];
			if (!defined $k) { $ovf{$b}++; }
			elsif ($k ne 'hot') { $others++; }
			my ($amax, $qmax) = defined $k && $k eq 'hot' ? (2, 3) : (1, 2);
			push @bad, sprintf('%.3f: key %s of %s has %d active and %d queued (limits %d, %d; at most %d, %d ever)',
				$t, $k // '(overflow)', $b, $a, $q, $ma, $mq, $amax, $qmax)
			  if $a > $amax || $q > $qmax || $b ne 'soak_k'
			  || ((!defined $k || $k ne 'hot') && ($a > $ma || $q > $mq));
		}
		$others //= 0;
		push @bad, sprintf('%.3f: %d keys without a limit of their own, dbgate.max_keys is %d', $t, $others, $MAX_KEYS)
		  if $others > $MAX_KEYS;
		push @bad, sprintf('%.3f: %s has %d overflow rows', $t, $_, $ovf{$_})
		  for grep { $ovf{$_} > 1 } sort keys %ovf;
		$full++ if $others == $MAX_KEYS;
		$over++ if %ovf;
	}
	close $fh;
	ok(!@bad, "(1.3) dbgate.keys in $nsamples samples: never over capacity, no key over its limits")
	  or diag join("\n", @bad[ 0 .. ($#bad < 30 ? $#bad : 29) ]);
	note("dbgate.keys: the shared pool full in $full samples, an overflow row in $over");
}

my $final = status_rows($admin);
my $t_final = time;
my @final_config = config_problems();

# ---------------------------------------------------------------------
# Counters against what the clients saw

my (%acct, %tot, %errors, %ops, @client_fails);
my $nfails = 0;
for my $i (1 .. $nclients)
{
	my $f = "$dir/client-$i.stats";
	if (!-e $f)
	{
		push @client_fails, "client $i wrote no statistics";
		next;
	}
	for my $line (split /\n/, slurp_file($f))
	{
		my @f = split /\t/, $line;
		if ($f[0] eq 'acct') { $acct{ $f[1] }{ $f[2] }{ $f[3] } += $f[4]; }
		elsif ($f[0] eq 'tot') { $tot{ $f[1] }{ $f[2] } += $f[3]; $tot{all}{ $f[2] } += $f[3]; }
		elsif ($f[0] eq 'err') { $errors{ $f[1] } += $f[2]; }
		elsif ($f[0] eq 'op') { $ops{ $f[1] } += $f[2]; }
		elsif ($f[0] eq 'nfail') { $nfails += $f[1]; }
		elsif ($f[0] eq 'fail') { push @client_fails, $f[1]; }
	}
}
ok($nfails == 0 && !@client_fails, 'clients saw nothing wrong')
  or diag join("\n", "$nfails problem(s) seen by clients, the first ones:",
	@client_fails[ 0 .. ($#client_fails < 40 ? $#client_fails : 39) ]);

ok(!@admin_fails, 'every budget change and fault injection did what it should')
  or diag join("\n", @admin_fails[ 0 .. ($#admin_fails < 40 ? $#admin_fails : 39) ]);
ok(!@final_config, 'at the end dbgate.budgets shows the committed configuration')
  or diag join("\n", @final_config);

ok(($faults{'change of soak_e or soak_s while a statement was demoted'} // 0) > 0,
	'(1.3) soak_e or soak_s was changed while a statement of soak_e was demoted');

for my $e (0 .. $epoch - 1)
{
	my $p = $crash_checks[$e] // [];
	ok(!@$p, "after crash restart $e every counter is 0 and the configuration is kept")
	  or diag join("\n", @$p);
}

# (1.3) a statement of soak_e's clients whose query was quarantined in
# soak_e (while its runaway_action was 'demote') is gated by soak_s: it
# counts in soak_e's quarantined, and is admitted, rejected or leaves the
# queue in soak_s.  So soak_e's admissions may be up to that many fewer
# than its clients saw, and soak_s's up to that many more; its
# rejections name soak_s (the clients count those apart: full_t, qto_t).
for my $k (qw(soak_e soak_s))
{
	$acct{$epoch}{$k}{$_} //= 0
	  for qw(adm_lo amb full qto full_t qto_t lost_unconf long ra_sure);
}
my $e_quar = $final->{soak_e}{quarantined} // 0;
my %via_s = (
	soak_e => { lo => -$e_quar, hi => 0, full => 0, qto => 0, lost => 0 },
	soak_s => {
		lo => 0,
		hi => $e_quar,
		full => $acct{$epoch}{soak_e}{full_t},
		qto => $acct{$epoch}{soak_e}{qto_t},
		lost => $acct{$epoch}{soak_e}{lost_unconf}
	});
for my $b (@CHECKED)
{
	my $s = $final->{$b};
	my $c = $acct{$epoch}{$b} // {};
	$c->{$_} //= 0 for qw(adm_lo amb full qto lost_unconf attempts idle_term idle_unsure);
	my $v = $via_s{$b} // { lo => 0, hi => 0, full => 0, qto => 0, lost => 0 };
	my @p;
	my $range = sub {
		my ($name, $v, $lo, $hi) = @_;
		$lo = 0 if $lo < 0;
		push @p, "$name = $v, expected " . ($lo == $hi ? $lo : "$lo .. $hi")
		  if $v < $lo || $v > $hi;
	};
	my ($full, $qto) = ($c->{full} + $v->{full}, $c->{qto} + $v->{qto});
	$range->('rejected_full', $s->{rejected_full}, $full,
		$full + $c->{lost_unconf} + $v->{lost});
	$range->('rejected_timeout', $s->{rejected_timeout}, $qto,
		$qto + ($QT_MS{$b} ? $c->{lost_unconf} + $v->{lost} : 0));
	$range->('admitted', $s->{admitted}, $c->{adm_lo} + $v->{lo},
		$c->{adm_lo} + $c->{amb} + $v->{hi});
	$range->('canceled_waiting', $s->{canceled_waiting}, 0, $c->{amb} + $v->{hi});
	$range->('admitted + canceled_waiting', $s->{admitted} + $s->{canceled_waiting},
		$c->{adm_lo} + $v->{lo}, $c->{adm_lo} + $c->{amb} + $v->{hi});
	# every statement has at most one of these outcomes
	$range->('admitted + canceled_waiting + rejected_full + rejected_timeout',
		$s->{admitted} + $s->{canceled_waiting} + $s->{rejected_full} + $s->{rejected_timeout},
		$c->{adm_lo} + $full + $qto + $v->{lo},
		$c->{adm_lo} + $c->{amb} + $full + $qto + $v->{hi});
	$range->('admitted_after_wait', $s->{admitted_after_wait}, 0, $s->{admitted});
	$range->('admitted_lock_holder', $s->{admitted_lock_holder}, 0,
		$s->{admitted_after_wait} + $s->{canceled_waiting});
	# sessions ended by the budget's idle_in_transaction_timeout
	$range->('terminated_idle', $s->{terminated_idle}, $c->{idle_term},
		$c->{idle_term} + $c->{idle_unsure});
	my $mb = $epoch_max{$epoch}{$b};
	# (demoted statements count beyond the target's limits)
	$range->('peak_active', $s->{peak_active}, 0,
		$mb->{max_active} + $s->{admitted_lock_holder} + $s->{demoted_in});
	$range->('peak_queued', $s->{peak_queued}, 0, $mb->{max_queued});
	$range->('wait_time_max', $s->{wait_time_max}, 0, $QT_MS{$b} + 2000) if $QT_MS{$b};
	push @p, 'active_time_total is 0 although statements were admitted'
	  if $s->{admitted} > 0 && $s->{active_time_total} <= 0;
	push @p, "no statement was admitted" if $s->{admitted} == 0;
	# (1.3) soak_a cancels its runaways and refuses their repeats: every
	# cancel the clients saw was counted, and every refusal; a refused
	# statement whose client lost the error is counted too
	$c->{$_} //= 0 for qw(ra quar fail_other);
	if ($b eq 'soak_a')
	{
		$range->('runaways', $s->{runaways}, $c->{ra}, $c->{ra} + $c->{fail_other});
		$range->('quarantined', $s->{quarantined}, $c->{quar}, $c->{quar} + $c->{fail_other});
	}
	elsif ($b eq 'soak_e')
	{
		# (1.3) soak_e demotes its runaways to soak_s: each runaway ran at
		# least runaway_after, and a sleep longer than any runaway_after
		# that was admitted and ended normally was a runaway or was
		# quarantined (and so went to soak_s); each statement of its
		# clients that soak_s rejected was quarantined
		$range->('runaways', $s->{runaways}, $c->{ra_sure} - $s->{quarantined}, $c->{long});
		$range->('quarantined', $s->{quarantined}, $c->{full_t} + $c->{qto_t}, 9**9**9);
		$range->('demoted_out', $s->{demoted_out}, 1, $s->{runaways});
		$range->('demoted_in', $s->{demoted_in}, 0, 0);
	}
	elsif ($b eq 'soak_s')
	{
		# a demoted statement is not an admission of the target, and is
		# counted once on each side
		$range->('demoted_in', $s->{demoted_in}, $final->{soak_e}{demoted_out},
			$final->{soak_e}{demoted_out});
		$range->('runaways', $s->{runaways}, 0, 0);
		$range->('quarantined', $s->{quarantined}, 0, 0);
		$range->('demoted_out', $s->{demoted_out}, 0, 0);
	}
	else
	{
		$range->('runaways', $s->{runaways}, 0, 0);
		$range->('quarantined', $s->{quarantined}, 0, 0);
	}
	if ($b ne 'soak_e' && $b ne 'soak_s')
	{
		$range->('demoted_out', $s->{demoted_out}, 0, 0);
		$range->('demoted_in', $s->{demoted_in}, 0, 0);
	}
	ok(!@p, "$b: counters since the last restart agree with what the clients saw")
	  or diag join("\n", "$b: " . join(', ', map { "$_ $c->{$_}" } sort keys %$c), @p);
	note sprintf(
		'%s: admitted %d (clients: %d certain + up to %d canceled or terminated), '
		  . 'rejected_full %d (clients: %d), rejected_timeout %d (clients: %d), '
		  . 'canceled_waiting %d, lost results %d, terminated_idle %d (clients: %d), '
		  . 'admitted_lock_holder %d, runaways %d (clients: %d canceled), '
		  . 'quarantined %d (clients: %d refused)',
		$b, $s->{admitted}, $c->{adm_lo}, $c->{amb}, $s->{rejected_full}, $c->{full},
		$s->{rejected_timeout}, $c->{qto}, $s->{canceled_waiting}, $c->{lost_unconf},
		$s->{terminated_idle}, $c->{idle_term}, $s->{admitted_lock_holder},
		$s->{runaways}, $c->{ra}, $s->{quarantined}, $c->{quar});
}

# (1.3) soak_e and soak_s together: every statement of their clients was
# admitted at most once, in one of them
{
	my ($e, $s) = @$final{qw(soak_e soak_s)};
	my ($ce, $cs) = @{ $acct{$epoch} }{qw(soak_e soak_s)};
	my @p;
	my $adm = $e->{admitted} + $s->{admitted};
	my ($lo, $hi) = ($ce->{adm_lo} + $cs->{adm_lo},
		$ce->{adm_lo} + $ce->{amb} + $cs->{adm_lo} + $cs->{amb});
	push @p, "admitted $e->{admitted} + $s->{admitted} = $adm, expected $lo .. $hi"
	  if $adm < $lo || $adm > $hi;
	my $out = $adm + $e->{canceled_waiting} + $s->{canceled_waiting};
	$out += $_->{rejected_full} + $_->{rejected_timeout} for $e, $s;
	my $rej = 0;
	$rej += $_->{full} + $_->{qto} + $_->{full_t} + $_->{qto_t} for $ce, $cs;
	push @p, "admitted + canceled_waiting + rejected_full + rejected_timeout of both = $out, "
	  . 'expected ' . ($lo + $rej) . ' .. ' . ($hi + $rej)
	  if $out < $lo + $rej || $out > $hi + $rej;
	push @p, "soak_e.runaways $e->{runaways} < its demoted_out $e->{demoted_out}"
	  if $e->{runaways} < $e->{demoted_out};
	push @p, "soak_e.demoted_out $e->{demoted_out} != soak_s.demoted_in $s->{demoted_in}"
	  if $e->{demoted_out} != $s->{demoted_in};
	ok(!@p, 'soak_e and soak_s (1.3 demotion): the admissions of both agree with their clients, '
		  . 'and each demoted statement counts once out and once in')
	  or diag join("\n", @p);
	note sprintf('soak_e: runaways %d (clients: %d ran %d ms or more, %d admitted that slept '
		  . '%d ms or more), demoted_out %d, quarantined %d (clients: %d rejected by soak_s); '
		  . 'soak_s: demoted_in %d, admitted %d',
		$e->{runaways}, $ce->{long}, $E_LONG_MS, $ce->{ra_sure}, $E_SURE_MS, $e->{demoted_out},
		$e->{quarantined}, $ce->{full_t} + $ce->{qto_t}, $s->{demoted_in}, $s->{admitted});
}

# ---------------------------------------------------------------------
# The counters of 1.2 at every level (see the top of this file for what is
# exact)

my %hist;    # budget -> [[le_ms, count], ...] in order
for my $r (@{ $admin->selectall_arrayref(
			'SELECT budget, le_ms, count FROM dbgate.wait_histogram ORDER BY budget, le_ms')
		  // [] })
{
	push @{ $hist{ $r->[0] } }, [ $r->[1] =~ /inf/i ? 9**9**9 : $r->[1], $r->[2] ];
}

# admissions that waited at most LE ms (LE a bucket bound)
sub waited_at_most
{
	my ($b, $le) = @_;
	for my $h (@{ $hist{$b} // [] })
	{
		return $h->[1] if abs($h->[0] - $le) < 1e-9;
	}
	return undef;
}

# the smallest bucket bound at least MS
sub bucket_over
{
	my ($b, $ms) = @_;
	for my $h (@{ $hist{$b} // [] })
	{
		return $h->[0] if $h->[0] >= $ms;
	}
	return 9**9**9;
}

# the tokens a bucket could give between FROM and TO: its burst at FROM,
# its rate over the time, and a full bucket at each change (committed
# somewhere in [t0, t1]: the higher rate there); in each stretch one token
# more, of the tree's token waiter, which takes it as of the time it was
# due (however late it woke), and the catch-up of those granted with it
# (see Soak::Check12)
sub rate_allowance
{
	my ($budget, $from, $to) = @_;
	my @ev = sort { $a->[0] <=> $b->[0] }
	  (map { [ @$_, 'max_rate' ] } @{ $timeline{$budget}{max_rate}{ev} }),
	  (map { [ @$_, 'rate_burst' ] } @{ $timeline{$budget}{rate_burst}{ev} });
	my %cur = (
		max_rate => $timeline{$budget}{max_rate}{init},
		rate_burst => $timeline{$budget}{rate_burst}{init});
	my @later;
	for my $e (@ev)
	{
		if ($e->[1] < $from) { $cur{ $e->[3] } = $e->[2]; }
		else { push @later, $e; }
	}
	my $tokens = $cur{rate_burst} + 1 + $cur{max_rate} * $TOKEN_CATCHUP;
	my $t = $from;
	for my $e (@later)
	{
		my ($t0, $t1, $v, $f) = @$e;
		last if $t0 > $to;
		$tokens += $cur{max_rate} * ($t0 - $t) if $t0 > $t;
		my %new = (%cur, $f => $v);
		my $start = $t0 > $t ? $t0 : $t;
		$tokens += ($cur{max_rate} > $new{max_rate} ? $cur{max_rate} : $new{max_rate})
		  * ($t1 - $start);
		$tokens += ($cur{rate_burst} > $new{rate_burst} ? $cur{rate_burst} : $new{rate_burst})
		  + 1 + ($cur{max_rate} > $new{max_rate} ? $cur{max_rate} : $new{max_rate}) * $TOKEN_CATCHUP;
		%cur = %new;
		$t = $t1;
	}
	$tokens += $cur{max_rate} * ($to - $t) if $to > $t;
	return $tokens;
}

my %sessions_of;
for my $sess (@SESSIONS)
{
	my $b = $ROLE_BUDGET{ $sess->[0] } // next;
	$sessions_of{$b} += $sess->[2];
}
my %child_after_wait;
$child_after_wait{all} += $final->{$_}{admitted_after_wait} // 0 for @CHILDREN;

for my $b (sort keys %$final)
{
	my $s = $final->{$b};
	my @p;
	my $is_parent = grep { $_ eq $b } @PARENTS;
	my $h = $hist{$b} // [];
	push @p, 'wait_histogram has ' . scalar(@$h) . ' buckets, not 12' if @$h != 12;
	for my $i (1 .. $#$h)
	{
		push @p, "wait_histogram is not cumulative at $h->[$i][0] ms"
		  if $h->[$i][1] < $h->[ $i - 1 ][1];
	}
	push @p, "the last bucket of wait_histogram is $h->[-1][1], admitted $s->{admitted}"
	  if @$h && $h->[-1][1] != $s->{admitted};
	push @p, "the first bucket of wait_histogram is $h->[0][1], below the "
	  . ($s->{admitted} - $s->{admitted_after_wait}) . ' admissions that did not wait'
	  if @$h && $h->[0][1] < $s->{admitted} - $s->{admitted_after_wait};
	if ($QT_MS{$b} && $b ne 'soak_l')
	{
		my $le = bucket_over($b, $QT_MS{$b} + 1000);
		my $n = waited_at_most($b, $le) // -1;
		push @p, "$n admissions waited at most $le ms, of $s->{admitted} (queue_timeout "
		  . "$QT_MS{$b} ms)"
		  if $n != $s->{admitted};
	}
	for my $c (qw(would_queue would_reject))
	{
		push @p, "$c = $s->{$c}, but no budget is in shadow mode" if $s->{$c} != 0;
	}
	push @p, "memory_mb_active = $s->{memory_mb_active} after the drain"
	  if $s->{memory_mb_active} != 0;
	if ($b eq 'soak_m')
	{
		my $c = $acct{$epoch}{$b} // {};
		my ($lo, $amb) = ($c->{bypass} // 0, $c->{bypass_amb} // 0);
		push @p, "bypassed $s->{bypassed}, the clients ran $lo reads below min_cost "
		  . "(and up to $amb more were canceled or lost)"
		  if $s->{bypassed} < $lo || $s->{bypassed} > $lo + $amb;
		push @p, 'bypassed is 0: no read passed' if $s->{bypassed} == 0;
		note "soak_m: bypassed $s->{bypassed} (clients: $lo certain + up to $amb)";
	}
	elsif ($s->{bypassed} != 0)
	{
		push @p, "bypassed = $s->{bypassed}, but it has no min_cost";
	}
	push @p, "rate_limited = $s->{rate_limited}, but it never had a rate"
	  if $s->{rate_limited} != 0
	  && !grep { $_ > 0 } map { $_->[2] } @{ $timeline{$b}{max_rate}{ev} // [] },
	  [ 0, 0, $timeline{$b}{max_rate}{init} // 0 ];
	push @p, "admitted_overdue = $s->{admitted_overdue}, but it was never 'lifo'"
	  if $s->{admitted_overdue} != 0
	  && !grep { $_ eq 'lifo' } map { $_->[2] } @{ $timeline{$b}{queue_order}{ev} // [] },
	  [ 0, 0, $timeline{$b}{queue_order}{init} // 'fifo' ];
	if ($is_parent)
	{
		for my $c (
			qw(admitted admitted_after_wait rejected_full rejected_timeout canceled_waiting
			admitted_lock_holder terminated_idle admitted_overdue wait_time_total
			wait_time_max active_time_total))
		{
			push @p, "$c = $s->{$c} (a parent counts nothing of its own)" if $s->{$c} != 0;
		}
		push @p, "a bucket of wait_histogram is not 0" if grep { $_->[1] != 0 } @$h;
		push @p, "rate_limited $s->{rate_limited} > its children's admitted_after_wait "
		  . $child_after_wait{all}
		  if $s->{rate_limited} > $child_after_wait{all};
		my $mb = $epoch_max{$epoch}{$b}{max_active} // 0;
		my $lh = 0;
		$lh += $final->{$_}{admitted_lock_holder} for @CHILDREN;
		push @p, "peak_active $s->{peak_active} > $mb + $lh lock-holder admissions"
		  if $s->{peak_active} > $mb + $lh;
	}
	else
	{
		for my $c (qw(admitted_overdue rate_limited))
		{
			push @p, "$c $s->{$c} > admitted_after_wait $s->{admitted_after_wait}"
			  if $s->{$c} > $s->{admitted_after_wait};
		}
		# only an overdue waiter is chosen after waiting overtake_limit
		# (100 ms or more), and only one that waited that long can be
		if ($b eq 'soak_l' || $b eq 'soak_h1')
		{
			my $over50 = $s->{admitted} - (waited_at_most($b, 50) // 0);
			push @p, "admitted_overdue $s->{admitted_overdue} > the $over50 admissions "
			  . 'that waited more than 50 ms'
			  if $s->{admitted_overdue} > $over50;
		}
	}
	if ($b eq 'soak_l')
	{
		my $c = $acct{$epoch}{$b} // {};
		push @p, "rejected_timeout $s->{rejected_timeout}, clients "
		  . ($c->{qto} // 0) . ": a 'lifo' wait is bounded far below queue_timeout"
		  if $s->{rejected_timeout} != 0 || ($c->{qto} // 0) != 0;
		push @p, sprintf('wait_time_max %.0f ms > the bound of a \'lifo\' wait, %.0f ms',
			$s->{wait_time_max}, $L_WAIT_MAX * 1000)
		  if $s->{wait_time_max} > $L_WAIT_MAX * 1000;
		my $le = bucket_over($b, $L_WAIT_MAX * 1000);
		my $n = waited_at_most($b, $le) // -1;
		push @p, "$n admissions waited at most $le ms, of $s->{admitted}"
		  if $n != $s->{admitted};
		my $over500 = $s->{admitted} - (waited_at_most($b, 500) // 0);
		push @p, "admitted_overdue $s->{admitted_overdue} < the $over500 admissions that "
		  . "waited more than 500 ms less $s->{admitted_lock_holder} lock-holder admissions"
		  if $s->{admitted_overdue} < $over500 - $s->{admitted_lock_holder};
		push @p, 'admitted_overdue is 0: the queue never stood long enough to test the order'
		  if $s->{admitted_overdue} == 0;
	}
	if ($b eq 'soak_r')
	{
		my $allowed = rate_allowance($b, $epoch_t0[$epoch], $t_final) + $sessions_of{$b};
		my $a = $s->{admitted} - $s->{admitted_lock_holder};
		push @p, sprintf('%d admissions since the epoch began, more than its rate allows '
			  . '(%.1f, with one per client session counted late)', $a, $allowed)
		  if $a > $allowed;
		note sprintf('soak_r: %d admissions in %.1f s, the rate allows %.1f', $a,
			$t_final - $epoch_t0[$epoch], $allowed);
		push @p, 'rate_limited is 0: its rate never held a statement back'
		  if $s->{rate_limited} == 0;
	}
	ok(!@p, "$b: the counters of 1.2 and the wait histogram are exact")
	  or diag join("\n", map { "$b: $_" } @p);
}

# ---------------------------------------------------------------------
# Monitor samples

# how long a statement may wait in each budget (s): its queue_timeout and
# a margin, soak_l its bound; soak_b and soak_c the longest of max_age
my %queued_age = (
	soak_a => $QT_MS{soak_a} / 1000 + 2,
	soak_d => $QT_MS{soak_d} / 1000 + 2,
	soak_e => $QT_MS{soak_e} / 1000 + 2,
	soak_s => $QT_MS{soak_s} / 1000 + 2,
	soak_l => $L_WAIT_MAX,
	soak_r => $QT_MS{soak_r} / 1000 + 2,
	map { $_ => $QT_MS{$_} / 1000 + 2 } @CHILDREN);

# what the checks of the samples know, kept for reading after a failure
{
	require Data::Dumper;
	local $Data::Dumper::Sortkeys = 1;
	open(my $fh, '>', "$dir/checks.in") or die "checks.in: $!";
	print $fh Data::Dumper->Dump(
		[ \%timeline, \%lowerings, \%changes, \@gate_windows ],
		[qw(timeline lowerings changes gate_windows)]);
	close $fh;
}
my $check12 = Soak::Check12->new(
	timeline => \%timeline,
	parents => \@PARENTS,
	children => \@CHILDREN,
	leaves => [ grep { my $b = $_; !grep { $_ eq $b } @PARENTS } @BUDGETS ],
	clients => \%sessions_of,
	rated => { map { $_ => 1 } qw(soak_r soak_h2 soak_q) },
	gate_windows => \@gate_windows,
	persist => 1.0,
	starve_limit => 2,
	tol => 0.005,
	catchup => $TOKEN_CATCHUP,
	live => { map { $_ => 1 } 'soak_r', @CHILDREN },
	keyed => { soak_k => 1 },
	queued_age => \%queued_age,
	max_age => 30);
my $mon = check_samples(
	file => "$dir/monitor.samples",
	parents => { map { $_ => 1 } @PARENTS },
	# (soak_k's waiters may wait for their key while a slot is free)
	no_starve => { map { $_ => 1 } 'soak_r', 'soak_k', @PARENTS, @CHILDREN },
	lifo_possible => { soak_l => 1, soak_h1 => 1, soak_h4 => 1 },
	keyed => { soak_k => 1 },
	extra => [$check12],
	lowerings => \%lowerings,
	changes => \%changes,
	role_budget => \%ROLE_BUDGET,
	budgets => { map { $_ => 1 } @BUDGETS },
	may_vanish => { soak_c => 1 },
	sentinels => \%SENTINEL,
	queued_age => \%queued_age,
	# a kept slot of soak_d is idle at most as long as its idle timeout
	idle_age => { soak_d => $d_idle_max / 1000 + 4 },
	max_age => 30,
	# a budget that hands a released slot off whenever it has waiters;
	# soak_l, fair and 'lifo', frees the slot and wakes its newest waiter
	# while none is overdue (1.3), so it is held only to starve_limit
	# (1.3) a demotion returns the slot in soak_e as a release does
	fair => { soak_a => 1, soak_d => 1, soak_e => 1, soak_s => 1 },
	demote_targets => { soak_e => { soak_s => 1, soak_c => 1 } },
	scope => \%SCOPE,
	gate_windows => \@gate_windows,
	starve_limit => 2);
ok($mon->{samples} >= $MIN_SAMPLES, "the monitor took samples ($mon->{samples} of at least $MIN_SAMPLES)");
ok($mon->{nviolations} == 0, 'every sample of dbgate.status and dbgate.backends is possible')
  or diag join("\n", "$mon->{nviolations} violation(s), the first ones:",
	@{ $mon->{violations} });

# ---------------------------------------------------------------------
# Server log

my ($problems, $kills_seen, $quitting) = scan_log(file => $node->logfile, killed => \@killed);
ok(!@$problems, 'the server log shows no PANIC, assertion or unexpected crash')
  or diag join("\n", @$problems[ 0 .. ($#$problems < 40 ? $#$problems : 39) ]);
is($kills_seen, scalar @killed, 'the server log shows each deliberate kill -9');

# ---------------------------------------------------------------------
# Figures

my @fig;
push @fig, sprintf('seed %d; %.0f s of load, %d clients, %d epoch(s); drained in %.1f s',
	$seed, $load_seconds, $nclients, $epoch + 1, $drained{seconds} // -1);
push @fig, sprintf('statements %d (%s); operations: %s',
	$tot{all}{statements} // 0,
	join(', ', map { "$_ " . ($tot{$_}{statements} // 0) } qw(a b c d e s l r h m k free)),
	join(', ', map { "$_ $ops{$_}" } sort keys %ops));
push @fig, 'outcomes: ' . join(', ',
	map { my $k = $_; (my $n = $k) =~ s/^outcome_//; "$n $tot{all}{$k}" }
	grep { /^outcome_/ } sort keys %{ $tot{all} });
push @fig, sprintf('%d line(s) of glibc from backends quitting after a deliberate kill -9 (the SIGQUIT handler\'s message)%s',
	scalar @$quitting, @$quitting ? ": $quitting->[0]" : '');
push @fig, 'errors by SQLSTATE: ' . join(', ', map { "$_ $errors{$_}" } sort keys %errors);
# all epochs; for soak_c, since it was last created in each epoch
my %sum;
for my $e (0 .. $epoch)
{
	my $st = $e == $epoch ? $final : $epoch_status[$e];
	for my $b (sort keys %{ $st // {} })
	{
		$sum{$b}{$_} += $st->{$b}{$_}
		  for qw(admitted admitted_after_wait rejected_full rejected_timeout
		  canceled_waiting admitted_lock_holder terminated_idle admitted_overdue
		  rate_limited);
	}
}
for my $b (sort keys %sum)
{
	push @fig, sprintf(
		'%s: admitted %d, '
		  . 'after waiting %d, lock holder %d, rejected full %d, rejected timeout %d, '
		  . 'canceled waiting %d, terminated idle %d, overdue %d, rate-limited %d; '
		  . 'max active seen %s, max queued seen %s, max idle in transaction seen %s',
		$b, @{ $sum{$b} }{qw(admitted admitted_after_wait admitted_lock_holder rejected_full
		  rejected_timeout canceled_waiting terminated_idle admitted_overdue rate_limited)},
		$mon->{max_active}{$b} // '-', $mon->{max_queued}{$b} // '-',
		$mon->{max_idle}{$b} // '-');
}
push @fig, sprintf('statements under a slot already held (kept, or an open cursor) %d, '
	  . 'maybe under one %d; '
	  . 'pauses in transactions %d; sessions ended idle in a transaction %d '
	  . '(%d keeping a slot, %d after a pause longer than the idle timeout; '
	  . '%d long pauses ended otherwise)',
	map { $tot{all}{$_} // 0 }
	  qw(mode_held mode_maybe idle_pauses idle_ended idle_ended_kept idle_long_ended
	  idle_long_lost));
push @fig, sprintf('disconnects by clients: while queued %d, while active %d, '
	  . 'while running ungated %d, while holding a cursor %d',
	map { $tot{all}{$_} // 0 }
	  qw(disconnect_queued disconnect_active disconnect_running disconnect_holding));
push @fig, 'faults: ' . join(', ', map { "$_ $faults{$_}" } sort keys %faults);
push @fig, 'crash restarts took ' . join(', ', map { sprintf('%.1f s', $_) } @restart_seconds)
  if @restart_seconds;
push @fig, sprintf('reconnects %d; monitor: %d samples, longest gap %.2f s, '
	  . 'over-limit samples excused by lowering %d, by lock-holder admission %d, '
	  . 'by demotion %d; rows of demoted statements seen %d',
	($tot{all}{connects} // 0) - $nclients,
	$mon->{samples}, $mon->{max_gap}, $mon->{lowering_excused}, $mon->{lh_excused},
	$mon->{demote_excused}, $mon->{demoted_rows});
# (1.3) demotion in every epoch
push @fig, 'demotion: ' . join('; ', map {
		my $st = $_ == $epoch ? $final : $epoch_status[$_];
		sprintf('epoch %d: soak_e runaways %d, demoted_out %d, quarantined %d; soak_s demoted_in %d%s',
			$_, map({ $st->{soak_e}{$_} // 0 } qw(runaways demoted_out quarantined)),
			$st->{soak_s}{demoted_in} // 0,
			$st->{soak_c} ? ", soak_c demoted_in $st->{soak_c}{demoted_in}" : '')
} 0 .. $epoch) . sprintf('; rejections by soak_s of statements quarantined in soak_e %d',
	$tot{all}{rejected_by_target} // 0);
push @fig, $check12->figures;
diag "soak figures:\n  " . join("\n  ", @fig);

# ---------------------------------------------------------------------

$admin->do("SELECT dbgate.drop_budget(b, force => true) FROM unnest(ARRAY['soak_a', 'soak_b', 'soak_c']) b "
	  . 'WHERE b IN (SELECT budget FROM dbgate.budgets)');
$admin->disconnect;
$node->stop;
done_testing();
