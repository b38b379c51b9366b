# Soak test with fault injection.
#
# 32 client sessions in eight roles and four budgets (plus an ungated role)
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
#           (the sessions' statement_timeout is 2 s) roles soak_a1, soak_a2
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
# Checks: the invariants of every sample (Soak::Check); at the end every
# budget drains and dbgate.backends is empty; the counters of soak_a,
# soak_b and soak_d since the last crash restart agree with what the
# clients observed: per admission, not per statement (a statement under a
# kept slot is no admission and is never queued or rejected), exactly for
# rejections and for sessions ended by the budget's idle timeout
# (terminated_idle), within bounds where a canceled or terminated
# statement may or may not have been admitted; a session idle longer than
# its idle timeout in a transaction that keeps a slot is ended; after each
# crash restart the counters are 0 and the configuration is as committed;
# the server log has no crash other than the deliberate ones.  Figures are
# printed at the end.
#
# Environment:
#   SOAK_SEED=<n>        random seed (default 1); printed at the start
#   SOAK_DURATION=<s>    seconds of load (default 100)
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

use File::Path qw(rmtree);
use POSIX ();
use Time::HiRes qw(time sleep);

BEGIN
{
	if (!eval { require DBI; require DBD::Pg; 1 })
	{
		plan skip_all =>
		  'DBI and DBD::Pg are needed (Debian package libdbd-pg-perl)';
	}
}

use Soak::Common qw(write_epoch dsn);
use Soak::Client;
use Soak::Monitor;
use Soak::Check qw(check_samples scan_log);

my $seed = $ENV{SOAK_SEED} // 1;
my $duration = $ENV{SOAK_DURATION} // ($ENV{SOAK_LONG} ? 480 : 100);
my $ncrashes = $ENV{SOAK_CRASHES} // ($duration >= 300 ? int($duration / 150) : 1);
die "SOAK_SEED must be an integer\n" unless $seed =~ /^\d+$/;
die "SOAK_DURATION must be a number of seconds\n" unless $duration =~ /^\d+$/;
note "soak: SOAK_SEED=$seed SOAK_DURATION=$duration SOAK_CRASHES=$ncrashes";
diag "soak: seed $seed, $duration s of load, $ncrashes crash restart(s); "
  . "repeat the choices with SOAK_SEED=$seed";
srand($seed);

# ---------------------------------------------------------------------
# Cluster, roles, budgets

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
});
$node->start;

my @BUDGETS = qw(soak_a soak_b soak_c soak_d);
my @CHECKED = qw(soak_a soak_b soak_d);    # counters compared with the clients'
my %ROLE_BUDGET = (
	soak_a1 => 'soak_a',
	soak_a2 => 'soak_a',
	soak_b1 => 'soak_b',
	soak_b2 => 'soak_b',
	soak_c1 => 'soak_c',
	soak_c2 => 'soak_c',
	soak_d1 => 'soak_d',
	soak_d2 => 'soak_d');
# role, class, number of sessions, the sessions' own
# idle_in_transaction_session_timeout in ms (taken in turn)
my @SESSIONS = (
	[ soak_a1 => 'a', 6, [0] ],
	[ soak_a2 => 'a', 5, [0] ],
	[ soak_b1 => 'b', 4, [0] ],
	[ soak_b2 => 'b', 3, [0] ],
	[ soak_d1 => 'd', 4, [0] ],
	[ soak_d2 => 'd', 3, [ 250, 60000 ] ],
	[ soak_c1 => 'c', 2, [0] ],
	[ soak_c2 => 'c', 2, [0] ],
	[ soak_free => 'free', 3, [0] ]);
my %QT_MS = (soak_a => 400, soak_b => 0, soak_d => 600);
# soak_c's statement_timeout is 0 or 2 s (see create_c_sql)
my %BUDGET_ST_MS = (soak_a => 0, soak_b => 1500, soak_c => 2000, soak_d => 0);
my %SESSION_ST_MS = (a => 2000, b => 0, c => 3000, d => 3000, free => 3000);
my %SCOPE = (soak_a => 'statement', soak_b => 'statement', soak_d => 'transaction');
# the values soak_d's idle_in_transaction_timeout takes
my @D_IDLE_MS = (500, 800);
my %SENTINEL = (
	soak_a => { max_active => 9 },
	soak_b => { max_queued => 9 },
	soak_d => { max_queued => 9 });

# the committed configuration, as this script knows it
my %cfg = (
	soak_a => { max_active => 2, max_queued => 3 },
	soak_b => { max_active => 1, max_queued => 2 },
	soak_d => { max_active => 2, max_queued => 3, idle_in_transaction_timeout => 500 },
	soak_c => {
		max_active => 2,
		max_queued => 2,
		queue_timeout => 1000,
		statement_timeout => 0,
		lock_timeout => 200,
		fair => 1,
		scope => 'statement',
		idle_in_transaction_timeout => 0
	});
my %c_roles = (soak_c1 => 1, soak_c2 => 1);    # assigned to soak_c
my $c_exists = 1;

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
                            scope => 'statement');
SELECT dbgate.create_budget('soak_b', 1, 2, statement_timeout => '1500ms',
                            lock_timeout => '300ms', fair => false);
SELECT dbgate.create_budget('soak_c', 2, 2, queue_timeout => '1s',
                            lock_timeout => '200ms');
SELECT dbgate.create_budget('soak_d', 2, 3, queue_timeout => '600ms',
                            scope => 'transaction',
                            idle_in_transaction_timeout => '500ms');
};
$setup .= "CREATE ROLE $_->[0] LOGIN;\n" for @SESSIONS;
$setup .= "SELECT dbgate.assign_role('$_', '$ROLE_BUDGET{$_}');\n"
  for sort keys %ROLE_BUDGET;
$setup .= "GRANT soak_free TO $_;\n" for sort keys %ROLE_BUDGET;
# unassigned, soak_c2 falls back to its default budget (while soak_c exists)
$setup .= "ALTER ROLE soak_c2 SET dbgate.default_budget = 'soak_c';\n";
$setup .= "SELECT dbgate.reset_stats();\n";
$node->safe_psql('postgres', $setup);

my $superuser = $node->safe_psql('postgres', 'SELECT current_user');
my ($host, $port) = ($node->host, $node->port);

# ---------------------------------------------------------------------
# Run directory and child processes

my $dir = "$PostgreSQL::Test::Utils::tmp_check/soak";
rmtree($dir);
mkdir $dir or die "$dir: $!";
my $epoch = 0;
write_epoch($dir, $epoch, 'running');

# If the test dies early, stop the children (they also stop on their own
# when this process is gone).
my $main_pid = $$;
my @children;

END
{
	if ($$ == $main_pid && @children)
	{
		for my $f (qw(stop stop-monitor))
		{
			my $fh;
			close $fh if open($fh, '>', "$dir/$f");
		}
		kill 'TERM', @children;
	}
}

# Children never return into the test: no TAP output, no END blocks.
sub spawn
{
	my ($name, $code) = @_;
	my $pid = fork();
	die "fork: $!" unless defined $pid;
	if ($pid)
	{
		push @children, $pid;
		return $pid;
	}
	my $ok = eval { $code->(); 1 };
	if (!$ok)
	{
		print STDERR "$name died: $@";
		if (open(my $fh, '>>', "$dir/died"))
		{
			print $fh "$name: $@\n";
			close $fh;
		}
	}
	POSIX::_exit($ok ? 0 : 1);
}

my $monitor_pid = spawn(
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
			host => $host,
			port => $port,
			dir => $dir,
			seed => $seed * 1000 + $id,
			superuser => $superuser);
		my $pid = spawn("client $id", sub { $client->run });
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
	for my $b (@CHECKED)
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
		  . 'extract(epoch FROM idle_in_transaction_timeout) * 1000 AS it '
		  . 'FROM dbgate.budgets', 'budget');
	return ('cannot read dbgate.budgets: ' . ($admin->errstr // '')) unless $rows;
	my %want = %cfg;
	delete $want{soak_c} unless $c_exists;
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
		my $scope = $cfg{$b}{scope} // $SCOPE{$b};
		push @p, "$b.scope is $r->{scope}, committed $scope"
		  if $r->{scope} ne $scope;
		my $it = $cfg{$b}{idle_in_transaction_timeout} // 0;
		push @p, "$b.idle_in_transaction_timeout is $r->{it} ms, committed $it ms"
		  if abs($r->{it} - $it) > 0.001;
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
	my $want = pick('active', 'active', 'queued', 'queued', 'idle in transaction');
	my $rows = $admin->selectall_arrayref(
		'SELECT pid, state FROM dbgate.backends ORDER BY pid');
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
	$faults{ 'alter ' . ($value < $old ? 'down' : 'up') }++;
	event($t0, "alter $budget $field $old -> $value");
	note_max();
	return;
}

sub alter_ab
{
	my $budget = pick(@CHECKED);
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
# The victim is a backend of soak_a, active or queued (those clients never
# disconnect on their own); the kill counts once the server log reports it.
sub crash
{
	$epoch_status[$epoch] = status_rows($admin);
	write_epoch($dir, $epoch, 'pending');
	my ($victim, $t_kill);
	for my $try (1 .. 20)
	{
		if (!$admin || !$admin->ping)
		{
			sleep 0.2;
			$admin = admin_connect() or next;
		}
		my $rows = $admin->selectall_arrayref(
			"SELECT pid FROM dbgate.backends WHERE role IN ('soak_a1', 'soak_a2') "
			  . 'ORDER BY pid');
		my @pids = map { $_->[0] } @{ $rows // [] };
		if (!@pids)
		{
			sleep 0.05;
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
			last;
		}
		# it exited on its own just before: no crash, try another one
	}
	BAIL_OUT('could not crash the server with kill -9 of a client backend')
	  unless $victim;
	push @killed, $victim;
	fault('crash (kill -9)', "backend $victim");
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
			idle_in_transaction terminated_idle)
		  )
		{
			push @problems, "after the crash restart $b.$c = $st->{$b}{$c}"
			  if $st->{$b}{$c} != 0;
		}
	}
	my ($nb) = $admin->selectrow_array('SELECT count(*) FROM dbgate.backends');
	push @problems, "after the crash restart dbgate.backends has $nb rows"
	  if ($nb // -1) != 0;
	push @problems, map { "after the crash restart: $_" } config_problems();
	$crash_checks[$epoch] = \@problems;

	adm('SELECT dbgate.reset_stats()');
	$epoch++;
	note_max();
	write_epoch($dir, $epoch, 'running');
	event($t_kill, "epoch $epoch running");
	return;
}

my $t_start = time;
my $t_end = $t_start + $duration;
my @crash_at =
  map { $t_start + $duration * (($_ - 0.5) / $ncrashes) * (0.8 + rand(0.3)) }
  1 .. $ncrashes;
while (time < $t_end)
{
	if (@crash_at && time >= $crash_at[0])
	{
		shift @crash_at;
		crash();
		next;
	}
	sleep(0.1 + rand(0.25));
	my $r = rand();
	if ($r < 0.32) { hit_backend('cancel'); }
	elsif ($r < 0.44) { hit_backend('terminate'); }
	elsif ($r < 0.58) { alter_ab(); }
	elsif ($r < 0.68) { churn_c(); }
	elsif ($r < 0.71) { rolled_back_change(); }
	elsif ($r < 0.73) { gate_off_and_on(); }
	if ($r >= 0.44 && $r < 0.71 && rand() < 0.2)
	{
		push @admin_fails, config_problems();
	}
}
my $load_seconds = time - $t_start;

# ---------------------------------------------------------------------
# Stop the load, drain

open(my $stopfh, '>', "$dir/stop") or die "stop: $!";
close $stopfh;
my $t_stop = time;
my @stragglers;
while (%client_pids && time - $t_stop < 90)
{
	my $pid = waitpid(-1, POSIX::WNOHANG());
	if ($pid > 0) { delete $client_pids{$pid}; next; }
	sleep 0.1;
}
for my $pid (sort keys %client_pids)
{
	push @stragglers, $client_pids{$pid};
	kill 'KILL', $pid;
	waitpid($pid, 0);
}
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
	my $busy = grep { $_->{active} != 0 || $_->{queued} != 0 } values %$st;
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
ok($drained{ok}, 'every budget drains to active = 0, queued = 0, and dbgate.backends is empty')
  or diag $drained{detail};

open(my $monfh, '>', "$dir/stop-monitor") or die "stop-monitor: $!";
close $monfh;
waitpid($monitor_pid, 0);
@children = ();

my $final = status_rows($admin);
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

for my $e (0 .. $epoch - 1)
{
	my $p = $crash_checks[$e] // [];
	ok(!@$p, "after crash restart $e every counter is 0 and the configuration is kept")
	  or diag join("\n", @$p);
}

for my $b (@CHECKED)
{
	my $s = $final->{$b};
	my $c = $acct{$epoch}{$b} // {};
	$c->{$_} //= 0 for qw(adm_lo amb full qto lost_unconf attempts idle_term idle_unsure);
	my @p;
	my $range = sub {
		my ($name, $v, $lo, $hi) = @_;
		push @p, "$name = $v, expected " . ($lo == $hi ? $lo : "$lo .. $hi")
		  if $v < $lo || $v > $hi;
	};
	$range->('rejected_full', $s->{rejected_full}, $c->{full}, $c->{full} + $c->{lost_unconf});
	$range->('rejected_timeout', $s->{rejected_timeout}, $c->{qto},
		$c->{qto} + ($QT_MS{$b} ? $c->{lost_unconf} : 0));
	$range->('admitted', $s->{admitted}, $c->{adm_lo}, $c->{adm_lo} + $c->{amb});
	$range->('canceled_waiting', $s->{canceled_waiting}, 0, $c->{amb});
	$range->('admitted + canceled_waiting', $s->{admitted} + $s->{canceled_waiting},
		$c->{adm_lo}, $c->{adm_lo} + $c->{amb});
	# every statement has at most one of these outcomes
	$range->('admitted + canceled_waiting + rejected_full + rejected_timeout',
		$s->{admitted} + $s->{canceled_waiting} + $s->{rejected_full} + $s->{rejected_timeout},
		$c->{adm_lo} + $c->{full} + $c->{qto},
		$c->{adm_lo} + $c->{amb} + $c->{full} + $c->{qto});
	$range->('admitted_after_wait', $s->{admitted_after_wait}, 0, $s->{admitted});
	$range->('admitted_lock_holder', $s->{admitted_lock_holder}, 0,
		$s->{admitted_after_wait} + $s->{canceled_waiting});
	# sessions ended by the budget's idle_in_transaction_timeout
	$range->('terminated_idle', $s->{terminated_idle}, $c->{idle_term},
		$c->{idle_term} + $c->{idle_unsure});
	my $mb = $epoch_max{$epoch}{$b};
	$range->('peak_active', $s->{peak_active}, 0, $mb->{max_active} + $s->{admitted_lock_holder});
	$range->('peak_queued', $s->{peak_queued}, 0, $mb->{max_queued});
	$range->('wait_time_max', $s->{wait_time_max}, 0, $QT_MS{$b} + 2000) if $QT_MS{$b};
	push @p, 'active_time_total is 0 although statements were admitted'
	  if $s->{admitted} > 0 && $s->{active_time_total} <= 0;
	push @p, "no statement was admitted" if $s->{admitted} == 0;
	ok(!@p, "$b: counters since the last restart agree with what the clients saw")
	  or diag join("\n", "$b: " . join(', ', map { "$_ $c->{$_}" } sort keys %$c), @p);
	note sprintf(
		'%s: admitted %d (clients: %d certain + up to %d canceled or terminated), '
		  . 'rejected_full %d (clients: %d), rejected_timeout %d (clients: %d), '
		  . 'canceled_waiting %d, lost results %d, terminated_idle %d (clients: %d), '
		  . 'admitted_lock_holder %d',
		$b, $s->{admitted}, $c->{adm_lo}, $c->{amb}, $s->{rejected_full}, $c->{full},
		$s->{rejected_timeout}, $c->{qto}, $s->{canceled_waiting}, $c->{lost_unconf},
		$s->{terminated_idle}, $c->{idle_term}, $s->{admitted_lock_holder});
}

# ---------------------------------------------------------------------
# Monitor samples

my $mon = check_samples(
	file => "$dir/monitor.samples",
	lowerings => \%lowerings,
	changes => \%changes,
	role_budget => \%ROLE_BUDGET,
	budgets => { map { $_ => 1 } @BUDGETS },
	may_vanish => { soak_c => 1 },
	sentinels => \%SENTINEL,
	queued_age => {
		soak_a => $QT_MS{soak_a} / 1000 + 2,
		soak_d => $QT_MS{soak_d} / 1000 + 2
	},
	# a kept slot of soak_d is idle at most as long as its idle timeout
	idle_age => { soak_d => $d_idle_max / 1000 + 4 },
	max_age => 30,
	lh_window => 15,
	fair => { soak_a => 1, soak_d => 1 },
	scope => \%SCOPE,
	gate_windows => \@gate_windows,
	starve_limit => 2);
ok($mon->{samples} > $load_seconds * 5, "the monitor took samples ($mon->{samples})");
ok($mon->{nviolations} == 0, 'every sample of dbgate.status and dbgate.backends is possible')
  or diag join("\n", "$mon->{nviolations} violation(s), the first ones:",
	@{ $mon->{violations} });

# ---------------------------------------------------------------------
# Server log

my ($problems, $kills_seen) = scan_log(file => $node->logfile, killed => \@killed);
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
	join(', ', map { "$_ " . ($tot{$_}{statements} // 0) } qw(a b c d free)),
	join(', ', map { "$_ $ops{$_}" } sort keys %ops));
push @fig, 'outcomes: ' . join(', ',
	map { my $k = $_; (my $n = $k) =~ s/^outcome_//; "$n $tot{all}{$k}" }
	grep { /^outcome_/ } sort keys %{ $tot{all} });
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
		  canceled_waiting admitted_lock_holder terminated_idle);
	}
}
for my $b (sort keys %sum)
{
	push @fig, sprintf(
		'%s: admitted %d, '
		  . 'after waiting %d, lock holder %d, rejected full %d, rejected timeout %d, '
		  . 'canceled waiting %d, terminated idle %d; max active seen %s, '
		  . 'max queued seen %s, max idle in transaction seen %s',
		$b, @{ $sum{$b} }{qw(admitted admitted_after_wait admitted_lock_holder rejected_full
		  rejected_timeout canceled_waiting terminated_idle)},
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
	  . 'over-limit samples excused by lowering %d, by lock-holder admission %d',
	($tot{all}{connects} // 0) - $nclients,
	$mon->{samples}, $mon->{max_gap}, $mon->{lowering_excused}, $mon->{lh_excused});
diag "soak figures:\n  " . join("\n  ", @fig);

# ---------------------------------------------------------------------

$admin->do("SELECT dbgate.drop_budget(b, force => true) FROM unnest(ARRAY['soak_a', 'soak_b', 'soak_c']) b "
	  . 'WHERE b IN (SELECT budget FROM dbgate.budgets)');
$admin->disconnect;
$node->stop;
done_testing();
