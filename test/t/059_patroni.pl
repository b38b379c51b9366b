# dbgate in a cluster managed by Patroni: an etcd server and three
# Patroni nodes on loopback ports, each server with
# shared_preload_libraries = 'dbgate,pg_stat_statements' and
# use_pg_rewind on.  The test starts and stops every process itself,
# also when it fails.
#
#   1. Budgets (a parent and two children, role assignments, a 'demote'
#      runaway target, a default budget) created on the leader: every
#      replica shows the same config_script() and refuses with 53300 a
#      statement of a full budget for its own sessions, counted there
#      only; a quarantine entry added on a replica stays on that replica.
#   2. patronictl switchover while pgbench runs through a budget: the new
#      leader has the configuration and takes a change, the old leader
#      streams from it and replays it; pgbench never meets dbgate's 53300
#      (only PostgreSQL's connection errors, counted); after the load no
#      slot or queue place is counted on any node.
#   3. The leader's postmaster killed alone (kill -9): its Patroni starts
#      it again in place, no failover, crash recovery with the
#      configuration intact and every counter at 0.  Then the node lost:
#      its walsenders stopped (SIGSTOP) so that a change committed on it
#      reaches no replica, then kill -9 of its Patroni and of all its
#      server processes, under the pgbench load; Patroni promotes a
#      replica once the leader key expires; the old leader's Patroni,
#      started again, rejoins it through pg_rewind, and all three have
#      the newest configuration committed on the new timeline: the lost
#      change (three calls in one transaction) is nowhere, not even in
#      part, although the old leader's state file held it before the
#      rewind.
#   4. dbgate.max_budgets and dbgate.default_budget through Patroni's
#      dynamic configuration (patronictl edit-config): the default
#      budget is in force on every node after Patroni's reload, the
#      budget table's size after the restart of the pending nodes
#      (patronictl restart --pending); a replica whose own configuration
#      has a smaller max_budgets keeps what fits, with the WARNING, and
#      the whole configuration again once the setting is gone.
#
# Every assertion waits for the state it checks (Patroni's REST API,
# pg_stat_replication, dbgate.status): Patroni's ttl and loop_wait only
# make things happen, each wait gets $patience seconds.  The figures
# (pgbench's connection errors at the switchover and at the failover,
# slots left counted after each drain, config_script() compared at the
# end of each phase) are printed at the end.
#
# Needs Debian's patroni, etcd-server and python3-etcd (Patroni's etcd3
# client); without them the test is skipped with the reason.
use strict;
use warnings FATAL => 'all';

use FindBin;
use lib "$FindBin::RealBin/../perl";
use DbgateTest;
use File::Basename qw(dirname basename);
use File::Path qw(make_path);
use HTTP::Tiny;
use IPC::Run ();
use JSON::PP ();
use POSIX ();
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

# --- what the test needs --------------------------------------------------

sub in_path
{
	my ($prog) = @_;
	for my $d (split /:/, $ENV{PATH})
	{
		return "$d/$prog" if $d ne '' && -x "$d/$prog";
	}
	return undef;
}

my %bin = map { $_ => in_path($_) } qw(patroni patronictl etcd pg_ctl pgbench pg_rewind);
plan skip_all => 'Patroni is not installed (Debian package patroni)'
  unless $bin{patroni} && $bin{patronictl};
plan skip_all => 'etcd is not installed (Debian package etcd-server)'
  unless $bin{etcd};
for my $prog (qw(pg_ctl pgbench pg_rewind))
{
	plan skip_all => "$prog is not in PATH" unless $bin{$prog};
}
{
	my ($out, $err) = ('', '');
	IPC::Run::run([ 'python3', '-c', 'import etcd, psycopg2' ],
		'>', \$out, '2>', \$err);
	plan skip_all =>
	  "Patroni's etcd3 client cannot be loaded (Debian package python3-etcd): $err"
	  if $? != 0;
}

my $bindir = dirname($bin{pg_ctl});
my $patience = 3 * $PostgreSQL::Test::Utils::timeout_default;
my $scope = 'dbgate59';
my $superuser = (getpwuid($<))[0];
my $log_path = $PostgreSQL::Test::Utils::log_path;
my $work = PostgreSQL::Test::Utils::tempdir();
my $sockdir = PostgreSQL::Test::Utils::tempdir_short();
my $testname = basename($0);
$testname =~ s/\.[^.]+$//;
my $t_start = time;

# --- processes the test starts -------------------------------------------

# name => pid of every process the test started and has not reaped
my %procs;

# spawn(NAME, LOG, CMD...): start CMD with stdin /dev/null and both
# output streams appended to LOG; a pid file in $work names it for
# check.sh's clean-up after a test that could not clean up itself.
sub spawn
{
	my ($name, $log, @cmd) = @_;
	my $pid = fork;
	die "fork: $!" unless defined $pid;
	if ($pid == 0)
	{
		open(STDIN, '<', '/dev/null');
		open(STDOUT, '>>', $log) or POSIX::_exit(126);
		open(STDERR, '>&', \*STDOUT);
		$ENV{LC_ALL} = 'C.UTF-8';
		exec(@cmd) or POSIX::_exit(127);
	}
	$procs{$name} = $pid;
	PostgreSQL::Test::Utils::append_to_file("$work/$name.pid", "$pid\n");
	return $pid;
}

sub alive { my ($pid) = @_; return $pid && kill(0, $pid); }

# reap(NAME, SECONDS): wait up to SECONDS for NAME to exit; 1 if it did
sub reap
{
	my ($name, $secs) = @_;
	my $pid = $procs{$name} // return 1;
	my $end = time + $secs;
	while (time < $end)
	{
		if (waitpid($pid, POSIX::WNOHANG()) != 0)
		{
			delete $procs{$name};
			unlink "$work/$name.pid";
			return 1;
		}
		usleep(100_000);
	}
	return 0;
}

sub stop_proc
{
	my ($name, $secs) = @_;
	return unless defined $procs{$name};
	kill 'TERM', $procs{$name};
	return if reap($name, $secs);
	diag("$name did not stop within $secs s: SIGKILL");
	kill 'KILL', $procs{$name};
	reap($name, 10);
	return;
}

my @nodes;    # PostgreSQL::Test::Cluster objects of the Patroni-managed servers

sub postmaster_pid
{
	my ($node) = @_;
	open(my $fh, '<', $node->data_dir . '/postmaster.pid') or return undef;
	my $pid = <$fh>;
	close $fh;
	chomp $pid if defined $pid;
	return (defined $pid && $pid =~ /^\d+$/ && kill(0, $pid)) ? $pid : undef;
}

# Everything stops, also after a failure or a die: the load, the Patroni
# nodes (each stops its server), servers left without their Patroni, etcd.
# This END runs before PostgreSQL::Test::Cluster's, which stops any server
# still running after a failure.
sub stop_everything
{
	stop_proc('pgbench_load', 30);
	# all Patroni nodes at once: each stops its server
	my @patroni = sort grep { /^patroni_/ } keys %procs;
	kill 'TERM', $procs{$_} for @patroni;
	stop_proc($_, 60) for @patroni;
	for my $node (@nodes)
	{
		my $pid = postmaster_pid($node);
		next unless $pid;
		diag("server " . $node->name . " (pid $pid) left running: immediate stop");
		kill 'QUIT', $pid;
	}
	stop_proc('etcd', 30);
	return;
}

END
{
	my $rc = $?;
	stop_everything();
	$? = $rc;
}

$SIG{TERM} = $SIG{INT} = sub { die "killed by signal\n"; };

# --- polling --------------------------------------------------------------

# wait_for(WHAT, CODE): call CODE every 0.2 s until it returns true, for at
# most $patience seconds; errors inside CODE count as false.
sub wait_for
{
	my ($what, $code) = @_;
	my $end = time + $patience;
	my $last_err = '';
	while (1)
	{
		my $r = eval { $code->() };
		$last_err = $@ if $@;
		return 1 if $r;
		if (time > $end)
		{
			diag("gave up after $patience s waiting for $what"
				  . ($last_err ne '' ? ": $last_err" : ''));
			return 0;
		}
		usleep(200_000);
	}
}

# sql(NODE, SQL [, user]): the output, or undef when the node cannot be
# reached or the statement fails ($sql_err then has psql's stderr).  The
# superuser's statements run in the node's poll session (poll_psql: one
# psql and one backend for the many polls of this test, opened again
# after Patroni restarted or demoted the node); a role's in a new session.
my $sql_err = '';

sub sql
{
	my ($node, $q, $user) = @_;
	if (!defined $user)
	{
		my $out = eval { poll_psql($node, $q) };
		$sql_err = $@ // '';
		return $out;
	}
	my ($out, $err, $timed_out) = ('', '', 0);
	my $ret = $node->psql(
		'postgres', $q,
		stdout => \$out,
		stderr => \$err,
		timeout => $PostgreSQL::Test::Utils::timeout_default,
		timed_out => \$timed_out,
		extra_params => [ '-v', 'ON_ERROR_STOP=1', '-U', $user ]);
	$sql_err = $timed_out ? 'timed out' : $err;
	return (defined $ret && $ret == 0 && !$timed_out) ? $out : undef;
}

sub ctl
{
	my (@args) = @_;
	my ($out, $err) = ('', '');
	IPC::Run::run([ $bin{patronictl}, '-c', "$work/patronictl.yml", @args ],
		'<', \'', '>', \$out, '2>', \$err,
		IPC::Run::timeout($patience));
	return ($? >> 8, $out, $err);
}

sub node_named { my ($n) = @_; return (grep { $_->name eq $n } @nodes)[0]; }

# healthy(LEADER): LEADER is Patroni's leader, accepts writes and both
# other nodes stream from it and are in recovery.
sub healthy
{
	my ($leader) = @_;
	my $m = members();
	return 0 unless ($m->{ $leader->name }{role} // '') eq 'leader';
	return 0 unless (sql($leader, 'SELECT pg_is_in_recovery()') // '') eq 'f';
	my @others = grep { $_ != $leader } @nodes;
	my $streaming = sql($leader,
		q{SELECT string_agg(application_name, ',' ORDER BY application_name)
		    FROM pg_stat_replication WHERE state = 'streaming'}) // '';
	return 0 unless $streaming eq join(',', sort map { $_->name } @others);
	for my $o (@others)
	{
		return 0 unless (sql($o, 'SELECT pg_is_in_recovery()') // '') eq 't';
	}
	return 1;
}

sub leader_node
{
	my $m = members();
	my @l = grep { ($m->{$_}{role} // '') eq 'leader' } keys %$m;
	return @l == 1 ? node_named($l[0]) : undef;
}

# the configuration as every node sees it; phase => 'same' / 'differs'
my %config_figure;

sub config_of { return sql($_[0], 'SELECT dbgate.config_script()'); }

# same_config_ok(PHASE): every node shows the leader's config_script();
# returns it
sub same_config_ok
{
	my ($phase, $leader) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	my @s;
	my $ok = wait_for(
		"the same config_script() on every node ($phase)",
		sub {
			@s = map { config_of($_) } ($leader, grep { $_ != $leader } @nodes);
			return !grep { !defined $_ || $_ ne $s[0] } @s;
		});
	$config_figure{$phase} = $ok ? 'identical' : 'differs';
	ok($ok, "$phase: config_script() is the same on all three nodes")
	  or diag(join("\n---\n", map { $_ // '(none)' } @s));
	return $s[0];
}

# slots(NODE) -> "active:queued:backends" summed over dbgate.status
sub slots
{
	my ($node) = @_;
	return sql($node,
		q{SELECT coalesce(sum(active), 0) || ':' || coalesce(sum(queued), 0)
		   || ':' || (SELECT count(*) FROM dbgate.backends) FROM dbgate.status});
}

my %drain_figure;

sub drained_ok
{
	my ($phase) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	my %got;
	my $ok = wait_for(
		"no slot counted on any node ($phase)",
		sub {
			%got = map { $_->name => slots($_) // 'unreachable' } @nodes;
			return !grep { $_ ne '0:0:0' } values %got;
		});
	$drain_figure{$phase} =
	  join(', ', map { "$_ $got{$_}" } sort keys %got);
	ok($ok, "$phase: no slot or queue place is counted on any node after the drain (active:queued:backends)")
	  or diag($drain_figure{$phase});
	return;
}

# --- the cluster ------------------------------------------------------------

my @pgport = map { PostgreSQL::Test::Cluster::get_free_port() } 1 .. 3;
my @restport = map { PostgreSQL::Test::Cluster::get_free_port() } 1 .. 3;
my $etcd_client = PostgreSQL::Test::Cluster::get_free_port();

# members() -> { name => { role, state, tl, pending } }: Patroni's view of
# the cluster, what `patronictl list` shows (both are cluster_as_json() of
# a fresh read from etcd), from the REST API (GET /cluster) of the first
# node whose Patroni answers.  The waits poll it every 0.2 s: a patronictl
# call, a Python start-up, took about 0.3 CPU seconds.
my $rest_http = HTTP::Tiny->new(timeout => 5);

sub members
{
	for my $port (@restport)
	{
		my $r = $rest_http->get("http://127.0.0.1:$port/cluster");
		next unless $r->{success};
		my $c = eval { JSON::PP::decode_json($r->{content}) };
		next unless ref($c) eq 'HASH' && ref($c->{members}) eq 'ARRAY';
		my %m;
		for my $mb (@{ $c->{members} })
		{
			$m{ $mb->{name} } = {
				role => lc($mb->{role} // ''),
				state => $mb->{state},
				tl => $mb->{timeline},
				pending => $mb->{pending_restart} ? 1 : 0
			};
		}
		return \%m;
	}
	return {};
}
my $etcd_peer = PostgreSQL::Test::Cluster::get_free_port();

for my $i (0 .. 2)
{
	my $node = PostgreSQL::Test::Cluster->new('node' . ($i + 1), port => $pgport[$i]);
	# Patroni's servers listen on 127.0.0.1 and in $sockdir
	$node->{_host} = $sockdir;
	push @nodes, $node;
}

# patroni_yml(I, EXTRA): node I's configuration; EXTRA are more lines of
# its own postgresql.parameters (local configuration, which wins over the
# dynamic one)
sub patroni_yml
{
	my ($i, $extra) = @_;
	my $node = $nodes[$i];
	my $name = $node->name;
	my $logfile = basename($node->logfile);
	my $data = $node->data_dir;
	my $yml = <<"EOT";
scope: $scope
name: $name
log:
  level: INFO
restapi:
  listen: 127.0.0.1:$restport[$i]
  connect_address: 127.0.0.1:$restport[$i]
etcd3:
  hosts: 127.0.0.1:$etcd_client
watchdog:
  mode: 'off'
bootstrap:
  dcs:
    ttl: 20
    loop_wait: 1
    retry_timeout: 5
    maximum_lag_on_failover: 67108864
    postgresql:
      use_pg_rewind: true
      use_slots: true
      parameters:
        shared_preload_libraries: 'dbgate,pg_stat_statements'
        dbgate.max_quarantine: 100
        wal_keep_size: '256MB'
        fsync: 'off'
  initdb:
  - encoding: UTF8
  - no-locale
postgresql:
  listen: 127.0.0.1:$pgport[$i]
  connect_address: 127.0.0.1:$pgport[$i]
  data_dir: '$data'
  bin_dir: '$bindir'
  pgpass: '$work/$name.pgpass'
  authentication:
    superuser:
      username: '$superuser'
    replication:
      username: '$superuser'
    rewind:
      username: '$superuser'
  pg_hba:
  - local all all trust
  - host all all 127.0.0.1/32 trust
  - host replication all 127.0.0.1/32 trust
  parameters:
    unix_socket_directories: '$sockdir'
    logging_collector: 'on'
    log_directory: '$log_path'
    log_filename: '$logfile'
    log_rotation_age: 0
    log_rotation_size: 0
    log_line_prefix: '%m [%p] %q%a '
EOT
	$yml .= $extra // '';
	open(my $fh, '>', "$work/$name.yml") or die "$work/$name.yml: $!";
	print $fh $yml;
	close $fh;
	return "$work/$name.yml";
}

# Patroni's output; it has the server's own until the logging collector
# runs (a WARNING of dbgate's while it loads the state file at start)
sub patroni_log
{
	my ($node) = @_;
	return "$log_path/${testname}_" . $node->name . '_patroni.log';
}

# output_since(NODE, [SERVER_LOG_OFFSET, PATRONI_LOG_OFFSET]): what the
# server and its Patroni logged since the offsets (log_offsets())
sub log_offsets
{
	my ($node) = @_;
	return [ -s $node->logfile // 0, -s patroni_log($node) // 0 ];
}

sub output_since
{
	my ($node, $off) = @_;
	return PostgreSQL::Test::Utils::slurp_file($node->logfile, $off->[0])
	  . PostgreSQL::Test::Utils::slurp_file(patroni_log($node), $off->[1]);
}

sub start_patroni
{
	my ($i) = @_;
	my $name = $nodes[$i]->name;
	return spawn("patroni_$name", patroni_log($nodes[$i]), $bin{patroni},
		"$work/$name.yml");
}

PostgreSQL::Test::Utils::append_to_file("$work/patronictl.yml",
	"scope: $scope\netcd3:\n  hosts: 127.0.0.1:$etcd_client\n");

make_path("$work/etcd");
spawn('etcd', "$log_path/${testname}_etcd.log", $bin{etcd},
	'--name', 'etcd59',
	'--data-dir', "$work/etcd",
	'--listen-client-urls', "http://127.0.0.1:$etcd_client",
	'--advertise-client-urls', "http://127.0.0.1:$etcd_client",
	'--listen-peer-urls', "http://127.0.0.1:$etcd_peer",
	'--initial-advertise-peer-urls', "http://127.0.0.1:$etcd_peer",
	'--initial-cluster', "etcd59=http://127.0.0.1:$etcd_peer",
	'--initial-cluster-state', 'new');
my $http = HTTP::Tiny->new(timeout => 5);
ok( wait_for(
		'etcd to answer',
		sub {
			my $r = $http->get("http://127.0.0.1:$etcd_client/health");
			return $r->{success} && $r->{content} =~ /"health"\s*:\s*"true"/;
		}),
	'etcd is up on a loopback port');

for my $i (0 .. 2)
{
	patroni_yml($i);
	start_patroni($i);
}
my $leader;
ok( wait_for(
		'a leader with two streaming replicas',
		sub { $leader = leader_node(); return $leader && healthy($leader); }),
	'Patroni bootstraps one leader and two streaming replicas')
  or BAIL_OUT('the Patroni cluster did not come up');
note('bootstrapped in ' . sprintf('%.0f', time - $t_start) . ' s; leader ' . $leader->name);

is(sql($_, 'SHOW shared_preload_libraries'), 'dbgate,pg_stat_statements',
	$_->name . ': dbgate and pg_stat_statements are preloaded')
  for @nodes;

# --- 1. configuration replicated and enforced on the replicas ------------

$leader->safe_psql(
	'postgres', q{
	CREATE EXTENSION dbgate;
	CREATE EXTENSION pg_stat_statements;
	CREATE ROLE pgb LOGIN;
	CREATE ROLE rep LOGIN;
	CREATE ROLE other LOGIN;
	CREATE TABLE pgb_t (id int PRIMARY KEY, n bigint NOT NULL DEFAULT 0);
	INSERT INTO pgb_t (id) SELECT generate_series(1, 100);
	GRANT SELECT, UPDATE ON pgb_t TO pgb;
	BEGIN;
	SELECT dbgate.create_budget('pool', 4);
	SELECT dbgate.create_budget('oltp', 2, max_queued => 64, parent => 'pool');
	SELECT dbgate.create_budget('report', 1, parent => 'pool');
	SELECT dbgate.create_budget('slow', 1, max_queued => 8);
	SELECT dbgate.create_budget('fallback', 1, max_queued => 8);
	SELECT dbgate.alter_budget('report', runaway_after => '1h',
		runaway_action => 'demote', runaway_budget => 'slow');
	SELECT dbgate.assign_role('pgb', 'oltp');
	SELECT dbgate.assign_role('rep', 'report');
	COMMIT;
});
my $conf1 = same_config_ok('phase 1', $leader);
like($conf1,
	qr/create_budget\('oltp', max_active => 2, max_queued => 64, parent => 'pool'\).*alter_budget\('report', runaway_action => 'demote', runaway_budget => 'slow'\).*assign_role\('pgb', 'oltp'\)/s,
	'phase 1: the script has the tree, the demote target and the assignments');

# full_on_ok(NODE): a statement of rep holds report's only slot (B = 1,
# Q = 0) on NODE until it is canceled; the next one is refused with 53300
sub full_on_ok
{
	my ($node, $what) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	$node->safe_psql('postgres', 'SELECT dbgate.reset_stats()');
	my $holder = DbgateTest::Session->new($node, user => 'rep');
	$holder->send('SELECT pg_sleep(600)');
	ok($node->poll_query_until('postgres',
			"SELECT active FROM dbgate.status WHERE budget = 'report'", '1'),
		"$what: a statement of rep holds report's only slot");
	my ($st) = run_sql($node, 'SELECT 1', user => 'rep');
	is($st, '53300', "$what: the next statement of rep is refused (53300)");
	$node->safe_psql('postgres', 'SELECT pg_cancel_backend(' . $holder->pid . ')');
	my (undef, undef, $hst) = $holder->result;
	is($hst, '57014', "$what: the holder ends by the test's cancel");
	$holder->quit;
	return;
}

my @replicas = grep { $_ != $leader } @nodes;
$leader->safe_psql('postgres', 'SELECT dbgate.reset_stats()');
full_on_ok($_, 'phase 1, replica ' . $_->name) for @replicas;
is($leader->safe_psql('postgres',
		q{SELECT admitted || ':' || rejected_full FROM dbgate.status WHERE budget = 'report'}),
	'0:0', 'phase 1: the replicas\' statements count on the replicas only');
is(join(' ', map { sql($_, q{SELECT rejected_full FROM dbgate.status WHERE budget = 'report'}) } @replicas),
	'1 1', 'phase 1: each replica counted its own refusal');

# the quarantine is per server: an entry added on a replica stays there
is(sql($replicas[0], q{SELECT dbgate.quarantine_add('report', 5959, '1h')}), '',
	'phase 1: quarantine_add works on a replica') or diag($sql_err);
is(join(' ', map { sql($_, 'SELECT count(*) FROM dbgate.quarantine') } @nodes),
	join(' ', map { $_ == $replicas[0] ? 1 : 0 } @nodes),
	'phase 1: the entry is on that replica only');
is(sql($replicas[0], 'SELECT dbgate.quarantine_remove()'), '1',
	'phase 1: and is removed there');

# --- the pgbench load -------------------------------------------------------

# Each transaction also holds an oltp slot for 10 ms (pg_sleep): with 4
# clients and max_active 2, two statements run and the others queue at
# every moment of the switchover and the failover, at a few hundred
# statements a second instead of as many as the CPUs allow (the
# unthrottled load took most of this test's CPU).
my $pgb_script = "$work/pgb.sql";
PostgreSQL::Test::Utils::append_to_file($pgb_script, <<'EOT');
\set id random(1, 100)
UPDATE pgb_t SET n = n + 1 WHERE id = :id;
SELECT sum(n) FROM pgb_t;
SELECT pg_sleep(0.01);
EOT
my $conninfo = 'host=' . join(',', ('127.0.0.1') x 3)
  . ' port=' . join(',', @pgport)
  . ' dbname=postgres user=pgb target_session_attrs=read-write connect_timeout=5';
my $load_log;
my $load_no = 0;

# start_load(): pgbench runs of 1 s one after the other (4 clients, 2
# threads) against whichever node accepts writes, until stop_load(); a run
# whose clients lost their connection or could not connect is followed by
# the next one 0.2 s later.  Each run's output, exit status and times go
# to the log.
sub start_load
{
	$load_no++;
	$load_log = "$log_path/${testname}_pgbench_$load_no.log";
	unlink "$work/stop_load";
	my $loop = <<"EOT";
while [ ! -e '$work/stop_load' ]; do
	echo "pgbench start at \$(date +%s.%N)"
	'$bin{pgbench}' -n -T 1 -c 4 -j 2 -f '$pgb_script' '$conninfo'
	rc=\$?
	echo "pgbench exit status \$rc at \$(date +%s.%N)"
	[ \$rc -eq 0 ] || sleep 0.2
done
EOT
	spawn('pgbench_load', $load_log, 'sh', '-c', $loop);
	return;
}

# stop_load() -> { runs, failed_runs, aborted, connect_failed, processed,
# budget_errors, outage }: pgbench's runs, those that failed, its clients
# that lost their connection, its runs that could not connect at their
# start (exit status 1), the transactions, dbgate's errors it met, and
# the seconds from the end of the first run that failed to the start of
# the first run after it that did not
sub stop_load
{
	PostgreSQL::Test::Utils::append_to_file("$work/stop_load", '');
	ok(reap('pgbench_load', $patience), 'the pgbench load stops');
	my $log = PostgreSQL::Test::Utils::slurp_file($load_log);
	my %f = (runs => 0, failed_runs => 0, aborted => 0, connect_failed => 0,
		processed => 0, budget_errors => 0, outage => 0);
	my ($first_fail, $started);
	for my $line (split /\n/, $log)
	{
		if ($line =~ /^pgbench start at ([\d.]+)$/)
		{
			$started = $1;
			if (defined $first_fail && !$f{outage_done})
			{
				# the start of a run after a failure: the outage lasts
				# until one of them succeeds
				$f{outage_start_candidate} = $started;
			}
		}
		elsif ($line =~ /^pgbench exit status (\d+) at ([\d.]+)$/)
		{
			$f{runs}++;
			if ($1 != 0)
			{
				$f{failed_runs}++;
				$f{connect_failed}++ if $1 == 1;
				$first_fail //= $2;
			}
			elsif (defined $first_fail && !$f{outage_done})
			{
				$f{outage} = $f{outage_start_candidate} - $first_fail;
				$f{outage_done} = 1;
			}
		}
	}
	$f{aborted}++ while $log =~ /client \d+ (?:script \d+ )?aborted/g;
	$f{processed} += $1 while $log =~ /number of transactions actually processed: (\d+)/g;
	$f{budget_errors}++ while $log =~ /budget "[^"]*"/g;
	return \%f;
}

sub oltp_admitted
{
	my ($node) = @_;
	return sql($node, q{SELECT admitted FROM dbgate.status WHERE budget = 'oltp'}) // -1;
}

# load_seen_ok(NODE, WHAT): the load is admitted by NODE's budget oltp: 20
# more admissions than when called
sub load_seen_ok
{
	my ($node, $what) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	my $base = oltp_admitted($node);
	$base = 0 if $base < 0;
	ok(wait_for("pgbench admitted by oltp on " . $node->name,
			sub { return oltp_admitted($node) >= $base + 20; }),
		"$what: pgbench's statements go through budget oltp on " . $node->name);
	return;
}

# --- 2. switchover under the load ----------------------------------------

start_load();
load_seen_ok($leader, 'phase 2, before the switchover');
my $old = $leader;
my $cand = $replicas[0];
my ($rc, $out, $err) =
  ctl('switchover', $scope, '--leader', $old->name, '--candidate', $cand->name, '--force');
is($rc, 0, 'phase 2: patronictl switchover succeeds') or diag("$out\n$err");
ok(wait_for('the candidate to lead with both others streaming', sub { healthy($cand) }),
	'phase 2: ' . $cand->name . ' leads, ' . $old->name . ' and the other replica stream from it');
$leader = $cand;
load_seen_ok($leader, 'phase 2, after the switchover');
my $load2 = stop_load();
is($load2->{budget_errors}, 0,
	'phase 2: pgbench met no dbgate error (its errors are PostgreSQL\'s connection errors)');
cmp_ok($load2->{processed}, '>', 0, 'phase 2: pgbench ran transactions');

my $conf_new = $leader->safe_psql('postgres', 'SELECT dbgate.config_script()');
is($conf_new, $conf1, 'phase 2: the new leader has the configuration');
my ($st) = run_sql($leader, q{SELECT dbgate.alter_budget('oltp', max_queued => 65)});
is($st, '', 'phase 2: the new leader takes a change');
my $conf2 = same_config_ok('phase 2', $leader);
like($conf2, qr/create_budget\('oltp', max_active => 2, max_queued => 65, parent => 'pool'\)/,
	'phase 2: the old leader replayed the change made on the new one');
drained_ok('phase 2');

# --- 3a. the leader's postmaster killed alone ------------------------------

my $patroni_pid = $procs{ 'patroni_' . $leader->name };
full_on_ok($leader, 'phase 3, leader before its crash');
my $holder = DbgateTest::Session->new($leader, user => 'rep');
$holder->send('SELECT pg_sleep(600)');
ok($leader->poll_query_until('postgres',
		"SELECT active FROM dbgate.status WHERE budget = 'report'", '1'),
	'phase 3: a statement holds report\'s slot on the leader when its postmaster is killed');
my $pm = postmaster_pid($leader);
my $crash_off = log_offsets($leader);
kill 'KILL', $pm;
ok(wait_for('the server to run again under a new postmaster',
		sub { my $p = postmaster_pid($leader); return $p && $p != $pm && healthy($leader); }),
	'phase 3: Patroni starts the killed server again and it leads with both replicas streaming');
# the holder's connection was lost with the server: psql ends
$holder->wait_exit;
ok(alive($patroni_pid) && $procs{ 'patroni_' . $leader->name } == $patroni_pid,
	'phase 3: the same Patroni process (it was not killed)');
my $still = leader_node();
is($still ? $still->name : 'none', $leader->name, 'phase 3: no failover: the same node leads');
# Patroni 4 starts the server, which recovers; Patroni 3.0 recovers it
# in single-user mode first, starts it as a standby and promotes it
like(output_since($leader, $crash_off),
	qr/was not properly shut down; automatic recovery in progress|doing crash recovery in a single user mode/,
	'phase 3: the server went through crash recovery');
is($leader->safe_psql('postgres', 'SELECT dbgate.config_script()'), $conf2,
	'phase 3: the budgets are intact after the crash restart');
is($leader->safe_psql('postgres',
		q{SELECT string_agg(budget || ':' || active || ':' || admitted || ':' || rejected_full, ' ' ORDER BY budget) FROM dbgate.status}),
	'fallback:0:0:0 oltp:0:0:0 pool:0:0:0 report:0:0:0 slow:0:0:0',
	'phase 3: every counter starts from 0 after the crash restart');
full_on_ok($leader, 'phase 3, leader after its crash');

# --- 3b. the leader lost, a change with it ----------------------------------

# C1: a change every node has
($st) = run_sql($leader, q{SELECT dbgate.alter_budget('slow', max_queued => 9)});
is($st, '', 'phase 3: a change C1 on the leader');
my $conf_c1 = same_config_ok('phase 3, C1', $leader);

start_load();
load_seen_ok($leader, 'phase 3, before the failover');

# the walsenders stopped: what the leader commits from now on reaches no
# replica
my $lost = $leader;
my @ws = split /\n/,
  $lost->safe_psql('postgres', 'SELECT pid FROM pg_stat_replication ORDER BY pid');
is(scalar(@ws), 2, 'phase 3: two walsenders on the leader');
kill 'STOP', @ws;
ok(wait_for('the walsenders to be stopped',
		sub { return !grep { (PostgreSQL::Test::Utils::slurp_file("/proc/$_/stat") =~ /^\d+ \(.*\) (\S)/)[0] ne 'T' } @ws; }),
	'phase 3: the walsenders are stopped');
# C2: three calls in one transaction, committed on the leader only
($st) = run_sql($lost, q{BEGIN;
	SELECT dbgate.create_budget('lost', 1);
	SELECT dbgate.alter_budget('oltp', max_active => 3);
	SELECT dbgate.assign_role('other', 'lost');
	COMMIT;});
is($st, '', 'phase 3: a change C2 committed on the leader');
like($lost->safe_psql('postgres', 'SELECT dbgate.config_script()'), qr/'lost'/,
	'phase 3: the leader has C2');
is(join(' ', map { (config_of($_) // '') eq $conf_c1 ? 'C1' : 'other' } grep { $_ != $lost } @nodes),
	'C1 C1', 'phase 3: the replicas have C1 and not C2');

# the node lost: its Patroni, its postmaster and every server process
my $lost_pm = postmaster_pid($lost);
my @children;
for my $stat (glob '/proc/[0-9]*/stat')
{
	my $s = eval { PostgreSQL::Test::Utils::slurp_file($stat) } // next;
	push @children, $1 if $s =~ /^(\d+) \(.*\) \S (\d+)/ && $2 == $lost_pm;
}
kill 'KILL', $procs{ 'patroni_' . $lost->name };
reap('patroni_' . $lost->name, 30);
kill 'KILL', $lost_pm;
kill 'KILL', @children;
my $t_lost = time;
my $new;
ok( wait_for(
		'a replica promoted by Patroni',
		sub {
			my $l = leader_node();
			return 0 unless $l && $l != $lost;
			return 0 unless (sql($l, 'SELECT pg_is_in_recovery()') // '') eq 'f';
			$new = $l;
			return 1;
		}),
	'phase 3: Patroni promotes a replica once the leader key expires');
my $t_promoted = time;
my ($third) = grep { $_ != $lost && $_ != $new } @nodes;
ok(wait_for('the third node to stream from the new leader',
		sub {
			return (sql($new, q{SELECT string_agg(application_name, ',') FROM pg_stat_replication WHERE state = 'streaming'}) // '') eq $third->name;
		}),
	'phase 3: the other replica streams from the new leader');
load_seen_ok($new, 'phase 3, after the failover');
my $load3 = stop_load();
is($load3->{budget_errors}, 0, 'phase 3: pgbench met no dbgate error');
is(config_of($new) // '', $conf_c1, 'phase 3: the new leader has C1 and not C2');

# C3 on the new timeline, before the old leader comes back
($st) = run_sql($new, q{SELECT dbgate.alter_budget('slow', max_queued => 11)});
is($st, '', 'phase 3: the new leader takes a change C3');

# The old leader's state file holds C2, which no WAL of the new timeline
# has (budget names are stored as they are).
my $state_file = $lost->data_dir . '/dbgate.state';
like(PostgreSQL::Test::Utils::slurp_file($state_file), qr/lost/,
	'phase 3: the old leader\'s state file holds C2, ahead of the WAL the new leader has');

# the old leader's Patroni started again: it rewinds the node and follows
my $off = log_offsets($lost);
start_patroni((grep { $nodes[$_] == $lost } 0 .. 2)[0]);
ok(wait_for('the old leader to rejoin', sub { healthy($new) }),
	'phase 3: the old leader rejoins as a replica of the new leader');
my $rejoin = output_since($lost, $off);
like($rejoin, qr/pg_rewind exit code=0/, 'phase 3: the old leader was rewound by pg_rewind');
my @loaded = $rejoin =~ /(dbgate loaded \d+ budgets, \d+ role assignments)/g;
is($loaded[-1] // '', 'dbgate loaded 5 budgets, 2 role assignments',
	'phase 3: the rewound server started from the new leader\'s state file (pg_rewind copies it), without C2');
unlike(PostgreSQL::Test::Utils::slurp_file($state_file), qr/lost/,
	'phase 3: the rewound node\'s state file has no C2');
my $conf3 = same_config_ok('phase 3', $new);
like($conf3, qr/create_budget\('slow', max_active => 1, max_queued => 11\)/,
	'phase 3: the configuration everywhere is the newest committed one (C3)');
is(join(' ', map { sql($_, q{SELECT count(*) FILTER (WHERE budget = 'lost') || ':' || max(max_active) FILTER (WHERE budget = 'oltp') || ':' || count(*) FILTER (WHERE 'other' = ANY (roles)) FROM dbgate.budgets}) // 'unreachable' } @nodes),
	'0:2:0 0:2:0 0:2:0',
	'phase 3: no part of C2 on any node (no budget lost, oltp\'s max_active 2, no assignment of other)');
note("the rewound node's log lines that name dbgate:\n"
	  . join("\n", grep { /dbgate/ } split /\n/, $rejoin));
full_on_ok($lost, 'phase 3, the rewound node');
drained_ok('phase 3');
$leader = $new;

# --- 4. GUCs through Patroni's dynamic configuration -----------------------

($rc, $out, $err) = ctl('edit-config', $scope, '--force', '--quiet',
	'-p', 'dbgate.max_budgets=16', '-p', 'dbgate.default_budget=fallback');
is($rc, 0, 'phase 4: patronictl edit-config takes dbgate.max_budgets and dbgate.default_budget')
  or diag("$out\n$err");

# a replica with a smaller dbgate.max_budgets of its own
my ($small) = grep { $_ != $leader } @nodes;
my $small_i = (grep { $nodes[$_] == $small } 0 .. 2)[0];
patroni_yml($small_i, "    dbgate.max_budgets: 3\n");
kill 'HUP', $procs{ 'patroni_' . $small->name };

# setting_is(NODE, GUC, VALUE, PENDING): the server runs with VALUE and
# its pending_restart is PENDING ('t' or 'f')
sub setting_is
{
	my ($node, $name, $value, $pending) = @_;
	return (sql($node, "SELECT setting || ':' || pending_restart::int FROM pg_settings WHERE name = '$name'") // '')
	  eq "$value:" . ($pending eq 't' ? 1 : 0);
}

# pending_ok(WHAT, NAME => VALUE of max_budgets in the files of each node
# named): Patroni wrote VALUE into the node's configuration, the server
# read it and waits for a restart, and Patroni reports that
sub pending_ok
{
	my ($what, %want) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	ok( wait_for(
			$what,
			sub {
				my $m = members();
				for my $name (keys %want)
				{
					my $n = node_named($name);
					return 0 unless (sql($n,
						q{SELECT setting FROM pg_file_settings WHERE name = 'dbgate.max_budgets' ORDER BY seqno DESC LIMIT 1}) // '')
					  eq $want{$name};
					return 0 unless (sql($n, q{SELECT pending_restart FROM pg_settings WHERE name = 'dbgate.max_budgets'}) // '') eq 't';
					return 0 unless $m->{$name}{pending};
				}
				return 1;
			}),
		$what);
	return;
}
pending_ok('phase 4: dbgate.max_budgets is in every node\'s configuration, 3 on '
	  . $small->name . ', and waits for a restart (pg_settings, patronictl list)',
	map { $_->name => ($_ == $small ? 3 : 16) } @nodes);
ok(wait_for('dbgate.default_budget on every node',
		sub { return !grep { !setting_is($_, 'dbgate.default_budget', 'fallback', 'f') } @nodes; }),
	'phase 4: dbgate.default_budget is in force on every node after Patroni\'s reload');
my %fb_before = map { $_->name => sql($_, q{SELECT admitted FROM dbgate.status WHERE budget = 'fallback'}) } @nodes;
for my $n (@nodes)
{
	my ($fst) = run_sql($n, 'SELECT 1', user => 'other');
	is($fst, '', 'phase 4: a statement of the unassigned role other on ' . $n->name);
}
is(join(' ', map { sql($_, q{SELECT admitted FROM dbgate.status WHERE budget = 'fallback'}) - $fb_before{ $_->name } } @nodes),
	'1 1 1', 'phase 4: each node counts it in the default budget fallback');

my $small_off = log_offsets($small);
($rc, $out, $err) = ctl('restart', $scope, '--pending', '--force');
is($rc, 0, 'phase 4: patronictl restart --pending succeeds') or diag("$out\n$err");
ok( wait_for(
		'every node restarted with its max_budgets',
		sub {
			for my $n (@nodes)
			{
				return 0 unless setting_is($n, 'dbgate.max_budgets', $n == $small ? 3 : 16, 'f');
			}
			return healthy($leader);
		}),
	'phase 4: after the restarts dbgate.max_budgets is 16, 3 on ' . $small->name . ', and the cluster is whole');
($st) = run_sql($leader, join('', 'BEGIN; ',
	map({ "SELECT dbgate.create_budget('extra$_', 1); " } 1 .. 12), 'COMMIT;'));
is($st, '53400', 'phase 4: the leader refuses a 17th budget (dbgate.max_budgets = 16)');
like(output_since($small, $small_off),
	qr/WARNING:  dbgate left out 2 of 5 budgets, 1 of 2 role assignments and 0 of 0 database assignments of state file "dbgate\.state"\n.*DETAIL:  This server has dbgate\.max_budgets = 3 and dbgate\.max_roles = \d+\. Budgets left out: "report", "slow"\./,
	'phase 4: the replica with max_budgets 3 warns at its start what it left out (in Patroni\'s output: the logging collector is not running yet)');
is(sql($small, q{SELECT string_agg(budget, ',' ORDER BY budget) FROM dbgate.budgets}),
	'fallback,oltp,pool', 'phase 4: it keeps the budgets that fit, in the order of config_script()');
is($leader->safe_psql('postgres', 'SELECT count(*) FROM dbgate.budgets'), '5',
	'phase 4: the leader has all five');

# the smaller setting gone: the whole configuration again
patroni_yml($small_i);
kill 'HUP', $procs{ 'patroni_' . $small->name };
pending_ok('phase 4: the replica\'s own setting removed, 16 waits for a restart there',
	$small->name => 16);
$small_off = log_offsets($small);
($rc, $out, $err) = ctl('restart', $scope, $small->name, '--force');
is($rc, 0, 'phase 4: patronictl restart of that replica succeeds') or diag("$out\n$err");
ok(wait_for('the replica back with max_budgets 16',
		sub { return setting_is($small, 'dbgate.max_budgets', 16, 'f') && healthy($leader); }),
	'phase 4: the replica runs with max_budgets 16 again');
my $restart_out = output_since($small, $small_off);
unlike($restart_out, qr/dbgate left out/, 'phase 4: no WARNING at that start');
like($restart_out, qr/dbgate loaded 5 budgets, 2 role assignments/,
	'phase 4: it loads all five budgets from its state file');
same_config_ok('phase 4', $leader);
drained_ok('phase 4');

# --- the end ----------------------------------------------------------------

my $t_stop = time;
stop_everything();
ok(!grep({ alive($_) } values %procs) && !grep({ postmaster_pid($_) } @nodes),
	'every process the test started has stopped');

for my $l ([ 'switchover', $load2 ], [ 'failover', $load3 ])
{
	diag(sprintf(
			"figures: pgbench at the %s: %d runs of 1 s, %d with errors: %d clients aborted (connection lost), %d runs could not connect (no node accepted writes; one try per 0.2 s); %.1f s from the first failed run to the first good one; %d transactions; %d dbgate errors",
			$l->[0], @{ $l->[1] }{qw(runs failed_runs aborted connect_failed outage processed budget_errors)}));
}
diag(sprintf('figures: Patroni promoted a replica %.0f s after the node was lost (ttl 20 s)',
		$t_promoted - $t_lost));
diag("figures: slots counted after the drain (active:queued:backends): $_: $drain_figure{$_}")
  for sort keys %drain_figure;
diag("figures: config_script() at the end of $_: $config_figure{$_} on all three nodes")
  for sort keys %config_figure;
diag(sprintf('figures: %.0f s in all, %.0f s to stop', time - $t_start, time - $t_stop));

done_testing();
