# Soak::Check - checks of the soak test's monitor samples and server log.
#
# check_samples() reads monitor.samples (see Soak::Monitor) and applies, to
# every sample, the invariants that hold at each instant:
#
#   - 0 <= active <= max_active and 0 <= queued <= max_queued, with three
#     excuses for active: slots admitted before the latest lowering of
#     max_active, lock-holder admissions that may still hold their slot
#     and (1.3) statements demoted into
#     the budget (its rows with demoted_from, in this sample or the
#     previous one, and the growth of demoted_in since the previous
#     sample: a demoted statement counts beyond the target's limits); and
#     one for queued: statements
#     queued before the latest lowering of max_queued.  A lock-holder
#     admission that may still hold its slot is one counted since the
#     earliest time that a slot counted in the sample may date from (the
#     rows of this sample and of the previous one, and the previous
#     sample's time for a slot taken and returned in between, see
#     below): admitted_lock_holder now less its value in the last sample
#     read before that time, however long ago.  The same bounds
#     apply to the rows of dbgate.backends per budget, where a slot kept
#     idle in a transaction counts as active.  A kept slot's state_since
#     moves with each statement and pause, so a slot may date from before a
#     lowering if its holder held a slot in the same transaction
#     (pg_stat_activity.xact_start) at an earlier state_since, or was not
#     seen in the previous sample.  A change of a limit is in effect in a
#     sample if it may have committed before the sample's views were
#     read (before t_end, the time taken after them);
#   - 0 <= idle_in_transaction <= active;
#   - a transaction that keeps its slot never queues again: no backend is
#     queued in a transaction in which it was seen holding a slot while the
#     transaction held a transaction ID (pg_stat_activity.backend_xid; a
#     transaction may get one before its first gated statement, CREATE
#     TEMP TABLE ... AS for one, and then queue for it), in a budget of
#     'transaction' no backend is queued in a transaction in which it was
#     seen idle in transaction (except while dbgate.enabled was turned off
#     and on: a statement that ran ungated took no slot); and a slot is
#     never held idle by a backend that is outside a transaction
#     (pg_stat_activity.state 'idle').  Judged only on rows whose state
#     began before the sample time, which is taken before pg_stat_activity
#     is read;
#   - counters never decrease while stats_reset stays the same (also the
#     1.2 counters admitted_overdue, rate_limited and bypassed, the 1.3
#     counters runaways, demoted_out, demoted_in and quarantined, and would_queue and
#     would_reject, which no budget of the soak may count: none is in
#     shadow mode);
#   - limits never show a value that was only set in a rolled-back
#     transaction;
#   - a budget in fair (one that hands a released slot off whenever it
#     has waiters) never has a free slot while statements wait; no budget
#     has one for longer than starve_limit seconds (a lost wake-up), but
#     those in no_starve (children, whose waiters may wait for a parent,
#     and budgets with a rate, whose waiters may wait for a token: see
#     Soak::Check12 for theirs);
#   - a waiter's queue position never grows (but in budgets that may be
#     'lifo', where a newcomer goes ahead of those not overdue);
#   - dbgate.backends rows: one per pid, state 'active' or 'idle in
#     transaction' (no queue position) or 'queued' (positions 1..n within a
#     budget), a role that is assigned to that budget (1.3: or a budget
#     that its budget demotes to, demote_targets; a row with demoted_from
#     names its role's budget there and is not queued), and no row older
#     than a limit (a stuck waiter, a leaked slot, a kept slot idle longer
#     than its budget's idle timeout allows);
#   - parents (budgets with children) are not held to their own max_queued
#     (their 'queued' counts their subtree) and have no rows of their own.
#
# The checks of the 1.2 dimensions (trees, queue order, rate) are objects
# of Soak::Check12 passed as 'extra': check_samples() hands each of them
# every sample, already parsed, and asks for their verdicts at the end.
#
# scan_log() looks for crashes other than the deliberate ones.
package Soak::Check;

use strict;
use warnings;

use Exporter 'import';

use Soak::Monitor;

our @EXPORT_OK = qw(check_samples scan_log);

my %S = %Soak::Monitor::S;
my %B = %Soak::Monitor::B;
my @COUNTERS = qw(admitted admitted_after_wait rejected_full rejected_timeout
  canceled_waiting admitted_lock_holder terminated_idle admitted_overdue
  rate_limited would_queue would_reject bypassed runaways demoted_out demoted_in
  quarantined);

# check_samples(file => F, lowerings => { budget => { max_active => [[t0, t1],
#   ...], max_queued => [...] } }, changes => { budget => { max_active =>
#   [[t0, t1, new value], ...], max_queued => [...] } } (every committed
#   change, committed between t0 and t1), role_budget => { role => budget },
#   budgets => { budget => 1 }, may_vanish => { budget => 1 },
#   sentinels => { budget => { column => value } }, queued_age => { budget =>
#   seconds }, idle_age => { budget => seconds }, max_age => seconds,
#   fair => { budget => 1 }, starve_limit => seconds,
#   scope => { budget => 'statement' or 'transaction' } (the budgets whose
#   scope never changes), gate_windows => [[t_off, t_on], ...],
#   parents => { budget => 1 }, no_starve => { budget => 1 },
#   lifo_possible => { budget => 1 }, extra => [Soak::Check12 objects],
#   keyed => { budget => 1 } (1.3: budgets with key_by, whose queue is in
#   the cross-key order: a waiter of a key with fewer active statements
#   goes before those of busier keys, so a waiter may lose places),
#   demote_targets => { budget => { runaway_budget => 1 } } (every budget
#   that a budget may demote its statements to))
# may_vanish: budgets that are dropped and created during the run, whose
# backends rows may appear in a sample whose status rows miss the budget.
# Returns a hash: samples, violations (list, the first 30), nviolations,
# max_active / max_queued / max_idle (seen per budget), max_gap (seconds between
# samples), lh_excused / lowering_excused / demote_excused (samples where an
# excuse was used), demoted_rows (rows with demoted_from seen).  The
# objects of 'extra' get, with each sample, the lock-holder admissions
# that may still hold a slot, per budget (lh => { budget => n }).
sub check_samples
{
	my (%p) = @_;
	my %r = (
		samples => 0,
		violations => [],
		nviolations => 0,
		max_active => {},
		max_queued => {},
		max_idle => {},
		max_gap => 0,
		lh_excused => 0,
		lowering_excused => 0,
		demote_excused => 0,
		demoted_rows => 0);
	my $viol = sub {
		my ($t, $msg) = @_;
		$r{nviolations}++;
		push @{ $r{violations} }, sprintf('%.3f %s', $t, $msg)
		  if @{ $r{violations} } < 30;
	};
	my %prev;       # "budget@stats_reset" -> previous status row
	my %qpos;       # "pid@since" -> last queue position seen
	my %starved;    # budget -> time since when a slot is free while others wait
	my %prev_rows;  # budget -> state -> rows of the previous sample
	my %lh_hist;    # same key -> [[t_end, admitted_lock_holder], ...]
	my %held_from;  # "pid@xact_start" -> earliest time its slot may date from
	my %kept_in;    # "pid@xact_start" -> when it was seen keeping a slot
	my %xid_held;   # "pid@xact_start" -> when seen holding a slot with an ID
	# did dbgate.enabled go off and on while a transaction begun at xs ran?
	my $gate_excuse = sub {
		my ($xs, $t) = @_;
		return scalar grep { $_->[0] <= $t && $_->[1] + 2 >= $xs } @{ $p{gate_windows} // [] };
	};
	my $prev_t;

	open(my $fh, '<', $p{file}) or die "$p{file}: $!";
	while (my $line = <$fh>)
	{
		chomp $line;
		my ($t, $sj, $bj, $t_end) = split /\t/, $line, -1;
		next unless defined $t_end;
		my $status = Soak::Monitor::read_rows($sj);
		my $backends = Soak::Monitor::read_rows($bj);
		my $last_t = $prev_t;    # the previous sample's time
		$r{samples}++;
		$r{max_gap} = $t - $prev_t
		  if defined $prev_t && $t - $prev_t > $r{max_gap};

		# backends rows by budget, and checks of single rows
		my (%rows, %pids, %held_now);
		for my $b (@$backends)
		{
			my ($pid, $role, $budget, $state, $since, $pos, $xs, $pstate, $has_xid) =
			  @$b[ @B{qw(pid role budget state since position xact_start pstate has_xid)} ];
			# in this state since before the sample time, so already when
			# pg_stat_activity was read: what that shows of the backend is of
			# the same state
			$viol->($t, "backend $pid keeps a slot of $budget outside a transaction")
			  if $since <= $t
			  && $state eq 'idle in transaction'
			  && ($pstate // '') eq 'idle';
			my $scope = $p{scope}{$budget} // '';
			if ($since <= $t && defined $xs && $scope ne '')
			{
				my $k = "$pid\@$xs";
				if ($state ne 'queued')
				{
					$kept_in{$k} //= $t
					  if $scope eq 'transaction' && $state eq 'idle in transaction';
					$xid_held{$k} //= $t if $has_xid;
				}
				elsif ($state eq 'queued' && !$gate_excuse->($xs, $t))
				{
					$viol->($t,
						sprintf(
							'backend %d queued in %s in the transaction in which it kept a slot '
							  . '(seen idle in transaction at %.3f)',
							$pid, $budget, $kept_in{$k}))
					  if defined $kept_in{$k};
					$viol->($t,
						sprintf(
							'backend %d queued in %s in the transaction in which it held a slot '
							  . 'with a transaction ID (seen at %.3f)',
							$pid, $budget, $xid_held{$k}))
					  if defined $xid_held{$k};
				}
			}
			$viol->($t, "pid $pid has two rows in dbgate.backends")
			  if $pids{$pid}++;
			my $want = $p{role_budget}{$role};
			my $from = $b->[ $B{demoted_from} ];
			if (defined $from)
			{
				$r{demoted_rows}++;
				$viol->($t, "backend $pid of role $role (budget "
					  . ($want // 'none') . ") in budget $budget, demoted from $from")
				  unless defined $want && $want eq $from
				  && $p{demote_targets}{$from}{$budget};
				$viol->($t, "backend $pid demoted from $from to $budget is queued")
				  if $state eq 'queued';
			}
			else
			{
				# (1.3) a quarantined statement of a 'demote' budget is gated
				# by the budget's runaway_budget
				$viol->($t, "backend $pid of role $role in budget $budget")
				  unless defined $want
				  && ($want eq $budget || $p{demote_targets}{$want}{$budget});
			}
			if ($state eq 'active' || $state eq 'idle in transaction')
			{
				$viol->($t, "$state backend $pid has queue position $pos")
				  if defined $pos;
				# the earliest its slot may have been admitted: held in the
				# same transaction before, or else not before the previous
				# sample (nor before the transaction began)
				my $k = "$pid\@" . ($xs // '');
				my $from = $held_from{$k};
				if (!defined $from)
				{
					$from = $prev_t // $since;
					$from = $xs if defined $xs && $xs > $from;
					$from = $since if $since < $from;
				}
				$from = $since if $since < $from;
				$held_now{$k} = $from;
				$b->[ scalar(keys %B) ] = $from;
			}
			elsif ($state eq 'queued')
			{
				$viol->($t, "queued backend $pid has no queue position")
				  unless defined $pos;
				my $limit = $p{queued_age}{$budget} // $p{max_age};
				$viol->($t,
					sprintf('backend %d queued in %s for %.1f s', $pid, $budget, $t - $since))
				  if $t - $since > $limit;
			}
			else
			{
				$viol->($t, "backend $pid in state '$state'");
			}
			$viol->($t,
				sprintf('backend %d %s in %s for %.1f s', $pid, $state, $budget, $t - $since))
			  if $state eq 'active' && $t - $since > $p{max_age};
			my $idle_limit = $p{idle_age}{$budget} // $p{max_age};
			$viol->($t,
				sprintf('backend %d idle in transaction in %s for %.1f s',
					$pid, $budget, $t - $since))
			  if $state eq 'idle in transaction' && $t - $since > $idle_limit;
			# a slot kept idle is taken: it counts as active
			push @{ $rows{$budget}{ $state eq 'queued' ? 'queued' : 'active' } }, $b;
			$rows{$budget}{nidle}++ if $state eq 'idle in transaction';
		}
		%held_from = %held_now;
		$prev_t = $t;
		# a waiter never loses places in its queue ('fifo')
		my %qpos_now;
		for my $budget (keys %rows)
		{
			next if $p{lifo_possible}{$budget} || $p{keyed}{$budget};
			for my $b (@{ $rows{$budget}{queued} // [] })
			{
				my $k = "$b->[$B{pid}]\@$b->[$B{since}]";
				my $pos = $b->[ $B{position} ] // 0;
				$viol->($t,
					"backend $b->[$B{pid}] moved back in the queue of $budget from position $qpos{$k} to $pos"
				) if defined $qpos{$k} && $pos > $qpos{$k};
				$qpos_now{$k} = $pos;
			}
		}
		%qpos = %qpos_now;

		for my $budget (keys %rows)
		{
			my @pos = sort { $a <=> $b }
			  map { $_->[ $B{position} ] // 0 } @{ $rows{$budget}{queued} // [] };
			for my $i (0 .. $#pos)
			{
				if ($pos[$i] != $i + 1)
				{
					$viol->($t, "queue positions of $budget are @pos");
					last;
				}
			}
		}

		my %seen_budget;
		my %st;    # budget -> the status row as a hash
		my %lh_now;    # budget -> lock-holder admissions that may hold a slot
		for my $s (@$status)
		{
			my %v = map { $_ => $s->[ $S{$_} ] } keys %S;
			$st{ $v{budget} } = \%v;
			my $budget = $v{budget};
			$seen_budget{$budget} = 1;
			my $key = "$budget\@$v{stats_reset}";

			if (!$p{budgets}{$budget})
			{
				$viol->($t, "unknown budget $budget in dbgate.status");
				next;
			}
			for my $col (keys %{ $p{sentinels}{$budget} // {} })
			{
				$viol->($t,
					"$budget.$col = $v{$col}: a value set only in a rolled-back transaction"
				) if $v{$col} == $p{sentinels}{$budget}{$col};
			}
			$viol->($t, "$budget: active $v{active} or queued $v{queued} negative")
			  if $v{active} < 0 || $v{queued} < 0;
			$viol->($t,
				"$budget: idle_in_transaction $v{idle_in_transaction} not within 0 .. active $v{active}"
			) if $v{idle_in_transaction} < 0 || $v{idle_in_transaction} > $v{active};
			$r{max_idle}{$budget} = $v{idle_in_transaction}
			  if $v{idle_in_transaction} > ($r{max_idle}{$budget} // -1);

			# counters only grow until reset
			my $pr = $prev{$key};
			if ($pr)
			{
				for my $c (@COUNTERS, qw(peak_active peak_queued))
				{
					$viol->($t, "$budget.$c went down from $pr->{$c} to $v{$c}")
					  if $v{$c} < $pr->{$c};
				}
			}
			$prev{$key} = \%v;

			# (1.3) statements demoted into the budget: its rows that
			# show it (this sample's and the previous one's, once a pid),
			# and those moved since the previous sample (a statement
			# moved and ended between two readings is in no row)
			my %dpid;
			for my $row (@{ $rows{$budget}{active} // [] },
				@{ $prev_rows{$budget}{active} // [] })
			{
				$dpid{ $row->[ $B{pid} ] } = 1 if defined $row->[ $B{demoted_from} ];
			}
			my $dm = keys %dpid;
			$dm += $v{demoted_in} - $pr->{demoted_in}
			  if $pr && $v{demoted_in} > $pr->{demoted_in};

			# lock-holder admissions that may still hold a slot: those
			# counted since the earliest time a slot counted now may date
			# from
			my $h = $lh_hist{$key} //= [];
			my $since = earliest_slot($last_t,
				[ @{ $rows{$budget}{active} // [] }, @{ $prev_rows{$budget}{active} // [] } ]);
			my $lh = $v{admitted_lock_holder} - lh_before($h, $since);
			push @$h, [ $t_end, $v{admitted_lock_holder} ];
			$lh_now{$budget} = $lh;

			# dbgate.backends is read a moment after dbgate.status: a row
			# that counted in the status may be gone from it, so rows of
			# the previous sample count too
			my $ga = grandfathered($p{lowerings}{$budget}{max_active}, $t,
				[ @{ $rows{$budget}{active} // [] }, @{ $prev_rows{$budget}{active} // [] } ],
				$t_end);
			my $gq = grandfathered($p{lowerings}{$budget}{max_queued}, $t,
				[ @{ $rows{$budget}{queued} // [] }, @{ $prev_rows{$budget}{queued} // [] } ],
				$t_end);

			$r{max_active}{$budget} = $v{active}
			  if $v{active} > ($r{max_active}{$budget} // -1);
			$r{max_queued}{$budget} = $v{queued}
			  if $v{queued} > ($r{max_queued}{$budget} // -1);

			# A fair budget hands a released slot straight to the waiter
			# chosen: nobody waits while a slot is free (the budgets in
			# $p{fair}).  A non-fair one, and a fair 'lifo' one while
			# nobody is overdue, wakes the waiter chosen, which takes the
			# slot at once (so a slot is free at most starve_limit).
			if ($v{queued} > 0 && $v{active} < $v{max_active} && !$p{no_starve}{$budget})
			{
				$viol->($t,
					"$budget (fair): queued $v{queued} while active $v{active} < max_active $v{max_active}"
				) if $p{fair}{$budget};
				$starved{$budget} //= $t;
				$viol->($t,
					sprintf('%s: a slot has been free for %.1f s while %d statement(s) wait',
						$budget, $t - $starved{$budget}, $v{queued}))
				  if $t - $starved{$budget} > $p{starve_limit};
			}
			else
			{
				delete $starved{$budget};
			}

			# dbgate.backends is read after dbgate.status: a limit raised
			# in between (committed before t_end) already applies to its
			# rows
			my %lim;
			for my $f (qw(max_active max_queued))
			{
				$lim{$f} = $v{$f};
				for my $c (@{ $p{changes}{$budget}{$f} // [] })
				{
					$lim{$f} = $c->[2]
					  if $c->[0] <= $t_end && $c->[1] >= $t && $c->[2] > $lim{$f};
				}
			}
			my $nact = scalar @{ $rows{$budget}{active} // [] };
			my $nque = scalar @{ $rows{$budget}{queued} // [] };
			for my $c ([ 'active', $v{active}, $v{max_active} ],
				[ 'active rows', $nact, $lim{max_active} ])
			{
				my ($what, $n, $max) = @$c;
				# (a parent's slots are its subtree's: Soak::Check12)
				next if $n <= $max || $p{parents}{$budget};
				if ($n <= $max + $ga + $lh + $dm)
				{
					$r{demote_excused}++ if $n > $max + $ga + $lh;
					$r{lh_excused}++ if $n > $max + $ga && $n <= $max + $ga + $lh;
					$r{lowering_excused}++ if $n <= $max + $ga;
					next;
				}
				$viol->($t,
					"$budget: $what $n > max_active $max "
					  . "(admitted before a lowering: $ga, lock-holder admissions that may hold a slot: $lh, "
					  . "demoted in: $dm)"
				);
			}
			for my $c ([ 'queued', $v{queued}, $p{parents}{$budget} ? 1e9 : $v{max_queued} ],
				[ 'queued rows', $nque, $lim{max_queued} ])
			{
				my ($what, $n, $max) = @$c;
				next if $n <= $max;
				if ($n <= $max + $gq)
				{
					$r{lowering_excused}++;
					next;
				}
				$viol->($t,
					"$budget: $what $n > max_queued $max "
					  . "(queued before a lowering: $gq)");
			}
		}
		for my $budget (keys %rows)
		{
			$viol->($t, "dbgate.backends rows for budget $budget, which dbgate.status does not show")
			  unless $seen_budget{$budget} || $p{may_vanish}{$budget};
			$viol->($t, "dbgate.backends rows for budget $budget, a parent")
			  if $p{parents}{$budget}
			  && grep { @{ $rows{$budget}{$_} // [] } } qw(active queued);
		}
		$_->sample(
			t => $t,
			t_end => $t_end,
			lh => \%lh_now,
			status => \%st,
			rows => \%rows,
			prev_rows => \%prev_rows,
			viol => $viol) for @{ $p{extra} // [] };
		%prev_rows = %rows;
	}
	close $fh;
	$_->finish($viol) for @{ $p{extra} // [] };
	return \%r;
}

# Rows admitted (or queued) before the latest lowering that may already be
# in effect in the sample read between t and t_end.  A lowering is
# [t_before, t_after]: the commit happened in between.  A slot holder's
# row carries, after the columns of %B, the earliest time its slot may
# date from (see check_samples).
sub grandfathered
{
	my ($lowerings, $t, $rows, $t_end) = @_;
	return 0 unless $lowerings && $rows;
	die 'grandfathered() needs the time after the sample was read' unless defined $t_end;
	my $latest;
	# (a lowering that began before the views were read may be in effect
	# in them)
	for my $l (@$lowerings)
	{
		$latest = $l->[1] if $l->[0] <= $t_end;
	}
	return 0 unless defined $latest;
	my %seen;
	# a backend holds one slot: its row of this and of the previous sample
	# count once
	return scalar grep {
		my $from = $_->[ scalar(keys %B) ];
		defined $from
		  ? ($from < $latest && !$seen{"$_->[$B{pid}]"}++)
		  : ($_->[ $B{since} ] < $latest && !$seen{"$_->[$B{pid}]\@$_->[$B{since}]"}++)
	} @$rows;
}

# earliest_slot(PREV_T, ROWS) -> the earliest time a slot counted in a
# sample may date from: each slot holder's row (of this sample or the
# previous one) carries the earliest time its slot may date from; a slot
# in neither was taken after the previous sample's views were read (after
# PREV_T), and given back before this sample's dbgate.backends was.
# -9**9**9 before the first sample.
sub earliest_slot
{
	my ($prev_t, $rows) = @_;
	return -9**9**9 unless defined $prev_t;
	my $e = $prev_t;
	for my $r (@$rows)
	{
		my $from = $r->[ scalar(keys %B) ] // $r->[ $B{since} ];
		$e = $from if $from < $e;
	}
	return $e;
}

# lh_before(HIST, T) -> admitted_lock_holder in the last sample of HIST
# ([[t_end, count], ...] in time order) read wholly before T, or 0 when
# there is none.  The admissions counted after that sample were granted
# after T, or before it and counted late: both are excused, which errs on
# the side of the excuse.
sub lh_before
{
	my ($h, $t) = @_;
	my ($lo, $hi) = (0, scalar @$h);
	# the first entry with t_end >= t
	while ($lo < $hi)
	{
		my $mid = int(($lo + $hi) / 2);
		if ($h->[$mid][0] < $t) { $lo = $mid + 1; }
		else { $hi = $mid; }
	}
	return $lo > 0 ? $h->[ $lo - 1 ][1] : 0;
}

# scan_log(file => F, killed => [pids]) -> (problems, deliberate kills seen,
#                                            lines of a quitting backend)
#
# After a deliberate kill -9 the postmaster sends SIGQUIT to every other
# child, and a client backend's SIGQUIT handler (PostgreSQL's quickdie())
# builds a message for its client from inside the signal handler: when the
# signal came in the middle of a malloc() of that backend, glibc may find
# its heap half updated and abort the process with "Fatal glibc error" or
# "malloc(): ..." on stderr (PostgreSQL's own comment there says so).  The
# postmaster logs no exit of the children it told to quit.  Such lines are
# counted apart, and only between the postmaster's "terminating any other
# active server processes" that follows a deliberate kill and its
# "all server processes terminated; reinitializing"; the same lines
# anywhere else are problems.
sub scan_log
{
	my (%p) = @_;
	my %killed = map { $_ => 1 } @{ $p{killed} };
	my @problems;
	my @quitting;
	my $seen = 0;
	my $deliberate = 0;    # the last child crash was a deliberate kill
	my $window = 0;        # between its SIGQUIT to all and the reinit
	open(my $fh, '<', $p{file}) or return ([ "cannot read $p{file}: $!" ], 0, []);
	while (my $line = <$fh>)
	{
		chomp $line;
		if ($line =~ /\(PID (\d+)\) was terminated by signal (\d+)/)
		{
			if ($killed{$1} && $2 == 9) { $seen++; $deliberate = 1; next; }
			$deliberate = 0;
			push @problems, $line;
			next;
		}
		if ($line =~ /terminating any other active server processes/)
		{
			$window = $deliberate;
			next;
		}
		if ($line =~ /all server processes terminated; reinitializing/)
		{
			$window = $deliberate = 0;
			next;
		}
		if ($window && $line =~ /^(?:Fatal glibc error: |malloc\(\)|free\(\)|corrupted )/)
		{
			push @quitting, $line;
			next;
		}
		# a parallel worker ends with an error when its leader is
		# canceled or terminated
		next
		  if $line =~
		  /background worker "parallel worker" \(PID \d+\) exited with exit code 1$/;
		push @problems, $line
		  if $line =~ /PANIC|TRAP:|[Aa]ssert|terminated by signal|exited with exit code|WARNING:.*dbgate|dbgate\.state\.corrupt|^Fatal glibc error|^malloc\(\)|^free\(\)|^corrupted /;
	}
	close $fh;
	return (\@problems, $seen, \@quitting);
}

1;
