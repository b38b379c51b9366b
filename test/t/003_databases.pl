# Budgets are cluster-wide: a budget created in one database gates
# sessions in every database (also one without the extension), every
# database sees the same configuration and the same live status, and
# dropping the extension in one database keeps the budgets.
use strict;
use warnings FATAL => 'all';

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use DbgateTest;

my $node = dbgate_node('databases', extension => 0);
$node->safe_psql('postgres', $_)
  for ('CREATE DATABASE db_a', 'CREATE DATABASE db_b',
	'CREATE DATABASE db_c', 'CREATE ROLE d_user LOGIN');
$node->safe_psql($_, 'CREATE EXTENSION dbgate') for ('db_a', 'db_b');

my $budgets_sql = q{SELECT budget, max_active, max_queued, roles FROM dbgate.budgets};
my $status_sql = q{SELECT budget, max_active, active, max_queued, queued,
	peak_active, peak_queued, admitted, admitted_after_wait, rejected_full,
	rejected_timeout, canceled_waiting, admitted_lock_holder, wait_time_total,
	wait_time_max, stats_reset FROM dbgate.status};

$node->safe_psql(
	'db_a', q{
	SELECT dbgate.create_budget('d_budget', 1);
	SELECT dbgate.assign_role('d_user', 'd_budget');
});
is($node->safe_psql('db_b', $budgets_sql),
	'd_budget|1|0|{d_user}', 'budget created in db_a is seen in db_b');

# A statement in db_b takes the only slot (it waits for an advisory lock;
# those are per database, so the lock is taken in db_b).
my $locker = DbgateTest::Session->new($node, db => 'db_b');
$locker->query('SELECT pg_advisory_lock(5)');
my $holder = DbgateTest::Session->new($node, user => 'd_user', db => 'db_b');
$holder->send('SELECT pg_advisory_xact_lock_shared(5)');
poll_ok(
	$node,
	q{SELECT active FROM dbgate.status WHERE budget = 'd_budget'},
	'1',
	'statement in db_b holds the slot, seen from db_a',
	db => 'db_a');

for my $db ('db_a', 'db_c')
{
	my ($state, $out, $err) = run_sql($node, 'SELECT 1', user => 'd_user', db => $db);
	is($state, '53300', "statement in $db is rejected: budget is full");
	like($err, qr/budget "d_budget" is full/, "$db: message names the budget");
}

my $status_a = $node->safe_psql('db_a', $status_sql);
is($node->safe_psql('db_b', $status_sql),
	$status_a, 'dbgate.status is the same from db_a and db_b');
counters_are(
	$node, 'd_budget',
	{ active => 1, admitted => 1, rejected_full => 2, peak_active => 1 },
	'counters include statements of all databases', db => 'db_b');
my $backends_sql =
  q{SELECT pid, role, budget, state, queue_position FROM dbgate.backends};
is($node->safe_psql('db_a', $backends_sql),
	$holder->pid . '|d_user|d_budget|active|',
	'dbgate.backends in db_a shows the backend of db_b');
is($node->safe_psql('db_b', $backends_sql),
	$node->safe_psql('db_a', $backends_sql),
	'dbgate.backends is the same from db_a and db_b');

$locker->query('SELECT pg_advisory_unlock(5)');
my (undef, $err) = $holder->result;
is($err, '', 'statement in db_b finished');
$_->quit for ($holder, $locker);

# A change made in db_b applies at once in db_a.
$node->safe_psql('db_b', q{SELECT dbgate.alter_budget('d_budget', max_queued => 1)});
is($node->safe_psql('db_a', $budgets_sql),
	'd_budget|1|1|{d_user}', 'change made in db_b is seen in db_a');

# Dropping the extension in db_a leaves the budgets alone.
$node->safe_psql('db_a', 'DROP EXTENSION dbgate');
is($node->safe_psql('db_b', $budgets_sql),
	'd_budget|1|1|{d_user}', 'budgets remain after DROP EXTENSION in db_a');
my ($state) = run_sql($node, 'SELECT 1', user => 'd_user', db => 'db_a');
is($state, '', 'd_user runs a statement in db_a without the extension');
counters_are(
	$node, 'd_budget',
	{ admitted => 2, rejected_full => 2 },
	'statement in db_a is still gated after DROP EXTENSION there',
	db => 'db_b');

$node->restart;
is($node->safe_psql('db_b', $budgets_sql),
	'd_budget|1|1|{d_user}',
	'budgets remain after DROP EXTENSION in db_a and a restart');
($state) = run_sql($node, 'SELECT 1', user => 'd_user', db => 'db_c');
is($state, '', 'd_user runs a statement in db_c after the restart');
counters_are($node, 'd_budget', { admitted => 1 },
	'statement in db_c is gated after the restart', db => 'db_b');

$node->safe_psql('db_a', 'CREATE EXTENSION dbgate');
is($node->safe_psql('db_a', $budgets_sql),
	'd_budget|1|1|{d_user}', 'CREATE EXTENSION again in db_a shows the budget');

$node->safe_psql('db_a', q{SELECT dbgate.drop_budget('d_budget', force => true)});
is($node->safe_psql('db_b', 'SELECT count(*) FROM dbgate.budgets'),
	'0', 'budget dropped in db_a is gone in db_b');

$node->stop;
done_testing();
