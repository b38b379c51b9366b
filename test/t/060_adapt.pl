# The adaptive limit (1.3, src/adapt.c): a budget with adapt = 'on' lowers
# its limit L when its statements crowd the CPUs (M = 16 x the CPUs
# clients of CPU-bound statements on a budget of M: the CPU rule of
# src/adapt.c lowers L while more than 8 x the CPUs run), and admits no
# more than L; one
# whose statements sleep keeps L at max_active; 'shadow' computes L the
# same way and admits as before; configuration changes move L as README.md
# says (raising max_active raises L by as much, lowering clamps it,
# adapt_min bounds it, 'off' forgets it, 'on' again starts at max_active);
# a full budget's 53300 names both limits.
use strict;
use warnings FATAL => 'all';

use FindBin;
use lib "$FindBin::RealBin/../perl";
use DbgateTest;
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

# the load that crowds the CPUs is sized from their number, as the server
# counts them (sysconf(_SC_NPROCESSORS_ONLN))
my $ncpu = ((`getconf _NPROCESSORS_ONLN` // '') =~ /(\d+)/)[0] || 1;
my $M = 16 * $ncpu;
my $half = $M / 2;
my $Q = 4 * $M;
my $maxconn = 2 * $M + 40;
my $node = dbgate_node('adapt',
	conf => "max_wal_senders = 4\nwal_level = replica\nmax_connections = $maxconn\n");
$node->safe_psql(
	'postgres', qq{
	CREATE ROLE ad_cpu LOGIN;
	CREATE ROLE ad_sleep LOGIN;
	CREATE ROLE ad_sh LOGIN;
	CREATE ROLE ad_plain LOGIN;
	SELECT dbgate.create_budget('ad_cpu', $M, $Q, '1 min', adapt => 'on');
	SELECT dbgate.create_budget('ad_sleep', $M, $Q, '1 min', adapt => 'on');
	SELECT dbgate.create_budget('ad_sh', $M, $Q, '1 min', adapt => 'shadow');
	SELECT dbgate.create_budget('ad_plain', $M, $Q, '1 min');
	SELECT dbgate.assign_role(r::regrole, r) FROM unnest(ARRAY['ad_cpu', 'ad_sleep', 'ad_sh', 'ad_plain']) r;
});

sub limit_of
{
	my ($budget) = @_;
	return $node->safe_psql('postgres',
		"SELECT coalesce(adaptive_limit::text, 'NULL') FROM dbgate.status WHERE budget = '$budget'");
}

is(join(' ', map { limit_of($_) } qw(ad_cpu ad_sleep ad_sh ad_plain)),
	"$M $M $M NULL", 'L starts at max_active; NULL without adapt');

my $dir = PostgreSQL::Test::Utils::tempdir;
my $cpu_sql = "$dir/cpu.sql";
my $sleep_sql = "$dir/sleep.sql";
PostgreSQL::Test::Utils::append_to_file($cpu_sql,
	"SELECT count(*) FROM generate_series(1, 300000);\n");
PostgreSQL::Test::Utils::append_to_file($sleep_sql, "SELECT pg_sleep(0.01);\n");

# pgbench with CLIENTS clients of FILE for SECONDS as ROLE, in the background
sub load
{
	my ($role, $file, $clients, $seconds) = @_;
	my ($out, $err) = ('', '');
	my $h = IPC::Run::start(
		[
			'pgbench', '-n', '-c', $clients, '-j', 2, '-T', $seconds,
			'-f', $file, '-h', $node->host, '-p', $node->port,
			'-U', $role, 'postgres'
		],
		'>', \$out, '2>', \$err);
	return { h => $h, out => \$out, err => \$err };
}

sub finish
{
	my ($l) = @_;
	$l->{h}->finish;
	return ${ $l->{out} } =~ /number of transactions actually processed: (\d+)/ ? $1 : 0;
}

# ---------------------------------------------------------------------------
# 1. CPU-bound statements: L falls, and no more than L are active
my $cpu = load('ad_cpu', $cpu_sql, $M, 8);
ok( $node->poll_query_until(
		'postgres',
		qq{SELECT adaptive_limit <= $half FROM dbgate.status WHERE budget = 'ad_cpu'}),
	'CPU-bound: L falls below half of max_active');
# L may have fallen a moment ago, and statements admitted before still run:
# compare with the largest L of the samples of the last 600 ms.  L changes
# at most once a period (250 ms), so samples every 100 ms see every value
# it takes (a rise and a fall between two samples 200 ms apart went
# unseen once); the statement takes well under the 500 ms left.
my $peak_ok = 1;
my @recent = ($M);
my @seen;
for (1 .. 20)
{
	my ($active, $l) = split /\|/, $node->safe_psql('postgres',
		q{SELECT active, adaptive_limit FROM dbgate.status WHERE budget = 'ad_cpu'});
	push @seen, "$active/$l";
	push @recent, $l;
	shift @recent while @recent > 7;
	my $max = (sort { $b <=> $a } @recent)[0];
	$peak_ok = 0 if $active > $max;
	select(undef, undef, undef, 0.1);
}
ok($peak_ok, 'CPU-bound: no more statements are active than L') or diag "@seen";
ok(finish($cpu) > 0, 'CPU-bound: the clients got their work done');
my $l_cpu = limit_of('ad_cpu');
cmp_ok($l_cpu, '>=', 1, "CPU-bound: L settled at $l_cpu");

# ---------------------------------------------------------------------------
# 2. sleep-bound statements: L stays at max_active
my $sleep = load('ad_sleep', $sleep_sql, $M, 4);
ok(finish($sleep) > 0, 'sleep-bound: the clients ran');
is(limit_of('ad_sleep'), $M, 'sleep-bound: L stays at max_active');

# ---------------------------------------------------------------------------
# 3. shadow: L is computed, admission is as without it
$node->safe_psql('postgres', q{SELECT dbgate.reset_stats('ad_sh')});
my $sh = load('ad_sh', $cpu_sql, $M, 6);
ok( $node->poll_query_until(
		'postgres',
		qq{SELECT adaptive_limit <= $half FROM dbgate.status WHERE budget = 'ad_sh'}),
	'shadow: L falls as with on');
finish($sh);
cmp_ok($node->safe_psql('postgres',
		q{SELECT peak_active FROM dbgate.status WHERE budget = 'ad_sh'}),
	'>', limit_of('ad_sh'), 'shadow: more statements ran at once than L');

# ---------------------------------------------------------------------------
# 4. configuration changes
my $l = limit_of('ad_cpu');
$node->safe_psql('postgres', qq{SELECT dbgate.alter_budget('ad_cpu', max_active => @{[$M + 4]})});
is(limit_of('ad_cpu'), $l + 4, 'raising max_active by 4 raises L by 4');
$node->safe_psql('postgres', q{SELECT dbgate.alter_budget('ad_cpu', max_active => 3)});
cmp_ok(limit_of('ad_cpu'), '<=', 3, 'lowering max_active clamps L');
$node->safe_psql('postgres', qq{SELECT dbgate.alter_budget('ad_cpu', max_active => $M, adapt_min => 6)});
cmp_ok(limit_of('ad_cpu'), '>=', 6, 'adapt_min bounds L from below');
$node->safe_psql('postgres', q{SELECT dbgate.alter_budget('ad_cpu', adapt => 'shadow')});
my $l_sh = limit_of('ad_cpu');
$node->safe_psql('postgres', q{SELECT dbgate.alter_budget('ad_cpu', adapt => 'on')});
is(limit_of('ad_cpu'), $l_sh, "'shadow' -> 'on' keeps L");
$node->safe_psql('postgres', q{SELECT dbgate.alter_budget('ad_cpu', adapt => 'off')});
is(limit_of('ad_cpu'), 'NULL', "'off': no L");
$node->safe_psql('postgres', q{SELECT dbgate.alter_budget('ad_cpu', adapt => 'on', adapt_min => 1)});
is(limit_of('ad_cpu'), $M, "'on' again: L starts at max_active");

# ---------------------------------------------------------------------------
# 5. a full budget at its adaptive limit says so
$cpu = load('ad_cpu', $cpu_sql, $M, 6);
ok( $node->poll_query_until(
		'postgres',
		qq{SELECT adaptive_limit <= $half FROM dbgate.status WHERE budget = 'ad_cpu'}),
	'CPU-bound again: L falls');
finish($cpu);
$node->safe_psql('postgres', q{SELECT dbgate.alter_budget('ad_cpu', max_queued => 0)});
$l = limit_of('ad_cpu');
my @holders;
for (1 .. $l)
{
	my $s = DbgateTest::Session->new($node, user => 'ad_cpu');
	$s->send('SELECT pg_sleep(600)');
	push @holders, $s;
}
poll_ok($node, q{SELECT active FROM dbgate.status WHERE budget = 'ad_cpu'},
	$l, "L = $l statements hold every slot");
my ($st, undef, $err) = run_sql($node, 'SELECT 1', user => 'ad_cpu');
is($st, '53300', 'the next one is refused');
like($err, qr/DETAIL:\s+$l of $l statements are active \(its adaptive limit; max_active is $M\)/,
	'and the DETAIL names both limits');
$node->safe_psql('postgres',
	'SELECT pg_cancel_backend(pid) FROM dbgate.backends WHERE budget = \'ad_cpu\'');
$_->quit for @holders;
poll_ok($node, q{SELECT sum(active + queued) FROM dbgate.status}, '0', 'every slot is back');

# ---------------------------------------------------------------------------
# 6. in a tree: a child adapts within its parent's slots (a period in
# which its parent held it back leaves L as it is, so the parent gives it
# as many slots as it may use)
$node->safe_psql(
	'postgres', qq{
	CREATE ROLE ad_kid LOGIN;
	SELECT dbgate.create_budget('ad_top', $M);
	SELECT dbgate.create_budget('ad_kid', $M, $Q, '1 min', parent => 'ad_top', adapt => 'on');
	SELECT dbgate.assign_role('ad_kid', 'ad_kid');
});
my $kid = load('ad_kid', $cpu_sql, $M, 8);
my ($tree_ok, @tree_seen) = (1);
for (1 .. 20)
{
	my $a = $node->safe_psql('postgres',
		q{SELECT active FROM dbgate.status WHERE budget = 'ad_top'});
	push @tree_seen, $a;
	$tree_ok = 0 if $a > $M;
	select(undef, undef, undef, 0.2);
}
ok($tree_ok, "in a tree: the parent never has more than its $M active") or diag "@tree_seen";
ok( $node->poll_query_until(
		'postgres',
		qq{SELECT adaptive_limit < $M FROM dbgate.status WHERE budget = 'ad_kid'}),
	'in a tree: the child adapts below its max_active');
finish($kid);

# ---------------------------------------------------------------------------
# 7. a standby adapts on its own
$node->backup('b1');
my $standby = PostgreSQL::Test::Cluster->new('adapt_standby');
$standby->init_from_backup($node, 'b1', has_streaming => 1);
$standby->start;
is($standby->safe_psql('postgres',
		q{SELECT pg_is_in_recovery() || ':' || adaptive_limit FROM dbgate.status WHERE budget = 'ad_sleep'}),
	"true:$M", 'the standby starts with L at max_active');
{
	my ($out, $err) = ('', '');
	my $h = IPC::Run::start(
		[
			'pgbench', '-n', '-c', $M, '-j', 2, '-T', 8, '-f', $cpu_sql,
			'-h', $standby->host, '-p', $standby->port, '-U', 'ad_sleep', 'postgres'
		],
		'>', \$out, '2>', \$err);
	ok( $standby->poll_query_until(
			'postgres',
			qq{SELECT adaptive_limit <= $half FROM dbgate.status WHERE budget = 'ad_sleep'}),
		'CPU-bound statements on the standby lower its L');
	$h->finish;
}
is(limit_of('ad_sleep'), $M, 'and the primary\'s L stays');
$standby->stop;

$node->stop;
done_testing();
