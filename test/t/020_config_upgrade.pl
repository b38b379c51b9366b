# ALTER EXTENSION dbgate UPDATE from 1.0 to 1.1, from 1.1 to 1.2, from 1.2
# to 1.3 and from 1.0 straight to 1.2 and to 1.3 keeps every budget and
# assignment, the EXECUTE grants on the functions whose signature changes,
# and the objects that depend on dbgate.budgets; the new functions and
# columns are there afterwards, the new fields at their defaults (flat
# budgets stay flat).  The 1.3 library serves the SQL objects of 1.0, 1.1,
# 1.2 and 1.3 at the same time, in different databases of one cluster
# (budgets are cluster-wide): the old signatures keep working and keep the
# fields they do not know.
use strict;
use warnings FATAL => 'all';

use FindBin;
use lib "$FindBin::RealBin/../perl";
use DbgateTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = dbgate_node('upgrade', extension => 0);

# the extension at 1.0 in a database, its 1.0 functions granted to the
# delegated administrator u_admin
my $create_1_0 = q{
	CREATE EXTENSION dbgate VERSION '1.0';
	GRANT USAGE ON SCHEMA dbgate TO u_admin;
	GRANT EXECUTE ON FUNCTION
	  dbgate.create_budget(text, integer, integer, interval, interval, interval, boolean),
	  dbgate.alter_budget(text, integer, integer, interval, interval, interval, boolean)
	  TO u_admin;
};

# extversion_is(DB, VERSION, NAME): one assertion that the extension is at
# VERSION in database DB
sub extversion_is
{
	my ($db, $version, $name) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	return is($node->safe_psql($db,
			"SELECT extversion FROM pg_extension WHERE extname = 'dbgate'"),
		$version, $name);
}

# grants_kept_ok(DB, NAME): one assertion that u_admin may execute the
# functions it was granted at 1.0 (create_budget, alter_budget) and no
# others, and PUBLIC none of them, in database DB
my $grants_sql = q{SELECT string_agg(format('%s:%s:%s', p.proname,
	    has_function_privilege('public', p.oid, 'EXECUTE'),
	    has_function_privilege('u_admin', p.oid, 'EXECUTE')), ' ' ORDER BY p.proname)
	  FROM pg_proc p WHERE p.pronamespace = 'dbgate'::regnamespace
	   AND proname IN ('create_budget', 'alter_budget', 'assign_database', 'drop_budget')};
sub grants_kept_ok
{
	my ($db, $name) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	return is($node->safe_psql($db, $grants_sql),
		'alter_budget:f:t assign_database:f:f create_budget:f:t drop_budget:f:f', $name);
}

# no_helper_left_ok(SUFFIX, NAME): one assertion that database postgres
# has none of the old version's functions that an update script renames
# to NAME_SUFFIX (create_budget_1_0), and not the script's helper
# dbgate_copy_execute_grants
sub no_helper_left_ok
{
	my ($suffix, $name) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	return is( $node->safe_psql(
			'postgres',
			qq{SELECT count(*) FROM pg_proc WHERE (pronamespace = 'dbgate'::regnamespace AND proname LIKE '%$suffix') OR proname = 'dbgate_copy_execute_grants'}
		),
		'0',
		$name);
}

# dependents_kept_ok(BUDGETS, MONITOR_NAME, VIEW_NAME): two assertions on
# what depends on dbgate.budgets in database postgres after an update:
# pg_monitor reads it and dbgate.budget_config() and PUBLIC does not
# (MONITOR_NAME), and the view u_budget_names shows BUDGETS (VIEW_NAME)
sub dependents_kept_ok
{
	my ($budgets, $monitor_name, $view_name) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	is( $node->safe_psql(
			'postgres',
			q{SELECT has_function_privilege('pg_monitor', 'dbgate.budget_config()', 'EXECUTE'),
			         has_table_privilege('pg_monitor', 'dbgate.budgets', 'SELECT'),
			         has_table_privilege('public', 'dbgate.budgets', 'SELECT')}
		),
		't|t|f',
		$monitor_name);
	return is( $node->safe_psql('postgres',
			'SELECT string_agg(budget, \' \' ORDER BY budget) FROM u_budget_names'),
		$budgets, $view_name);
}

# the number of columns of dbgate.budgets
my $ncols_sql = q{SELECT count(*) FROM pg_attribute
	WHERE attrelid = 'dbgate.budgets'::regclass AND attnum > 0};

$node->safe_psql(
	'postgres', qq{
	CREATE ROLE u_alice LOGIN;
	CREATE ROLE u_admin LOGIN;
	$create_1_0
	CREATE DATABASE u_other;
});
extversion_is('postgres', '1.0', 'the extension is at version 1.0');

# 1.0 objects, 1.2 library: every 1.0 function works
$node->safe_psql(
	'postgres', q{
	SELECT dbgate.create_budget('u_one', 2, 3, '1s', '2s', '3s', false);
	SELECT dbgate.create_budget('u_two', 1);
	SELECT dbgate.alter_budget('u_two', max_queued => 4);
	SELECT dbgate.assign_role('u_alice', 'u_one');
	SELECT dbgate.create_budget('u_gone', 1);
	SELECT dbgate.drop_budget('u_gone');
	SELECT dbgate.reset_stats();
	CREATE VIEW u_budget_names AS SELECT budget FROM dbgate.budgets;
});
my ($state, undef, $err) = run_sql($node,
	q{SELECT dbgate.create_budget('u_three', 1, 0, '0', '0', '0', true)},
	user => 'u_admin');
is($state, '', 'a delegated administrator creates a budget with the 1.0 function');
is( $node->safe_psql(
		'postgres',
		q{SELECT string_agg(format('%s:%s:%s:%s:%s', budget, max_active, max_queued, fair, roles), ' ' ORDER BY budget) FROM dbgate.budgets}
	),
	'u_one:2:3:f:{u_alice} u_three:1:0:t:{} u_two:1:4:t:{}',
	'the 1.0 view shows the budgets');
is($node->safe_psql('postgres', $ncols_sql), '8', 'the 1.0 view has 8 columns');
my ($gstate) = run_sql($node, 'SELECT 1', user => 'u_alice');
is($gstate, '', 'the assigned role runs');
is($node->safe_psql('postgres',
		"SELECT admitted FROM dbgate.status WHERE budget = 'u_one'"),
	'1', 'and its statement was gated by its budget');

# another database at 1.1 sees and changes the same budgets
$node->safe_psql(
	'u_other', q{
	CREATE EXTENSION dbgate VERSION '1.1';
	SELECT dbgate.alter_budget('u_two', scope => 'transaction', enforce => false);
	SELECT dbgate.assign_database('u_other', 'u_two');
});
is( $node->safe_psql(
		'u_other',
		q{SELECT string_agg(format('%s:%s:%s:%s', budget, scope, enforce, databases), ' ' ORDER BY budget) FROM dbgate.budgets}
	),
	'u_one:statement:t:{} u_three:statement:t:{} u_two:transaction:f:{u_other}',
	'a 1.1 database in the same cluster shows the 1.1 fields');
is( $node->safe_psql(
		'postgres', q{SELECT max_queued FROM dbgate.budgets WHERE budget = 'u_two'}),
	'4',
	'the 1.0 database sees the change made from the 1.1 database');

# the update to 1.1
$node->safe_psql('postgres', "ALTER EXTENSION dbgate UPDATE TO '1.1'");
extversion_is('postgres', '1.1', 'ALTER EXTENSION dbgate UPDATE TO 1.1');

my $all_sql =
  q{SELECT string_agg(format('%s:%s:%s:%s:%s:%s:%s:%s:%s', budget, max_active, max_queued,
	  fair, roles, scope, parallel_workers, enforce, databases), ' ' ORDER BY budget)
	FROM dbgate.budgets};
my $all = 'u_one:2:3:f:{u_alice}:statement:-1:t:{} '
  . 'u_three:1:0:t:{}:statement:-1:t:{} '
  . 'u_two:1:4:t:{}:transaction:-1:f:{u_other}';
is($node->safe_psql('postgres', $all_sql),
	$all, 'budgets and assignments are kept, the 1.1 columns are there');
my $cols_sql = q{SELECT string_agg(attname, ',' ORDER BY attnum) FROM pg_attribute
	WHERE attrelid = 'dbgate.budgets'::regclass AND attnum > 0};
is( $node->safe_psql('postgres', $cols_sql),
	'budget,max_active,max_queued,queue_timeout,statement_timeout,lock_timeout,fair,roles,'
	  . 'scope,idle_in_transaction_timeout,parallel_workers,utility,enforce,databases',
	'dbgate.budgets has the 1.1 columns in order');
is( $node->safe_psql(
		'postgres',
		q{SELECT string_agg(p.oid::regprocedure::text, ' ' ORDER BY 1)
		  FROM pg_proc p WHERE p.pronamespace = 'dbgate'::regnamespace
		   AND proname IN ('create_budget', 'alter_budget', 'assign_database', 'unassign_database', 'budget_config')}
	),
	join(' ',
		'dbgate.alter_budget(text,integer,integer,interval,interval,interval,boolean,text,interval,integer,boolean,boolean)',
		'dbgate.assign_database(name,text)',
		'dbgate.budget_config()',
		'dbgate.create_budget(text,integer,integer,interval,interval,interval,boolean,text,interval,integer,boolean,boolean)',
		'dbgate.unassign_database(name)'),
	'the 1.1 functions replace the 1.0 ones');
no_helper_left_ok('1_0', 'no helper of the update script is left');
grants_kept_ok('postgres',
	'EXECUTE grants are carried over to the new signatures, PUBLIC has none');
dependents_kept_ok('u_one u_three u_two',
	'pg_monitor still reads the view and its function, PUBLIC does not',
	'a view on dbgate.budgets survives the update');

($state) = run_sql($node,
	q{SELECT dbgate.create_budget('u_four', 1, utility => true)},
	user => 'u_admin');
is($state, '', 'the delegated administrator uses the 1.1 function');
$node->safe_psql(
	'postgres', q{
	SELECT dbgate.assign_database('postgres', 'u_four');
	SELECT dbgate.alter_budget('u_four', parallel_workers => 2);
});

$node->restart;
is( $node->safe_psql(
		'postgres',
		q{SELECT format('%s:%s:%s', utility, parallel_workers, databases) FROM dbgate.budgets WHERE budget = 'u_four'}
	),
	't:2:{postgres}',
	'1.1 fields and database assignments survive a restart');

# ---------------------------------------------------------------------------
# 1.1 -> 1.2
my $sig_sql = q{SELECT string_agg(p.oid::regprocedure::text, ' ' ORDER BY 1)
	  FROM pg_proc p WHERE p.pronamespace = 'dbgate'::regnamespace
	   AND proname IN ('create_budget', 'alter_budget', 'budget_config')};
my $sigs_1_2 = join(' ',
	'dbgate.alter_budget(text,integer,integer,interval,interval,interval,boolean,text,interval,integer,boolean,boolean,text,interval,text,integer,double precision,integer,integer,double precision)',
	'dbgate.budget_config()',
	'dbgate.create_budget(text,integer,integer,interval,interval,interval,boolean,text,interval,integer,boolean,boolean,text,interval,text,integer,double precision,integer,integer,double precision)'
);
my $cols_1_2 =
    'budget,max_active,max_queued,queue_timeout,statement_timeout,lock_timeout,fair,roles,'
  . 'scope,idle_in_transaction_timeout,parallel_workers,utility,enforce,databases,'
  . 'queue_order,overtake_limit,parent,weight,max_rate,rate_burst,max_memory_mb,min_cost';
my $new_sql = q{SELECT string_agg(format('%s:%s:%s:%s:%s:%s:%s:%s:%s', budget, queue_order,
	  overtake_limit, coalesce(parent, '-'), weight, max_rate, rate_burst, max_memory_mb,
	  min_cost), ' ' ORDER BY budget) FROM dbgate.budgets};
my $everything = q{SELECT string_agg(b::text, ' ' ORDER BY budget) FROM dbgate.budgets b};

my $before_1_2 = $node->safe_psql('postgres', $everything);
$node->safe_psql('postgres', "ALTER EXTENSION dbgate UPDATE TO '1.2'");
extversion_is('postgres', '1.2', 'ALTER EXTENSION dbgate UPDATE TO 1.2 goes from 1.1 to 1.2');
is($node->safe_psql('postgres', $cols_sql), $cols_1_2,
	'dbgate.budgets has the 1.2 columns in order');
is($node->safe_psql('postgres', $sig_sql), $sigs_1_2, 'the 1.2 functions replace the 1.1 ones');
is( $node->safe_psql(
		'postgres',
		q{SELECT string_agg(b::text, ' ' ORDER BY budget) FROM
		    (SELECT budget, max_active, max_queued, queue_timeout, statement_timeout, lock_timeout,
		            fair, roles, scope, idle_in_transaction_timeout, parallel_workers, utility,
		            enforce, databases FROM dbgate.budgets) b}
	),
	$before_1_2,
	'every budget and assignment is kept');
is( $node->safe_psql('postgres', $new_sql),
	join(' ', map { "$_:fifo:00:00:00.1:-:1:0:1:0:0" } qw(u_four u_one u_three u_two)),
	'the 1.2 fields are at their defaults: the budgets are flat');
grants_kept_ok('postgres',
	'EXECUTE grants are carried over to the 1.2 signatures, PUBLIC has none');
no_helper_left_ok('1_1', 'no helper of the update script is left');
dependents_kept_ok('u_four u_one u_three u_two',
	'pg_monitor still reads the view and its function, PUBLIC does not',
	'a view on dbgate.budgets survives the update');

($state, undef, $err) = run_sql($node,
	q{SELECT dbgate.create_budget('u_pool', 4, weight => 2)},
	user => 'u_admin');
is($state, '', 'the delegated administrator uses the 1.2 function') or diag($err);
$node->safe_psql(
	'postgres', q{
	SELECT dbgate.alter_budget('u_three', parent => 'u_pool', max_rate => 2.5, min_cost => 10);
});

# ---------------------------------------------------------------------------
# The 1.1 objects of u_other, served by the 1.2 library: the 1.1 signatures
# work and keep the 1.2 fields, the 1.1 view shows its 14 columns
$node->safe_psql(
	'u_other', q{
	SELECT dbgate.alter_budget('u_three', max_queued => 9, enforce => false);
	SELECT dbgate.create_budget('u_five', 1, scope => 'transaction');
});
is( $node->safe_psql(
		'postgres',
		q{SELECT format('%s:%s:%s:%s:%s:%s', max_queued, enforce, parent, max_rate, min_cost, weight)
		  FROM dbgate.budgets WHERE budget = 'u_three'}
	),
	'9:f:u_pool:2.5:10:1',
	'alter_budget of a 1.1 database keeps the 1.2 fields it does not know');
is( $node->safe_psql(
		'postgres',
		q{SELECT format('%s:%s:%s', scope, queue_order, parent IS NULL) FROM dbgate.budgets WHERE budget = 'u_five'}
	),
	'transaction:fifo:t',
	'create_budget of a 1.1 database gives the 1.2 fields their defaults');
is($node->safe_psql('u_other', $ncols_sql), '14', 'the 1.1 view has 14 columns');
is($node->safe_psql('u_other', q{SELECT string_agg(budget, ' ' ORDER BY budget) FROM dbgate.budgets}),
	'u_five u_four u_one u_pool u_three u_two',
	'and every budget, also the 1.2 ones');

# ---------------------------------------------------------------------------
# 1.0 -> 1.2 in one step
$node->safe_psql('postgres', 'CREATE DATABASE u_old');
$node->safe_psql(
	'u_old', qq{
	$create_1_0
	SELECT dbgate.alter_budget('u_pool', max_active => 5);
	CREATE VIEW u_old_names AS SELECT budget, roles FROM dbgate.budgets;
});
is( $node->safe_psql(
		'postgres', q{SELECT format('%s:%s', max_active, weight) FROM dbgate.budgets WHERE budget = 'u_pool'}),
	'5:2',
	'alter_budget of a 1.0 database keeps the fields it does not know');
my $before_old = $node->safe_psql('postgres', $everything);
$node->safe_psql('u_old', "ALTER EXTENSION dbgate UPDATE TO '1.2'");
extversion_is('u_old', '1.2', 'ALTER EXTENSION dbgate UPDATE TO 1.2 goes from 1.0 to 1.2');
is($node->safe_psql('u_old', $cols_sql), $cols_1_2, 'with the 1.2 columns');
is($node->safe_psql('u_old', $sig_sql), $sigs_1_2, 'and the 1.2 functions');
grants_kept_ok('u_old', 'EXECUTE grants are carried over from 1.0 to the 1.2 signatures');
is($node->safe_psql('u_old', $everything), $before_old, 'every budget and assignment is kept');
is( $node->safe_psql('u_old', q{SELECT string_agg(budget, ' ' ORDER BY budget) FROM u_old_names}),
	'u_five u_four u_one u_pool u_three u_two',
	'a view on dbgate.budgets survives the update');

# ---------------------------------------------------------------------------
# 1.2 -> 1.3 (postgres), with u_old staying at 1.2 beside it
my $sigs_1_3 = $sigs_1_2;
$sigs_1_3 =~ s/double precision\)/double precision,integer,text,integer,integer,double precision,integer,interval,text,text,interval,text,integer)/g;
my $cols_1_3 = "$cols_1_2,reserved,key_by,key_max_active,key_max_queued,key_max_rate,key_rate_burst,runaway_after,runaway_action,runaway_budget,quarantine,adapt,adapt_min";
my $bcols_sql = q{SELECT string_agg(attname, ',' ORDER BY attnum) FROM pg_attribute
	WHERE attrelid = 'dbgate.backends'::regclass AND attnum > 0};
my $bcols_1_2 = 'pid,role,budget,state,state_since,queue_position,classified_by,memory_mb';
my $bcols_1_3 = "$bcols_1_2,key,key_overflow,demoted_from";
$node->safe_psql('postgres', q{SELECT dbgate.alter_budget('u_pool', max_active => 6)});
my $before_1_3 = $node->safe_psql('postgres', $everything);
$node->safe_psql('postgres', 'ALTER EXTENSION dbgate UPDATE');
extversion_is('postgres', '1.3', 'ALTER EXTENSION dbgate UPDATE goes from 1.2 to 1.3');
is($node->safe_psql('postgres', $cols_sql), $cols_1_3,
	'dbgate.budgets has the 1.3 columns in order');
is($node->safe_psql('postgres', $sig_sql), $sigs_1_3, 'the 1.3 functions replace the 1.2 ones');
is($node->safe_psql('postgres', $bcols_sql), $bcols_1_3,
	'dbgate.backends has the 1.3 columns in order');
is( $node->safe_psql(
		'postgres', q{SELECT string_agg(attname, ',' ORDER BY attnum) FROM pg_attribute
	WHERE attrelid = 'dbgate.status'::regclass AND attnum > 26}),
	'keys,keys_overflowed,runaways,demoted_out,demoted_in,quarantined,adaptive_limit',
	'dbgate.status has the 1.3 columns after memory_mb_active, in order');
is( $node->safe_psql(
		'postgres', q{SELECT has_table_privilege('pg_monitor', 'dbgate.keys', 'SELECT')
	|| '/' || has_table_privilege('public', 'dbgate.keys', 'SELECT')}),
	'true/false', 'dbgate.keys is new, readable by pg_monitor and not by PUBLIC');
is( $node->safe_psql(
		'postgres',
		q{SELECT p.prosrc FROM pg_proc p WHERE p.pronamespace = 'dbgate'::regnamespace
		   AND p.proname = 'backend_status'}
	),
	'dbgate_backend_status_1_3',
	'backend_status() is the 1.3 function');
is( $node->safe_psql(
		'postgres',
		q{SELECT has_function_privilege('pg_monitor', 'dbgate.backend_status()', 'EXECUTE'),
		         has_table_privilege('pg_monitor', 'dbgate.backends', 'SELECT'),
		         has_function_privilege('public', 'dbgate.backend_status()', 'EXECUTE'),
		         has_table_privilege('public', 'dbgate.backends', 'SELECT'),
		         (SELECT count(*) FROM dbgate.backends)}
	),
	't|t|f|f|0',
	'pg_monitor reads dbgate.backends after the 1.3 update, PUBLIC does not');
is( $node->safe_psql(
		'postgres',
		q{SELECT string_agg(b::text, ' ' ORDER BY budget) FROM
		    (SELECT budget, max_active, max_queued, queue_timeout, statement_timeout, lock_timeout,
		            fair, roles, scope, idle_in_transaction_timeout, parallel_workers, utility,
		            enforce, databases, queue_order, overtake_limit, parent, weight, max_rate,
		            rate_burst, max_memory_mb, min_cost FROM dbgate.budgets) b}
	),
	$before_1_3,
	'every budget and assignment is kept');
is($node->safe_psql('postgres', q{SELECT string_agg(DISTINCT format('%s:%s:%s:%s:%s:%s:%s', reserved, runaway_after, runaway_action, runaway_budget, quarantine, adapt, adapt_min), ',') FROM dbgate.budgets}),
	'0:00:00:00:log::00:00:00:off:1', 'the 1.3 fields are at their defaults');
is( $node->safe_psql(
		'postgres',
		q{SELECT string_agg(DISTINCT format('%s:%s:%s:%s:%s', key_by, key_max_active, key_max_queued,
		    key_max_rate, key_rate_burst), ',') FROM dbgate.budgets}
	),
	':0:0:0:1',
	'and so are the key fields');
grants_kept_ok('postgres',
	'EXECUTE grants are carried over to the 1.3 signatures, PUBLIC has none');
no_helper_left_ok('1_2', 'no helper of the 1.3 update script is left');
dependents_kept_ok('u_five u_four u_one u_pool u_three u_two',
	'pg_monitor still reads the view after the 1.3 update, PUBLIC does not',
	'a view on dbgate.budgets survives the 1.3 update');
($state, undef, $err) = run_sql($node,
	q{SELECT dbgate.alter_budget('u_three', reserved => 1)},
	user => 'u_admin');
is($state, '', 'the delegated administrator uses the 1.3 function') or diag($err);
($state, undef, $err) = run_sql($node,
	q{SELECT dbgate.alter_budget('u_four', key_by => 'setting:app.tenant', key_max_queued => 3)},
	user => 'u_admin');
is($state, '', 'and its key fields') or diag($err);

# the 1.2 objects of u_old, served by the 1.3 library
$node->safe_psql('u_old',
	q{SELECT dbgate.alter_budget('u_three', max_queued => 7, min_cost => 20)});
is( $node->safe_psql(
		'postgres',
		q{SELECT format('%s:%s:%s:%s', max_queued, min_cost, parent, reserved)
		  FROM dbgate.budgets WHERE budget = 'u_three'}
	),
	'7:20:u_pool:1',
	'alter_budget of a 1.2 database keeps the 1.3 fields it does not know');
is($node->safe_psql('u_old', $ncols_sql), '22', 'the 1.2 view has 22 columns');
is($node->safe_psql('u_old', $bcols_sql), $bcols_1_2,
	'the 1.2 dbgate.backends has its 8 columns');
is($node->safe_psql('u_old', 'SELECT count(*) FROM dbgate.backends'),
	'0', 'and reads');
$node->safe_psql('postgres',
	q{SELECT dbgate.alter_budget('u_two', runaway_after => '1s', runaway_action => 'demote',
	                             runaway_budget => 'u_one')});
$node->safe_psql('u_old', q{SELECT dbgate.alter_budget('u_two', max_queued => 5)});
is( $node->safe_psql(
		'postgres',
		q{SELECT format('%s:%s:%s:%s', max_queued, runaway_after, runaway_action, runaway_budget)
		  FROM dbgate.budgets WHERE budget = 'u_two'}
	),
	'5:00:00:01:demote:u_one',
	"alter_budget of a 1.2 database keeps runaway_action 'demote'");
$node->safe_psql('u_old', q{SELECT dbgate.alter_budget('u_four', max_queued => 4)});
is( $node->safe_psql(
		'postgres',
		q{SELECT format('%s:%s:%s', max_queued, key_by, key_max_queued)
		  FROM dbgate.budgets WHERE budget = 'u_four'}
	),
	'4:setting:app.tenant:3',
	'alter_budget of a 1.2 database keeps key_by and the key fields');
like( $node->safe_psql('postgres', 'SELECT dbgate.config_script()'),
	qr/create_budget\('u_four', [^\n]*key_by => 'setting:app.tenant', key_max_queued => 3\);/,
	'config_script() names key_by and key_max_queued where they are set');
like( $node->safe_psql('postgres', 'SELECT dbgate.config_script()'),
	qr/create_budget\('u_three', max_active => 1, max_queued => 7, .*reserved => 1\);/,
	'config_script() names reserved where it is set');
unlike( $node->safe_psql('postgres', 'SELECT dbgate.config_script()'),
	qr/create_budget\('u_(one|two|four|five)',[^\n]*reserved/,
	'and only there');

# 1.0 -> 1.3 in one step
$node->safe_psql('postgres', 'CREATE DATABASE u_older');
$node->safe_psql('u_older', $create_1_0);
$node->safe_psql('u_older', 'ALTER EXTENSION dbgate UPDATE');
extversion_is('u_older', '1.3', 'ALTER EXTENSION dbgate UPDATE goes from 1.0 to 1.3');
is($node->safe_psql('u_older', $cols_sql), $cols_1_3, 'with the 1.3 columns');
is($node->safe_psql('u_older', $sig_sql), $sigs_1_3, 'and the 1.3 functions');
is($node->safe_psql('u_older', $bcols_sql), $bcols_1_3, 'and the 1.3 dbgate.backends');
grants_kept_ok('u_older', 'EXECUTE grants are carried over from 1.0 to the 1.3 signatures');
is($node->safe_psql('u_older', $everything), $node->safe_psql('postgres', $everything),
	'it sees the same budgets');

$node->restart;
is( $node->safe_psql(
		'postgres',
		q{SELECT format('%s:%s:%s', parent, max_rate, min_cost) FROM dbgate.budgets WHERE budget = 'u_three'}
	),
	'u_pool:2.5:20',
	'1.2 fields survive a restart');
is($node->safe_psql('postgres', q{SELECT reserved FROM dbgate.budgets WHERE budget = 'u_three'}),
	'1', 'and so does reserved');
is( $node->safe_psql(
		'postgres',
		q{SELECT format('%s:%s', runaway_action, runaway_budget) FROM dbgate.budgets WHERE budget = 'u_two'}
	),
	'demote:u_one',
	"and runaway_action 'demote' with its runaway_budget");
is( $node->safe_psql(
		'postgres', q{SELECT format('%s:%s', key_by, key_max_queued) FROM dbgate.budgets WHERE budget = 'u_four'}),
	'setting:app.tenant:3',
	'and key_by with the key fields');

$node->stop;
done_testing();
