# A standby with a smaller dbgate.max_budgets and dbgate.max_roles than its
# primary keeps what fits, by the rule of the state file's load: budgets in
# the order of config_script() (top-level budgets by name, each followed
# by its subtree), each while there is room and its parent is kept -- a
# child whose parent is left out is left out with it, never re-parented
# and never its own parent -- then the assignments to the budgets kept, by
# OID, while there is room.  One WARNING per replayed change (and per load
# of the state file at start) names what was left out.  Statements of a
# kept budget and of a role whose budget was left out (ungated) finish;
# a promoted standby keeps the same consistent tree and takes
# changes, and its state file then holds what it kept.
#
# dbgate 1.2 before this rule installed the first max_budgets budgets by
# name and resolved a left-out parent through a slot never written for
# it: here cap_a_child1, first by name, became its own parent, and every
# statement of its roles went round in the gate until statement_timeout.
use strict;
use warnings FATAL => 'all';

use FindBin;
use lib "$FindBin::RealBin/../perl";
use DbgateTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $primary = PostgreSQL::Test::Cluster->new('cap_primary');
$primary->init(allows_streaming => 1);
$primary->append_conf('postgresql.conf', "shared_preload_libraries = 'dbgate'\n");
$primary->start;
# roles in this order: their OIDs decide which assignments fit
$primary->safe_psql(
	'postgres', q{
	CREATE EXTENSION dbgate;
	CREATE ROLE cap_lost1 LOGIN;
	CREATE ROLE cap_lost2 LOGIN;
	CREATE ROLE cap_kept1 LOGIN;
	CREATE ROLE cap_kept2 LOGIN;
	CREATE ROLE cap_kept3 LOGIN;
	CREATE DATABASE cap_db;
});
$primary->backup('b1');
my $standby = PostgreSQL::Test::Cluster->new('cap_standby');
$standby->init_from_backup($primary, 'b1', has_streaming => 1);
$standby->append_conf('postgresql.conf',
	"dbgate.max_budgets = 4\ndbgate.max_roles = 2\n");
$standby->start;

# budget:parent:roles:databases of every budget
my $conf_sql = q{SELECT coalesce(string_agg(format('%s:%s:%s:%s', budget,
	coalesce(parent, ''), roles, databases), ' ' ORDER BY budget), '')
	FROM dbgate.budgets};
# budgets whose parent is themselves or not a budget of this server
my $broken_sql = q{SELECT coalesce(string_agg(budget || '->' || parent, ' '), '')
	FROM dbgate.budgets b
	WHERE coalesce(parent, '') <> ''
	  AND (parent = budget
	       OR NOT EXISTS (SELECT 1 FROM dbgate.budgets p WHERE p.budget = b.parent))};

# The primary (dbgate.max_budgets 64) has eleven budgets: cap_z_parent,
# whose name sorts after every other, with the two children that sort
# first; a second tree cap_m_parent / cap_m_child; five top-level ones.
my $offset = -s $standby->logfile;
$primary->safe_psql(
	'postgres', q{
	BEGIN;
	SELECT dbgate.create_budget('cap_z_parent', 10);
	SELECT dbgate.create_budget('cap_a_child1', 1, parent => 'cap_z_parent');
	SELECT dbgate.create_budget('cap_a_child2', 1, parent => 'cap_z_parent');
	SELECT dbgate.create_budget('cap_b_top1', 1);
	SELECT dbgate.create_budget('cap_b_top2', 1);
	SELECT dbgate.create_budget('cap_m_parent', 5);
	SELECT dbgate.create_budget('cap_m_child', 1, parent => 'cap_m_parent');
	SELECT dbgate.create_budget('cap_n_top', 1);
	SELECT dbgate.create_budget('cap_p1', 1);
	SELECT dbgate.create_budget('cap_p2', 1);
	SELECT dbgate.create_budget('cap_p3', 1);
	SELECT dbgate.assign_role('cap_lost1', 'cap_a_child1');
	SELECT dbgate.assign_role('cap_lost2', 'cap_a_child2');
	SELECT dbgate.assign_role('cap_kept1', 'cap_b_top1');
	SELECT dbgate.assign_role('cap_kept2', 'cap_b_top2');
	SELECT dbgate.assign_role('cap_kept3', 'cap_m_child');
	SELECT dbgate.assign_database('cap_db', 'cap_n_top');
	COMMIT;
});
$primary->wait_for_catchup($standby);

my $want = 'cap_b_top1::{cap_kept1}:{} cap_b_top2::{cap_kept2}:{} '
  . 'cap_m_child:cap_m_parent:{}:{} cap_m_parent::{}:{}';
is($standby->safe_psql('postgres', $conf_sql), $want,
	'the standby keeps four budgets in the order of config_script(): '
	  . 'cap_b_top1, cap_b_top2, cap_m_parent and its child, and the first two assignments to them');
is($standby->safe_psql('postgres', $broken_sql), '',
	'no budget on the standby is its own parent or has a parent that is not there');
is($primary->safe_psql('postgres', 'SELECT count(*) FROM dbgate.budgets'), '11',
	'the primary has all eleven');

my $kept_oid = $primary->safe_psql('postgres', q{SELECT 'cap_kept3'::regrole::oid});
my $lost_oids = $primary->safe_psql('postgres',
	q{SELECT 'cap_lost1'::regrole::oid || ', ' || 'cap_lost2'::regrole::oid});
my $db_oid = $primary->safe_psql('postgres',
	q{SELECT oid FROM pg_database WHERE datname = 'cap_db'});
my $warning = qr/WARNING:  dbgate left out 7 of 11 budgets, 3 of 5 role assignments and 1 of 1 database assignments of the configuration change replayed at [0-9A-F]+\/[0-9A-F]+\n.*DETAIL:  This server has dbgate\.max_budgets = 4 and dbgate\.max_roles = 2\. Budgets left out: "cap_a_child1", "cap_a_child2", "cap_n_top", "cap_p1", "cap_p2" and 2 more\. Assignments of roles \(OIDs\) left out: $lost_oids, $kept_oid\. Assignments of databases \(OIDs\) left out: $db_oid\./;
ok($standby->log_contains($warning, $offset),
	'the standby logs one WARNING naming what it left out (a few names and the count)')
  or diag(slurp_file($standby->logfile, $offset));

# Statements finish: one that went round in the gate would never end.  The
# statement is sent in a session of its own and the test waits until the
# session is idle again after it; a statement still running when the wait
# gives up is canceled and the assertion fails.
sub prompt_ok
{
	my ($node, $user, $what) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	my $s = DbgateTest::Session->new($node, user => $user);
	my $pid = $s->pid;
	$s->send('SELECT 42');
	my $done = poll_until($node,
		"SELECT state = 'idle' AND query = 'SELECT 42;'
		   FROM pg_stat_activity WHERE pid = $pid");
	$node->safe_psql('postgres', "SELECT pg_cancel_backend($pid)") if !$done;
	my ($out, $err, $st) = $s->result;
	$s->quit;
	ok($done && $st eq '' && $out eq '42',
		"$what: a statement of $user finishes")
	  or diag("SQLSTATE '$st', output '$out': $err");
	return;
}

sub statements_ok
{
	my ($node, $what) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	$node->safe_psql('postgres', 'SELECT dbgate.reset_stats()');
	prompt_ok($node, 'cap_kept1', "$what, kept budget");
	prompt_ok($node, 'cap_kept2', "$what, kept budget");
	prompt_ok($node, 'cap_lost1', "$what, left-out child (ungated)");
	prompt_ok($node, 'cap_lost2', "$what, left-out child (ungated)");
	prompt_ok($node, 'cap_kept3', "$what, assignment beyond max_roles (ungated)");
	is($node->safe_psql('postgres',
			q{SELECT string_agg(budget || ':' || admitted, ' ' ORDER BY budget)
			    FROM dbgate.status}),
		'cap_b_top1:1 cap_b_top2:1 cap_m_child:0 cap_m_parent:0',
		"$what: the kept budgets admitted their own statements, nothing else was gated");
	return;
}
statements_ok($standby, 'standby');

# Every replayed change that does not fit warns again, once.
$offset = -s $standby->logfile;
$primary->safe_psql('postgres',
	q{SELECT dbgate.alter_budget('cap_a_child1', max_active => 2)});
$primary->safe_psql('postgres',
	q{SELECT dbgate.alter_budget('cap_b_top1', max_active => 3)});
$primary->wait_for_catchup($standby);
like($standby->safe_psql('postgres',
		q{SELECT max_active FROM dbgate.budgets WHERE budget = 'cap_b_top1'}),
	qr/^3$/, 'a change of a kept budget is replayed');
my @warnings = grep { /WARNING:  dbgate left out/ }
  split /\n/, slurp_file($standby->logfile, $offset);
is(scalar(@warnings), 2, 'one WARNING for each of the two changes replayed');
is($standby->safe_psql('postgres', $conf_sql), $want,
	'the same budgets kept after further changes');

# A restart loads the state file (which holds all eleven, as the
# primary's) by the same rule.
$offset = -s $standby->logfile;
$standby->restart;
ok($standby->log_contains(
		qr/WARNING:  dbgate left out 7 of 11 budgets, 3 of 5 role assignments and 1 of 1 database assignments of state file "dbgate\.state"/,
		$offset),
	'after a restart, the load of the state file warns the same way');
is($standby->safe_psql('postgres', $conf_sql), $want,
	'after a restart, the standby keeps the same budgets and assignments');
is($standby->safe_psql('postgres', $broken_sql), '',
	'after a restart, no budget is its own parent or has one that is not there');

# Promotion keeps that tree; the promoted server takes changes within its
# own capacity, and its state file then holds what it kept.
$standby->promote;
ok($standby->poll_query_until('postgres', 'SELECT pg_is_in_recovery()', 'f'),
	'the standby is promoted');
is($standby->safe_psql('postgres', $conf_sql), $want,
	'the promoted standby keeps the tree it had');
is($standby->safe_psql('postgres', $broken_sql), '',
	'after promotion, no budget is its own parent or has one that is not there');
statements_ok($standby, 'promoted');
my ($st) = run_sql($standby, q{SELECT dbgate.alter_budget('cap_m_child', max_active => 2)});
is($st, '', 'the promoted standby accepts a change');
($st) = run_sql($standby, q{SELECT dbgate.create_budget('cap_new', 1)});
is($st, '53400', 'and refuses a fifth budget (its dbgate.max_budgets is 4)');
$offset = -s $standby->logfile;
$standby->restart;
ok(!$standby->log_contains(qr/dbgate left out/, $offset),
	'after that change, its state file fits: no WARNING at start');
is($standby->safe_psql('postgres', $conf_sql), $want,
	'and it loads the same tree');

$standby->stop;
$primary->stop;
done_testing();
