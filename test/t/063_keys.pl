# Keys (1.3): admission per key inside a budget with key_by.
#   - a key at its key_max_active queues while the budget has room, and a
#     newcomer of another key takes the free slot at once (no waiter could);
#   - a key at its key_max_queued gets 53300 with the key's DETAIL,
#     counted in the budget's rejected_full and the key's rejected;
#   - a free slot goes to the key with the fewest active statements, not
#     to the longest waiter of a busier key;
#   - raising a key's own limit (set_key_limit) admits its waiter at once;
#   - dbgate.keys, dbgate.status (keys, keys_overflowed) and
#     dbgate.backends (key, key_overflow) show it; queue_position follows
#     the keys' order;
#   - a canceled waiter and a queue timeout leave no count behind; after
#     the drain no key is live;
#   - a full table of keys (dbgate.max_keys) counts new keys under the
#     budget's overflow key, with the budget's key_* limits.
# Every step waits for the state it asserts on (no sleeps): slots are held
# by statements that wait for advisory locks the test holds.
use strict;
use warnings FATAL => 'all';

use FindBin;
use lib "$FindBin::RealBin/../perl";
use DbgateTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = dbgate_node('keys');
$node->safe_psql(
	'postgres', q{
	CREATE ROLE k_user LOGIN;
	SELECT dbgate.create_budget('kb', 3, max_queued => 10,
		key_by => 'setting:app.tenant', key_max_active => 1);
	SELECT dbgate.assign_role('k_user', 'kb');
});
my $ctl = DbgateTest::Session->new($node);

# A session of tenant T; its statements wait for advisory lock LOCK.
sub tenant
{
	my ($t) = @_;
	my $s = DbgateTest::Session->new($node, user => 'k_user');
	my (undef, $err) = $s->query("SET app.tenant = '$t'");
	die $err if $err ne '';
	return $s;
}

sub hold
{
	my ($s, $lock) = @_;
	$s->send("SELECT pg_advisory_lock_shared($lock), pg_advisory_unlock_shared($lock)");
	return;
}

sub state_of
{
	my ($s) = @_;
	return poll_psql($node,
		'SELECT state || coalesce(\':\' || key, \'\') FROM dbgate.backends WHERE pid = ' . $s->pid);
}

sub keys_view
{
	return poll_psql($node,
		q{SELECT coalesce(string_agg(format('%s:%s/%s', coalesce(key, '-'), active, queued), ' ' ORDER BY key NULLS FIRST), '')
		    FROM dbgate.keys WHERE budget = 'kb'});
}

sub wait_state
{
	my ($s, $want, $name) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	poll_ok($node,
		"SELECT state || coalesce(':' || key, '') FROM dbgate.backends WHERE pid = " . $s->pid,
		$want, $name);
}

# --- a key at its limit queues; another key takes the free slot --------
$ctl->query('SELECT pg_advisory_lock(1)');
my $a1 = tenant('a');
hold($a1, 1);
wait_state($a1, 'active:a', 'tenant a: admitted');
my $a2 = tenant('a');
hold($a2, 1);
wait_state($a2, 'queued:a', 'a second statement of a waits for its key (key_max_active 1)');
is(keys_view(), 'a:1/1', 'dbgate.keys: a has 1 active, 1 queued');
my $b1 = tenant('b');
hold($b1, 1);
wait_state($b1, 'active:b', 'tenant b takes the free slot at once');
is(poll_psql($node, q{SELECT keys || '/' || active || '/' || queued FROM dbgate.status WHERE budget = 'kb'}),
	'2/2/1', 'dbgate.status: 2 live keys, 2 active, 1 queued (a slot free that no waiter could take)');

# --- key_max_queued ----------------------------------------------------
$node->safe_psql('postgres', q{SELECT dbgate.alter_budget('kb', key_max_queued => 1)});
my $a3 = tenant('a');
my ($out, $err, $sqlstate) = $a3->query('SELECT 1');
is($sqlstate, '53300', 'a third statement of a: 53300 at its key_max_queued');
like($err, qr/Key "a" has 1 of 1 queue places taken/, 'with the key\'s DETAIL');
is(poll_psql($node, q{SELECT rejected FROM dbgate.keys WHERE budget = 'kb' AND key = 'a'}),
	'1', 'counted in the key\'s rejected');
is(poll_psql($node, q{SELECT rejected_full FROM dbgate.status WHERE budget = 'kb'}),
	'1', 'and the budget\'s rejected_full');

# --- raising the key's own limit admits its waiter at once -------------
$node->safe_psql('postgres', q{SELECT dbgate.set_key_limit('kb', 'a', max_active => 2)});
wait_state($a2, 'active:a', 'set_key_limit raised a: its waiter is admitted');
is(keys_view(), 'a:2/0 b:1/0', 'dbgate.keys: a 2 active (its own limit), b 1');
is(poll_psql($node, q{SELECT max_active FROM dbgate.keys WHERE budget = 'kb' AND key = 'a'}),
	'2', 'the limit in force for a is its own');
$ctl->query('SELECT pg_advisory_unlock(1)');
for my $s ($a1, $a2, $b1)
{
	my ($o, $e) = $s->result;
	is($e, '', 'the statement ran') or diag $e;
}
poll_ok($node, q{SELECT count(*) FROM dbgate.keys WHERE budget = 'kb'}, '0',
	'after the drain no key of kb is live');

# --- a free slot goes to the key with the fewest active ----------------
$node->safe_psql('postgres', q{
	SELECT dbgate.reset_key_limit('kb');
	SELECT dbgate.alter_budget('kb', 2, key_max_active => 0, key_max_queued => 0)});
$ctl->query('SELECT pg_advisory_lock(2)');
$ctl->query('SELECT pg_advisory_lock(3)');
hold($a1, 2);
wait_state($a1, 'active:a', 'a holds a slot (lock 2)');
hold($a2, 3);
wait_state($a2, 'active:a', 'a holds the other slot (lock 3)');
my $a4 = tenant('a');
hold($a4, 3);
wait_state($a4, 'queued:a', 'a third statement of a queues first');
my $c1 = tenant('c');
hold($c1, 3);
wait_state($c1, 'queued:c', 'then one of c');
is(poll_psql($node, 'SELECT queue_position FROM dbgate.backends WHERE pid = ' . $c1->pid),
	'1', 'c is next in queue_position: its key has fewer active');
$ctl->query('SELECT pg_advisory_unlock(2)');
wait_state($c1, 'active:c', 'a freed slot goes to c (0 active), not to the longer waiter of a (1 active)');
is(state_of($a4), 'queued:a', 'a\'s waiter still waits');
my ($o1, $e1) = $a1->result;
is($e1, '', 'the statement of lock 2 ran');

# --- a canceled waiter leaves no count -----------------------------------
poll_psql($node, 'SELECT pg_cancel_backend(' . $a4->pid . ')');
my ($o4, $e4, $s4) = $a4->result;
is($s4, '57014', 'the waiter of a is canceled');
is(keys_view(), 'a:1/0 c:1/0', 'its key counts it no more');
$ctl->query('SELECT pg_advisory_unlock(3)');
for my $s ($a2, $c1)
{
	my ($o, $e) = $s->result;
	is($e, '', 'the statement ran') or diag $e;
}
poll_ok($node, q{SELECT count(*) FROM dbgate.keys WHERE budget = 'kb'}, '0',
	'after the drain no key of kb is live');
counters_are($node, 'kb',
	{ admitted => 6, admitted_after_wait => 2, rejected_full => 1, canceled_waiting => 1 },
	'kb\'s counters');

# --- a full table of keys: the overflow key -----------------------------
$_->quit for ($a1, $a2, $a3, $a4, $b1, $c1);
$node->append_conf('postgresql.conf', "dbgate.max_keys = 1\n");
$node->restart;
$ctl = DbgateTest::Session->new($node);
$node->safe_psql('postgres', q{SELECT dbgate.alter_budget('kb', key_max_active => 1)});
$ctl->query('SELECT pg_advisory_lock(4)');
my $x1 = tenant('x');
hold($x1, 4);
wait_state($x1, 'active:x', 'x takes the one entry of the table');
my $y1 = tenant('y');
hold($y1, 4);
poll_ok($node, 'SELECT state || \'/\' || key_overflow || \'/\' || coalesce(key, \'-\') FROM dbgate.backends WHERE pid = ' . $y1->pid,
	'active/true/-', 'y finds no room: counted under the overflow key (key NULL)');
my $z1 = tenant('z');
hold($z1, 4);
poll_ok($node, 'SELECT state || \'/\' || key_overflow FROM dbgate.backends WHERE pid = ' . $z1->pid,
	'queued/true', 'z too, and the overflow key has the budget\'s key_max_active 1: z waits');
is(poll_psql($node, q{SELECT keys || '/' || keys_overflowed FROM dbgate.status WHERE budget = 'kb'}),
	'1/2', 'dbgate.status: 1 live key, 2 statements counted under the overflow key');
is(keys_view(), '-:1/1 x:1/0', 'dbgate.keys shows the overflow key as key NULL');
$ctl->query('SELECT pg_advisory_unlock(4)');
for my $s ($x1, $y1, $z1)
{
	my ($o, $e) = $s->result;
	is($e, '', 'the statement ran') or diag $e;
}
poll_ok($node, q{SELECT count(*) FROM dbgate.keys}, '0', 'after the drain no key is live');
$_->quit for ($x1, $y1, $z1, $ctl);
$node->stop;
done_testing();
