# The formats of the state file (see src/persist.c):
#   - a file of format 2, as dbgate 1.1 wrote it, loads with the 1.2
#     fields at their defaults (format 1 is 021_config_state_v1);
#   - the encoder writes format 2 while every 1.2 field has its default,
#     format 3 as soon as one does not, each field on its own, and format 4
#     while a 1.3 field (reserved, key_by and the key fields, adapt) is in
#     use;
#   - a format-4 file built byte by byte loads with its reservations and
#     key fields;
#   - format 3 round-trips every field and a hierarchy through a restart,
#     a crash restart and config_script(); a file built here byte by byte
#     loads the same way;
#   - decoding refuses what the SQL functions refuse (a value out of range,
#     the lifo rule, an unknown parent, a cycle, a chain of five, an
#     assignment to a parent, (1.3) a key_by of another form or on a
#     parent, key_max_active over max_active): the file is set aside with a WARNING;
#   - a file of a newer format stops the server from starting, with a
#     message, and is left as it is.
use strict;
use warnings FATAL => 'all';

use FindBin;
use lib "$FindBin::RealBin/../perl";
use DbgateState;
use DbgateTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = dbgate_node('formats');
my $pgdata = $node->data_dir;
my $state = "$pgdata/dbgate.state";
my $corrupt = "$pgdata/dbgate.state.corrupt";
$node->safe_psql('postgres', 'CREATE ROLE fm_alice LOGIN; CREATE ROLE fm_bob LOGIN');
my ($alice, $bob, $dbid) = split /\|/,
  $node->safe_psql(
	'postgres', q{SELECT (SELECT oid FROM pg_roles WHERE rolname = 'fm_alice'),
	                     (SELECT oid FROM pg_roles WHERE rolname = 'fm_bob'),
	                     (SELECT oid FROM pg_database WHERE datname = 'postgres')});

my $all = q{SELECT coalesce(string_agg(b::text, ' ' ORDER BY budget), '')
	FROM dbgate.budgets b};

sub write_file
{
	my ($bytes) = @_;
	open my $fh, '>:raw', $state or die "cannot write $state: $!";
	print $fh $bytes;
	close $fh;
	return;
}

sub file_format
{
	return state_version(slurp_file($state));
}

# ---------------------------------------------------------------------------
# 1. A format-2 file of dbgate 1.1
$node->stop;
write_file(
	state_image(
		version => 2,
		budgets => [
			{
				name => 'fm_v2a',
				max_active => 3,
				max_queued => 1,
				queue_timeout => 1500,
				scope => 1,
				idle_in_transaction_timeout => 30000,
				parallel_workers => 0,
				utility => 1,
				enforce => 0
			},
			{ name => 'fm_v2b', max_active => 1, fair => 0 }
		],
		roles => [ [ $alice, 'fm_v2a' ] ],
		dbs => [ [ $dbid, 'fm_v2b' ] ]));
my $offset = -s $node->logfile;
$node->start;
ok( $node->log_contains(
		qr/dbgate loaded 2 budgets, 1 role assignments and 1 database assignments/,
		$offset),
	'the format-2 file is loaded');
ok(!$node->log_contains(qr/WARNING/, $offset), 'without a warning');
is( $node->safe_psql('postgres', $all),
	'(fm_v2a,3,1,00:00:01.5,00:00:00,00:00:00,t,{fm_alice},transaction,00:00:30,0,t,f,{},'
	  . 'fifo,00:00:00.1,,1,0,1,0,0,0,,0,0,0,1,00:00:00,log,,00:00:00,off,1) '
	  . '(fm_v2b,1,0,00:00:00,00:00:00,00:00:00,f,{},statement,00:00:00,-1,f,t,{postgres},'
	  . 'fifo,00:00:00.1,,1,0,1,0,0,0,,0,0,0,1,00:00:00,log,,00:00:00,off,1)',
	'its budgets and assignments, the 1.2 fields at their defaults');

# ---------------------------------------------------------------------------
# 2. The encoder's choice
$node->safe_psql('postgres', "SELECT dbgate.alter_budget('fm_v2b', max_queued => 2)");
is(file_format(), 2, 'a change that uses no 1.2 field writes format 2');
$node->safe_psql(
	'postgres', q{
	SELECT dbgate.create_budget('fm_p', 4);
	SELECT dbgate.alter_budget('fm_v2b', parent => 'fm_p');
});
is(file_format(), 3, 'a parent: format 3');
$node->safe_psql('postgres', "SELECT dbgate.alter_budget('fm_v2b', parent => '')");
is(file_format(), 2, 'no parent any more: format 2');
for my $set (
	"queue_order => 'lifo'", "overtake_limit => '1 s'",
	'weight => 2', 'max_rate => 5',
	'rate_burst => 2', 'max_memory_mb => 1',
	'min_cost => 0.5')
{
	$node->safe_psql('postgres', "SELECT dbgate.alter_budget('fm_p', $set)");
	is(file_format(), 3, "$set: format 3");
	$node->safe_psql(
		'postgres', q{
		SELECT dbgate.alter_budget('fm_p', queue_order => 'fifo', overtake_limit => '100 ms',
		  weight => 1, max_rate => 0, rate_burst => 1, max_memory_mb => 0, min_cost => 0)});
	is(file_format(), 2, "$set back to its default: format 2");
}
$node->safe_psql('postgres',
	"SELECT dbgate.alter_budget('fm_v2b', parent => 'fm_p', reserved => 1)");
is(file_format(), 4, 'reserved (1.3): format 4');
$node->safe_psql('postgres', "SELECT dbgate.alter_budget('fm_v2b', reserved => 0)");
is(file_format(), 3, 'reserved back to 0, a parent left: format 3');
$node->safe_psql('postgres', "SELECT dbgate.alter_budget('fm_v2b', parent => '')");
is(file_format(), 2, 'and no parent: format 2');
for my $set ("key_by => 'user'", "key_by => 'setting:app.tenant'", 'key_max_queued => 3',
	'key_max_rate => 5', 'key_rate_burst => 2')
{
	$node->safe_psql('postgres', "SELECT dbgate.alter_budget('fm_v2b', $set)");
	is(file_format(), 4, "$set (1.3): format 4");
	$node->safe_psql('postgres',
		"SELECT dbgate.alter_budget('fm_v2b', key_by => '', key_max_queued => 0, key_max_rate => 0, key_rate_burst => 1)");
	is(file_format(), 2, "$set back to its default: format 2");
}
for my $set ("adapt => 'shadow'", "adapt => 'on'", 'max_active => 2, adapt_min => 2')
{
	$node->safe_psql('postgres', "SELECT dbgate.alter_budget('fm_v2b', $set)");
	is(file_format(), 4, "$set (1.3): format 4");
	$node->safe_psql('postgres',
		"SELECT dbgate.alter_budget('fm_v2b', adapt => 'off', adapt_min => 1, max_active => 1)");
	is(file_format(), 2, "$set back to its default: format 2");
}

for my $set ("runaway_after => '1 s'", "runaway_after => '1 s', runaway_action => 'cancel'",
	"runaway_after => '1 s', quarantine => '1 min'", "runaway_budget => 'fm_p'",
	"runaway_after => '1 s', runaway_action => 'demote', runaway_budget => 'fm_p'")
{
	$node->safe_psql('postgres', "SELECT dbgate.alter_budget('fm_v2b', $set)");
	is(file_format(), 4, "$set (1.3): format 4");
	$node->safe_psql('postgres',
		"SELECT dbgate.alter_budget('fm_v2b', quarantine => '0', runaway_after => '0', runaway_action => 'log', runaway_budget => '')"
	);
	is(file_format(), 2, "$set back to its default: format 2");
}

# ---------------------------------------------------------------------------
# 3. Format 3 round-trips: restart, crash restart, config_script()
$node->safe_psql(
	'postgres', q{
	SELECT dbgate.drop_budget(budget, force => true) FROM dbgate.budgets;
	SELECT dbgate.create_budget('fm_root', 20, 5, '2 s', '1 min', '3 s', false,
	  'transaction', '45 s', 3, true, false, 'lifo', '0', NULL, 17, 0.1, 9, 4096, 1e-3);
	SELECT dbgate.create_budget('fm_b', 10, parent => 'fm_root', weight => 10000,
	  max_rate => 1000000, rate_burst => 1000000, overtake_limit => '2147483647 ms');
	SELECT dbgate.create_budget('fm_a', 5, parent => 'fm_b', max_rate => 333.3333333333333,
	  min_cost => 1e308, max_memory_mb => 2147483647);
	SELECT dbgate.create_budget('fm_0', 1, parent => 'fm_a', queue_order => 'lifo',
	  queue_timeout => '1 ms', overtake_limit => '0', max_rate => 0.01);
	SELECT dbgate.create_budget('fm_flat', 1);
	SELECT dbgate.assign_role('fm_alice', 'fm_0');
	SELECT dbgate.assign_role('fm_bob', 'fm_flat');
	SELECT dbgate.assign_database('postgres', 'fm_0');
});
is(file_format(), 3, 'every 1.2 field in use: format 3');
my $before = $node->safe_psql('postgres', $all);
my $script = $node->safe_psql('postgres', 'SELECT dbgate.config_script()');
like($before, qr/\(fm_0,.*,fm_a,.*\(fm_a,.*,fm_b,.*\(fm_b,.*,fm_root,/,
	'a chain of four budgets');

$node->restart;
is($node->safe_psql('postgres', $all), $before, 'format 3 survives a restart');
$node->stop('immediate');
$node->start;
is($node->safe_psql('postgres', $all), $before, 'and a crash restart');
is($node->safe_psql('postgres', 'SELECT dbgate.config_script()'),
	$script, 'config_script() is the same');
$node->safe_psql('postgres',
	'SELECT dbgate.drop_budget(budget, force => true) FROM dbgate.budgets');
is($node->safe_psql('postgres', $all), '', 'all budgets dropped');
my ($sqlstate, undef, $err) = run_sql($node, $script);
is($sqlstate, '', 'the script runs') or diag($err);
is($node->safe_psql('postgres', $all), $before, 'and recreates every field and the hierarchy');

# ---------------------------------------------------------------------------
# 4. A format-3 file built byte by byte
my @tree = (
	{ name => 'fm_t', max_active => 6, max_rate => 2.5, rate_burst => 4 },
	{ name => 'fm_u', max_active => 2, parent => 'fm_t', weight => 3, min_cost => 12.5 },
	{
		name => 'fm_v',
		max_active => 1,
		parent => 'fm_t',
		queue_order => 1,
		overtake_limit => 0,
		queue_timeout => 500,
		max_memory_mb => 64
	});
$node->stop;
write_file(
	state_image(
		version => 3,
		budgets => \@tree,
		roles => [ [ $alice, 'fm_u' ] ],
		dbs => [ [ $dbid, 'fm_v' ] ]));
$offset = -s $node->logfile;
$node->start;
ok(!$node->log_contains(qr/WARNING/, $offset), 'a format-3 file built here loads');
is( $node->safe_psql(
		'postgres',
		q{SELECT string_agg(format('%s<%s:%s:%s:%s:%s:%s:%s:%s:%s:%s:%s', budget, parent,
		    weight, queue_order, overtake_limit, queue_timeout, max_rate, rate_burst,
		    max_memory_mb, min_cost, roles, databases), ' ' ORDER BY budget) FROM dbgate.budgets}
	),
	'fm_t<:1:fifo:00:00:00.1:00:00:00:2.5:4:0:0:{}:{} '
	  . 'fm_u<fm_t:3:fifo:00:00:00.1:00:00:00:0:1:0:12.5:{fm_alice}:{} '
	  . 'fm_v<fm_t:1:lifo:00:00:00:00:00:00.5:0:1:64:0:{}:{postgres}',
	'with every field where the layout puts it');

# a format-4 file: the reservations of a tree (2 + 1 of the parent's 3)
$node->stop;
write_file(
	state_image(
		version => 4,
		budgets => [
			{ name => 'fm_r', max_active => 3 },
			{ name => 'fm_r1', max_active => 2, parent => 'fm_r', reserved => 2, min_cost => 1.5 },
			{ name => 'fm_r2', max_active => 3, parent => 'fm_r', reserved => 1, adapt => 2, adapt_min => 3 },
			{ name => 'fm_r3', max_active => 3, parent => 'fm_r' },
			{
				name => 'fm_k', max_active => 4, key_by => 'setting:app.tenant',
				key_max_active => 2, key_max_queued => 5, key_max_rate => 2.5, key_rate_burst => 3
			}
		],
		keylimits => [
			{ budget => 'fm_k', key => 'tenant 1', max_active => 1, max_rate => 0.5 },
			{ budget => 'fm_k', key => '', max_queued => 0, rate_burst => 7 }
		]));
$offset = -s $node->logfile;
$node->start;
ok(!$node->log_contains(qr/WARNING/, $offset), 'a format-4 file built here loads');
is( $node->safe_psql(
		'postgres',
		q{SELECT string_agg(format('%s<%s:%s:%s:%s:%s:%s', budget, parent, max_active, min_cost,
		    reserved, adapt, adapt_min), ' ' ORDER BY budget) FROM dbgate.budgets}
	),
	'fm_k<:4:0:0:off:1 fm_r<:3:0:0:off:1 fm_r1<fm_r:2:1.5:2:off:1 fm_r2<fm_r:3:0:1:on:3 fm_r3<fm_r:3:0:0:off:1',
	'with reserved where the layout puts it');
is( $node->safe_psql(
		'postgres',
		q{SELECT format('%s:%s:%s:%s:%s', key_by, key_max_active, key_max_queued, key_max_rate,
		    key_rate_burst) FROM dbgate.budgets WHERE budget = 'fm_k'}
	),
	'setting:app.tenant:2:5:2.5:3',
	'and the key fields where the layout puts them');
is( $node->safe_psql(
		'postgres',
		q{SELECT string_agg(format('%s/%s:%s:%s:%s:%s', budget, key, max_active, max_queued,
		    max_rate, rate_burst), ' ' ORDER BY key) FROM dbgate.key_limits}
	),
	'fm_k/::0::7 fm_k/tenant 1:1::0.5:',
	'and its key limits');
is(file_format(), 4, 'and is format 4 as it is');

# a format-4 file: runaway_action 'demote' with its runaway_budget
$node->stop;
write_file(
	state_image(
		version => 4,
		budgets => [
			{
				name => 'fm_d',
				max_active => 2,
				runaway_after => 250,
				runaway_action => 1,
				runaway_budget => 'fm_slow',
				quarantine => 60000
			},
			{ name => 'fm_slow', max_active => 1 }
		]));
$offset = -s $node->logfile;
$node->start;
ok(!$node->log_contains(qr/WARNING/, $offset), "a format-4 file with 'demote' loads");
my $runaway_sql = q{SELECT string_agg(format('%s:%s:%s:%s:%s', budget, runaway_after,
    runaway_action, runaway_budget, quarantine), ' ' ORDER BY budget) FROM dbgate.budgets};
my $runaway_want = 'fm_d:00:00:00.25:demote:fm_slow:00:01:00 fm_slow:00:00:00:log::00:00:00';
is($node->safe_psql('postgres', $runaway_sql), $runaway_want,
	'with the runaway fields where the layout puts them');
$node->restart;
is($node->safe_psql('postgres', $runaway_sql), $runaway_want, 'and they survive a restart');

# ---------------------------------------------------------------------------
# 5. Decoding refuses what the SQL functions refuse
my $inf = 9**9**9;
my $nan = $inf - $inf;
my @refused = (
	[ 'weight 0', [ { name => 'x', weight => 0 } ] ],
	[ 'weight 10001', [ { name => 'x', weight => 10001 } ] ],
	[ 'max_rate 0.001', [ { name => 'x', max_rate => 0.001 } ] ],
	[ 'max_rate NaN', [ { name => 'x', max_rate => $nan } ] ],
	[ 'rate_burst 0', [ { name => 'x', rate_burst => 0 } ] ],
	[ 'max_memory_mb -1', [ { name => 'x', max_memory_mb => -1 } ] ],
	[ 'min_cost -1', [ { name => 'x', min_cost => -1 } ] ],
	[ 'queue_order 2', [ { name => 'x', queue_order => 2 } ] ],
	[ 'overtake_limit -1', [ { name => 'x', overtake_limit => -1 } ] ],
	[ 'a boolean 2', [ { name => 'x', fair => 2 } ] ],
	[
		'lifo without bound',
		[ { name => 'x', queue_order => 1, overtake_limit => 0, queue_timeout => 0 } ]
	],
	[ 'an unknown parent', [ { name => 'x', parent => 'nobody' } ] ],
	[ 'its own parent', [ { name => 'x', parent => 'x' } ] ],
	[
		'a cycle',
		[ { name => 'x', parent => 'y' }, { name => 'y', parent => 'x' } ]
	],
	[
		'a chain of five',
		[
			{ name => 'c1' },
			{ name => 'c2', parent => 'c1' },
			{ name => 'c3', parent => 'c2' },
			{ name => 'c4', parent => 'c3' },
			{ name => 'c5', parent => 'c4' }
		]
	],
	[
		'a role assigned to a parent',
		[ { name => 'x' }, { name => 'y', parent => 'x' } ],
		[ [ $alice, 'x' ] ]
	],
	[
		'a database assigned to a parent',
		[ { name => 'x' }, { name => 'y', parent => 'x' } ],
		[],
		[ [ $dbid, 'x' ] ]
	],
	[ 'reserved -1', [ { name => 'x' }, { name => 'y', parent => 'x', reserved => -1 } ], [], [], 4 ],
	[ 'adapt 3', [ { name => 'x', adapt => 3 } ], [], [], 4 ],
	[ 'runaway_action 3', [ { name => 'x', runaway_action => 3 } ], [], [], 4 ],
	[ 'runaway_after -1', [ { name => 'x', runaway_after => -1 } ], [], [], 4 ],
	[ 'quarantine without runaway_after', [ { name => 'x', quarantine => 1000 } ], [], [], 4 ],
	[ 'demote without runaway_budget', [ { name => 'x', runaway_after => 1000, runaway_action => 1 } ],
		[], [], 4 ],
	[ 'runaway_budget the budget itself', [ { name => 'x', runaway_budget => 'x' } ], [], [], 4 ],
	# a runaway_budget that does not exist is not refused: the load clears
	# it with a WARNING (056_fit_runaway)
	[
		'runaway_budget with children',
		[ { name => 'w', runaway_budget => 'x' }, { name => 'x' }, { name => 'y', parent => 'x' } ],
		[], [], 4
	],
	[ 'adapt_min 0', [ { name => 'x', adapt_min => 0 } ], [], [], 4 ],
	[ 'key_by of another form', [ { name => 'x', key_by => 'role' } ], [], [], 4 ],
	[ 'key_by with an empty setting name', [ { name => 'x', key_by => 'setting:' } ], [], [], 4 ],
	[ 'key_by with children', [ { name => 'x', key_by => 'user' }, { name => 'y', parent => 'x' } ],
		[], [], 4 ],
	[ 'key_max_active -1', [ { name => 'x', key_max_active => -1 } ], [], [], 4 ],
	[ 'key_max_active over max_active', [ { name => 'x', max_active => 2, key_max_active => 3 } ],
		[], [], 4 ],
	[ 'key_max_queued -1', [ { name => 'x', key_max_queued => -1 } ], [], [], 4 ],
	[ 'key_max_rate 0.001', [ { name => 'x', key_max_rate => 0.001 } ], [], [], 4 ],
	[ 'key_rate_burst 0', [ { name => 'x', key_rate_burst => 0 } ], [], [], 4 ],
	[
		'a key limit of a budget without key_by', [ { name => 'x' } ], [], [], 4,
		[ { budget => 'x', key => 'k', max_active => 1 } ]
	],
	[
		'a key limit of a budget that does not exist', [ { name => 'x', key_by => 'user' } ],
		[], [], 4, [ { budget => 'y', key => 'k' } ]
	],
	[
		'a key limit twice', [ { name => 'x', key_by => 'user' } ], [], [], 4,
		[ { budget => 'x', key => 'k' }, { budget => 'x', key => 'k', max_queued => 1 } ]
	],
	[
		'a key limit with rate_burst 0', [ { name => 'x', key_by => 'user' } ], [], [], 4,
		[ { budget => 'x', key => 'k', rate_burst => 0 } ]
	],
	[
		'a key limit with max_rate 0.001', [ { name => 'x', key_by => 'user' } ], [], [], 4,
		[ { budget => 'x', key => 'k', max_rate => 0.001 } ]
	],
	[
		'key limits in format 3', [ { name => 'x' } ], [], [], 3,
		[ { budget => 'x', key => 'k' } ]
	],
	[ 'adapt_min over max_active', [ { name => 'x', max_active => 2, adapt_min => 3 } ], [], [], 4 ],
	[ 'reserved without a parent', [ { name => 'x', max_active => 2, reserved => 1 } ], [], [], 4 ],
	[
		'reserved over max_active',
		[ { name => 'x', max_active => 4 }, { name => 'y', parent => 'x', reserved => 2 } ],
		[], [], 4
	],
	[
		'reservations over the parent\'s max_active',
		[
			{ name => 'x', max_active => 3 },
			{ name => 'y', parent => 'x', max_active => 2, reserved => 2 },
			{ name => 'z', parent => 'x', max_active => 2, reserved => 2 }
		],
		[], [], 4
	]);
for my $case (@refused)
{
	my ($what, $budgets, $roles, $dbs, $version, $keylimits) = @$case;
	my $bytes = state_image(
		version => $version // 3,
		budgets => $budgets,
		roles => $roles // [],
		dbs => $dbs // [],
		keylimits => $keylimits // []);
	$node->stop;
	unlink $corrupt;
	write_file($bytes);
	$offset = -s $node->logfile;
	$node->start;
	ok( $node->log_contains(
			qr/WARNING:  dbgate state file "dbgate\.state" is invalid, starting with no budgets/,
			$offset)
		  && -e $corrupt
		  && $node->safe_psql('postgres', 'SELECT count(*) FROM dbgate.budgets') eq '0',
		"$what: the file is refused and set aside");
}

# ---------------------------------------------------------------------------
# 6. A file of a newer format: the server does not start, the file stays
$node->stop;
unlink $corrupt;
my $newer = state_image(version => 5) . 'written by a newer dbgate';
write_file($newer);
$offset = -s $node->logfile;
is($node->start(fail_ok => 1), 0, 'a newer format: the server does not start');
ok( $node->log_contains(
		qr/FATAL:  dbgate state file "dbgate\.state" has format version 5, which this version of dbgate cannot read/,
		$offset),
	'it says why');
ok($node->log_contains(qr/HINT:  Install the version of dbgate that wrote the file/, $offset),
	'and what to do');
is(slurp_file($state), $newer, 'the file is left as it is');
ok(!-e $corrupt, 'and not set aside');
unlink $state;
$node->start;
is($node->safe_psql('postgres', 'SELECT count(*) FROM dbgate.budgets'),
	'0', 'without the file the server starts, with no budgets');

$node->stop;
done_testing();
