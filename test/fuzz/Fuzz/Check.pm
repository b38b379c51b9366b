# Fuzz::Check - the fuzz test's monitor, the checks of its samples, and
# the reading of the server log.
#
# monitor() is a forked process with a superuser connection (never gated)
# that samples dbgate.status and dbgate.backends, every column the server
# has (so the columns of 1.2 are checked once they exist), as JSON, until
# the run directory's "stop-monitor" file appears.  For a backends row in
# its state for more than 5 s the sample carries the backend's query.
#
# check_samples() applies to every sample what holds at every instant,
# whatever the alterations do:
#   - no value is negative or absurdly large (an underflow or a torn
#     read); active, queued and idle_in_transaction are within the number
#     of sessions that can be in the budget (its own, or every gated one
#     for a budget that may have children; not active for those: it counts
#     the slots kept for the children's reservations too);
#     idle_in_transaction <= active;
#   - counters never go down, and stats_reset never changes (nothing
#     resets them during the run, and a crash restart would);
#   - admitted_after_wait <= admitted, admitted_lock_holder <=
#     admitted_after_wait + canceled_waiting, peak_active >= active;
#   - a budget with roles: peak_queued <= the highest max_queued it ever
#     had; and if it never was in shadow mode, peak_active <= the highest
#     max_active it ever had + admitted_lock_holder + demoted_in (1.3: a
#     demoted statement counts beyond the target's limits);
#   - wait_time_max within the longest wait a statement can have (the
#     sessions' statement timeouts bound every wait);
#   - dbgate.backends: one row per pid, a state of 'active', 'idle in
#     transaction' or 'queued', queue positions 1..n per budget, the budget
#     that the row's role is classified into (1.3: or one that budget
#     demoted to at some time, demote => { source => { target => 1 } }; a
#     row with demoted_from names its role's budget there and is not
#     queued), and no row in its state for longer than a statement can
#     last (a hang or a leaked slot);
#   - (1.3) a budget in may_vanish (dropped and created again) may vanish
#     from a sample and come back with its counters and stats_reset new.
#
# scan_log() reads the server log (log_line_prefix '%m [%p] <%e> <%u> <%a> ',
# log_error_verbosity = verbose, log_min_error_statement = warning) and
# tells dbgate's own messages from those of the generated SQL by their
# LOCATION: a function defined in one of dbgate's source files.  It
# returns the findings (a crash, an assertion, a PANIC, a dbgate WARNING,
# an internal or system error raised by dbgate, a FATAL of dbgate other
# than the idle timeout, a WARNING of PostgreSQL about a leaked resource),
# the 53300 rejections per budget, how many statements or sessions of each
# role were canceled, timed out or ended (an upper bound of the statements
# that left a queue), the errors of the generated SQL by
# SQLSTATE, the other warnings by message, and the internal errors
# (class XX) that PostgreSQL raised, with their statements.
package Fuzz::Check;

use strict;
use warnings;

use DBI;
use File::Basename qw(basename);
use IO::Handle;
use JSON::PP ();
use Time::HiRes qw(time sleep);

use Soak::Common qw(flag_set);
use Fuzz::Common qw(dsn);

use Exporter 'import';
our @EXPORT_OK = qw(monitor check_samples scan_log dbgate_functions shape);

my $SAMPLE_SQL = <<'SQL';
SELECT extract(epoch FROM clock_timestamp()),
       (SELECT coalesce(json_agg(s), '[]') FROM dbgate.status s),
       (SELECT coalesce(json_agg(x), '[]')
          FROM (SELECT b.*,
                       CASE WHEN b.state_since < clock_timestamp() - interval '5 s'
                            THEN left(a.query, 2000) END AS query
                  FROM dbgate.backends b LEFT JOIN pg_stat_activity a USING (pid)) x)
SQL

sub monitor
{
	my (%p) = @_;
	my $dir = $p{dir};
	open(my $out, '>>', "$dir/monitor.samples") or die "monitor.samples: $!";
	$out->autoflush(1);
	my $dbh;
	while (!flag_set($dir, 'stop-monitor'))
	{
		my $t0 = time;
		$dbh //= DBI->connect(dsn($p{host}, $p{port}, $p{dbname}), $p{superuser}, '',
			{ AutoCommit => 1, RaiseError => 0, PrintError => 0 });
		if (!$dbh)
		{
			sleep 0.1;
			next;
		}
		my $row = $dbh->selectrow_arrayref($SAMPLE_SQL);
		if (!$row)
		{
			$dbh->disconnect;
			$dbh = undef;
			sleep 0.1;
			next;
		}
		my @f = map { (my $v = $_) =~ s/\n/ /g; $v } @$row;
		print $out join("\t", @f), "\n";
		my $left = $p{interval} - (time - $t0);
		sleep $left if $left > 0;
	}
	$dbh->disconnect if $dbh;
	close $out;
	return;
}

# columns of dbgate.status that only grow
my @COUNTERS = qw(admitted admitted_after_wait rejected_full rejected_timeout
  canceled_waiting admitted_lock_holder terminated_idle would_queue would_reject
  admitted_overdue rate_limited bypassed wait_time_total active_time_total
  wait_time_max peak_active peak_queued);
my %BACKEND_STATES = map { $_ => 1 } ('active', 'idle in transaction', 'queued');

# check_samples(file => F, sessions => { budget => N } (sessions whose
#   statements the budget gates; for a budget that may have children, every
#   gated session), leaf => { budget => 1 } (budgets with roles),
#   role_budget => { role => budget }, max => { budget => { max_active =>
#   N, max_queued => N } } (the highest values ever committed),
#   enforce_off => { budget => 1 }, max_wait_ms => N, ages => { queued =>
#   s, active => s, 'idle in transaction' => s }, demote => { source =>
#   { target => 1 } }, may_vanish => { budget => 1 })
# -> { samples, nviolations, violations => [first 30], max_gap,
#      max_active => { budget => n }, max_queued => { budget => n } }
sub check_samples
{
	my (%p) = @_;
	my %r = (samples => 0, nviolations => 0, violations => [], max_gap => 0,
		max_active => {}, max_queued => {});
	my $viol = sub {
		my ($t, $msg) = @_;
		$r{nviolations}++;
		push @{ $r{violations} }, sprintf('%.3f %s', $t, $msg) if @{ $r{violations} } < 30;
	};
	my $json = JSON::PP->new;
	my (%prev, %reset, $prev_t);
	open(my $fh, '<', $p{file}) or die "$p{file}: $!";
	while (my $line = <$fh>)
	{
		chomp $line;
		my ($t, $sj, $bj) = split /\t/, $line, -1;
		next unless defined $bj;
		my $status = eval { $json->decode($sj) };
		my $backends = eval { $json->decode($bj) };
		if (!$status || !$backends)
		{
			$viol->($t // 0, 'a sample that is not JSON');
			next;
		}
		$r{samples}++;
		$r{max_gap} = $t - $prev_t if defined $prev_t && $t - $prev_t > $r{max_gap};
		$prev_t = $t;

		for my $s (@$status)
		{
			my $b = $s->{budget};
			my $n = $p{sessions}{$b};
			if (!defined $n)
			{
				$viol->($t, "unknown budget $b in dbgate.status");
				next;
			}
			for my $c (sort keys %$s)
			{
				my $v = $s->{$c};
				next if !defined $v || $v !~ /^-?[\d.e+]+$/i;
				$viol->($t, "$b.$c = $v is negative") if $v < 0;
				$viol->($t, "$b.$c = $v is out of range") if $v > 1e15;
			}
			for my $c (qw(active queued idle_in_transaction))
			{
				next unless defined $s->{$c};
				# a parent's active also counts what it keeps for its
				# children's reservations (1.3)
				next if $c eq 'active' && !$p{leaf}{$b};
				$viol->($t, "$b.$c = $s->{$c}, more than the $n sessions that it can have")
				  if $s->{$c} > $n;
			}
			$viol->($t, "$b.idle_in_transaction = $s->{idle_in_transaction} > active = $s->{active}")
			  if defined $s->{idle_in_transaction} && $s->{idle_in_transaction} > $s->{active};
			$viol->($t, "$b.peak_active = $s->{peak_active} < active = $s->{active}")
			  if $s->{peak_active} < $s->{active};
			$viol->($t, "$b.admitted_after_wait = $s->{admitted_after_wait} > admitted = $s->{admitted}")
			  if $s->{admitted_after_wait} > $s->{admitted};
			$viol->($t,
				"$b.admitted_lock_holder = $s->{admitted_lock_holder} > admitted_after_wait + canceled_waiting"
				  . " = $s->{admitted_after_wait} + $s->{canceled_waiting}")
			  if $s->{admitted_lock_holder} > $s->{admitted_after_wait} + $s->{canceled_waiting};
			$viol->($t, "$b.wait_time_max = $s->{wait_time_max} ms, longer than any wait can be")
			  if $s->{wait_time_max} > $p{max_wait_ms};
			if ($p{leaf}{$b})
			{
				my $m = $p{max}{$b} // {};
				$viol->($t, "$b.peak_queued = $s->{peak_queued} > $m->{max_queued}, "
					  . 'the highest max_queued it ever had')
				  if defined $m->{max_queued} && $s->{peak_queued} > $m->{max_queued};
				$viol->($t, "$b.peak_active = $s->{peak_active} > $m->{max_active} + "
					  . "$s->{admitted_lock_holder} (the highest max_active it ever had + "
					  . 'lock-holder admissions)')
				  if !$p{enforce_off}{$b}
				  && defined $m->{max_active}
				  && $s->{peak_active} > $m->{max_active} + $s->{admitted_lock_holder}
				  + ($s->{demoted_in} // 0);
			}
			$r{max_active}{$b} = $s->{active} if $s->{active} > ($r{max_active}{$b} // -1);
			$r{max_queued}{$b} = $s->{queued} if $s->{queued} > ($r{max_queued}{$b} // -1);

			my $sr = $s->{stats_reset} // '';
			$reset{$b} //= $sr;
			if ($sr ne $reset{$b} && $p{may_vanish}{$b})
			{
				# dropped and created again
				$reset{$b} = $sr;
				delete $prev{$b};
			}
			$viol->($t, "$b.stats_reset changed from $reset{$b} to $sr")
			  if $sr ne $reset{$b};
			if (my $pr = $prev{$b})
			{
				for my $c (@COUNTERS)
				{
					next unless defined $s->{$c} && defined $pr->{$c};
					$viol->($t, "$b.$c went down from $pr->{$c} to $s->{$c}")
					  if $s->{$c} < $pr->{$c};
				}
			}
			$prev{$b} = $s;
		}

		my (%pids, %pos);
		for my $row (@$backends)
		{
			my ($pid, $role, $b, $state) = @$row{qw(pid role budget state)};
			$viol->($t, "pid $pid has two rows in dbgate.backends") if $pids{$pid}++;
			if (!$BACKEND_STATES{$state})
			{
				$viol->($t, "backend $pid in state '$state'");
				next;
			}
			my $want = $p{role_budget}{$role};
			my $from = $row->{demoted_from};
			if (defined $from)
			{
				$viol->($t, "backend $pid of role $role in budget $b, demoted from $from, "
					  . 'not from ' . ($want // 'none'))
				  unless defined $want && $want eq $from && $p{demote}{$from}{$b};
				$viol->($t, "backend $pid demoted from $from to $b is queued")
				  if $state eq 'queued';
			}
			else
			{
				# a quarantined statement of a 'demote' budget is gated by
				# its runaway_budget
				$viol->($t, "backend $pid of role $role in budget $b, not in " . ($want // 'none'))
				  unless defined $want && ($want eq $b || $p{demote}{$want}{$b});
			}
			if ($state eq 'queued')
			{
				if (defined $row->{queue_position}) { push @{ $pos{$b} }, $row->{queue_position}; }
				else { $viol->($t, "queued backend $pid has no queue position"); }
			}
			elsif (defined $row->{queue_position})
			{
				$viol->($t, "$state backend $pid has queue position $row->{queue_position}");
			}
			my $age = $t - since($row->{state_since});
			my $limit = $p{ages}{$state};
			$viol->($t,
				sprintf('backend %d (%s) %s in %s for %.1f s: %s', $pid, $role, $state, $b, $age,
					$row->{query} // '(query not known)'))
			  if defined $limit && $age > $limit;
		}
		for my $budget (sort keys %pos)
		{
			my @pos = sort { $a <=> $b } @{ $pos{$budget} };
			$viol->($t, "queue positions of $budget are @pos")
			  if join(',', @pos) ne join(',', 1 .. @pos);
		}
	}
	close $fh;
	return \%r;
}

# state_since as JSON gives it ("2026-01-01T10:00:00.123456+00:00") in
# seconds since the epoch
sub since
{
	my ($ts) = @_;
	return 0 unless defined $ts;
	my ($y, $mo, $d, $h, $mi, $s, $tz) =
	  $ts =~ /^(\d+)-(\d+)-(\d+)[T ](\d+):(\d+):([\d.]+)([+-]\d+(?::\d+)?)?/
	  or return 0;
	require Time::Local;
	my $t = Time::Local::timegm(0, $mi, $h, $d, $mo - 1, $y) + $s;
	if (defined $tz)
	{
		my ($sign, $th, $tm) = $tz =~ /^([+-])(\d+)(?::(\d+))?/;
		my $off = ($th * 60 + ($tm // 0)) * 60;
		$t -= $sign eq '+' ? $off : -$off;
	}
	return $t;
}

# dbgate_functions(SRCDIR) -> { file => { function => 1 } }: the functions
# defined in dbgate's C sources and headers (PostgreSQL style: the name at
# the start of a line, followed by its parameter list)
sub dbgate_functions
{
	my ($src) = @_;
	my %f;
	for my $file (glob("$src/*.c"), glob("$src/*.h"))
	{
		open(my $fh, '<', $file) or next;
		my $base = basename($file);
		while (my $line = <$fh>)
		{
			$f{$base}{$1} = 1 if $line =~ /^([A-Za-z_]\w*)\(/;
		}
		close $fh;
	}
	return \%f;
}

my $PREFIX = qr/^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? \S+) \[(\d+)\] <([0-9A-Z]{5})> <([^>]*)> <([^>]*)> ([A-Z0-9]+):  (.*)$/;
my %PART = map { $_ => 1 } qw(DETAIL HINT CONTEXT LOCATION STATEMENT QUERY);

# PostgreSQL's warnings about a resource that a module left behind
# (not "you don't own a lock": pg_advisory_unlock_xact... of a lock not held
# says that too)
my $LEAK = qr/leak|still referenced|not closed|still active|still pinned|AbortTransaction while|not owned by resource owner/i;

# scan_log(file => F, offset => BYTES, functions => dbgate_functions(),
#          smith_roles => { role => 1 })
sub scan_log
{
	my (%p) = @_;
	my %r = (findings => [], full => {}, qto => {}, smith_errors => {}, other_errors => {},
		warnings => {}, internal => [], fatal => {}, messages => 0);
	open(my $fh, '<', $p{file}) or die "$p{file}: $!";
	seek($fh, $p{offset} // 0, 0);
	my ($rec, $last_part);
	my $finish = sub {
		classify(\%r, $rec, \%p) if $rec;
		$rec = undef;
	};
	while (my $line = <$fh>)
	{
		chomp $line;
		if ($line =~ /^TRAP:/)
		{
			push @{ $r{findings} }, "assertion failure: $line";
			next;
		}
		if (my ($ts, $pid, $state, $user, $app, $level, $text) = $line =~ $PREFIX)
		{
			if ($PART{$level} && $rec && $rec->{pid} == $pid)
			{
				$rec->{ lc $level } = $text;
				$last_part = lc $level;
				next;
			}
			$finish->();
			$text =~ s/^[0-9A-Z]{5}: //;
			$rec = { ts => $ts, pid => $pid, state => $state, user => $user, app => $app,
				level => $level, message => $text };
			$last_part = 'message';
			next;
		}
		# continuation of the last line (a multi-line message or statement)
		if ($rec)
		{
			(my $cont = $line) =~ s/^\t//;
			$rec->{$last_part} .= "\n$cont";
		}
	}
	$finish->();
	close $fh;
	return \%r;
}

# a message with its numbers replaced by '#' (to count like ones together)
sub shape
{
	my ($m) = @_;
	$m =~ s/0x[0-9a-fA-F]+|\d+/#/g;
	return $m;
}

sub classify
{
	my ($r, $rec, $p) = @_;
	$r->{messages}++;
	my ($level, $state, $msg) = @$rec{qw(level state message)};
	my ($func, $file) = ($rec->{location} // '') =~ /^(\w+), ([^:]+):\d+/;
	my $ours = defined $file && $p->{functions}{$file} && $p->{functions}{$file}{$func};
	my $where = defined $file ? " [$func, $file]" : '';
	my $what = sprintf('%s %s (pid %d, %s, %s): %s%s', $level, $state, $rec->{pid},
		$rec->{user} || '-', $rec->{app} || '-', $msg, $where);
	$what .= "\n  DETAIL: $rec->{detail}" if $rec->{detail};
	$what .= "\n  STATEMENT: $rec->{statement}" if $rec->{statement};

	# what may end a queued statement other than admission or a queue
	# timeout: a cancel or a statement timeout, the end of the session, a
	# lost client
	$r->{leave}{ $rec->{user} }++
	  if ($level eq 'ERROR' && $state eq '57014')
	  || $level eq 'FATAL'
	  || ($level eq 'LOG' && $state =~ /^08/);
	if ($level eq 'LOG')
	{
		# the postmaster reports a crashed child, then restarts
		if ($msg =~ /terminated by signal|was terminated by exception|all server processes terminated|database system was interrupted|terminating any other active server processes/
			|| ($msg =~ /exited with exit code/
				&& $msg !~ /background worker "parallel worker" \(PID \d+\) exited with exit code 1$/))
		{
			push @{ $r->{findings} }, "crash: $what";
		}
		return;
	}
	if ($level eq 'PANIC')
	{
		push @{ $r->{findings} }, "PANIC: $what";
		return;
	}
	if ($level eq 'WARNING')
	{
		# the WARNINGs dbgate gives by design: alter_budget(parent => '')
		# or a drop with force resets an orphan's reservation (1.3); a
		# drop with force of a runaway_budget (1.3); key_by in a build that
		# does not enforce keys (1.3)
		if ($ours
			&& ($msg =~ /^budget ".*" has no parent any more: its reserved \d+ is set to 0$/
				|| $msg =~ /^budget ".*" loses its runaway_budget ".*"(: its runaway_action is set to 'log')?$/
				|| $msg =~ /^key limits of budget ".*" are not enforced$/))
		{
			$r->{warnings}{ "$state " . shape($msg) }++;
		}
		elsif ($ours) { push @{ $r->{findings} }, "dbgate warning: $what"; }
		elsif ($msg =~ $LEAK) { push @{ $r->{findings} }, "resource warning: $what"; }
		else { $r->{warnings}{ "$state " . shape($msg) }++; }
		return;
	}
	if ($level eq 'FATAL')
	{
		$r->{fatal}{$state}++;
		push @{ $r->{findings} }, "dbgate FATAL: $what"
		  if $ours && $state ne '25P03' && $state ne '57P01';
		push @{ $r->{findings} }, "internal FATAL: $what" if $state =~ /^XX/;
		return;
	}
	return unless $level eq 'ERROR';
	if ($ours && $state =~ /^(XX|58)/)
	{
		push @{ $r->{findings} }, "dbgate internal error: $what";
	}
	elsif ($state =~ /^XX/)
	{
		push @{ $r->{internal} }, { what => $what, state => $state, message => $msg,
			statement => $rec->{statement} };
	}
	if ($ours && $state eq '53300')
	{
		if ($msg =~ /^budget "(.+)" is full$/) { $r->{full}{$1}++; }
		elsif ($msg =~ /^timed out waiting for a slot in budget "(.+)"$/) { $r->{qto}{$1}++; }
		else { push @{ $r->{findings} }, "unknown 53300 message of dbgate: $what"; }
	}
	my $bucket = ($p->{smith_roles}{ $rec->{user} } && $rec->{app} eq 'sqlsmith::dut')
	  ? 'smith_errors' : 'other_errors';
	$r->{$bucket}{$state}++;
	return;
}

1;
