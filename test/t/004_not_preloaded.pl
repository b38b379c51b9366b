# Without shared_preload_libraries = 'dbgate': CREATE EXTENSION works, and
# every function and view raises SQLSTATE 55000 with a hint to add dbgate
# to shared_preload_libraries.  Nothing is gated.
use strict;
use warnings FATAL => 'all';

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use DbgateTest;

my $node = dbgate_node('not_preloaded', preload => 0, extension => 0);

my ($state, $out, $err) = run_sql($node, 'CREATE EXTENSION dbgate');
is($state, '', 'CREATE EXTENSION works without preloading');
is($node->safe_psql('postgres', 'SHOW shared_preload_libraries'),
	'', 'dbgate is not preloaded');

# Every function of the extension, called with valid arguments.  The list
# is checked against the catalog below, so a new function must be added.
my %calls = (
	'alter_budget(text,integer,integer,interval,interval,interval,boolean,text,interval,integer,boolean,boolean,text,interval,text,integer,doubleprecision,integer,integer,doubleprecision,integer,text,integer,integer,doubleprecision,integer,interval,text,text,interval,text,integer)'
	  => q{SELECT dbgate.alter_budget('x', max_active => 2)},
	'assign_database(name,text)' =>
	  q{SELECT dbgate.assign_database('postgres', 'x')},
	'assign_role(regrole,text)' =>
	  q{SELECT dbgate.assign_role('np_role', 'x')},
	'backend_status()' => q{SELECT * FROM dbgate.backend_status()},
	'budget_config()' => q{SELECT * FROM dbgate.budget_config()},
	'budget_status()' => q{SELECT * FROM dbgate.budget_status()},
	'budget_wait_histogram()' => q{SELECT * FROM dbgate.budget_wait_histogram()},
	'config_script()' => q{SELECT dbgate.config_script()},
	'create_budget(text,integer,integer,interval,interval,interval,boolean,text,interval,integer,boolean,boolean,text,interval,text,integer,doubleprecision,integer,integer,doubleprecision,integer,text,integer,integer,doubleprecision,integer,interval,text,text,interval,text,integer)'
	  => q{SELECT dbgate.create_budget('x', 1, 1, '1s', '1s', '1s', true)},
	'drop_budget(text,boolean)' => q{SELECT dbgate.drop_budget('x', true)},
	'quarantine_add(text,bigint,interval)' =>
	  q{SELECT dbgate.quarantine_add('x', 1, '1 min')},
	'quarantine_entries()' => q{SELECT * FROM dbgate.quarantine_entries()},
	'quarantine_remove(text,bigint)' => q{SELECT dbgate.quarantine_remove()},
	'key_limit_entries()' => q{SELECT * FROM dbgate.key_limit_entries()},
	'key_status()' => q{SELECT * FROM dbgate.key_status()},
	'reset_key_limit(text,text)' => q{SELECT dbgate.reset_key_limit('x')},
	'reset_stats(text)' => q{SELECT dbgate.reset_stats()},
	'set_key_limit(text,text,integer,integer,doubleprecision,integer)' =>
	  q{SELECT dbgate.set_key_limit('x', 'k', 1)},
	'unassign_database(name)' =>
	  q{SELECT dbgate.unassign_database('postgres')},
	'unassign_role(regrole)' => q{SELECT dbgate.unassign_role('np_role')},);
my %views = map { $_ => "SELECT * FROM dbgate.$_" } qw(backends budgets key_limits keys quarantine status wait_histogram);

$node->safe_psql('postgres', 'CREATE ROLE np_role LOGIN');
is( $node->safe_psql(
		'postgres',
		q{SELECT string_agg(proname || '(' || replace(oidvectortypes(proargtypes), ' ', '') || ')',
		  ' ' ORDER BY proname)
		  FROM pg_proc WHERE pronamespace = 'dbgate'::regnamespace}),
	join(' ', sort keys %calls),
	'the test covers every function of the extension');
is( $node->safe_psql(
		'postgres',
		q{SELECT string_agg(relname, ' ' ORDER BY relname) FROM pg_class
		  WHERE relnamespace = 'dbgate'::regnamespace AND relkind = 'v'}),
	join(' ', sort keys %views),
	'the test covers every view of the extension');

my %all = (%calls, %views);
for my $what (sort keys %all)
{
	($state, $out, $err) = run_sql($node, $all{$what});
	is($state, '55000', "$what: SQLSTATE 55000");
	like(
		$err,
		qr/^HINT:.*shared_preload_libraries/m,
		"$what: hint mentions shared_preload_libraries");
}
($state, $out, $err) = run_sql($node, q{SELECT dbgate.alter_budget('x')});
is($state, '55000', 'alter_budget with defaults only: SQLSTATE 55000');

# Loading the library into one session does not make it usable either.
($state, $out, $err) = run_sql($node,
	qq{LOAD 'dbgate';\nSELECT dbgate.create_budget('x', 1);});
is($state, '55000', 'after LOAD in the session: SQLSTATE 55000');
like($err, qr/^HINT:.*shared_preload_libraries/m,
	'after LOAD in the session: hint mentions shared_preload_libraries');

# The error also reaches a role that may only read the views.
$node->safe_psql('postgres', 'GRANT pg_monitor TO np_role');
($state, $out, $err) =
  run_sql($node, 'SELECT * FROM dbgate.status', user => 'np_role');
is($state, '55000', 'pg_monitor member reading dbgate.status: SQLSTATE 55000');

# Nothing is gated and the server works normally.
($state, $out) = run_sql($node, 'SELECT 41 + 1', user => 'np_role');
is($out, '42', 'statements run normally without preloading');

$node->stop;
done_testing();
