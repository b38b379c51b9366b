# Reservations (1.3) on a streaming standby: the standby replays `reserved`
# and enforces it for its own sessions, with its own counters.  A parent
# of two slots, one of them reserved for child rs_a: a statement of the
# sibling rs_s takes the other one, and a second statement of rs_s waits
# although the parent has a free slot, because that slot is rs_a's; a
# statement of rs_a (no queue places of its own) then runs at once.  When
# the primary takes the reservation away, the standby's install lets the
# waiting statement of rs_s go on at once.  The primary counts none of it.
# A promoted standby keeps the reservation and goes on enforcing it (its
# parent's active counts the slot kept for rs_a).
use strict;
use warnings FATAL => 'all';

use FindBin;
use lib "$FindBin::RealBin/../perl";
use DbgateTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $primary = PostgreSQL::Test::Cluster->new('rs_primary');
$primary->init(allows_streaming => 1);
$primary->append_conf('postgresql.conf', "shared_preload_libraries = 'dbgate'\n");
$primary->start;
$primary->safe_psql(
	'postgres', q{
	CREATE EXTENSION dbgate;
	CREATE ROLE rs_a LOGIN;
	CREATE ROLE rs_s LOGIN;
	BEGIN;
	SELECT dbgate.create_budget('rs_p', 2);
	SELECT dbgate.create_budget('rs_a', 1, 0, parent => 'rs_p', reserved => 1);
	SELECT dbgate.create_budget('rs_s', 2, 2, '1 min', parent => 'rs_p');
	SELECT dbgate.assign_role('rs_a', 'rs_a');
	SELECT dbgate.assign_role('rs_s', 'rs_s');
	COMMIT;
});
$primary->backup('b1');
my $standby = PostgreSQL::Test::Cluster->new('rs_standby');
$standby->init_from_backup($primary, 'b1', has_streaming => 1);
$standby->start;

my $conf_sql = q{SELECT string_agg(format('%s<%s:%s:%s', budget, parent, max_active, reserved),
	' ' ORDER BY budget) FROM dbgate.budgets};

sub replayed_ok
{
	my ($name) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	my $want = $primary->safe_psql('postgres', $conf_sql);
	ok($standby->poll_query_until('postgres', $conf_sql, $want),
		"$name: the standby has the primary's budgets")
	  or diag $standby->safe_psql('postgres', $conf_sql);
	return;
}

# "active:queued:admitted:admitted_after_wait:rejected_full" of a budget
sub counts
{
	my ($node, $budget) = @_;
	return $node->safe_psql('postgres',
		"SELECT active || ':' || queued || ':' || admitted || ':' || admitted_after_wait
		        || ':' || rejected_full FROM dbgate.status WHERE budget = '$budget'");
}

replayed_ok('created');
is($standby->safe_psql('postgres', $conf_sql),
	'rs_a<rs_p:1:1 rs_p<:2:0 rs_s<rs_p:2:0', 'the reservation is on the standby');

# On NODE, with rs_a reserving one of rs_p's two slots: rs_s gets one slot,
# its second statement waits, rs_a's statement runs at once.  Returns the
# sessions of rs_s (the holder, and the waiter still waiting).
sub reserved_ok
{
	my ($node, $what) = @_;
	my $holder = DbgateTest::Session->new($node, user => 'rs_s');
	$holder->send('SELECT pg_sleep(600)');
	poll_ok($node, 'SELECT state FROM dbgate.backends WHERE pid = ' . $holder->pid,
		'active', "$what: a statement of rs_s takes a slot");
	my $waiter = DbgateTest::Session->new($node, user => 'rs_s');
	$waiter->send('SELECT 42');
	poll_ok($node, 'SELECT state FROM dbgate.backends WHERE pid = ' . $waiter->pid,
		'queued', "$what: its second statement waits: the parent's other slot is rs_a's");
	my ($st, $out, $err) = run_sql($node, 'SELECT 7', user => 'rs_a');
	is($st . $out, '7', "$what: a statement of rs_a (no queue places) runs at once")
	  or diag $err;
	is(counts($node, 'rs_a') . ' ' . counts($node, 'rs_s'),
		'0:0:1:0:0 1:1:1:0:0', "$what: rs_a admitted once at once, rs_s holds one and waits");
	return ($holder, $waiter);
}

my ($holder, $waiter) = reserved_ok($standby, 'on the standby');
is(counts($primary, 'rs_a') . ' ' . counts($primary, 'rs_s'),
	'0:0:0:0:0 0:0:0:0:0', 'on the standby: the primary counted nothing');

# the primary takes the reservation away: the standby's waiter goes on
$primary->safe_psql('postgres', q{SELECT dbgate.alter_budget('rs_a', reserved => 0)});
replayed_ok('reservation removed');
my ($out, $err) = $waiter->result;
is($out, '42', 'without the reservation, the waiting statement of rs_s runs at once');
is(counts($standby, 'rs_s'), '1:0:2:1:0', 'and counts as admitted after a wait');
$standby->safe_psql('postgres', 'SELECT pg_cancel_backend(' . $holder->pid . ')');
$holder->result;
$holder->quit;
$waiter->quit;
poll_ok($standby, q{SELECT sum(active + queued) FROM dbgate.status}, '0',
	'on the standby: every slot is back');

# the reservation again, then a promotion: the promoted standby enforces it
$primary->safe_psql('postgres', q{SELECT dbgate.alter_budget('rs_a', reserved => 1)});
replayed_ok('reservation again');
$standby->safe_psql('postgres', 'SELECT dbgate.reset_stats()');
$standby->promote;
$standby->poll_query_until('postgres', 'SELECT NOT pg_is_in_recovery()')
  or die 'the standby was not promoted';
($holder, $waiter) = reserved_ok($standby, 'after promotion');
$standby->safe_psql('postgres', 'SELECT pg_cancel_backend(' . $holder->pid . ')');
($out) = $waiter->result;
is($out, '42', "after promotion: the waiter runs once rs_s's slot is free");
$holder->result;
$holder->quit;
$waiter->quit;
# the parent's active counts the slot it keeps for rs_a (README, Shares)
poll_ok($standby,
	q{SELECT string_agg(budget || ':' || active || ':' || queued, ' ' ORDER BY budget) FROM dbgate.status},
	'rs_a:0:0 rs_p:1:0 rs_s:0:0',
	'after promotion: every slot is back, but the one the parent keeps for rs_a');

$standby->stop;
$primary->stop;
done_testing();
