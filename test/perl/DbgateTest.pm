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
  poll_ok backends_of backend_state slot_holder queued_waiter admitted_at_once
  wire_run wire_start wire_finish walgen_functions walgen_log_image
  worker_pid worker_runs);

# The counters of dbgate.status that counters_are() compares; those not
# named in the expected hash must be 0.
our @COUNTERS = qw(active queued admitted admitted_after_wait rejected_full
  rejected_timeout canceled_waiting admitted_lock_holder);

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
	my $out = $node->safe_psql($p{db} // 'postgres',
		    'SELECT '
		  . join(', ', @cols)
		  . " FROM dbgate.status WHERE budget = '$budget'");
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
	return $node->safe_psql($p{db} // 'postgres',
		"SELECT string_agg(pid || ':' || state || ':' || coalesce(queue_position::text, '-'), ','
		   ORDER BY state, queue_position, pid)
		   FROM dbgate.backends WHERE budget = '$budget'");
}

# backend_state(NODE, SESSION) -> the state of SESSION's backend in
# dbgate.backends ('active', 'queued', ...), '' when it has no row.
sub backend_state
{
	my ($node, $s) = @_;
	return $node->safe_psql('postgres',
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
	$node->poll_query_until('postgres',
		"SELECT state IN ('active', 'queued') FROM dbgate.backends WHERE pid = "
		  . $n->pid)
	  or die "$names->[0]: the statement of $user did not reach the gate";
	my $state = backend_state($node, $n);
	is($state, 'active', $names->[0]);
	my $during = $p{during} ? $p{during}->() : undef;
	$node->safe_psql('postgres', 'SELECT pg_cancel_backend(' . $n->pid . ')')
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

# poll_ok(NODE, SQL, EXPECTED, NAME): one assertion that SQL (run as the
# superuser in database postgres) returns EXPECTED within the default
# timeout.
sub poll_ok
{
	my ($node, $sql, $expected, $name, %p) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	return ok($node->poll_query_until($p{db} // 'postgres', $sql, $expected),
		$name);
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
	$self->{pid} = $node->safe_psql('postgres',
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
