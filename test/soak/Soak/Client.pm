# Soak::Client - one client session of the soak test.
#
# A client is a forked process that logs in as one role and runs a random
# mix of operations until the run directory's "stop" file appears, then
# writes what it observed to client-<id>.stats and exits.
#
# Bookkeeping.  For the roles of the budgets whose counters are checked
# exactly, every statement that asks for an admission is accounted under the
# connection's epoch by what the client saw of it:
#
#   adm_lo   certainly admitted: it succeeded, or failed in a way that only
#            an executing statement can (division by zero, lock timeout,
#            deadlock, a statement timeout that cannot fire in the queue)
#   amb      maybe admitted, maybe left the queue (canceled_waiting), maybe
#            neither: canceled, terminated, disconnected, or a statement
#            timeout that may have fired while it waited
#   full     53300 "is full"          (rejected_full)
#   qto      53300 "timed out waiting" (rejected_timeout)
#   lost_unconf  statements whose result never arrived and that were not
#            seen queued or active first: a rejection of one of them could
#            have been counted without the client seeing it
#   bypass   (1.2) reads below the budget's min_cost that ran: bypassed
#   bypass_amb  such reads canceled, timed out or lost (maybe counted,
#            maybe not: the count is taken at executor start), or run while
#            dbgate.enabled went off and on (then not counted)
#   idle_term  sessions ended by the budget's idle_in_transaction_timeout
#            (25P03 while the transaction kept a slot and the budget's
#            timeout was the tighter one): terminated_idle
#   full_t, qto_t  (1.3) 53300 naming the budget's runaway_budget: a
#            statement whose query was quarantined in a 'demote' budget is
#            gated by its runaway_budget (so its rejections and its
#            admission are the target's; it counts in quarantined)
#   long     (1.3) statements that ran at least ra_long_ms (any mode, any
#            outcome): a runaway of the budget is one of them
#   ra_sure  (1.3) pg_sleep()s of at least ra_sure_ms (more than the
#            longest runaway_after) that asked for an admission and ended
#            normally: each one executed that long under its slot, so
#            the budget's runaway timer fired (it was a runaway of the
#            budget), or it was quarantined.  The time the client measured
#            is not used: it includes the wait and the machine's delays
#
# A slot is kept to the end of the transaction once the transaction holds a
# transaction ID (scope 'statement': after its first UPDATE or SELECT FOR
# UPDATE, or CREATE TABLE AS) or from its first gated statement (scope
# 'transaction'); ROLLBACK TO SAVEPOINT keeps it.  The client follows this
# per transaction (in_txn, kept, savepoint depth): a gated statement runs
# in mode 'one' (asks for an admission), 'held' (runs under the kept slot:
# no admission, never queued or rejected) or 'maybe' (the client cannot
# tell, after an ambiguous failure inside a savepoint).
#
# A DO block or procedure reports each of its admissions with
# RAISE NOTICE 'soak_step' (plain RAISE runs no executor, so it takes no
# slot); statements that run while the backend already holds a slot (an open
# cursor, a kept slot) are never admitted, queued or rejected.
package Soak::Client;

use strict;
use warnings;

use DBI;
use DBD::Pg qw(:async);
use Socket ();
use Time::HiRes qw(time sleep);

use Soak::Common qw(read_epoch flag_set dsn classify_error error_parts weighted_pick);

# A statement running this long means a lost wake-up or a stuck queue: no
# operation of the workload can take more than a few seconds.
use constant HANG_SECONDS => 60;
use constant HOT_ROWS => 4;

# Operation mix by role class.
my %COMMON = (
	sleep => 20,
	cpu => 9,
	error => 7,
	hot => 9,
	write_txn => 9,
	idle => 5,
	savepoint => 8,
	cursor => 8,
	do_block => 7,
	procedure => 5,
	prepared => 5,
	explain => 3,
	nested => 3,
	ctas => 2,
	parallel => 2,
	set_role => 2,
	copy => 2,
	hold_cursor => 2);
# Short statements only, none that keeps a slot while its client thinks
# (no write transactions, pauses, cursors held open, CREATE TABLE AS,
# parallel queries): how long a slot is held is bounded by the budget's
# statement_timeout, which bounds the waits of a 'lifo' budget.
my %SHORT = (
	sleep => 25,
	cpu => 8,
	error => 7,
	savepoint => 6,
	do_block => 7,
	procedure => 5,
	prepared => 6,
	explain => 3,
	nested => 4,
	set_role => 2,
	copy => 3,
	hold_cursor => 2,
	amb_timeout => 3,
	disconnect => 2);
my %MIX = (
	a => {%COMMON},
	b => { %COMMON, amb_timeout => 4, disconnect => 4 },
	c => { %COMMON, amb_timeout => 4, disconnect => 4 },
	d => { %COMMON, idle => 12, amb_timeout => 2, disconnect => 3 },
	# 1.3: a budget that demotes its runaways, and its runaway_budget
	e => { %COMMON, sleep => 26, amb_timeout => 3 },
	s => { %COMMON, amb_timeout => 3, disconnect => 2 },
	free => { %COMMON, amb_timeout => 4, disconnect => 2 },
	# 1.2: a 'lifo' budget, a rate-limited one, the children of parents
	l => {%SHORT},
	r => { %SHORT, hot => 3, write_txn => 3, amb_timeout => 4 },
	h => { %COMMON, amb_timeout => 3, disconnect => 2 },
	# a budget with min_cost (100) and max_memory_mb: reads far below the
	# cost pass ungated, sorts and hashes far above it are gated and get
	# memory grants, writes are gated
	m => { m_cheap => 30, m_sort => 15, m_hash => 10, hot => 6, m_amb => 4 },
	# 1.3: a budget with key_by 'setting:app.tenant': short statements,
	# each under a tenant set before it (see tenant)
	k => { %SHORT, amb_timeout => 3 });

# The longest pg_sleep() of the workload (seconds), per client (see new).
my $sleep_max = 2.3;

# new(id, role, class, budget, checked, qt_ms, budget_st_ms, session_st_ms,
#     scope, own_idle_ms, idle_counted, idle_limit_ms, host, port, dir, seed,
#     superuser, sleep_max)
#   budget_st_ms: the budget's statement_timeout, or the smallest non-zero
#   one it can have (a lower bound for check_timeout)
#   scope: the budget's scope ('statement' or 'transaction')
#   own_idle_ms: the session's own idle_in_transaction_session_timeout
#   idle_counted: a session ended by an idle timeout while keeping a slot
#   counts in terminated_idle (the budget's timeout is the tighter one)
#   idle_limit_ms: the longest idle time in a transaction that keeps a slot
#   that the session can survive (0: no limit); longer pauses must end it
#   sleep_max: the longest pg_sleep() of the random sleeps (default 2.3 s)
#   targets: (1.3) { budget => its queue_timeout in ms, or undef when it
#   varies }: the budgets that the session's budget may demote to, whose
#   rejections the session's statements may get (see full_t)
#   ra_long_ms, ra_sure_ms: (1.3) see long and ra_sure above (0: not
#   counted)
sub new
{
	my ($class, %p) = @_;
	my $self = bless {%p}, $class;
	$self->{dbh} = undef;
	$self->{side} = undef;
	$self->{epoch} = -1;
	$self->{acct} = {};
	$self->{tot} = {};
	$self->{errors} = {};
	$self->{ops} = {};
	$self->{fails} = [];
	$self->{nfails} = 0;
	$self->{seq} = 0;
	$self->{scope} //= 'statement';
	$self->{own_idle_ms} //= 0;
	$self->{idle_limit_ms} //= 0;
	$self->{in_txn} = 0;
	$self->{kept} = 0;
	$self->{sp} = 0;
	$self->{targets} //= {};
	my @ops = sort keys %{ $MIX{ $p{class} } };
	$self->{mix} = [ map { [ $_, $MIX{ $p{class} }{$_} ] } @ops ];
	return $self;
}

sub fail
{
	my ($self, $msg) = @_;
	$self->{nfails}++;
	push @{ $self->{fails} }, $msg if @{ $self->{fails} } < 20;
	return;
}

sub stopping { my ($self) = @_; return flag_set($self->{dir}, 'stop'); }

# ---------------------------------------------------------------------
# Main loop

sub run
{
	my ($self) = @_;
	srand($self->{seed});
	$sleep_max = $self->{sleep_max} if $self->{sleep_max};
	local $SIG{__WARN__} = sub {
		my ($w) = @_;
		if ($w =~ /soak_step/) { $self->{notices}++; }
		elsif ($w =~ /^(NOTICE|WARNING|INFO):/) { }
		else { print STDERR "client $self->{id}: $w"; }
	};
	while (!$self->stopping)
	{
		if (!$self->{dbh})
		{
			$self->connect or next;
		}
		$self->tenant if $self->{class} eq 'k';
		my $op = weighted_pick($self->{mix});
		$self->{ops}{$op}++;
		$self->{rejected} = 0;
		$self->{op_t0} = time;
		$self->{op} = $op;
		my $m = "op_$op";
		$self->$m();
		$self->check_session_settings
		  if !$self->{lost} && $self->{dbh} && rand() < 0.1;
		$self->drop_conn if $self->{lost};
		sleep(rand(0.03) + ($self->{rejected} ? rand(0.15) : 0));
	}
	$self->drop_conn;
	$self->drop_side;
	$self->write_stats;
	return;
}

# Connect when an epoch is running, and make sure it still runs once
# connected (a connection made after a crash but before the counters were
# reset belongs to no epoch and is dropped unused).
sub connect
{
	my ($self) = @_;
	while (!$self->stopping)
	{
		my ($e, $state) = read_epoch($self->{dir});
		if ($state ne 'running')
		{
			sleep 0.05;
			next;
		}
		my $dbh = DBI->connect(
			dsn($self->{host}, $self->{port}),
			$self->{role}, '',
			{
				AutoCommit => 1,
				RaiseError => 0,
				PrintError => 0,
				PrintWarn => 1,
				AutoInactiveDestroy => 1
			});
		if (!$dbh)
		{
			sleep 0.1;
			next;
		}
		my $ok = $dbh->do("SET application_name = 'soak-$self->{id}'");
		$ok &&= $dbh->do("SET statement_timeout = '$self->{session_st_ms}ms'");
		$ok &&= $dbh->do(
			"SET idle_in_transaction_session_timeout = '$self->{own_idle_ms}ms'")
		  if $self->{own_idle_ms};
		my ($e2, $state2) = read_epoch($self->{dir});
		if (!$ok || $e2 != $e || $state2 ne 'running')
		{
			$dbh->disconnect;
			sleep 0.05;
			next;
		}
		$self->drop_side if $self->{side_epoch} && $self->{side_epoch} != $e;
		$self->{dbh} = $dbh;
		$self->{epoch} = $e;
		$self->{st_ms} = $self->{session_st_ms};
		$self->{lost} = 0;
		$self->{in_txn} = 0;
		$self->{kept} = 0;
		$self->{sp} = 0;
		$self->{late_timeout_possible} = 0;
		$self->{tot}{connects}++;
		return 1;
	}
	return 0;
}

# Close the connection; after a shutdown() of the socket or a lost
# connection the pending result is collected first, so that DBD::Pg does not
# send a cancel request on our behalf.
sub drop_conn
{
	my ($self) = @_;
	my $dbh = $self->{dbh} or return;
	$self->{dbh} = undef;
	$self->{sth} = {};
	if ($dbh->{pg_async_status})
	{
		my $t0 = time;
		while (!$dbh->pg_ready && time - $t0 < 5) { sleep 0.01 }
		$dbh->pg_result;
	}
	$dbh->disconnect;
	return;
}

# A superuser connection (never gated) to look at our own backend.
sub side
{
	my ($self) = @_;
	return $self->{side} if $self->{side};
	my $dbh = DBI->connect(
		dsn($self->{host}, $self->{port}),
		$self->{superuser}, '',
		{ AutoCommit => 1, RaiseError => 0, PrintError => 0, AutoInactiveDestroy => 1 })
	  or return undef;
	$self->{side} = $dbh;
	$self->{side_epoch} = $self->{epoch};
	return $dbh;
}

sub drop_side
{
	my ($self) = @_;
	my $dbh = $self->{side} or return;
	$self->{side} = undef;
	$dbh->disconnect;
	return;
}

# ---------------------------------------------------------------------
# Running and accounting statements

# start(SQL, params => [...]) sends a statement; returns an outcome hash,
# with done => 1 if sending failed already.
sub start
{
	my ($self, $sql, %opt) = @_;
	my $dbh = $self->{dbh};
	my $o = { sql => $sql, t0 => time };
	$self->{notices} = 0;
	$self->{tot}{statements}++;
	my $rv;
	if ($opt{fetch})
	{
		# a statement whose row is read: not prepared on the server, so
		# that it is planned with its literal values every time
		$o->{sth} = $dbh->prepare($sql, { pg_async => PG_ASYNC, pg_server_prepare => 0 });
		$rv = $o->{sth}->execute if $o->{sth};
	}
	elsif ($opt{params})
	{
		my $sth = $self->{sth}{$sql} //=
		  $dbh->prepare($sql, { pg_async => PG_ASYNC });
		$rv = $sth->execute(@{ $opt{params} }) if $sth;
	}
	else
	{
		$rv = $dbh->do($sql, { pg_async => PG_ASYNC });
	}
	if (!defined $rv)
	{
		$self->collect_error($o);
		$o->{done} = 1;
	}
	return $o;
}

# finish(OUTCOME): wait for the result of a started statement.
sub finish
{
	my ($self, $o) = @_;
	return $o if $o->{done};
	my $dbh = $self->{dbh};
	my $t0 = time;
	my $hung = 0;
	while (!$dbh->pg_ready)
	{
		if (!$hung && time - $t0 > HANG_SECONDS)
		{
			my $msg = sprintf("statement still running after %d s (epoch %d, pid %d): %s",
				HANG_SECONDS, $self->{epoch}, $dbh->{pg_pid}, $o->{sql});
			$self->fail($msg);
			print STDERR "client $self->{id}: $msg\n";
			$hung = 1;
		}
		if ($hung && $self->stopping)
		{
			# give up, so that what was seen gets written
			$self->shut_socket;
		}
		my $rin = '';
		vec($rin, $dbh->{pg_socket}, 1) = 1;
		select($rin, undef, undef, 0.05);
	}
	my $res = $dbh->pg_result;
	$o->{elapsed_ms} = (time - $o->{t0}) * 1000;
	# DBD::Pg 3.21 returns a defined value for an asynchronous statement
	# that failed, with only the SQLSTATE set (3.18 returns undef): an
	# SQLSTATE marks the failure either way.
	if (defined $res && ($dbh->state // '') eq '')
	{
		$o->{ok} = 1;
		if ($o->{sth})
		{
			my $row = eval { $o->{sth}->fetchrow_arrayref };
			$o->{row} = $row ? [@$row] : undef;
		}
	}
	else { $self->collect_error($o); }
	$o->{notices} = $self->{notices};
	$o->{done} = 1;
	return $o;
}

sub collect_error
{
	my ($self, $o) = @_;
	my $dbh = $self->{dbh};
	$o->{state} = $dbh->state // '';
	$o->{errstr} = $dbh->errstr // '';
	# where DBD::Pg did not set errstr (see finish), the message is read
	# from the error's fields, in psql's layout
	if ($o->{errstr} eq '' && $o->{state} ne '' && $dbh->can('pg_error_field'))
	{
		my $sev = $dbh->pg_error_field('severity') // 'ERROR';
		my $primary = $dbh->pg_error_field('primary') // '';
		my $detail = $dbh->pg_error_field('detail');
		$o->{errstr} = "$sev:  $primary" . (defined $detail ? "\nDETAIL:  $detail" : '');
	}
	($o->{msg}, $o->{detail}) = error_parts($o->{errstr});
	$o->{notices} = $self->{notices};
	return;
}

# sql(SQL, MODE, %opt): run one statement and account for it; returns true
# if it succeeded.  MODE says what the statement asks of the gate:
#   gated  a gated statement: 'one', 'held' or 'maybe', whatever the
#          current transaction makes it (see gm)
#   one    needs a slot (the backend holds none)
#   held   runs while the backend holds a slot: never queued or rejected
#   maybe  'one' or 'held', the client cannot tell which
#   none   not gated (utility statements, plain EXPLAIN)
#   multi  a DO block or CALL: its statements are gated one at a time
# Options: params => [...] (extended protocol); writes => 1: once it runs,
# the statement gets its transaction a transaction ID (UPDATE, SELECT FOR
# UPDATE, CREATE TABLE AS); fail_held => 1 (multi): a failure at the end
# of the block hits a statement that runs under a kept slot; min_run_ms
# => N: ended normally, the statement executed at least N ms (a sleep).
sub sql
{
	my ($self, $sql, $mode, %opt) = @_;
	return 0 if $self->{lost} || !$self->{dbh};
	$mode = $self->gm if $mode eq 'gated';
	my $o = $self->finish($self->start($sql, %opt));
	delete $o->{sth};
	$self->account($o, $mode, %opt);
	$self->track_txn($o, $mode, %opt);
	$self->{last} = $o;
	# A COMMIT or ROLLBACK that failed before it ran (canceled, or hit by
	# a statement timeout that ran out as the previous statement ended and
	# is reported in the next one) leaves the transaction open, and failed
	# now: roll back until the server has ended it.  After a statement
	# that found its transaction failed (a client bug, reported above)
	# the same puts client and server in step again.
	if (!$o->{ok} && !$self->{lost}
		&& ($sql =~ /^(COMMIT|ROLLBACK)$/ || $o->{kind} eq 'aborted'))
	{
		my $depth = $opt{rollback_depth} // 0;
		$self->sql('ROLLBACK', 'none', rollback_depth => $depth + 1)
		  if $depth < 5;
	}
	return $o->{ok} ? 1 : 0;
}

# The mode of the next gated statement of the current transaction.
sub gm
{
	my ($self) = @_;
	return 'one' unless $self->{in_txn};
	return 'maybe' if $self->{kept} eq 'maybe';
	return $self->{kept} ? 'held' : 'one';
}

# Follow the transaction after a statement: does it keep a slot?
sub track_txn
{
	my ($self, $o, $mode, %opt) = @_;
	my $sql = $o->{sql};
	if ($self->{lost})
	{
		$self->{in_txn} = $self->{kept} = $self->{sp} = 0;
		return;
	}
	if ($sql =~ /^BEGIN\b/)
	{
		($self->{in_txn}, $self->{kept}, $self->{sp}) = ($o->{ok} ? 1 : 0, 0, 0);
		return;
	}
	if ($sql =~ /^(COMMIT|ROLLBACK)$/)
	{
		$self->{in_txn} = $self->{kept} = $self->{sp} = 0;
		return;
	}
	return unless $self->{in_txn};
	if ($sql =~ /^SAVEPOINT /) { $self->{sp}++ if $o->{ok}; return; }
	if ($sql =~ /^RELEASE /) { $self->{sp}-- if $o->{ok}; return; }
	return if $sql =~ /^ROLLBACK TO /;
	my $txn_scope = $self->{scope} eq 'transaction';
	if ($o->{ok})
	{
		# ('held' by an open cursor is not kept: CLOSE may return it)
		$self->{kept} = 1
		  if ($mode eq 'one' || $mode eq 'maybe') && ($txn_scope || $opt{writes});
		return;
	}
	if ($self->{sp} == 0)
	{
		# the transaction failed: its slot went with the abort
		$self->{kept} = 0;
		return;
	}
	# a subtransaction failed; ROLLBACK TO keeps a kept slot
	return if $self->{kept} eq '1' || ($mode ne 'one' && $mode ne 'maybe');
	my $k = $o->{kind};
	if ($k eq 'exec')
	{
		# it was admitted, and ran
		$self->{kept} = $txn_scope ? 1 : $opt{writes} ? 'maybe' : $self->{kept};
	}
	elsif ($k ne 'full' && $k ne 'qto' && $k ne 'parse')
	{
		# maybe admitted (canceled, timed out)
		$self->{kept} = 'maybe' if $txn_scope || $opt{writes};
	}
	return;
}

sub account
{
	my ($self, $o, $mode, %opt) = @_;
	my $kind = $o->{ok} ? 'ok' : classify_error($o->{state}, $o->{errstr});
	# (1.3) a statement canceled by its budget's runaway_after had been
	# admitted and ran (as one that failed while executing); a quarantined
	# query was refused before the gate (as one the parser refused)
	my $orig = $kind;
	if ($kind eq 'ra' || $kind eq 'quar')
	{
		my $b = $self->{budget} // '';
		$self->fail("$kind ($o->{state}) in budget '$b', which has no runaway_after: $o->{sql}: $o->{msg}")
		  unless $b eq 'soak_a';
		$self->fail("a runaway cancel names another budget than $b: $o->{msg}")
		  unless $o->{msg} =~ /"\Q$b\E"/;
		$kind = $kind eq 'ra' ? 'exec' : 'parse';
	}
	$o->{kind} = $kind;
	my $late = $self->{late_timeout_possible};
	my $h = $self->{history} //= [];
	push @$h, sprintf('%s [%s, %.0f ms]', $o->{sql}, $kind, $o->{elapsed_ms} // -1);
	shift @$h while @$h > 8;
	$self->{tot}{"outcome_$orig"}++;
	$self->{errors}{ $o->{state} }++ if !$o->{ok} && $o->{state} ne '';
	$self->{lost} = 1 if $kind eq 'lost';
	$self->{rejected} = 1 if $kind eq 'full' || $kind eq 'qto';
	$self->{tot}{"mode_$mode"}++ if $mode eq 'held' || $mode eq 'maybe';

	$self->check_rejection($o, $mode) if $kind eq 'full' || $kind eq 'qto';
	$self->fail("unexpected error ($o->{state}) for: $o->{sql}: $o->{msg}")
	  if $kind eq 'other';
	$self->fail("statement in a failed transaction: $o->{sql}; last statements: "
		  . join(' | ', @$h))
	  if $kind eq 'aborted';
	$self->check_timeout($o, $mode, $late)
	  if $kind eq 'st' && $mode ne 'held' && $mode ne 'maybe';
	# Did a timeout that applies to this statement run out as it ended?
	# PostgreSQL then reports it in the next statement of the session.
	my $min = min_timeout($self->{st_ms}, $mode ne 'none' ? $self->{budget_st_ms} : 0);
	$self->{late_timeout_possible} = $mode eq 'held' || $mode eq 'maybe'
	  || (defined $min && ($o->{elapsed_ms} // 0) >= $min - 50);

	if ($kind eq 'idle')
	{
		# ended while idle in a transaction: the statement never ran
		$self->{tot}{idle_ended}++;
		$self->{tot}{idle_ended_kept}++ if $self->{in_txn} && $self->{kept} eq '1';
	}

	return unless $self->{checked};
	my $acc = $self->{acct}{ $self->{epoch} }{ $self->{budget} } //= {};
	# (1.3) how long it ran, for the bounds of runaways
	my $ms = $o->{elapsed_ms} // 0;
	$acc->{long}++ if $self->{ra_long_ms} && $ms >= $self->{ra_long_ms};
	$acc->{ra_sure}++
	  if $self->{ra_sure_ms} && $mode eq 'one' && $kind eq 'ok'
	  && ($opt{min_run_ms} // 0) >= $self->{ra_sure_ms};
	$acc->{ra}++ if $orig eq 'ra';
	$acc->{quar}++ if $orig eq 'quar';
	# (1.3) any other failure, in any mode: it may have hidden a runaway
	# or a refusal (a cancel or a termination that came first)
	$acc->{fail_other}++ if !$o->{ok} && $orig ne 'ra' && $orig ne 'quar';
	if ($mode eq 'cheap')
	{
		# (1.2) below min_cost: counted in bypassed at executor start,
		# unless the gate was off then
		if (($kind eq 'ok' || $kind eq 'exec') && !$self->gate_toggled) { $acc->{bypass}++; }
		elsif ($kind ne 'parse' && $kind ne 'full' && $kind ne 'qto') { $acc->{bypass_amb}++; }
		return;
	}
	# a session that the idle timeout ended while it kept a slot can see a
	# lost connection instead of the FATAL (the client was sending its next
	# statement when the server closed the socket): counted, maybe
	$acc->{idle_unsure}++
	  if $kind eq 'lost' && $self->{in_txn} && $self->{idle_counted}
	  && ($self->{kept} eq '1' || $self->{kept} eq 'maybe');
	if ($kind eq 'idle')
	{
		if ($self->{in_txn} && $self->{idle_counted})
		{
			$acc->{idle_term}++ if $self->{kept} eq '1';
			$acc->{idle_unsure}++ if $self->{kept} eq 'maybe';
		}
		return;
	}
	my $single = 1;
	my $maybe = 0;
	if ($mode eq 'multi')
	{
		$acc->{adm_lo} += $o->{notices};
		return if $kind eq 'ok';
		# the statement that failed ran under the slot its transaction kept
		return if $opt{fail_held} && $kind eq 'exec';
		$single = 0;
	}
	elsif ($mode eq 'maybe')
	{
		$maybe = 1;
	}
	elsif ($mode ne 'one')
	{
		return;
	}
	$acc->{attempts}++;
	if ($kind eq 'ok' || $kind eq 'exec') { $acc->{ $maybe ? 'amb' : 'adm_lo' }++; }
	elsif ($kind eq 'full') { $acc->{ $o->{rej_target} ? 'full_t' : 'full' }++; }
	elsif ($kind eq 'qto') { $acc->{ $o->{rej_target} ? 'qto_t' : 'qto' }++; }
	elsif ($kind eq 'st')
	{
		# The budget's statement_timeout runs from admission.  The
		# session's runs from the start of the statement and can fire in
		# the queue, unless the queue timeout ends every wait well before.
		my $st = $self->{st_ms};
		my $qt = $self->{qt_ms};
		if ($late || $maybe)
		{
			# maybe the previous statement's, reported here: it may have
			# hit this one anywhere, in the queue too
			$acc->{amb}++;
		}
		elsif ($st == 0 || ($single && $qt > 0 && $st >= $qt + 1000))
		{
			$acc->{adm_lo}++;
		}
		else { $acc->{amb}++; }
	}
	elsif ($kind eq 'parse') { }
	else
	{
		# cancel, lost, other
		$acc->{amb}++;
		$acc->{lost_unconf}++ if $kind ne 'cancel' && !$opt{seen};
	}
	return;
}

# A rejection must name our budget, never hit a statement that needs no
# slot, and carry a DETAIL that fits it.
sub check_rejection
{
	my ($self, $o, $mode) = @_;
	my $b = $self->{budget};
	if (!defined $b)
	{
		$self->fail("ungated role $self->{role} was rejected: $o->{msg}");
		return;
	}
	my ($named) = $o->{msg} =~ /budget "(.+)"/;
	my $qt = $self->{qt_ms};
	# (a statement under a held slot is never quarantined; the slot may
	# not have been taken when dbgate.enabled went off and on)
	if (defined $named && $named ne $b && exists $self->{targets}{$named}
		&& (($mode ne 'held' && $mode ne 'none') || ($mode eq 'held' && $self->gate_toggled)))
	{
		# (1.3) quarantined in our budget and gated by its runaway_budget
		$o->{rej_target} = 1;
		$qt = $self->{targets}{$named};
		$self->{tot}{rejected_by_target}++;
	}
	else
	{
		$self->fail("rejection names another budget than $b: $o->{msg} ($mode: $o->{sql}; "
			  . "operation $self->{op}, statements before: "
			  . join(' / ', @{ $self->{history} // [] }[ 0 .. $#{ $self->{history} // [] } - 1 ])
			  . ')')
		  unless $o->{msg} =~ /"\Q$b\E"/;
	}
	$self->fail("a statement below min_cost was queued or rejected: $o->{sql}: $o->{msg}")
	  if $mode eq 'cheap';
	if ($mode eq 'held' || $mode eq 'none')
	{
		# The slot the operation seems to hold may never have been taken:
		# dbgate.enabled was off for a moment, or (the roles of soak_c) the
		# role had no budget, or the budget did not exist, when the
		# operation began.
		if ($mode eq 'held' && ($self->{class} eq 'c' || $self->gate_toggled))
		{
			$self->{tot}{held_rejected_excused}++;
		}
		else
		{
			$self->fail("a statement that needs no slot ($mode) was rejected: "
				  . "$o->{sql}: $o->{msg}");
		}
	}
	if ($o->{kind} eq 'full')
	{
		if ($o->{detail} =~
			/^(\d+) of (\d+) statements are active and (\d+) of (\d+) queue places are taken\.$/
		  )
		{
			my ($a, $ma, $q, $mq) = ($1, $2, $3, $4);
			$self->fail("full although the queue has room: $o->{detail}")
			  if $q < $mq;
			$self->fail("rolled-back limit in effect: $o->{detail}")
			  if $ma == 9 || $mq == 9;
		}
		elsif ($o->{detail} =~
			/^Its parent budget "(\w+)" has (\d+) of (\d+) statements active, and (\d+) of (\d+) queue places are taken\.$/
		  )
		{
			# (1.2) held back by a parent that was full
			my ($p, $a, $ma, $q, $mq) = ($1, $2, $3, $4, $5);
			$self->fail("full although the queue has room: $o->{detail}")
			  if $q < $mq;
			$self->fail("a parent that is not full held a statement back: $o->{detail}")
			  if $a < $ma;
			$self->fail("a budget without parent was held back by one: $o->{detail}")
			  unless $self->{may_have_parent};
		}
		elsif ($o->{detail} =~
			/^No admission is due yet under the rate of budget "(\w+)", and (\d+) of (\d+) queue places are taken\.$/
		  )
		{
			# (1.2) no token, and no queue place
			my ($rb, $q, $mq) = ($1, $2, $3);
			$self->fail("full although the queue has room: $o->{detail}")
			  if $q < $mq;
			$self->fail("held back by the rate of $rb, which has none: $o->{detail}")
			  unless $self->{rated_by}{$rb};
		}
		elsif ($o->{detail} =~
			/^(?:Key "[^"]*"|The budget's overflow key \(the keys the table of keys had no room for\)) has (\d+) of (\d+) (?:queue places taken|statements active, and (\d+) of (\d+) queue places are taken)\.$/
		  )
		{
			# (1.3) held back by its key: the key's queue places, or the
			# budget's queue full for a statement its key held back
			my ($q, $mq) = defined $3 ? ($3, $4) : ($1, $2);
			$self->fail("full although the queue has room: $o->{detail}")
			  if $q < $mq;
			$self->fail("held back by a key in a budget without key_by: $o->{detail}")
			  unless $self->{class} eq 'k';
		}
		else
		{
			$self->fail("unexpected DETAIL of a full rejection: $o->{detail}");
		}
	}
	else
	{
		if ($o->{detail} =~
			/^Waited (\d+) ms in the queue; the queue timeout is (\d+) ms\.$/)
		{
			my ($w, $t) = ($1, $2);
			$self->fail("queue timeout after $w ms, before its $t ms")
			  if $w < $t;
			$self->fail("queue timeout of $t ms, expected $qt ms")
			  if $self->{checked} && defined $qt && $t != $qt;
		}
		else
		{
			$self->fail("unexpected DETAIL of a queue timeout: $o->{detail}");
		}
	}
	return;
}

# A statement timeout cannot fire before the shortest timeout that applies
# has run out: the session's counts from the start of the statement, the
# budget's from admission, and only while an executor runs (so never for a
# utility statement).  An earlier one is a timer the gate left armed.  Not
# checked: a statement run while the backend holds a slot (the deadline
# counts from the slot's admission), and the statement after one that ran
# as long as a timeout (a timeout that expires as a statement ends is
# reported by the next one, PostgreSQL's own behaviour, seen after parallel
# queries).
sub check_timeout
{
	my ($self, $o, $mode, $late) = @_;
	if ($late)
	{
		$self->{tot}{late_timeout}++;
		return;
	}
	my $min = min_timeout($self->{st_ms}, $mode ne 'none' ? $self->{budget_st_ms} : 0);
	if (!defined $min)
	{
		$self->fail("statement timeout although none applies: $o->{sql}");
		return;
	}
	$self->fail(
		sprintf('statement timeout after %.0f ms, the shortest timeout is %d ms: %s '
			  . '(operation %s, statements before: %s)',
			$o->{elapsed_ms}, $min, $o->{sql}, $self->{op},
			join(' / ', @{ $self->{history} }[ 0 .. $#{ $self->{history} } - 1 ])))
	  if defined $o->{elapsed_ms} && $o->{elapsed_ms} < $min - 20;
	return;
}

# Did the test turn dbgate.enabled off (and on again) since the current
# operation began?  The file "gate" holds the times of the last change.
sub gate_toggled
{
	my ($self) = @_;
	open(my $fh, '<', "$self->{dir}/gate") or return 0;
	my ($off, $on) = split ' ', (<$fh> // '');
	close $fh;
	return defined $on && $on + 2 >= $self->{op_t0};
}

# the smallest of the non-zero timeouts given, or undef
sub min_timeout
{
	my @t = sort { $a <=> $b } grep { defined $_ && $_ > 0 } @_;
	return $t[0];
}

# Nothing the gate applied leaks into the session.
sub check_session_settings
{
	my ($self) = @_;
	my $dbh = $self->{dbh};
	my ($st) = $dbh->selectrow_array('SHOW statement_timeout');
	my ($lt) = $dbh->selectrow_array('SHOW lock_timeout');
	return unless defined $st && defined $lt;
	$self->fail("SHOW statement_timeout is $st, the session set "
		  . "$self->{st_ms} ms")
	  if to_ms($st) != $self->{st_ms};
	$self->fail("SHOW lock_timeout is $lt, the session has 0")
	  if to_ms($lt) != 0;
	# (1.2) a statement's work_mem lowered for its memory grant is the
	# statement's only
	my ($wm) = $dbh->selectrow_array('SHOW work_mem');
	$self->fail("SHOW work_mem is $wm, the session has 4MB")
	  if defined $wm && $wm ne '4MB';
	return;
}

sub to_ms
{
	my ($v) = @_;
	my %unit = (ms => 1, s => 1000, min => 60000, h => 3600000, '' => 1);
	return $v =~ /^(\d+)(ms|s|min|h|)$/ ? $1 * $unit{$2} : -1;
}

# Run a utility statement that must take effect; a cancel meant for the
# statement before may hit it, so try again.  Returns true on success.
sub retry
{
	my ($self, $sql) = @_;
	for (1 .. 3)
	{
		return 0 if $self->{lost};
		return 1 if $self->sql($sql, 'none');
		$self->{tot}{retries}++;
	}
	return 0;
}

# End a transaction that failed (unless the connection is gone).
sub abort_txn
{
	my ($self) = @_;
	$self->sql('ROLLBACK', 'none') unless $self->{lost};
	return;
}

sub rand_sleep
{
	my $r = rand();
	my $s =
		$r < 0.6 ? rand(0.02)
	  : $r < 0.9 ? 0.02 + rand(0.28)
	  :            0.3 + rand(2.0);
	return sprintf('%.3f', $s < $sleep_max ? $s : rand($sleep_max));
}

sub short_sleep { return sprintf('%.3f', rand(0.03)); }

# (1.3) The tenant of the next operation of a client of class 'k' (the
# key of its budget, key_by 'setting:app.tenant'): 'hot' (a key with a
# limit of its own that changes under load), one of a few warm keys, or
# most often a key never used before (churn: the table of keys fills and
# new keys go to the overflow key).  A session-level SET, not gated.
sub tenant
{
	my ($self) = @_;
	return if $self->{lost} || !$self->{dbh};
	my $r = rand();
	my $k =
		$r < 0.25 ? 'hot'
	  : $r < 0.45 ? 'w' . int(rand(3))
	  :             'n' . $self->{id} . '_' . ++$self->{tenants};
	$self->{dbh}->do("SET app.tenant = '$k'")
	  or $self->{lost} = 1;
	return;
}

# ---------------------------------------------------------------------
# Operations

sub op_sleep
{
	my ($self) = @_;
	my $s = rand_sleep();
	# (a sleep that ends normally ran at least that long)
	if (rand() < 0.5) { $self->sql("SELECT pg_sleep($s)", 'one', min_run_ms => $s * 1000); }
	else
	{
		# extended protocol, server-side prepared
		$self->sql('SELECT pg_sleep($1)', 'one', params => [$s], min_run_ms => $s * 1000);
	}
	return;
}

sub op_cpu
{
	my ($self) = @_;
	my $n = 1000 + int(rand(300000));
	if (rand() < 0.5)
	{
		$self->sql(
			"SELECT count(*) FROM generate_series(1, $n) g WHERE g % 7 = 3",
			'one');
	}
	else
	{
		$self->sql(
			'SELECT count(*) FROM generate_series(1, $1::int) g WHERE g % 7 = 3',
			'one', params => [$n]);
	}
	return;
}

sub op_error
{
	my ($self) = @_;
	my $r = rand();
	if ($r < 0.4)
	{
		# division by zero at run time (random() is not folded)
		$self->sql('SELECT 1 / (random() * 0)::int', 'one');
	}
	elsif ($r < 0.6)
	{
		$self->sql('SELECT soak_fail()', 'one');
	}
	elsif ($r < 0.8)
	{
		$self->sql('SELEC 1', 'one');
	}
	else
	{
		$self->sql('SELECT no_such_column FROM soak_hot', 'one');
	}
	return;
}

# Row locks on a small hot table, with lock_timeout; a transaction that
# holds a row lock and then queues for its next statement is what the
# lock-holder admission is for.
sub op_hot
{
	my ($self) = @_;
	my $lt = 20 + int(rand(600));
	my $k = 1 + int(rand(HOT_ROWS));
	$self->sql('BEGIN', 'none') or return;
	$self->sql("SET LOCAL lock_timeout = '${lt}ms'", 'none')
	  or return $self->abort_txn;
	$self->sql("UPDATE soak_hot SET v = v + 1 WHERE id = $k", 'gated',
		writes => 1)
	  or return $self->abort_txn;
	if (rand() < 0.3)
	{
		my $k2 = 1 + int(rand(HOT_ROWS));
		my $nowait = rand() < 0.3 ? ' NOWAIT' : '';
		$self->sql("SELECT v FROM soak_hot WHERE id = $k2 FOR UPDATE$nowait",
			'gated', writes => 1)
		  or return $self->abort_txn;
	}
	my $s = rand() < 0.7 ? short_sleep() : rand_sleep();
	$self->sql("SELECT pg_sleep($s)", 'gated') or return $self->abort_txn;
	if (rand() < 0.2) { $self->sql('ROLLBACK', 'none'); }
	else { $self->sql('COMMIT', 'none'); }
	return;
}

sub op_savepoint
{
	my ($self) = @_;
	$self->sql('BEGIN', 'none') or return;
	$self->sql('SELECT pg_sleep(' . short_sleep() . ')', 'gated')
	  or return $self->abort_txn;
	$self->sql('SAVEPOINT s1', 'none') or return $self->abort_txn;
	my $r = rand();
	my $inner =
		$r < 0.3 ? 'SELECT 1 / (random() * 0)::int'
	  : $r < 0.4 ? 'SELEC 2'
	  :            'SELECT pg_sleep(' . rand_sleep() . ')';
	my $ok = $self->sql($inner, 'gated');
	return if $self->{lost};
	if (!$ok || rand() < 0.5)
	{
		# also undoes a queue wait that was canceled or timed out
		$self->sql('ROLLBACK TO SAVEPOINT s1', 'none') or return $self->abort_txn;
	}
	else
	{
		$self->sql('RELEASE SAVEPOINT s1', 'none') or return $self->abort_txn;
	}
	$self->sql('SELECT count(*) FROM soak_hot', 'gated') or return $self->abort_txn;
	$self->sql('COMMIT', 'none');
	return;
}

# Cursors keep the slot until they are closed, rolled back or the
# transaction ends; statements in between never queue.
sub op_cursor
{
	my ($self) = @_;
	my $n = 1000 + int(rand(20000));
	$self->sql('BEGIN', 'none') or return;
	if (rand() < 0.35)
	{
		# declared in a subtransaction that is rolled back
		$self->sql('SAVEPOINT s1', 'none') or return $self->abort_txn;
		my $ok = $self->sql(
			"DECLARE c1 CURSOR FOR SELECT g FROM generate_series(1, $n) g",
			'gated');
		return if $self->{lost};
		$ok &&= $self->sql('FETCH 100 FROM c1', 'held');
		return if $self->{lost};
		$self->sql('ROLLBACK TO SAVEPOINT s1', 'none') or return $self->abort_txn;
		# the slot went with the subtransaction (scope 'transaction':
		# it is kept)
		$self->sql('SELECT pg_sleep(' . short_sleep() . ')', 'gated')
		  or return $self->abort_txn;
		$self->sql('COMMIT', 'none');
		return;
	}
	$self->sql("DECLARE c1 CURSOR FOR SELECT g FROM generate_series(1, $n) g",
		'gated')
	  or return $self->abort_txn;
	$self->sql('FETCH 100 FROM c1', 'held') or return $self->abort_txn;
	$self->sql('SELECT pg_sleep(' . short_sleep() . ')', 'held')
	  or return $self->abort_txn;
	my $r = rand();
	if ($r < 0.3)
	{
		$self->sql('CLOSE c1', 'none') or return $self->abort_txn;
		$self->sql('SELECT count(*) FROM soak_hot', 'gated')
		  or return $self->abort_txn;
	}
	elsif ($r < 0.55)
	{
		# a second cursor inside a subtransaction that fails
		$self->sql('SAVEPOINT s2', 'none') or return $self->abort_txn;
		my $ok = $self->sql('DECLARE c2 CURSOR FOR SELECT 1 / (random() * 0)::int',
			'held');
		$ok &&= $self->sql('FETCH 1 FROM c2', 'held');
		return if $self->{lost};
		$self->sql('ROLLBACK TO SAVEPOINT s2', 'none') or return $self->abort_txn;
		$self->sql('FETCH 10 FROM c1', 'held') or return $self->abort_txn;
	}
	elsif ($r < 0.65 && $self->{class} ne 'a')
	{
		# go away while holding the slot: backend exit returns it
		$self->{tot}{disconnect_holding}++;
		$self->shut_socket;
		$self->{lost} = 1;
		return;
	}
	else
	{
		# left open until the transaction ends
		$self->sql('SELECT count(*) FROM soak_hot', 'held')
		  or return $self->abort_txn;
	}
	if (rand() < 0.3) { $self->sql('ROLLBACK', 'none'); }
	else { $self->sql('COMMIT', 'none'); }
	return;
}

# Write transactions on the hot rows: several clients update the same few
# rows in random order in transactions of several statements, with
# savepoints that fail (lock timeout, deadlock, an error) and are rolled
# back or released, and short pauses while the slot is kept.  From the
# first UPDATE on, the transaction keeps its slot: nothing after it queues.
sub op_write_txn
{
	my ($self) = @_;
	my $lt = 50 + int(rand(400));
	$self->sql('BEGIN', 'none') or return;
	$self->sql("SET LOCAL lock_timeout = '${lt}ms'", 'none')
	  or return $self->abort_txn;
	if (rand() < 0.4)
	{
		# a read first: in scope 'statement' it returns its slot
		$self->sql('SELECT sum(v) FROM soak_hot', 'gated')
		  or return $self->abort_txn;
	}
	my $k = 1 + int(rand(HOT_ROWS));
	$self->sql("UPDATE soak_hot SET v = v + 1 WHERE id = $k", 'gated', writes => 1)
	  or return $self->abort_txn;
	for my $i (1 .. 1 + int(rand(4)))
	{
		my $r = rand();
		my $k2 = 1 + int(rand(HOT_ROWS));
		if ($r < 0.3)
		{
			$self->sql("UPDATE soak_hot SET v = v + 1 WHERE id = $k2", 'gated',
				writes => 1)
			  or return $self->abort_txn;
		}
		elsif ($r < 0.65)
		{
			my $sp = "w$i";
			$self->sql("SAVEPOINT $sp", 'none') or return $self->abort_txn;
			my $ok = $self->sql("UPDATE soak_hot SET v = v + 1 WHERE id = $k2",
				'gated', writes => 1);
			return if $self->{lost};
			$ok = $self->sql('SELECT 1 / (random() * 0)::int', 'gated')
			  if $ok && rand() < 0.25;
			return if $self->{lost};
			if (!$ok || rand() < 0.5)
			{
				# the slot stays kept
				$self->sql("ROLLBACK TO SAVEPOINT $sp", 'none')
				  or return $self->abort_txn;
			}
			else
			{
				$self->sql("RELEASE SAVEPOINT $sp", 'none')
				  or return $self->abort_txn;
			}
		}
		elsif ($r < 0.85)
		{
			# idle in transaction, keeping the slot
			$self->pause(rand(0.08));
		}
		else
		{
			$self->sql('SELECT pg_sleep(' . short_sleep() . ')', 'gated')
			  or return $self->abort_txn;
		}
	}
	if (rand() < 0.2) { $self->sql('ROLLBACK', 'none'); }
	else { $self->sql('COMMIT', 'none'); }
	return;
}

# Idle in a transaction that keeps a slot ('idle in transaction' in
# dbgate.backends, counted in active).  With an idle_in_transaction_timeout
# (the budget's, or the session's own) some pauses are longer than it: the
# session must be ended with FATAL 25P03 before the next statement runs.
# Meanwhile SHOW reports the session's own idle timeout, not the budget's.
sub op_idle
{
	my ($self) = @_;
	my $limit = $self->{idle_limit_ms};
	$self->sql('BEGIN', 'none') or return;
	if ($self->{scope} ne 'transaction' || rand() < 0.5)
	{
		my $k = 1 + int(rand(HOT_ROWS));
		my $lt = 50 + int(rand(300));
		$self->sql("SET LOCAL lock_timeout = '${lt}ms'", 'none')
		  or return $self->abort_txn;
		$self->sql("UPDATE soak_hot SET v = v + 1 WHERE id = $k", 'gated',
			writes => 1)
		  or return $self->abort_txn;
	}
	else
	{
		$self->sql('SELECT count(*) FROM soak_hot', 'gated')
		  or return $self->abort_txn;
	}
	my $long = $limit > 0 && rand() < 0.3;
	my $kept = $self->{kept} eq '1';
	my $short_max = !$limit ? 300 : $limit / 3 < 150 ? $limit / 3 : 150;
	# (well beyond the limit: the server's timer must have fired, even on
	# a busy machine, before the next statement arrives)
	my $ms = $long ? $limit + 700 + rand(500) : rand($short_max);
	$self->pause($ms / 1000);
	if (!$long && rand() < 0.3)
	{
		my $sh = $self->sql_value('SHOW idle_in_transaction_session_timeout');
		return if $self->{lost};
		$self->fail("SHOW idle_in_transaction_session_timeout is $sh while the "
			  . "transaction keeps a slot; the session set $self->{own_idle_ms} ms")
		  if defined $sh && to_ms($sh) != $self->{own_idle_ms};
	}
	my $ok = $self->sql('SELECT count(*) FROM soak_hot', 'gated');
	# Not judged when the slot may never have been taken: dbgate.enabled
	# was off for a moment, or (soak_c) the role had no budget or the
	# budget did not exist when the transaction began.
	if ($long && $kept && ($self->{class} eq 'c' || $self->gate_toggled))
	{
		$self->{tot}{idle_long_excused}++;
	}
	elsif ($long && $kept)
	{
		my $kind = $self->{last}{kind} // '';
		if ($ok)
		{
			$self->fail(sprintf(
				'a session idle in a transaction that keeps a slot for %.0f ms '
				  . 'survived (idle limit %d ms)', $ms, $limit));
		}
		elsif ($kind eq 'idle') { $self->{tot}{idle_long_ended}++; }
		elsif ($kind eq 'lost') { $self->{tot}{idle_long_lost}++; }
		else
		{
			$self->fail(sprintf('after a pause of %.0f ms in a transaction: %s (%s) %s',
				$ms, $kind, $self->{last}{state} // '', $self->{last}{msg} // ''));
		}
	}
	return if $self->{lost};
	return $self->abort_txn unless $ok;
	if (rand() < 0.3) { $self->sql('ROLLBACK', 'none'); }
	else { $self->sql('COMMIT', 'none'); }
	return;
}

# Client-side pause inside a transaction.
sub pause
{
	my ($self, $s) = @_;
	$self->{tot}{idle_pauses}++;
	sleep $s if $s > 0;
	return 1;
}

# The first column of a one-row result of a statement that is not gated.
sub sql_value
{
	my ($self, $sql) = @_;
	return undef if $self->{lost} || !$self->{dbh};
	my $o = { sql => $sql, t0 => time };
	$self->{tot}{statements}++;
	my $r = $self->{dbh}->selectrow_arrayref($sql);
	if ($r) { $o->{ok} = 1; }
	else { $self->collect_error($o); }
	$o->{elapsed_ms} = (time - $o->{t0}) * 1000;
	$self->account($o, 'none');
	$self->track_txn($o, 'none');
	$self->{last} = $o;
	return $r ? $r->[0] : undef;
}

sub op_do_block
{
	my ($self) = @_;
	my $txn_scope = $self->{scope} eq 'transaction';
	my $k = 1 + int(rand(4));
	my $body = '';
	my $kept = 0;    # the block's current transaction keeps a slot
	for my $i (1 .. $k)
	{
		if (rand() < 0.2)
		{
			# admitted, fails, caught: the subtransaction abort returns the
			# slot (scope 'transaction': keeps it)
			$body .= 'BEGIN PERFORM 1 / (random() * 0)::int; '
			  . 'EXCEPTION WHEN division_by_zero THEN NULL; END; ';
		}
		else
		{
			$body .= 'PERFORM pg_sleep(' . short_sleep() . '); ';
		}
		# in scope 'transaction' only the first gated statement of each
		# transaction of the block is an admission
		$body .= ($txn_scope && $kept)
		  ? "RAISE NOTICE 'soak_held'; "
		  : "RAISE NOTICE 'soak_step'; ";
		$kept = 1;
		if (rand() < 0.5)
		{
			$body .= 'COMMIT; ';
			$kept = 0;
		}
	}
	my $fail_held = 0;
	if (rand() < 0.2)
	{
		$body .= 'PERFORM 1 / (random() * 0)::int; ';
		$fail_held = $txn_scope && $kept;
	}
	$self->sql("DO \$\$BEGIN $body END\$\$", 'multi', fail_held => $fail_held);
	return;
}

sub op_procedure
{
	my ($self) = @_;
	my $k = 1 + int(rand(4));
	if (rand() < 0.3)
	{
		# A FOR loop over a query that commits in its body: the loop's
		# query takes a slot, the first iteration runs under it, COMMIT
		# turns the loop's cursor into a held one (run to completion and
		# ended inside COMMIT) and returns the slot; every later iteration
		# is gated again.  So each notice stands for one admission.
		$self->sql("CALL soak_loop($k)", 'multi');
		return;
	}
	my $ms = int(rand(40));
	my $fail = rand() < 0.2 ? 'true' : 'false';
	$self->sql("CALL soak_proc($k, $ms, $fail)", 'multi');
	return;
}

sub op_prepared
{
	my ($self) = @_;
	my $name = 'soak_p' . ++$self->{seq};
	$self->sql("PREPARE $name(int) AS SELECT count(*) FROM generate_series(1, \$1)",
		'none')
	  or return;
	for (1 .. 1 + int(rand(3)))
	{
		my $n = 1 + int(rand(50000));
		$self->sql("EXECUTE $name($n)", 'one');
		return if $self->{lost};
	}
	$self->sql("DEALLOCATE $name", 'none');
	return;
}

sub op_explain
{
	my ($self) = @_;
	$self->sql('EXPLAIN SELECT * FROM soak_hot WHERE id = 1', 'none');
	$self->sql('EXPLAIN (ANALYZE, COSTS OFF) SELECT pg_sleep(' . short_sleep() . ')',
		'one');
	return;
}

# Queries run by a function inside an admitted statement never queue; a
# SECURITY DEFINER function does not change the budget.
sub op_nested
{
	my ($self) = @_;
	if (rand() < 0.7)
	{
		$self->sql('SELECT soak_nested(' . (1 + int(rand(5))) . ')', 'one');
	}
	else
	{
		$self->sql('SELECT soak_secdef()', 'one');
	}
	return;
}

# The budget is the session user's: SET ROLE to the ungated role changes
# nothing.
sub op_set_role
{
	my ($self) = @_;
	$self->sql('SET ROLE soak_free', 'none') or return;
	$self->sql('SELECT pg_sleep(' . short_sleep() . ')', 'one');
	$self->retry('RESET ROLE');
	return;
}

# Parallel workers work under their leader's slot.
sub op_parallel
{
	my ($self) = @_;
	my $n = 1000 + int(rand(100000));
	# the parameter was renamed in PostgreSQL 16
	my $force = $self->{dbh}{pg_server_version} >= 160000
	  ? 'debug_parallel_query' : 'force_parallel_mode';
	$self->sql('BEGIN', 'none') or return;
	$self->sql("SET LOCAL $force = on", 'none')
	  or return $self->abort_txn;
	$self->sql("SELECT count(*) FROM soak_hot, generate_series(1, $n) g", 'gated')
	  or return $self->abort_txn;
	$self->sql('COMMIT', 'none');
	return;
}

sub op_ctas
{
	my ($self) = @_;
	$self->sql('BEGIN', 'none') or return;
	$self->sql(
		'CREATE TEMP TABLE soak_t ON COMMIT DROP AS '
		  . 'SELECT g FROM generate_series(1, 500) g',
		'gated', writes => 1
	) or return $self->abort_txn;
	# the new table gave the transaction an ID: the slot is kept
	$self->sql('SELECT count(*) FROM soak_t', 'gated') or return $self->abort_txn;
	$self->sql('COMMIT', 'none');
	return;
}

# COPY (query) TO STDOUT takes a slot (DBD::Pg runs COPY synchronously).
sub op_copy
{
	my ($self) = @_;
	return if $self->{lost} || !$self->{dbh};
	my $dbh = $self->{dbh};
	my $n = 1 + int(rand(2000));
	my $sql = "COPY (SELECT g FROM generate_series(1, $n) g) TO STDOUT";
	my $o = { sql => $sql, t0 => time };
	$self->{notices} = 0;
	$self->{tot}{statements}++;
	if (defined $dbh->do($sql))
	{
		my $line;
		my $rows = 0;
		$rows++ while $dbh->pg_getcopydata($line) >= 0;
		if (($dbh->state // '') eq '') { $o->{ok} = 1; }
		else { $self->collect_error($o); }
		$self->fail("COPY returned $rows rows instead of $n")
		  if $o->{ok} && $rows != $n;
	}
	else
	{
		$self->collect_error($o);
	}
	$o->{elapsed_ms} = (time - $o->{t0}) * 1000;
	$self->account($o, 'one');
	return;
}

# A cursor WITH HOLD is run to completion at commit: reading it later runs
# no executor and takes no slot.
sub op_hold_cursor
{
	my ($self) = @_;
	my $n = 1 + int(rand(5000));
	$self->sql("DECLARE soak_h CURSOR WITH HOLD FOR SELECT g FROM generate_series(1, $n) g",
		'one')
	  or return;
	$self->sql('FETCH 10 FROM soak_h', 'none');
	$self->sql('SELECT pg_sleep(' . short_sleep() . ')', 'one') if rand() < 0.5;
	$self->sql('FETCH ALL FROM soak_h', 'none') if rand() < 0.5;
	$self->sql('CLOSE soak_h', 'none');
	return;
}

# (1.2) The operations of a budget with min_cost 100 and max_memory_mb.
# Reads that cost about 1 (EXPLAIN's total cost: a soak_nap() 0.01, a read
# of soak_hot 1.05, a division by zero 0.02) are never gated.  They call
# no volatile function (1.3: such a plan is gated whatever its cost):
# soak_nap() is pg_sleep() declared stable, and the division by zero is
# not folded at planning as pg_backend_pid() is stable.
sub op_m_cheap
{
	my ($self) = @_;
	my $r = rand();
	if ($r < 0.5)
	{
		$self->sql('SELECT soak_nap(' . sprintf('%.3f', rand(0.1)) . ')', 'cheap');
	}
	elsif ($r < 0.8)
	{
		$self->sql('SELECT v FROM soak_hot WHERE id = $1', 'cheap',
			params => [ 1 + int(rand(HOT_ROWS)) ]);
	}
	else
	{
		$self->sql('SELECT 1 / (pg_backend_pid() * 0)', 'cheap');
	}
	return;
}

# A sort of 20000 to 60000 rows (cost 1900 and more): gated, with a grant
# of twice its work_mem (a Function Scan and a Sort), which it reads.
sub op_m_sort
{
	my ($self) = @_;
	my $n = 20000 + int(rand(40000));
	my $wm = $self->sql_row(
		"SELECT current_setting('work_mem'), count(*) FROM "
		  . "(SELECT g FROM generate_series(1, $n) g ORDER BY g DESC) s",
		'one');
	$self->check_work_mem($wm);
	return;
}

# A hash aggregate of 20000 to 60000 rows (cost 300 and more): gated.
sub op_m_hash
{
	my ($self) = @_;
	my $n = 20000 + int(rand(40000));
	my $wm = $self->sql_row(
		"SELECT current_setting('work_mem'), count(*) FROM "
		  . "(SELECT g % 1000 AS k, count(*) FROM generate_series(1, $n) g GROUP BY 1) s",
		'one');
	$self->check_work_mem($wm);
	return;
}

# The work_mem a statement ran with: lowered for its grant at most to
# 64 kB, never raised above the session's 4 MB.
sub check_work_mem
{
	my ($self, $wm) = @_;
	return unless defined $wm;
	my $kb = $wm =~ /^(\d+)kB$/ ? $1 : $wm =~ /^(\d+)MB$/ ? $1 * 1024 : -1;
	$self->fail("a statement ran with work_mem $wm, not within 64kB .. 4MB")
	  if $kb < 64 || $kb > 4096;
	return;
}

# A cheap read under a short session statement_timeout.
sub op_m_amb
{
	my ($self) = @_;
	my $st = 20 + int(rand(100));
	$self->sql("SET statement_timeout = '${st}ms'", 'none') or return;
	$self->{st_ms} = $st;
	$self->sql('SELECT soak_nap(' . sprintf('%.3f', rand(0.15)) . ')', 'cheap');
	$self->{st_ms} = $self->{session_st_ms}
	  if $self->retry("SET statement_timeout = '$self->{session_st_ms}ms'");
	return;
}

# sql_row(SQL, MODE): as sql(), and the first column of its one row (undef
# if it failed).
sub sql_row
{
	my ($self, $sql, $mode) = @_;
	return undef unless $self->sql($sql, $mode, fetch => 1);
	return $self->{last}{row} ? $self->{last}{row}[0] : undef;
}

# A short session statement_timeout that may fire while queued.
sub op_amb_timeout
{
	my ($self) = @_;
	my $st = 50 + int(rand(250));
	$self->sql("SET statement_timeout = '${st}ms'", 'none') or return;
	$self->{st_ms} = $st;
	$self->sql('SELECT pg_sleep(' . sprintf('%.3f', 0.03 + rand(0.3)) . ')',
		'one');
	$self->{st_ms} = $self->{session_st_ms}
	  if $self->retry("SET statement_timeout = '$self->{session_st_ms}ms'");
	return;
}

# Disconnect while the statement waits in the queue (or runs).  Our own
# backend's state comes from dbgate.backends through a side connection; a
# statement seen queued or active can no longer be rejected as full.
sub op_disconnect
{
	my ($self) = @_;
	my $o = $self->start('SELECT pg_sleep(' . sprintf('%.3f', 0.2 + rand(0.4)) . ')');
	if ($o->{done})
	{
		$self->account($o, 'one');
		return;
	}
	my $dbh = $self->{dbh};
	my $pid = $dbh->{pg_pid};
	my $side = defined $self->{budget} ? $self->side : undef;
	my $seen = '';
	my $t0 = time;
	my $wait = rand(0.3);
	while (time - $t0 < 0.5)
	{
		last if $dbh->pg_ready;
		if ($side)
		{
			my $r = $side->selectrow_arrayref(
				"SELECT state FROM dbgate.backends WHERE pid = $pid");
			if (!$r && $side->err) { $self->drop_side; $side = undef; }
			$seen = $r ? $r->[0] : '';
			last if $seen eq 'queued' || ($seen eq 'active' && time - $t0 > $wait);
		}
		else
		{
			last if time - $t0 > $wait;
		}
		sleep 0.005;
	}
	if ($dbh->pg_ready || ($side && $seen eq ''))
	{
		$self->finish($o);
		$self->account($o, 'one');
		return;
	}
	$self->{tot}{ 'disconnect_' . ($seen || 'running') }++;
	$self->shut_socket;
	$self->finish($o);
	if ($seen eq 'active')
	{
		# admitted for certain: count it as a success
		$self->account({ %$o, ok => 1 }, 'one');
	}
	else
	{
		$self->account($o, 'one', seen => ($seen eq 'queued'));
	}
	$self->{lost} = 1;
	return;
}

# Both directions of our socket: the server sees the client go away.
sub shut_socket
{
	my ($self) = @_;
	my $fd = $self->{dbh}{pg_socket};
	if (open(my $fh, '+<&=', $fd))
	{
		shutdown($fh, 2);
	}
	return;
}

# ---------------------------------------------------------------------

sub write_stats
{
	my ($self) = @_;
	my $f = "$self->{dir}/client-$self->{id}.stats";
	open(my $fh, '>', "$f.tmp") or die "$f.tmp: $!";
	for my $e (sort { $a <=> $b } keys %{ $self->{acct} })
	{
		for my $b (sort keys %{ $self->{acct}{$e} })
		{
			my $h = $self->{acct}{$e}{$b};
			print $fh "acct\t$e\t$b\t$_\t$h->{$_}\n" for sort keys %$h;
		}
	}
	print $fh "tot\t$self->{class}\t$_\t$self->{tot}{$_}\n"
	  for sort keys %{ $self->{tot} };
	print $fh "err\t$_\t$self->{errors}{$_}\n" for sort keys %{ $self->{errors} };
	print $fh "op\t$_\t$self->{ops}{$_}\n" for sort keys %{ $self->{ops} };
	print $fh "nfail\t$self->{nfails}\n";
	for my $m (@{ $self->{fails} })
	{
		(my $one = $m) =~ s/\s+/ /g;
		print $fh "fail\tclient $self->{id} ($self->{role}): $one\n";
	}
	close $fh or die "$f.tmp: $!";
	rename("$f.tmp", $f) or die "$f: $!";
	return;
}

1;
