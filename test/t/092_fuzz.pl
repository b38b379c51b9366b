# Fuzz test: random SQL from sqlsmith through gated roles, while the budgets
# change under it and backends are canceled and terminated.
#
# sqlsmith (Debian package sqlsmith) reads the catalog of a database with a
# small schema (test/fuzz/schema.sql: tables of many types, views with
# rules, triggers, functions that run queries while a statement is planned
# or executed, an aggregate that runs queries, views over dbgate's own
# views) and sends random statements built from it.  Six sqlsmith sessions
# and two clients of heavy utility commands (Fuzz::Utility) log in as roles
# of three budgets:
#
#   fz_stmt    B = 2, Q = 4, scope 'statement', queue, statement, lock and
#              idle timeouts, utility => true, parallel_workers 1
#              sqlsmith as fz_s1 (two sessions), utility client fz_u1
#   fz_txn     B = 2, Q = 3, scope 'transaction', non-fair, queue, lock and
#              idle timeouts, utility => true, no parallel query
#              sqlsmith as fz_t1 (may call dbgate's mutating functions) and
#              as fz_m1 (classified as a member of fz_grp), utility client
#              fz_u2 (member of fz_grp)
#   fz_shadow  B = 1, Q = 1, shadow mode (enforce => false) at the start
#              sqlsmith as fz_w1 (two sessions, classified by their
#              dbgate.default_budget)
#   fz_pool, fz_pool2   budgets without roles that the others may take as
#              their parent (only on a server whose alter_budget() has
#              'parent')
#   fz_spare   (1.3) a budget without roles that is dropped (with force
#              or without) and created again (only on a server whose
#              alter_budget() has 'runaway_budget')
# (1.3) The budget changes give budgets runaway_action 'demote' to another
# (runaway_budget: any of these, itself, or one that does not exist), so
# that statements of one budget run in another, and quarantined ones are
# gated by it; at the start fz_stmt demotes its statements after 100 ms to
# fz_txn, and fz_txn after 200 ms to fz_spare.
# (1.3) Keys: every role has an app.tenant of its own (t_s1, t_u1, ...), so
# that a budget with key_by 'setting:app.tenant' or 'user' has statements
# of several keys at once; at the start fz_stmt has key_by
# 'setting:app.tenant' with key_max_active 1 and fz_txn key_by 'user';
# key_by and the key_* fields change with the others, and set_key_limit()
# and reset_key_limit() calls, checked against the model, change the
# limits of single keys (Fuzz::Alter); sqlsmith may call them as fz_t1.
#
# Meanwhile one session changes the budgets (Fuzz::Alter: every field of
# alter_budget() this server has, table-driven), another cancels and
# terminates random gated backends, and a monitor samples dbgate.status and
# dbgate.backends every 50 ms (Fuzz::Check).
#
# It passes when the server never restarted (the postmaster's pid and start
# time are unchanged, the log shows no crash, no assertion failure, no
# PANIC), every budget drains to active 0 (a parent: the sum of its children's
# reservations), queued 0 and dbgate.backends is
# empty when the clients stop, every sample of the views is possible (see
# Fuzz::Check), rejected_full and rejected_timeout equal the 53300 errors
# of dbgate in the log (and canceled_waiting is at most the cancels,
# statement timeouts, ended sessions and lost clients the log shows), every budget change succeeded or failed as it
# should and dbgate.budgets shows the committed configuration, no sqlsmith
# session stalled, the utility clients met no error that the faults do
# not explain, and the server log has no WARNING of dbgate's own, no
# internal error raised by dbgate, no warning of PostgreSQL about a leaked
# resource, and no internal error (class XX) of PostgreSQL about snapshots,
# resource owners, portals, transaction, GUC or lock state.  Errors of the
# generated SQL itself are expected: they are counted by SQLSTATE; other
# internal errors of PostgreSQL are listed, run again ungated to tell
# those that do not depend on the gate.
#
# Time in the verdicts.  The checks are states (a sample, a counter, the
# log), not events per second.  The load goes on past FUZZ_LONG until
# every sqlsmith session has run statements, every budget with roles has
# admitted one and the monitor has taken 5 samples per second of
# FUZZ_LONG, for at most 120 s (or FUZZ_LONG) more.  What is left are
# hang detectors far above what they bound: a backend in one state (10 s
# queued, 15 s active or idle in transaction) and wait_time_max (6 s),
# where the sessions' statement_timeout of 3 s ends every statement; a
# sqlsmith session without a finished statement (20 s, with its own
# statement_timeout of 1 s); the clients' stop (60 s) and the drain
# (30 s).
#
# Environment:
#   FUZZ_SEED=<n>     seed of sqlsmith's sessions, the budget changes, the
#                     faults and the utility clients (default 1); the
#                     timing, and with it what sqlsmith generates after its
#                     first failures, is not reproducible
#   FUZZ_LONG=<s>     seconds of load, at least (default 20; see above);
#                     check.sh allows 600 s
#                     per TAP file: raise CHECK_TIMEOUT for long runs
# tmp_check/fuzz/ keeps the samples, the statistics of every process, and
# events.log (every fault, with its time).

use strict;
use warnings FATAL => 'all';

use FindBin;
use lib "$FindBin::RealBin/../soak", "$FindBin::RealBin/../fuzz";

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use IPC::Run ();
use Time::HiRes qw(time sleep);

BEGIN
{
	if (!eval { require DBI; require DBD::Pg; 1 })
	{
		plan skip_all => 'DBI and DBD::Pg are needed (Debian package libdbd-pg-perl)';
	}
}

use DbgateLoad;
use Fuzz::Common qw(dsn pick);
use Fuzz::Smith;
use Fuzz::Utility;
use Fuzz::Alter;
use Fuzz::Check qw(monitor check_samples scan_log dbgate_functions shape);

my $sqlsmith = (grep { -x "$_/sqlsmith" } split /:/, $ENV{PATH} // '')[0];
plan skip_all => 'sqlsmith is not installed (Debian package sqlsmith)' unless $sqlsmith;
$sqlsmith .= '/sqlsmith';

my $seed = $ENV{FUZZ_SEED} // 1;
my $duration = $ENV{FUZZ_LONG} || 20;
die "FUZZ_SEED must be an integer\n" unless $seed =~ /^\d+$/;
die "FUZZ_LONG must be a number of seconds\n" unless $duration =~ /^\d+$/;
diag "fuzz: seed $seed, $duration s of load; repeat with FUZZ_SEED=$seed FUZZ_LONG=$duration";
srand($seed);

my $srcdir = "$FindBin::RealBin/../..";
my $dbname = 'fuzz';

# ---------------------------------------------------------------------
# Cluster, schema, roles, budgets

my $node = PostgreSQL::Test::Cluster->new('fuzz');
$node->init;
$node->append_conf(
	'postgresql.conf', q{
shared_preload_libraries = 'dbgate'
max_connections = 60
autovacuum = off
deadlock_timeout = '100ms'
restart_after_crash = on
log_statement = none
log_line_prefix = '%m [%p] <%e> <%u> <%a> '
log_error_verbosity = verbose
log_min_messages = warning
log_min_error_statement = warning
dbgate.max_quarantine = 16
});
$node->start;
my $superuser = $node->safe_psql('postgres', 'SELECT current_user');
my ($host, $port) = ($node->host, $node->port);

# Does sqlsmith work against this server?  (As the superuser, before any
# budget exists.)
$node->safe_psql('postgres', "CREATE DATABASE $dbname");
$node->safe_psql($dbname, 'CREATE EXTENSION dbgate');
$node->safe_psql($dbname, slurp_file("$FindBin::RealBin/../fuzz/schema.sql"));
{
	my ($out, $err) = ('', '');
	my $ok = IPC::Run::run(
		[
			$sqlsmith, "--target=host=$host port=$port dbname=$dbname user=$superuser",
			'--seed=1', '--max-queries=50', '--exclude-catalog', '--verbose'
		],
		'>', \$out, '2>', \$err, IPC::Run::timeout(120));
	if (!$ok || $err !~ /queries: 50/)
	{
		my @last = (split /\n/, $err)[-5 .. -1];
		plan skip_all => 'sqlsmith does not work against PostgreSQL '
		  . $node->pg_version . ': ' . join(' | ', grep { defined } @last);
	}
}

my %ROLE_BUDGET = (
	fz_s1 => 'fz_stmt',
	fz_u1 => 'fz_stmt',
	fz_t1 => 'fz_txn',
	fz_m1 => 'fz_txn',
	fz_u2 => 'fz_txn',
	fz_w1 => 'fz_shadow');
my @SMITH = (qw(fz_s1 fz_s1 fz_t1 fz_m1 fz_w1 fz_w1));
my @UTILITY = (qw(fz_u1 fz_u2));

my $setup = q{
-- session-level advisory locks outlive sqlsmith's ROLLBACK: one statement
-- that locks every row of a table would fill the lock table for good (and
-- their unlock functions only warn)
DO $$
DECLARE f regprocedure;
BEGIN
	FOR f IN SELECT oid FROM pg_proc
			 WHERE proname IN ('pg_advisory_lock', 'pg_advisory_lock_shared',
							   'pg_try_advisory_lock', 'pg_try_advisory_lock_shared',
							   'pg_advisory_unlock', 'pg_advisory_unlock_shared',
							   'pg_advisory_unlock_all')
	LOOP
		EXECUTE format('REVOKE EXECUTE ON FUNCTION %s FROM PUBLIC', f);
	END LOOP;
END$$;
CREATE ROLE fz_grp NOLOGIN;
};
for my $r (sort keys %ROLE_BUDGET)
{
	$setup .= "CREATE ROLE $r LOGIN IN ROLE fz_owner;\n"
	  . "ALTER ROLE $r SET statement_timeout = '3s';\n"
	  . "ALTER ROLE $r SET max_parallel_workers_per_gather = 2;\n"
	  . "ALTER ROLE $r SET parallel_setup_cost = 0;\n"
	  . "ALTER ROLE $r SET parallel_tuple_cost = 0;\n"
	  . "ALTER ROLE $r SET app.tenant = '" . ($r =~ s/^fz_/t_/r) . "';\n";
}
$setup .= q{
GRANT fz_grp TO fz_m1, fz_u2;
GRANT pg_monitor TO fz_t1, fz_m1;
-- fz_t1 is a delegated administrator: sqlsmith calls dbgate's mutating
-- functions with its arguments (in transactions that it rolls back)
DO $$
DECLARE f regprocedure;
BEGIN
	FOR f IN SELECT oid FROM pg_proc
			 WHERE pronamespace = 'dbgate'::regnamespace
			   AND proname IN ('create_budget', 'alter_budget', 'drop_budget',
							   'assign_role', 'unassign_role', 'assign_database',
							   'unassign_database', 'set_key_limit', 'reset_key_limit')
	LOOP
		EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO fz_t1', f);
	END LOOP;
END$$;
SELECT dbgate.create_budget('fz_stmt', 2, 4, queue_timeout => '300ms',
	statement_timeout => '700ms', lock_timeout => '50ms', scope => 'statement',
	idle_in_transaction_timeout => '1500ms', parallel_workers => 1, utility => true);
SELECT dbgate.create_budget('fz_txn', 2, 3, queue_timeout => '800ms',
	lock_timeout => '300ms', fair => false, scope => 'transaction',
	idle_in_transaction_timeout => '500ms', parallel_workers => 0, utility => true);
SELECT dbgate.create_budget('fz_shadow', 1, 1, queue_timeout => '100ms',
	statement_timeout => '200ms', parallel_workers => 2, utility => true,
	enforce => false);
SELECT dbgate.assign_role('fz_s1', 'fz_stmt');
SELECT dbgate.assign_role('fz_u1', 'fz_stmt');
SELECT dbgate.assign_role('fz_t1', 'fz_txn');
SELECT dbgate.assign_role('fz_grp', 'fz_txn');
ALTER ROLE fz_w1 SET dbgate.default_budget = 'fz_shadow';
};
$node->safe_psql($dbname, $setup);

my %BUDGETS = (fz_stmt => 'leaf', fz_txn => 'leaf', fz_shadow => 'shadow');
my $has_parent = $node->safe_psql($dbname,
	q{SELECT count(*) FROM pg_proc WHERE proname = 'alter_budget'
	  AND pronamespace = 'dbgate'::regnamespace AND 'parent' = ANY (proargnames)});
if ($has_parent)
{
	$node->safe_psql($dbname,
		q{SELECT dbgate.create_budget('fz_pool', 3);
		  SELECT dbgate.create_budget('fz_pool2', 2, parent => 'fz_pool');});
	$BUDGETS{fz_pool} = $BUDGETS{fz_pool2} = 'pool';
}
my $has_runaway_budget = $node->safe_psql($dbname,
	q{SELECT count(*) FROM pg_proc WHERE proname = 'alter_budget'
	  AND pronamespace = 'dbgate'::regnamespace AND 'runaway_budget' = ANY (proargnames)});
if ($has_parent && $has_runaway_budget)
{
	$node->safe_psql($dbname,
		q{SELECT dbgate.create_budget('fz_spare', 2, 2, queue_timeout => '200ms');
		  SELECT dbgate.alter_budget('fz_stmt', runaway_after => '100ms',
		                             runaway_action => 'demote', runaway_budget => 'fz_txn');
		  SELECT dbgate.alter_budget('fz_txn', runaway_after => '200ms',
		                             runaway_action => 'demote', runaway_budget => 'fz_spare');});
	$BUDGETS{fz_spare} = 'spare';
}
# (1.3) keys from the start
if ($node->safe_psql($dbname,
		q{SELECT count(*) FROM pg_proc WHERE proname = 'alter_budget'
		  AND pronamespace = 'dbgate'::regnamespace AND 'key_by' = ANY (proargnames)}))
{
	$node->safe_psql($dbname,
		q{SELECT dbgate.alter_budget('fz_stmt', key_by => 'setting:app.tenant', key_max_active => 1);
		  SELECT dbgate.alter_budget('fz_txn', key_by => 'user');});
}
$node->safe_psql($dbname, 'SELECT dbgate.reset_stats()');
note 'budgets: ' . join(', ', map { "$_ ($BUDGETS{$_})" } sort keys %BUDGETS);

my $pm_pid = postmaster_pid();
my $pm_start = $node->safe_psql($dbname, 'SELECT pg_postmaster_start_time()');

sub postmaster_pid
{
	my $f = $node->data_dir . '/postmaster.pid';
	return -e $f ? (split /\n/, slurp_file($f))[0] : 'none';
}

# ---------------------------------------------------------------------
# Run directory and child processes

# DbgateLoad: the run directory tmp_check/fuzz, made anew, and the forked
# processes (stopped when the test dies early)
my $load = DbgateLoad->new('fuzz', duration => $duration);
my $dir = $load->dir;

my %common = (host => $host, port => $port, dbname => $dbname, dir => $dir);

my $monitor_pid = $load->spawn('monitor',
	sub { monitor(%common, superuser => $superuser, interval => 0.05); });

my %client_pids;
my $id = 0;
my @smiths;
for my $role (@SMITH)
{
	$id++;
	my $s = Fuzz::Smith->new(%common, id => $id, role => $role,
		seed => $seed * 1000 + $id, sqlsmith => $sqlsmith);
	push @smiths, $s;
	$client_pids{ $load->spawn("sqlsmith session $id", sub { $s->run }) } = "sqlsmith $id";
}
my $slot = 0;
for my $role (@UTILITY)
{
	$id++;
	my $u = Fuzz::Utility->new(%common, id => $id, role => $role,
		seed => $seed * 1000 + $id, slot => $slot++);
	$client_pids{ $load->spawn("utility client $id", sub { $u->run }) } = "utility $id";
}
my %assigned = map { $_ => 1 } values %ROLE_BUDGET;
my $alter = Fuzz::Alter->new(%common, superuser => $superuser, seed => $seed * 1000 + 99,
	budgets => \%BUDGETS, assigned => \%assigned);
$client_pids{ $load->spawn('budget changes', sub { $alter->run }) } = 'alter';
$client_pids{ $load->spawn('faults', sub { faults() }) } = 'faults';

# Cancel and terminate random gated backends: most often one that holds or
# waits for a slot, else any session of a fuzz role.  sqlsmith loading its
# schema (a few thousand catalog queries, a few seconds) is spared nine
# times in ten: it starts anew after each of them.
sub faults
{
	srand($seed * 1000 + 98);
	my $dbh = DBI->connect(dsn($host, $port, $dbname), $superuser, '',
		{ AutoCommit => 1, RaiseError => 0, PrintError => 0, PrintWarn => 0 })
	  or die "faults: cannot connect: $DBI::errstr";
	open(my $ev, '>', "$dir/events.log") or die "events.log: $!";
	$ev->autoflush(1);
	my %n;
	while (!-e "$dir/stop")
	{
		sleep(0.2 + rand(0.5));
		my $gated = $dbh->selectall_arrayref(
			q{SELECT b.pid, b.state, a.application_name
			  FROM dbgate.backends b JOIN pg_stat_activity a USING (pid)}) // [];
		my $any = $dbh->selectall_arrayref(
			q{SELECT pid, coalesce(state, ''), application_name FROM pg_stat_activity
			  WHERE usename LIKE 'fz\_%' AND backend_type = 'client backend'}) // [];
		my @pool = (@$gated && rand() < 0.7) ? @$gated : @$any;
		next unless @pool;
		my ($pid, $state, $app) = @{ pick(@pool) };
		next if $app eq 'sqlsmith::schema' && rand() < 0.9;
		my $how = rand() < 0.2 ? 'terminate' : 'cancel';
		my ($hit) = $dbh->selectrow_array("SELECT pg_${how}_backend($pid)");
		$n{"$how\t$state"}++ if $hit;
		printf $ev "%.6f %s %d (%s)%s\n", time, $how, $pid, $state, $hit ? '' : ' missed';
	}
	open(my $fh, '>', "$dir/faults.stats") or die "faults.stats: $!";
	print $fh "$_\t$n{$_}\n" for sort keys %n;
	close $fh;
	$dbh->disconnect;
	return;
}

# ---------------------------------------------------------------------
# Load, stop, drain

# What the checks need the load to have produced: every sqlsmith session
# has run statements (it loads the catalog through the gate first, which
# takes long on a busy machine), every budget with roles has admitted one,
# and the monitor has taken 5 samples per second of FUZZ_LONG.  The load
# goes on past $duration until all of that is there (a state, however
# long the machine takes), extra_max() s more at most (DbgateLoad); the
# checks that lack it fail then.
my $MIN_SAMPLES = $load->min_samples;

my $premise_dbh;
sub premises_missing
{
	my @m;
	push @m, map { "sqlsmith session $_ ran no statement" }
	  grep { !-e "$dir/smith-$_.ran" } 1 .. @SMITH;
	$premise_dbh //= DBI->connect(dsn($host, $port, $dbname), $superuser, '',
		{ AutoCommit => 1, RaiseError => 0, PrintError => 0, PrintWarn => 0 });
	my $st = $premise_dbh
	  ? $premise_dbh->selectall_hashref('SELECT budget, admitted FROM dbgate.status', 'budget')
	  : undef;
	for my $b (sort grep { $BUDGETS{$_} eq 'leaf' || $BUDGETS{$_} eq 'shadow' } keys %BUDGETS)
	{
		push @m, "$b admitted nothing" unless $st && ($st->{$b}{admitted} // 0) > 0;
	}
	push @m, $load->samples_lacking;
	return @m;
}

$load->start;
while (1)
{
	sleep 1;
	last if -e "$dir/died";
	last if $load->done(\&premises_missing);
}
$premise_dbh->disconnect if $premise_dbh;
my $load_seconds = $load->report('the load', 2);
my @stragglers = $load->stop_clients(\%client_pids, 60);
my $t_stop = $load->stopped_at;
ok(!@stragglers, 'every client stops within 60 s') or diag "still running: @stragglers";
ok(!-e "$dir/died", 'no client, monitor or fault process died')
  or diag slurp_file("$dir/died");

my $admin = DBI->connect(dsn($host, $port, $dbname), $superuser, '',
	{ AutoCommit => 1, RaiseError => 0, PrintError => 0, PrintWarn => 0 })
  or die "admin connection: $DBI::errstr";
my (%drained, $final);
my $drain_deadline = time + 30;
while (1)
{
	$final = $admin->selectall_hashref('SELECT * FROM dbgate.status', 'budget') // {};
	# an idle parent counts the slots it keeps for its children's
	# reservations (1.3)
	my $kept = $admin->selectall_hashref(
		q{SELECT parent AS budget, sum(reserved) AS kept FROM dbgate.budgets
		   WHERE parent IS NOT NULL GROUP BY parent}, 'budget') // {};
	my $rows = $admin->selectall_arrayref(
		q{SELECT b.pid, b.role, b.budget, b.state, a.backend_type, a.state, left(a.query, 300)
		  FROM dbgate.backends b LEFT JOIN pg_stat_activity a USING (pid)}) // [];
	my @busy = grep {
		my $s = $final->{$_};
		$s->{active} != ($kept->{$_}{kept} // 0) || $s->{queued} != 0
		  || ($s->{idle_in_transaction} // 0) != 0
		  || ($s->{oldest_wait} // 0) != 0
		  || ($s->{memory_mb_active} // 0) != 0
	} sort keys %$final;
	if (!@busy && !@$rows)
	{
		%drained = (ok => 1, seconds => time - $t_stop);
		last;
	}
	if (time > $drain_deadline)
	{
		%drained = (
			ok => 0,
			detail => join("\n",
				(map {
						my $s = $final->{$_};
						"$_: active $s->{active}, queued $s->{queued}, idle_in_transaction "
						  . ($s->{idle_in_transaction} // '-') . ', oldest_wait '
						  . ($s->{oldest_wait} // '-') . ', memory_mb_active '
						  . ($s->{memory_mb_active} // '-')
				} @busy),
				map { 'backends row: ' . join(' | ', map { $_ // 'NULL' } @$_) } @$rows));
		last;
	}
	sleep 0.1;
}
ok($drained{ok},
	'every budget drains to active 0 (a parent: its children\'s reservations) and queued 0, '
	  . 'and dbgate.backends is empty')
  or diag "30 s after the clients stopped:\n$drained{detail}";

$load->stop_monitor($monitor_pid);

# ---------------------------------------------------------------------
# What the processes saw

sub read_kv
{
	my ($file) = @_;
	my %h;
	open(my $fh, '<', $file) or return undef;
	while (my $line = <$fh>)
	{
		chomp $line;
		my @f = split /\t/, $line;
		my $v = pop @f;
		my $k = join("\t", @f);
		if (exists $h{$k}) { $h{$k} = [ ref $h{$k} ? @{ $h{$k} } : $h{$k}, $v ]; }
		else { $h{$k} = $v; }
	}
	close $fh;
	return \%h;
}

my (%smith, @smith_exits, @smith_seeds, @stalls);
for my $i (1 .. @SMITH)
{
	my $s = Fuzz::Smith::read_stats("$dir/smith-$i.stats");
	if (!$s)
	{
		push @stalls, "sqlsmith session $i wrote no statistics";
		next;
	}
	$smith{$_} += $s->{$_} // 0 for qw(ok failed syntax timeout broken generated starts stalls);
	$smith{"ran $i"} = ($s->{ok} // 0) + ($s->{failed} // 0) + ($s->{syntax} // 0);
	push @smith_exits, map { "session $i ($SMITH[$i - 1]): $_" } @{ $s->{exits} };
	push @smith_seeds, "$i $SMITH[$i - 1] " . ($s->{seeds} // '?');
	push @stalls, @{ $s->{stall_queries} };
}
my $statements = ($smith{ok} // 0) + ($smith{failed} // 0) + ($smith{syntax} // 0)
  + ($smith{timeout} // 0);
ok((!grep { !$smith{"ran $_"} } 1 .. @SMITH) && $statements > 0,
	"every sqlsmith session ran statements ($statements in all)")
  or diag join("\n", (map { "session $_: " . ($smith{"ran $_"} // 0) } 1 .. @SMITH),
	'exits of sqlsmith:', @smith_exits);
ok(!@stalls, 'no sqlsmith session stalled') or diag join("\n", @stalls);

my (%util, @util_unexpected);
for my $i (@SMITH + 1 .. @SMITH + @UTILITY)
{
	my $u = read_kv("$dir/utility-$i.stats");
	if (!$u)
	{
		push @util_unexpected, "utility client $i wrote no statistics";
		next;
	}
	for my $k (keys %$u)
	{
		if ($k eq 'unexpected') { push @util_unexpected, ref $u->{$k} ? @{ $u->{$k} } : $u->{$k}; }
		else { $util{$k} += $u->{$k}; }
	}
}
ok(!@util_unexpected, 'the utility clients met no error that the faults do not explain')
  or diag join("\n", @util_unexpected);

my $alt = read_kv("$dir/alter.stats") // {};
my @alter_problems = !%$alt ? ('the budget changer wrote no statistics')
  : !defined $alt->{problem} ? ()
  : ref $alt->{problem} ? @{ $alt->{problem} }
  : ($alt->{problem});
ok(!@alter_problems,
	'every budget change succeeded or failed as it should, and dbgate.budgets shows the committed configuration')
  or diag join("\n", @alter_problems[ 0 .. ($#alter_problems < 30 ? $#alter_problems : 29) ]);
my $faults = read_kv("$dir/faults.stats") // {};

# ---------------------------------------------------------------------
# Monitor samples

my (%sessions, %leaf, %max, %enforce_off, %demote);
my $ngated = @SMITH + @UTILITY;
$sessions{$_} = $ngated for keys %BUDGETS;    # every gated session, at most
# (1.3) SOURCE demoted to TARGET at some time: TARGET may hold statements of
# SOURCE's sessions
for my $k (keys %$alt)
{
	my ($what, $source, $target) = split /\t/, $k;
	$demote{$source}{$target} = 1 if $what eq 'demote' && defined $target;
}
my %demote_target = map { %$_ } values %demote;
for my $b (grep { $BUDGETS{$_} eq 'leaf' || $BUDGETS{$_} eq 'shadow' } keys %BUDGETS)
{
	$leaf{$b} = 1;
	$sessions{$b} = 0;
	for my $r (@SMITH, @UTILITY) { $sessions{$b}++ if $ROLE_BUDGET{$r} eq $b; }
	$sessions{$b} = $ngated if $demote_target{$b};
	$max{$b}{$_} = $alt->{"max\t$b\t$_"} for qw(max_active max_queued);
	$enforce_off{$b} = 1 if $alt->{"enforce_off\t$b"};
}
my $mon = check_samples(
	file => "$dir/monitor.samples",
	sessions => \%sessions,
	leaf => \%leaf,
	role_budget => \%ROLE_BUDGET,
	max => \%max,
	enforce_off => \%enforce_off,
	demote => \%demote,
	may_vanish => { map { $_ => 1 } grep { $BUDGETS{$_} eq 'spare' } keys %BUDGETS },
	# every wait ends by the sessions' statement timeout (3 s at most)
	max_wait_ms => 6000,
	ages => { queued => 10, active => 15, 'idle in transaction' => 15 });
ok($mon->{samples} >= $MIN_SAMPLES, "the monitor took samples ($mon->{samples} of at least $MIN_SAMPLES)");
ok($mon->{nviolations} == 0, 'every sample of dbgate.status and dbgate.backends is possible')
  or diag join("\n", "$mon->{nviolations} violation(s), the first ones:", @{ $mon->{violations} });

# ---------------------------------------------------------------------
# The server log, and the counters against it

my $log = scan_log(
	file => $node->logfile,
	functions => dbgate_functions("$srcdir/src"),
	smith_roles => { map { $_ => 1 } @SMITH });

my @counter_problems;
for my $b (sort grep { $leaf{$_} } keys %BUDGETS)
{
	my $s = $final->{$b} // {};
	for ([ rejected_full => $log->{full}{$b} // 0 ], [ rejected_timeout => $log->{qto}{$b} // 0 ])
	{
		my ($c, $n) = @$_;
		push @counter_problems, "$b.$c = " . ($s->{$c} // 'missing') . ", the log has $n"
		  unless defined $s->{$c} && $s->{$c} == $n;
	}
	my $leave = 0;
	# (1.3) a waiter quarantined in a budget that demotes to this one
	# waits here
	$leave += $log->{leave}{$_} // 0
	  for grep { $ROLE_BUDGET{$_} eq $b || $demote{ $ROLE_BUDGET{$_} }{$b} } keys %ROLE_BUDGET;
	push @counter_problems, "$b.canceled_waiting = $s->{canceled_waiting}, more than the $leave "
	  . 'cancels, statement timeouts, ended sessions and lost clients of its roles in the log'
	  if ($s->{canceled_waiting} // 0) > $leave;
	push @counter_problems, "$b: no statement was admitted" if !$s->{admitted};
}
# 1.3: a statement is demoted only after it was counted as a runaway (no
# budget's counters are reset during the run; the spare budget's start
# again when it is created)
for my $b (sort keys %$final)
{
	my $s = $final->{$b};
	push @counter_problems, "$b.demoted_out = $s->{demoted_out} > its runaways $s->{runaways}"
	  if defined $s->{demoted_out} && $s->{demoted_out} > $s->{runaways};
}
# 1.2: the wait histogram is cumulative and ends with every admission
my $hist = $admin->selectall_arrayref(
	q{SELECT budget, le_ms::text AS le, count FROM dbgate.wait_histogram h ORDER BY budget, h.le_ms})
  if $admin->selectrow_array(q{SELECT to_regclass('dbgate.wait_histogram') IS NOT NULL});
if ($hist)
{
	my %h;
	push @{ $h{ $_->[0] } }, [ $_->[1], $_->[2] ] for @$hist;
	for my $b (sort keys %h)
	{
		my @c = map { $_->[1] } @{ $h{$b} };
		push @counter_problems, "$b: wait_histogram counts @c are not cumulative"
		  if grep { $c[$_] < $c[ $_ - 1 ] } 1 .. $#c;
		push @counter_problems,
		  "$b: wait_histogram's last bucket ($h{$b}[-1][0]) counts $c[-1], admitted is "
		  . ($final->{$b}{admitted} // '?')
		  if $h{$b}[-1][0] ne 'Infinity' || $c[-1] != ($final->{$b}{admitted} // -1);
	}
}
ok(!@counter_problems,
	'the counters agree with the log: rejected_full and rejected_timeout are the 53300 errors of dbgate, '
	  . 'demoted_out within runaways, '
	  . 'canceled_waiting within the cancels and ends')
  or diag join("\n", @counter_problems);

my $pm_pid_end = postmaster_pid();
my $pm_start_end = $admin->selectrow_array('SELECT pg_postmaster_start_time()') // 'unknown';
ok($pm_pid_end eq $pm_pid && $pm_start_end eq $pm_start,
	'the server never restarted (postmaster pid and start time unchanged)')
  or diag "postmaster pid $pm_pid, now $pm_pid_end; started $pm_start, now $pm_start_end";

# An internal error raised by PostgreSQL's own code is a finding when its
# message speaks of the bookkeeping that a module in the executor's path
# can upset (snapshots, resource owners, portals, transaction or GUC
# state, locks).  Any other one is most often PostgreSQL's answer to
# arguments that no user should pass (sqlsmith passes such arguments to
# every catalog function): run the statement again as the superuser (never
# gated), up to five times (TABLESAMPLE and random() make some statements
# fail only sometimes); the figures list those that fail the same way (the
# same SQLSTATE, the same message but for its numbers) and those that do
# not (they may depend on live state, such as other backends).
my $BOOKKEEPING = qr/snapshot|resource owner|portal|transaction state|nest ?level|GUC|LWLock|spinlock|lock .*(not held|already held)|lost track|latch|subtransaction|cannot (abort|commit)/i;
my (@internal_ours, @internal_pg, @internal_other, %seen_internal);
for my $e (@{ $log->{internal} })
{
	if ($e->{message} =~ $BOOKKEEPING)
	{
		push @internal_ours, $e->{what};
		next;
	}
	next if !defined $e->{statement} || $seen_internal{ $e->{statement} }++;
	if (keys %seen_internal > 20)
	{
		push @internal_other, "$e->{what}\n  (not run again)";
		next;
	}
	my ($same, $again);
	for (1 .. 5)
	{
		$admin->do('BEGIN');
		$admin->do(q{SET LOCAL statement_timeout = '5s'});
		my $r = $admin->do($e->{statement});
		my ($state, $err) = ($admin->state, $admin->errstr // '');
		$admin->do('ROLLBACK');
		$again = defined $r ? 'succeeded' : "$state $err";
		$same = !defined $r && $state eq $e->{state}
		  && index(shape($err), shape($e->{message})) >= 0;
		last if $same;
	}
	if ($same) { push @internal_pg, $e->{what}; }
	else { push @internal_other, "$e->{what}\n  run again ungated, five times: the last $again"; }
}
# like findings once, with a count, the first one in full
my (@findings, %nfound);
for my $f (@{ $log->{findings} }, @internal_ours)
{
	my $k = shape((split /\n/, $f)[0] =~ s/ \(pid \d+, / (/r);
	push @findings, [ $k, $f ] unless $nfound{$k}++;
}
ok(!@findings,
	'the server log shows no crash, assertion, PANIC, WARNING or internal error of dbgate')
  or diag join("\n",
	map { ($nfound{ $_->[0] } > 1 ? "$nfound{$_->[0]} times, the first: " : '') . $_->[1] }
	  @findings[ 0 .. ($#findings < 30 ? $#findings : 29) ]);

# ---------------------------------------------------------------------
# Figures

my %class_name = (
	'08' => 'connection', '0A' => 'not supported', 21 => 'cardinality', 22 => 'data',
	23 => 'integrity', 25 => 'transaction state', 28 => 'authorization', '2B' => 'dependent objects',
	'2F' => 'SQL routine', 34 => 'cursor', 38 => 'external routine', 39 => 'external routine call',
	'3D' => 'catalog name', '3F' => 'schema name', 40 => 'rollback', 42 => 'syntax or access',
	44 => 'check option', 53 => 'resources', 54 => 'program limit', 55 => 'object state',
	57 => 'operator intervention', 58 => 'system', P0 => 'PL/pgSQL', XX => 'internal');
my %by_class;
for my $st (keys %{ $log->{smith_errors} })
{
	$by_class{ substr($st, 0, 2) } += $log->{smith_errors}{$st};
}
my @top = (sort { $log->{smith_errors}{$b} <=> $log->{smith_errors}{$a} } keys %{ $log->{smith_errors} });
@top = @top[ 0 .. 9 ] if @top > 10;
my @fig;
push @fig, sprintf('seed %d; %.0f s of load; %d sqlsmith sessions, %d utility clients; '
	  . 'drained in %.1f s', $seed, $load_seconds, scalar @SMITH, scalar @UTILITY,
	$drained{seconds} // -1);
push @fig, sprintf('sqlsmith: %d statements: %d succeeded, %d failed (%d syntax errors), '
	  . '%d lost connections; %d starts of sqlsmith', $statements, $smith{ok} // 0,
	($smith{failed} // 0) + ($smith{syntax} // 0), $smith{syntax} // 0, $smith{broken} // 0,
	$smith{starts} // 0);
push @fig, 'sqlsmith sessions, roles and seeds: ' . join('; ', @smith_seeds);
push @fig, 'failed statements of sqlsmith by SQLSTATE class (server log): '
  . join(', ', map { "$_ " . ($class_name{$_} // '?') . " $by_class{$_}" } sort keys %by_class);
push @fig, 'most frequent: ' . join(', ', map { "$_ $log->{smith_errors}{$_}" } @top);
push @fig, 'utility clients: ' . ($util{statements} // 0) . ' statements; '
  . join(', ', map { (my $k = $_) =~ s/^op\t//; "$k $util{$_}" } sort grep { /^op\t/ } keys %util)
  . '; errors: ' . join(', ', map { (my $k = $_) =~ s/^err\t//; "$k $util{$_}" }
	sort grep { /^err\t/ } keys %util);
push @fig, 'budget changes: ' . ($alt->{calls} // 0) . ' calls (' . ($alt->{rolled_back} // 0)
  . ' rolled back) of fields ' . ($alt->{fields} // '?') . '; committed: '
  . join(', ', map { (my $k = $_) =~ s/^ok\t//; "$k $alt->{$_}" } sort grep { /^ok\t/ } keys %$alt)
  . '; refused as expected: '
  . join(', ', map { (my $k = $_) =~ s/^refused\t//; "$k $alt->{$_}" } sort grep { /^refused\t/ } keys %$alt);
push @fig, 'quarantine calls: ' . ($alt->{quarantine_calls} // 0) . ' ('
  . ($alt->{quarantine_ok} // 0) . ' done, ' . ($alt->{quarantine_refused} // 0)
  . ' refused as expected)';
push @fig, 'key limit calls: ' . ($alt->{key_limit_calls} // 0) . ' ('
  . join(', ', map { (my $k = $_) =~ s/^key_limit\t//; $k =~ s/\t/ /; "$k $alt->{$_}" }
	  sort grep { /^key_limit\t/ } keys %$alt) . ')';
push @fig, 'spare budget: '
  . join(', ', map { (my $k = $_) =~ s/^spare\t//; $k =~ s/\t/: /; "$k $alt->{$_}" }
	  sort grep { /^spare\t/ } keys %$alt)
  . '; demoted (at some time) from -> to: '
  . join(', ', map { my $f = $_; map { "$f -> $_" } sort keys %{ $demote{$f} } } sort keys %demote);
push @fig, 'faults: ' . join(', ', map { (my $k = $_) =~ s/\t/ /; "$k $faults->{$_}" } sort keys %$faults);
for my $b (sort keys %$final)
{
	my $s = $final->{$b};
	push @fig, sprintf('%s: admitted %d, after waiting %d, lock holder %d, rejected full %d, '
		  . 'rejected timeout %d, canceled waiting %d, terminated idle %s, would queue %s, '
		  . 'would reject %s; peak active %d, peak queued %d; max active seen %s, '
		  . 'max queued seen %s; runaways %s, demoted out %s, demoted in %s, quarantined %s',
		$b, @$s{qw(admitted admitted_after_wait admitted_lock_holder rejected_full rejected_timeout
		  canceled_waiting)},
		map({ $s->{$_} // '-' } qw(terminated_idle would_queue would_reject)),
		$s->{peak_active}, $s->{peak_queued},
		$mon->{max_active}{$b} // '-', $mon->{max_queued}{$b} // '-',
		map({ $s->{$_} // '-' } qw(runaways demoted_out demoted_in quarantined)));
}
push @fig, sprintf('monitor: %d samples, longest gap %.2f s', $mon->{samples}, $mon->{max_gap});
push @fig, 'FATAL by SQLSTATE: '
  . join(', ', map { "$_ $log->{fatal}{$_}" } sort keys %{ $log->{fatal} });
my @warn = sort { $log->{warnings}{$b} <=> $log->{warnings}{$a} } keys %{ $log->{warnings} };
push @fig, 'warnings (not dbgate\'s): '
  . join('; ', map { "$log->{warnings}{$_} x $_" } @warn[ 0 .. ($#warn < 5 ? $#warn : 5) ]);
push @fig, 'exits of sqlsmith not asked for: ' . scalar(@smith_exits)
  . (@smith_exits ? ', the last: ' . $smith_exits[-1] : '');
my %pg_internal;
$pg_internal{ shape((split /\n/, $_)[0] =~ s/ \(pid \d+, [^)]*\)//r) }++ for @internal_pg;
push @fig, 'internal errors of PostgreSQL that the same statements also raise ungated: '
  . (%pg_internal ? join('; ', map { "$pg_internal{$_} x $_" } sort keys %pg_internal) : 'none');
my (@other, %nother);
for my $o (@internal_other)
{
	my $k = shape((split /\n/, $o)[0] =~ s/ \(pid \d+, [^)]*\)//r);
	push @other, [ $k, $o ] unless $nother{$k}++;
}
push @fig, 'internal errors of PostgreSQL that the same statements did not raise again ungated '
  . '(to look at): ' . scalar(@internal_other)
  . join('', map {
		"\n    $nother{$_->[0]} x, the first: "
		  . (length $_->[1] > 1200 ? substr($_->[1], 0, 1200) . ' ...' : $_->[1])
  } @other[ 0 .. ($#other < 9 ? $#other : 9) ]);
diag "fuzz figures:\n  " . join("\n  ", @fig);

$admin->disconnect;
$node->stop;
done_testing();
