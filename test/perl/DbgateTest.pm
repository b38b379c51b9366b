# DbgateTest - helpers shared by the TAP tests in test/t/.
#
#   my $node = dbgate_node('name', conf => "deadlock_timeout = '200ms'\n");
#   my $standby = dbgate_standby($primary, 'name', 'b1');
#   walgen_functions($node);               # SQL walgen_image(), walgen_confirm()
#   my ($state, $out, $err) = run_sql($node, 'SELECT 1', user => 'alice');
#   my $s = DbgateTest::Session->new($node, user => 'alice');
#   $s->send('SELECT pg_sleep(1)');        # returns at once
#   my ($out, $err, $state) = $s->result;  # waits for the statement
#   counters_are($node, 'budget', { active => 1, admitted => 1 }, 'name');
#   my $h = slot_holder($node, 'alice', 1, 'name');   # active until lock 1 goes
#   my $w = queued_waiter($node, 'alice', 'w', 'name'); # queued behind it
#   poll_ok($node, 'SELECT count(*) FROM dbgate.backends', '0', 'name');
#   my $out = poll_psql($node, 'SELECT ...');   # safe_psql, without a new psql
#   $node->safe_psql('postgres', 'SELECT ...');  # the same, unless SQL keeps
#                                   # session state (see $SESSION_STATE)
#
# SQLSTATEs are taken from psql's verbose error format
# ("ERROR:  53300: budget ..."), so tests assert the exact code.

package DbgateTest;

use strict;
use warnings FATAL => 'all';

use Exporter 'import';
use File::Basename ();
use File::Copy ();
use File::Spec;
use IPC::Run ();
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);

our @EXPORT = qw(dbgate_node dbgate_standby run_sql sqlstate counters_are status_of
  poll_ok poll_until poll_psql backends_of backend_state slot_holder
  queued_waiter admitted_at_once wire_run wire_start wire_finish
  walgen_functions walgen_log_image worker_pid worker_runs);

# The counters of dbgate.status that counters_are() compares; those not
# named in the expected hash must be 0.
our @COUNTERS = qw(active queued admitted admitted_after_wait rejected_full
  rejected_timeout canceled_waiting admitted_lock_holder);

# The initdb template.  With INITDB_TEMPLATE set (test/check.sh makes
# one data directory per run with Cluster.pm's own initdb options, -A
# trust -N), PostgreSQL 17's Cluster.pm makes a node's data directory as
# a copy of it instead of running initdb, unless the node asks for other
# initdb options; initdb cost about 1 CPU second per node, and a run
# makes over a hundred nodes.  Cluster.pm of 15 and 16 has no template:
# here its initdb call with exactly those options (and no other) becomes
# the same copy.  Without INITDB_TEMPLATE (prove by hand) every node runs
# initdb.
if (defined $ENV{INITDB_TEMPLATE}
	&& PostgreSQL::Test::Utils::slurp_file($INC{'PostgreSQL/Test/Cluster.pm'})
	!~ /INITDB_TEMPLATE/)
{
	no warnings 'redefine';
	my $system_or_bail = \&PostgreSQL::Test::Utils::system_or_bail;
	*PostgreSQL::Test::Utils::system_or_bail = sub {
		my @cmd = @_;
		if (   @cmd == 6
			&& join(' ', @cmd[ 0, 1, 3, 4, 5 ]) eq 'initdb -D -A trust -N'
			&& !-e $cmd[2])
		{
			note('initializing database system by copying initdb template');
			@cmd = ('cp', '-RPp', $ENV{INITDB_TEMPLATE}, $cmd[2]);
		}
		return $system_or_bail->(@cmd);
	};
}

# dbgate_node(NAME, conf => TEXT, preload => 0|1, extension => 0|1,
#             streaming => 0|1)
# A new, started node with dbgate preloaded (unless preload => 0) and the
# extension created in database postgres (unless extension => 0), set up
# to have streaming standbys with streaming => 1.  Extra postgresql.conf
# lines come from conf.
sub dbgate_node
{
	my ($name, %p) = @_;
	my $preload = $p{preload} // 1;
	my $node = PostgreSQL::Test::Cluster->new($name);

	$node->init($p{streaming} ? (allows_streaming => 1) : ());
	my $conf = '';
	$conf .= "shared_preload_libraries = 'dbgate'\n" if $preload;
	$conf .= $p{conf} if defined $p{conf};
	$node->append_conf('postgresql.conf', $conf) if $conf ne '';
	$node->start;
	$node->safe_psql('postgres', 'CREATE EXTENSION dbgate')
	  if $p{extension} // 1;
	return $node;
}

# dbgate_standby(PRIMARY, NAME, BACKUP) -> a new, started streaming
# standby of PRIMARY, made from PRIMARY's base backup BACKUP (taken now
# unless an earlier call took it).
sub dbgate_standby
{
	my ($primary, $name, $backup) = @_;
	$primary->backup($backup) unless -d $primary->backup_dir . "/$backup";
	my $standby = PostgreSQL::Test::Cluster->new($name);
	$standby->init_from_backup($primary, $backup, has_streaming => 1);
	$standby->start;
	return $standby;
}

# sqlstate(STDERR): the SQLSTATE of the first ERROR or FATAL in psql's
# verbose output, or '' when there is none.
sub sqlstate
{
	my ($err) = @_;
	return ($err // '') =~ /\b(?:ERROR|FATAL):\s+([0-9A-Z]{5}):/ ? $1 : '';
}

# run_sql(NODE, SQL, user => ROLE, db => DB) -> (SQLSTATE, STDOUT, STDERR)
# Runs SQL in a new session; stops at the first error.
sub run_sql
{
	my ($node, $sql, %p) = @_;
	my @extra = ('-v', 'VERBOSITY=verbose');
	push @extra, '-U', $p{user} if defined $p{user};
	my ($ret, $out, $err) = $node->psql(
		$p{db} // 'postgres', $sql,
		extra_params => \@extra,
		on_error_stop => 1);
	return (sqlstate($err), $out, $err);
}

# status_of(NODE, BUDGET, db => DB) -> { column => value } of dbgate.status,
# or undef when the budget does not exist.
sub status_of
{
	my ($node, $budget, %p) = @_;
	my @cols = (@COUNTERS, qw(max_active max_queued peak_active peak_queued));
	my $out = poll_psql($node,
		    'SELECT '
		  . join(', ', @cols)
		  . " FROM dbgate.status WHERE budget = '$budget'", %p);
	return undef if $out eq '';
	my %h;
	@h{@cols} = split /\|/, $out;
	return \%h;
}

# counters_are(NODE, BUDGET, EXPECTED, NAME, db => DB)
# One assertion: the counters of @COUNTERS are as in EXPECTED (0 when not
# named there); other columns of status_of() are compared when named.
sub counters_are
{
	my ($node, $budget, $exp, $name, %p) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	my %want = map { $_ => 0 } @COUNTERS;
	%want = (%want, %$exp);
	my $st = status_of($node, $budget, %p);
	if (!defined $st)
	{
		fail($name);
		diag("budget \"$budget\" is not in dbgate.status");
		return 0;
	}
	my %got = map { $_ => $st->{$_} } keys %want;
	return is_deeply(\%got, \%want, $name);
}

# backends_of(NODE, BUDGET) -> "pid:state:position,..." of dbgate.backends
# in queue order (active ones first), '' when there are none.
sub backends_of
{
	my ($node, $budget, %p) = @_;
	return poll_psql($node,
		"SELECT string_agg(pid || ':' || state || ':' || coalesce(queue_position::text, '-'), ','
		   ORDER BY state, queue_position, pid)
		   FROM dbgate.backends WHERE budget = '$budget'", %p);
}

# backend_state(NODE, SESSION) -> the state of SESSION's backend in
# dbgate.backends ('active', 'queued', ...), '' when it has no row.
sub backend_state
{
	my ($node, $s) = @_;
	return poll_psql($node,
		'SELECT state FROM dbgate.backends WHERE pid = ' . $s->pid);
}

# slot_holder(NODE, USER, KEY, NAME) -> a new session of USER whose
# statement holds its slot while it waits for advisory lock KEY (shared),
# which the test holds; it ends when the test lets go of KEY.  One
# assertion NAME that the statement is seen active (waits for that, up to
# the default timeout).
sub slot_holder
{
	my ($node, $user, $key, $name) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	my $h = DbgateTest::Session->new($node, user => $user);
	$h->send("SELECT pg_advisory_lock_shared($key), pg_advisory_unlock_shared($key)");
	poll_ok($node, 'SELECT state FROM dbgate.backends WHERE pid = ' . $h->pid,
		'active', $name);
	return $h;
}

# queued_waiter(NODE, USER, WHAT, NAME, asleep => 0|1) -> a new session of
# USER whose statement SELECT 'WHAT ran' waits in its budget's queue.  One
# assertion NAME that the statement is seen queued (asleep => 1: and
# asleep there, wait event type Extension; a backend is marked queued
# before it goes to sleep), waiting for that up to the default timeout.
sub queued_waiter
{
	my ($node, $user, $what, $name, %p) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	my $w = DbgateTest::Session->new($node, user => $user);
	$w->send("SELECT '$what ran'");
	if ($p{asleep})
	{
		poll_ok($node,
			"SELECT b.state || '/' || a.wait_event_type
			   FROM dbgate.backends b JOIN pg_stat_activity a USING (pid)
			  WHERE pid = " . $w->pid,
			'queued/Extension', $name);
	}
	else
	{
		poll_ok($node, 'SELECT state FROM dbgate.backends WHERE pid = ' . $w->pid,
			'queued', $name);
	}
	return $w;
}

# admitted_at_once(NODE, CTL, USER, KEY, WHAT, [NAME_ACTIVE, NAME_RAN],
#                  during => CODE) -> what CODE returned
# A statement of USER arrives and is seen active -- admitted at once, not
# queued -- while it waits for advisory lock KEY (shared), which the
# session CTL takes first; CODE runs then, if given; then CTL lets go of
# KEY and the statement ends.  The test makes sure that nothing else can
# free a slot meanwhile (its other statements wait for its locks), so the
# state the statement is seen in is the one its arrival gave it.  Waits
# for the statement to reach the gate (active or queued, up to the
# default timeout; dies if it does not).  Two assertions: NAME_ACTIVE
# that it was active (one seen queued is canceled then), NAME_RAN that
# it ran (its output '|t|WHAT').
sub admitted_at_once
{
	my ($node, $ctl, $user, $key, $what, $names, %p) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	$ctl->query("SELECT pg_advisory_lock($key)");
	my $n = DbgateTest::Session->new($node, user => $user);
	$n->send("SELECT pg_advisory_lock_shared($key), pg_advisory_unlock_shared($key), '$what'");
	poll_until($node,
		"SELECT state IN ('active', 'queued') FROM dbgate.backends WHERE pid = "
		  . $n->pid)
	  or die "$names->[0]: the statement of $user did not reach the gate";
	my $state = backend_state($node, $n);
	is($state, 'active', $names->[0]);
	my $during = $p{during} ? $p{during}->() : undef;
	poll_psql($node, 'SELECT pg_cancel_backend(' . $n->pid . ')')
	  if $state ne 'active';
	$ctl->query("SELECT pg_advisory_unlock($key)");
	my ($out, $err) = $n->result;
	is($out, "|t|$what", $names->[1]) or diag $err;
	$n->quit;
	return $during;
}

# worker_pid(NODE) -> the pid of NODE's runaway worker ('' when it is not
# there), from ps: "postgres: NODE: dbgate runaway worker"
sub worker_pid
{
	my ($n) = @_;
	my $name = $n->name;
	for (`ps -eo pid=,args=`)
	{
		return $1 if /^\s*(\d+) postgres: \Q$name\E: dbgate runaway worker\s*$/;
	}
	return '';
}

# worker_runs(NODE, NAME, not => PID) -> its pid: one assertion that a
# runaway worker (other than PID) runs, waited for up to the default
# timeout
sub worker_runs
{
	my ($n, $name, %p) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	my $pid = '';
	for (1 .. 10 * $PostgreSQL::Test::Utils::timeout_default)
	{
		$pid = worker_pid($n);
		last if $pid ne '' && (!defined $p{not} || $pid ne $p{not});
		$pid = '';
		select(undef, undef, undef, 0.1);
	}
	ok($pid ne '', $name);
	return $pid;
}

# poll_ok(NODE, SQL, EXPECTED, NAME, db => DB): one assertion that SQL
# (run as the superuser in database postgres, or DB) returns EXPECTED
# within the default timeout (poll_until).
sub poll_ok
{
	my ($node, $sql, $expected, $name, %p) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	return ok(poll_until($node, $sql, $expected, %p), $name);
}

# poll_until(NODE, SQL, EXPECTED, db => DB) -> 1 once SQL returns EXPECTED
# ('t' by default) with nothing on stderr, 0 when it has not within the
# default timeout: PostgreSQL::Test::Cluster's poll_query_until(), with
# its timeout and its diagnostics (the last output), but SQL runs every
# 50 ms in NODE's poll session (DbgateTest::Poll below) instead of in a
# new psql and a new backend each time.
sub poll_until
{
	my ($node, $sql, $expected, %p) = @_;
	$expected //= 't';
	my $db = $p{db} // 'postgres';
	my ($out, $err);
	my $until = time + $PostgreSQL::Test::Utils::timeout_default;
	for (;;)
	{
		($out, $err) = DbgateTest::Poll::query($node, $db, $sql);
		if (defined $out && $out eq $expected && $err eq '')
		{
			DbgateTest::Poll::end_sessions($node, $db) if $db ne 'postgres';
			return 1;
		}
		last if time > $until;
		select(undef, undef, undef, 0.05);
	}
	DbgateTest::Poll::end_sessions($node, $db) if $db ne 'postgres';
	$out //= '';
	diag qq(poll_query_until timed out executing this query:
$sql
expecting this output:
$expected
last actual query output:
$out
with stderr:
$err);
	return 0;
}

# PostgreSQL::Test::Cluster's own safe_psql and poll_query_until (see below)
our $original_safe_psql = \&PostgreSQL::Test::Cluster::safe_psql;
our $original_poll_query_until = \&PostgreSQL::Test::Cluster::poll_query_until;

# poll_psql(NODE, SQL, db => DB) -> STDOUT: safe_psql() run in NODE's poll
# session (database postgres; another DB gets a psql of its own, as
# safe_psql).  SQL is sent once: a session lost since its last statement
# (a restart, a crash restart, a terminate, an idle timeout) is noticed by
# a ping before it and opened again.  Dies on an error, as safe_psql, but
# the statements after the failing one have run (the session does not
# stop at an error: a poll may fail until its object exists).
sub poll_psql
{
	my ($node, $sql, %p) = @_;
	my $db = $p{db} // 'postgres';
	return $original_safe_psql->($node, $db, $sql) if $db ne 'postgres';
	DbgateTest::Poll::query($node, $db, 'SELECT 1')
	  if DbgateTest::Poll::is_open($node, $db);
	my ($out, $err) = DbgateTest::Poll::query($node, $db, $sql);
	die "poll session of node " . $node->name . " lost: $err"
	  unless defined $out;
	die "error running SQL: '$err'\nwhile running '$sql'"
	  if $err =~ /\b(?:ERROR|FATAL|PANIC):/;
	print "#### Begin standard error\n$err\n#### End standard error\n"
	  if $err ne '';
	return $out;
}

# $node->safe_psql('postgres', SQL), with no other parameter, runs in the
# node's poll session (poll_psql) unless SQL leaves state in its session or
# may end it: a transaction (BEGIN, START TRANSACTION, PREPARE), a setting
# (SET, RESET, set_config), a session-level advisory lock, a cursor, a
# prepared statement, a temporary table, LISTEN, LOAD, DISCARD, COPY from
# the client, a psql meta-command, pg_backend_pid(), a terminate or a
# cancel; such SQL, another database and any parameter (stdout, stderr,
# on_error_stop...) get a new psql and a new backend, as in
# PostgreSQL::Test::Cluster.  A new session costs a process, a backend
# and an authentication, about 60 ms of CPU here, and the tests run
# thousands of superuser statements that need no session of their own.
# A word in a string or a name counts too (UPDATE ... SET, a function
# body's BEGIN): such SQL takes a new session, which is always correct.
# DBGATE_TAP_NEW_SESSIONS=1 gives every call a new session, as before.
our $SESSION_STATE = qr/\\|\b(?:BEGIN|START\s+TRANSACTION|PREPARE|DEALLOCATE|
	SET|RESET|set_config|DISCARD|LISTEN|UNLISTEN|LOAD|DECLARE|TEMP|TEMPORARY|STDIN|
	pg_advisory_lock|pg_advisory_lock_shared|pg_try_advisory_lock|
	pg_try_advisory_lock_shared|pg_backend_pid|pg_terminate_backend|
	pg_cancel_backend)\b/xi;

{
	no warnings 'redefine';
	*PostgreSQL::Test::Cluster::safe_psql = sub {
		my ($node, $db, $sql, @params) = @_;
		return $original_safe_psql->(@_)
		  if @params
		  || $db ne 'postgres'
		  || $sql =~ $SESSION_STATE
		  || $ENV{DBGATE_TAP_NEW_SESSIONS};
		return poll_psql($node, $sql);
	};
	# and its poll_query_until (which wait_for_catchup and friends call
	# too) polls in the poll session, as poll_until
	*PostgreSQL::Test::Cluster::poll_query_until = sub {
		my ($node, $db, $sql, $expected) = @_;
		return poll_until($node, $sql, $expected, db => $db)
		  unless $ENV{DBGATE_TAP_NEW_SESSIONS};
		return $original_poll_query_until->(@_);
	};
}

# wire_run(NODE, USER, LINES) -> output lines of test/tools/pgwire.py, a
# client that sends exactly the protocol messages LINES ask for (a Bind
# without Execute, a fast-path function call; see that file), as USER in
# database postgres.
sub wire_run
{
	my ($node, $user, $lines) = @_;
	my $tool = File::Spec->catfile(File::Basename::dirname(__FILE__),
		File::Spec->updir, 'tools', 'pgwire.py');
	my ($out, $err) = ('', '');
	IPC::Run::run([ 'python3', $tool, $node->host, $node->port, $user,
			'postgres' ], '<', \($lines . "\n"), '>', \$out, '2>', \$err,
		IPC::Run::timeout($PostgreSQL::Test::Utils::timeout_default));
	die "pgwire.py failed: $err" if $err ne '';
	return [ split /\n/, $out ];
}

# wire_start(NODE, USER, LINES) -> a handle of pgwire.py running LINES in
# the background (as wire_run); wire_finish(HANDLE) -> its output lines.
sub wire_start
{
	my ($node, $user, $lines) = @_;
	my $tool = File::Spec->catfile(File::Basename::dirname(__FILE__),
		File::Spec->updir, 'tools', 'pgwire.py');
	# the commands come from a file: a scalar would only be fed while the
	# caller pumps
	my $in = PostgreSQL::Test::Utils::tempdir() . '/pgwire.in';
	PostgreSQL::Test::Utils::append_to_file($in, $lines . "\n");
	my $h = { out => '', err => '' };
	$h->{run} = IPC::Run::start(
		[ 'python3', $tool, $node->host, $node->port, $user, 'postgres' ],
		'<', $in, '>', \$h->{out}, '2>', \$h->{err},
		IPC::Run::timeout($PostgreSQL::Test::Utils::timeout_default));
	return $h;
}

sub wire_finish
{
	my ($h) = @_;
	$h->{run}->finish;
	die "pgwire.py failed: $h->{err}" if $h->{err} ne '';
	return [ split /\n/, $h->{out} ];
}

# walgen_functions(NODE): builds test/modules/dbgate_walgen, a test-only
# module that logs dbgate WAL records of any contents, with PGXS in this
# test's own directory (tmp_check/dbgate_walgen_<test>, once per test),
# and creates in database postgres of NODE the functions that load it
# from there: walgen_image(bytea) RETURNS xid logs an IMAGE record of the
# given contents as part of the current transaction and returns that
# transaction's ID; walgen_confirm(xid) logs and flushes the CONFIRM
# record of a transaction ID.
sub walgen_functions
{
	my ($node) = @_;
	my $src = File::Spec->catfile(File::Basename::dirname(__FILE__),
		File::Spec->updir, 'modules', 'dbgate_walgen');
	my $moddir = "$PostgreSQL::Test::Utils::tmp_check/dbgate_walgen_"
	  . File::Basename::basename($0, '.pl');
	if (!-e "$moddir/dbgate_walgen.so")
	{
		mkdir $moddir or die "cannot create $moddir: $!" unless -d $moddir;
		File::Copy::copy("$src/$_", "$moddir/$_") or die "cannot copy $_: $!"
		  for qw(Makefile dbgate_walgen.c);
		system_or_bail('make', '-s', '-C', $moddir,
			'PG_CONFIG=' . ($ENV{PG_CONFIG} // 'pg_config'));
	}
	$node->safe_psql(
		'postgres', qq{
		CREATE FUNCTION walgen_image(bytea) RETURNS xid
		  AS '$moddir/dbgate_walgen.so', 'dbgate_walgen_image' LANGUAGE C STRICT;
		CREATE FUNCTION walgen_confirm(xid) RETURNS void
		  AS '$moddir/dbgate_walgen.so', 'dbgate_walgen_confirm' LANGUAGE C STRICT;
	});
	return;
}

# walgen_log_image(NODE, BYTES) -> the transaction ID of an IMAGE record
# with contents BYTES that NODE logs (walgen_functions() first)
sub walgen_log_image
{
	my ($node, $bytes) = @_;
	return $node->safe_psql('postgres',
		"SELECT walgen_image('\\x" . unpack('H*', $bytes) . "')");
}

# ---------------------------------------------------------------------------
# The poll session: one psql per node (and database) that poll_until(),
# poll_ok(), poll_psql() and the reads of this module (status_of,
# backends_of, backend_state, a Session's pid) run their SQL in, opened on
# first use and kept: a poll in a new psql each 100 ms (poll_query_until)
# starts a process and a backend, with authentication, each time, and the
# tests poll a lot.  It is a session of the bootstrap superuser (never
# gated, never counted in a budget, not in dbgate.backends) with
# application_name 'dbgate_poll'; a query of a test that counts sessions
# in pg_stat_activity sees it.  A session lost to a restart, a crash
# restart or a terminate is noticed by the query that fails (its psql
# exits: a psql reading a script does not reconnect) and opened again by
# the next one; stop, restart, kill9, promote and teardown_node of the node
# close it first, so that no psql outlives its server.  A session of
# another database than postgres is closed after each poll (it would stand
# in the way of DROP DATABASE).

package DbgateTest::Poll;

use strict;
use warnings FATAL => 'all';

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;

my %open;    # "node name/database" -> { psql, marker, owner }

# query(NODE, DB, SQL) -> (STDOUT, STDERR) of SQL in the poll session of
# NODE and DB (opened when there is none), or (undef, WHY) when the session
# could not be opened or was lost on the way (it is closed then).
sub query
{
	my ($node, $db, $sql) = @_;
	local $SIG{PIPE} = 'IGNORE';    # a psql that exited: its stdin is closed
	my $key = $node->name . "/$db";
	my $s = $open{$key};
	# a forked process opens its own: the psql is the parent's
	delete $open{$key}, undef $s if $s && $s->{owner} != $$;
	if (!$s)
	{
		local $ENV{PGAPPNAME} = 'dbgate_poll';
		my $psql = eval {
			$node->background_psql($db, on_error_stop => 0, wait => 0);
		};
		return (undef, "could not start psql: $@") unless $psql;
		$s = $open{$key} = { psql => $psql, marker => 0, owner => $$ };
	}
	my $psql = $s->{psql};
	my $m = 'dbgate_poll_' . ++$s->{marker};
	$psql->{stdout} = '';
	$psql->{stderr} = '';
	# on a line of its own: SQL may end in a comment
	$sql .= "\n;" unless $sql =~ /;\s*\z/;
	$psql->{timeout}->start($PostgreSQL::Test::Utils::timeout_default);
	$psql->{stdin} .= "$sql\n\\echo $m\n\\warn $m\n";
	my $done = eval {
		$psql->{run}->pump()
		  until ($psql->{stdout} =~ /^$m\n/m && $psql->{stderr} =~ /^$m\n/m)
		  || !$psql->{run}->pumpable
		  || $psql->{timeout}->is_expired;
		1;
	};
	my ($out, $err) = ($psql->{stdout}, $psql->{stderr});
	# psql may go on after its connection was lost (its next statements
	# fail): a FATAL or a lost connection ends the session
	if (!$done
		|| !($out =~ s/^$m\n//m && $err =~ s/^$m\n//m)
		|| $err =~ /\bFATAL:|server closed the connection|no connection to the server|connection to server was lost|terminating connection because of crash/
	  )
	{
		$err .= $@ if !$done;
		end_sessions($node, $db);
		chomp $err;
		return (undef, $err);
	}
	chomp $out;
	chomp $err;
	return ($out, $err);
}

# is_open(NODE, DB) -> whether this process has a poll session of NODE and DB
sub is_open
{
	my ($node, $db) = @_;
	my $s = $open{ $node->name . "/$db" };
	return $s && $s->{owner} == $$;
}

# end_sessions(NODE, DB): end NODE's poll session of DB, or with DB undef all of
# NODE's, if open.  In a forked process, only forget them: the psql is the
# parent's.
sub end_sessions
{
	my ($node, $db) = @_;
	local $SIG{PIPE} = 'IGNORE';
	my $name = $node->name;
	for my $key (grep { m{^\Q$name\E/(.*)\z} && (!defined $db || $1 eq $db) }
		keys %open)
	{
		my $s = delete $open{$key};
		next if $s->{owner} != $$;
		my $psql = $s->{psql};
		eval {
			$psql->{timeout}->start($PostgreSQL::Test::Utils::timeout_default);
			$psql->{stdin} .= "\\q\n" if $psql->{run}->pumpable;
			$psql->{run}->finish;
		};
		eval { $psql->{run}->kill_kill; } if $@;
	}
	return;
}

# A node's poll sessions end before the node stops, restarts, crashes on
# purpose or is promoted (the next poll opens one again).
for my $method (qw(stop restart kill9 promote teardown_node))
{
	no strict 'refs';
	no warnings 'redefine';
	my $orig = \&{"PostgreSQL::Test::Cluster::$method"};
	*{"PostgreSQL::Test::Cluster::$method"} = sub {
		DbgateTest::Poll::end_sessions($_[0]);
		goto &$orig;
	};
}

# ---------------------------------------------------------------------------
# A psql session in the background, for statements that block (queued,
# waiting for a lock) while the test goes on.  Errors do not end the
# session (ON_ERROR_STOP is off).  BackgroundPsql gives a session one
# timer for its whole life; here each send, result and wait_exit starts
# it again, so that every wait gets the whole default timeout and a
# session that lives long is not ended by a slow machine.  The session is named by its
# application_name, which is how its backend pid is found without running a
# statement (a gated role's statements would count in the budget).

package DbgateTest::Session;

use strict;
use warnings FATAL => 'all';

use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);

my $session_no = 0;

# new(NODE, user => ROLE, db => DB, name => APPLICATION_NAME)
sub new
{
	my ($class, $node, %p) = @_;
	my @extra = ('-v', 'VERBOSITY=verbose');
	push @extra, '-U', $p{user} if defined $p{user};
	my $name = $p{name} // 'dbgate_tap_' . ++$session_no;
	my $psql = $node->background_psql(
		$p{db} // 'postgres',
		on_error_stop => 0,
		extra_params => \@extra);
	my $self = bless {
		node => $node,
		psql => $psql,
		name => $name,
		marker => 0,
	}, $class;
	$self->send("SET application_name = '$name';");
	my (undef, $err) = $self->result;
	die "could not set application_name: $err" if $err ne '';
	$self->{pid} = DbgateTest::poll_psql($node,
		"SELECT pid FROM pg_stat_activity WHERE application_name = '$name'");
	die "no backend for session $name" unless $self->{pid} =~ /^\d+$/;
	return $self;
}

sub pid { return $_[0]->{pid}; }
sub name { return $_[0]->{name}; }

# send(SQL): hand SQL to psql and return without waiting for its result.
# A final semicolon is added when missing.
sub send
{
	my ($self, $sql) = @_;
	my $psql = $self->{psql};
	$sql .= ';' unless $sql =~ /;\s*\z/;
	# taken before psql can see the statement, so that sent_at to done_at
	# is never shorter than the statement took in the server
	$self->{sent_at} = time;
	$psql->{timeout}->start;
	$psql->{stdin} .= "$sql\n";
	$psql->{run}->pump_nb;
	return;
}

# sent_at: when the last send() started (seconds, fractional).
sub sent_at { return $_[0]->{sent_at}; }

# result() -> (STDOUT, STDERR, SQLSTATE) of everything sent since the last
# result(), waiting until psql has processed it.  Also records done_at.
sub result
{
	my ($self) = @_;
	my $psql = $self->{psql};
	my $m = 'dbgate_tap_done_' . ++$self->{marker};
	$psql->{timeout}->start;
	$psql->{stdin} .= "\\echo $m\n\\warn $m\n";
	$psql->{run}->pump()
	  until ($psql->{stdout} =~ /^$m\n/m && $psql->{stderr} =~ /^$m\n/m)
	  || $psql->{timeout}->is_expired;
	die "timed out waiting for session $self->{name}; stderr: $psql->{stderr}"
	  if $psql->{timeout}->is_expired;
	$self->{done_at} = time;
	my ($out, $err) = ($psql->{stdout}, $psql->{stderr});
	$psql->{stdout} = '';
	$psql->{stderr} = '';
	$out =~ s/^$m\n//m;
	$err =~ s/^$m\n//m;
	chomp $out;
	chomp $err;
	return ($out, $err, DbgateTest::sqlstate($err));
}

sub done_at { return $_[0]->{done_at}; }

# query(SQL) -> (STDOUT, STDERR, SQLSTATE): send and wait.
sub query
{
	my ($self, $sql) = @_;
	$self->send($sql);
	return $self->result;
}

# wait_exit() -> STDERR: wait for psql to exit on its own (its server
# connection was closed), returning what it printed.
sub wait_exit
{
	my ($self) = @_;
	my $psql = $self->{psql};
	$psql->{timeout}->start;
	eval { $psql->{run}->finish; };
	$self->{closed} = 1;
	return $psql->{stderr};
}

# kill_client(): end the psql process with SIGKILL (the server is not told).
sub kill_client
{
	my ($self) = @_;
	$self->{psql}->{run}->signal('KILL');
	eval { $self->{psql}->{run}->finish; };
	$self->{closed} = 1;
	return;
}

# quit(): end the session normally (if it is still there).
sub quit
{
	my ($self) = @_;
	return if $self->{closed};
	$self->{closed} = 1;
	my $psql = $self->{psql};
	eval {
		$psql->{stdin} .= "\\q\n";
		$psql->{run}->finish;
	};
	return;
}

1;
