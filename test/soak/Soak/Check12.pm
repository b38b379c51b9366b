# Soak::Check12 - checks of the 1.2 admission dimensions in the soak
# test's monitor samples: trees of budgets (shares), queue order, rate.
#
# An object of this class is handed every sample by
# Soak::Check::check_samples() (method sample) and gives its verdicts at
# the end (method finish); figures() returns what it measured.  What it
# knows of the configuration comes from a *timeline*: for each budget and
# field, the initial value and every committed change as [t0, t1, value]
# (the change committed between t0 and t1, times of the test's clock,
# which is the server's: same machine).  A sample reads the views between
# its times t and t_end; a change is *certain* to be in effect in it when
# t1 < t, certain not to be when t0 > t_end, and uncertain otherwise.
# Fields: parent ('' = top-level), exists (0/1), max_active, queue_order,
# overtake_limit (ms), weight, max_rate, rate_burst; a field that the
# timeline lacks has its default (a budget that is always there, 'fifo',
# no parent, no rate) all the time.
#
# Checks, at every sample:
#
#   Trees.  For each parent P (a budget that exists for certain, whose
#   children are certain):
#     - P.queued = the sum of its children's queued (a waiter is counted
#       at every level of its budget's chain as the tree is now: an
#       install recounts them);
#     - P.active = the sum of its children's active, where a slot is
#       counted at the parents it was taken from: a child's slots that
#       may date from before its latest change of parent (its rows in
#       dbgate.backends whose slot may be older than that change, see
#       Soak::Check) may count at its former parent instead; (1.3) plus
#       the slots P keeps for its children: each child's unused
#       reservation, max(0, reserved - active), and up to one slot per
#       waiter of a fair 'lifo' child (held for it, freed in it only);
#     - P.active <= P.max_active, except slots admitted before a lowering
#       of P's max_active and lock-holder admissions in the tree that may
#       still hold their slot (Soak::Check counts them per budget);
#     - every counter of P but active, queued, their peaks, oldest_wait
#       and rate_limited is 0 (statements are counted at their own
#       budget), and so are its idle_in_transaction and wait_time_max.
#   dbgate.status reads the budgets one after the other, and an admission
#   takes its levels one compare-and-swap at a time without a lock (a
#   release returns them likewise): a sample can catch a statement between
#   two levels.  So the two sums are not one reading; a mismatch is a
#   violation only when it lasts (persist seconds and at least 5 samples
#   in a row, ignoring samples where the shape was uncertain); the
#   mismatches that did not last are counted.  After the drain every
#   level is 0 exactly (the test checks that).
#
#   Memory.  A budget with max_memory_mb M: memory_mb_active <= M, and
#   each of its dbgate.backends rows at most M / max_active (a slot's
#   share), except for slots that may date from before a lowering of M or
#   a raise of max_active and after lock-holder admissions that may still
#   hold their slot; queued
#   rows have 0; rows of budgets without M have NULL.  A parent's
#   memory_mb_active is its children's (a grant counts at every level of
#   the slot's chain; not one reading: only a lasting mismatch fails, as
#   for active).
#
#   oldest_wait: at most the longest a statement of the budget (for a
#   parent: of its children) may wait, queued_age (dbgate.backends rows
#   are held to the same bound by Soak::Check).
#
#   Counters that must stay 0: rate_limited of a budget that never had a
#   rate; admitted_overdue of a budget that was never 'lifo';
#   would_queue and would_reject everywhere (no
#   budget is in shadow mode).  admitted_overdue <= admitted_after_wait
#   and rate_limited <= admitted_after_wait at a leaf (the same reading
#   counts a waiter's admission first).
#
#   Queue order.  The queued rows of a budget whose order is certain, by
#   queue_position: 'fifo' in arrival order (state_since); 'lifo': first
#   those that have waited overtake_limit or more, longest first, then
#   the others, newest first.  ("Arrival" is taken a moment before a
#   statement joins the queue, so the order may differ by tol seconds.)
#
#   Liveness.  A budget with waiters and a free slot at every level of
#   its chain (its own and its parent's, in every sample) must admit one
#   within starve_limit seconds: waiters of a child may wait for its
#   parent, and those of a budget with a rate for a token, but never
#   with a slot free at every level and no admission for long (a lost
#   wake-up, a token waiter that was never woken).
#
#   Rate.  For each rate-limited entity (a leaf with a rate; a parent
#   with a rate, whose admissions are those of its children), in every
#   stretch of samples with one rate r, burst b and set of members: the
#   admissions A (the members' admitted minus admitted_lock_holder, which
#   take no token) between any two samples i < j satisfy
#       A_j - A_i <= b + 1 + r * (t_end_j - t_i + catchup) + inflight
#   (a token bucket of b tokens filled at r per second; inflight, the
#   number of client sessions of the members, covers admissions whose
#   token was taken before t_i but counted after it, as a waiter counts
#   its own admission when it runs again).  The rest is what src/rate.c
#   allows, however late a waiter wakes: the bucket's theoretical arrival
#   time moves on by 1/r with every token and never goes back, and a
#   token needs it within (b - 1) / r of the present; only the tree's
#   token waiter may take its token as of an earlier time (when it was
#   due), which adds one token to a window, and the waiters granted with
#   it take theirs as of at most catchup seconds back
#   (DBGATE_DIM_CATCHUP_NS, 2 ms).  So no wake-up delay, however long,
#   widens the bound.  A stretch ends at every uncertain sample, change of
#   the rate or of the members, crash restart (stats_reset) and
#   dbgate.enabled window.
package Soak::Check12;

use strict;
use warnings;

use Soak::Check ();
use Soak::Monitor;

my %B = %Soak::Monitor::B;

# new(timeline => {...}, parents => [P...], leaves => [budgets with
#   statements], children => [budgets that may have a parent],
#   clients => { budget => sessions }, rated => { entity => 1 } (budgets
#   whose rate is checked; a parent's covers its children),
#   gate_windows => [[off, on], ...] (dbgate.enabled off and on),
#   persist => s, starve_limit => s, tol => s,
#   catchup => s (how far back a waiter granted with the token waiter may
#   take its token: DBGATE_DIM_CATCHUP_NS of src/dimdefs.h),
#   live => { budget => 1 } (liveness checked here),
#   keyed => { budget => 1 } (1.3: budgets with key_by, whose queue is in
#   the cross-key order, not checked here: the samples have no keys),
#   queued_age => { budget => s }, max_age => s (the longest waits))
sub new
{
	my ($class, %p) = @_;
	my $self = bless {
		%p,
		streak => {},         # parent -> [t first, n samples, text]
		transient => {},      # parent -> mismatches that did not last
		judged => {},         # parent -> samples judged
		skipped => {},        # parent -> samples skipped (uncertain shape)
		seg => {},            # entity -> current stretch
		rate_fig => {},       # entity -> { windows, worst }
		starving => {},       # budget -> { t, admitted, reset, reported }
		order_checked => 0,
		oldest => {},         # budget -> longest oldest_wait seen (ms)
		share => {},          # parent -> child -> [sum of active, samples]
	}, $class;
	$self->{persist} //= 1.0;
	$self->{tol} //= 0.005;
	$self->{catchup} //= 0.002;
	return $self;
}

my %DEFAULT = (
	parent => '',
	exists => 1,
	queue_order => 'fifo',
	overtake_limit => 100,
	weight => 1,
	max_rate => 0,
	rate_burst => 1,
	max_memory_mb => 0,
	reserved => 0);

# value_at(BUDGET, FIELD, T, T_END) -> (value, certain)
sub value_at
{
	my ($self, $b, $f, $t, $te) = @_;
	my $tl = $self->{timeline}{$b}{$f};
	return ($DEFAULT{$f}, 1) unless $tl;
	my $v = $tl->{init};
	for my $e (@{ $tl->{ev} })
	{
		my ($t0, $t1, $nv) = @$e;
		last if $t0 > $te;
		return ($nv, 0) if $t1 >= $t;
		$v = $nv;
	}
	return ($v, 1);
}

# the windows of the changes of FIELD of BUDGET, as [[t0, t1], ...]
sub windows
{
	my ($self, $b, $f, $only_down) = @_;
	my $tl = $self->{timeline}{$b}{$f} or return [];
	my @w;
	my $prev = $tl->{init};
	for my $e (@{ $tl->{ev} })
	{
		push @w, [ $e->[0], $e->[1] ] if !$only_down || $e->[2] < $prev;
		$prev = $e->[2];
	}
	return \@w;
}

# did the field ever have a value for which TEST is true?
sub ever
{
	my ($self, $b, $f, $test) = @_;
	my $tl = $self->{timeline}{$b}{$f} or return $test->($DEFAULT{$f}) ? 1 : 0;
	return scalar grep { $test->($_) } $tl->{init}, map { $_->[2] } @{ $tl->{ev} };
}

sub in_gate_window
{
	my ($self, $t, $te) = @_;
	return scalar grep { $_->[0] <= $te && $_->[1] + 2 >= $t } @{ $self->{gate_windows} // [] };
}

sub sample
{
	my ($self, %s) = @_;
	$self->check_trees(%s);
	$self->check_zeros(%s);
	$self->check_memory(%s);
	$self->check_order(%s);
	$self->check_liveness(%s);
	$self->check_rates(%s);
	return;
}

# ---------------------------------------------------------------------
# Trees

sub check_trees
{
	my ($self, %s) = @_;
	my ($t, $te, $st, $viol) = @s{qw(t t_end status viol)};

	# lock-holder admissions that may still hold a slot, in the trees
	# (Soak::Check counts them per budget)
	my $lh = 0;
	for my $b (@{ $self->{children} })
	{
		$lh += $s{lh}{$b} // 0 if $st->{$b};
	}

	# the rows of each child that may hold a slot taken under its former
	# parent (this sample's and the previous one's)
	my %parent;
	my $shape_certain = 1;
	my %u;
	my @all_rows;
	for my $c (@{ $self->{children} })
	{
		my ($pv, $certain) = $self->value_at($c, 'parent', $t, $te);
		$shape_certain = 0 unless $certain;
		$parent{$c} = $pv;
		my @rows = (@{ $s{rows}{$c}{active} // [] }, @{ $s{prev_rows}{$c}{active} // [] });
		push @all_rows, @rows;
		$u{$c} = Soak::Check::grandfathered($self->windows($c, 'parent'), $t, \@rows, $te);
	}

	for my $p (@{ $self->{parents} })
	{
		my $pv = $st->{$p} or next;
		my ($exists, $ec) = $self->value_at($p, 'exists', $t, $te);
		next unless $ec && $exists;

		# its limit
		my $ga = Soak::Check::grandfathered($self->windows($p, 'max_active', 1), $t,
			\@all_rows, $te);
		$viol->($t,
			"$p: active $pv->{active} > max_active $pv->{max_active} "
			  . "(admitted before a lowering: $ga, lock-holder admissions that may hold a slot: $lh)")
		  if $pv->{active} > $pv->{max_active} + $ga + $lh;

		# counted at its children, never at itself
		for my $col (
			qw(admitted admitted_after_wait rejected_full rejected_timeout canceled_waiting
			admitted_lock_holder terminated_idle admitted_overdue would_queue would_reject
			idle_in_transaction wait_time_max))
		{
			$viol->($t, "$p (a parent): $col = $pv->{$col}")
			  if $pv->{$col} != 0;
		}

		if (!$shape_certain)
		{
			$self->{skipped}{$p}++;
			next;
		}
		$self->{judged}{$p}++;
		my ($sum_a, $sum_q, $sum_m, $lo_less, $hi_more) = (0, 0, 0, 0, 0);
		my @kids = grep { ($parent{$_} // '') eq $p } @{ $self->{children} };
		for my $c (@{ $self->{children} })
		{
			my $cv = $st->{$c} or next;
			if (($parent{$c} // '') eq $p)
			{
				my ($r, $rc) = $self->value_at($c, 'reserved', $t, $te);
				my ($o, $oc) = $self->value_at($c, 'queue_order', $t, $te);

				$sum_a += $cv->{active};
				$sum_q += $cv->{queued};
				$sum_m += $cv->{memory_mb_active};
				$lo_less += $u{$c};
				# kept for its reservation (as used as its own slots may
				# be elsewhere), held for a 'lifo' child's waiters
				$sum_a += $r - $cv->{active} if $rc && $r > $cv->{active};
				$hi_more += $r if !$rc;
				$hi_more += $cv->{queued} if $o eq 'lifo' || !$oc;
			}
			else
			{
				$hi_more += $u{$c};
			}
		}
		my $ok_q = $pv->{queued} == $sum_q;
		# (grants of children that moved count at their former parent:
		# only children that never move have grants here)
		my $ok_m = abs($pv->{memory_mb_active} - $sum_m) < 0.001;
		my $ok_a = $pv->{active} >= $sum_a - $lo_less && $pv->{active} <= $sum_a + $hi_more;
		if ($ok_q && $ok_a && $ok_m)
		{
			delete $self->{streak}{$p};
		}
		else
		{
			my $what = sprintf(
				'%s: active %d, its children (%s) %d (%d to %d allowed for slots taken '
				  . 'before a change of parent); queued %d, its children %d; '
				  . 'memory_mb_active %.3f, its children %.3f',
				$p, $pv->{active}, join(' ', @kids), $sum_a, $sum_a - $lo_less,
				$sum_a + $hi_more, $pv->{queued}, $sum_q, $pv->{memory_mb_active}, $sum_m);
			my $k = $self->{streak}{$p} //= [ $t, 0, $what ];
			$k->[1]++;
			if ($k->[1] == 1)
			{
				$self->{transient}{$p}++;
			}
			if ($t - $k->[0] >= $self->{persist} && $k->[1] >= 5 && !$k->[3])
			{
				$viol->($k->[0],
					sprintf('%s (and so in every sample for %.2f s)', $k->[2], $t - $k->[0]));
				$k->[3] = 1;
			}
		}

		# how the parent's slots are shared while it is full and two
		# children or more wait (figures only)
		my @waiting = grep { $st->{$_} && $st->{$_}{queued} > 0 } @kids;
		if ($pv->{active} >= $pv->{max_active} && @waiting >= 2)
		{
			for my $c (@kids)
			{
				my $sh = $self->{share}{$p}{$c} //= [ 0, 0, {} ];
				$sh->[0] += $st->{$c}{active};
				$sh->[1]++;
				my ($w) = $self->value_at($c, 'weight', $t, $te);
				$sh->[2]{ $w // '?' }++;
			}
		}
	}
	return;
}

# ---------------------------------------------------------------------
# Counters that must stay 0, and bounds between counters of one reading

sub check_zeros
{
	my ($self, %s) = @_;
	my ($t, $st, $viol) = @s{qw(t status viol)};
	for my $b (sort keys %$st)
	{
		my $v = $st->{$b};
		$self->{never_rate}{$b} //= !$self->ever($b, 'max_rate', sub { $_[0] > 0 });
		$self->{never_lifo}{$b} //= !$self->ever($b, 'queue_order', sub { $_[0] eq 'lifo' });
		$viol->($t, "$b: rate_limited = $v->{rate_limited}, but it never had a rate")
		  if $self->{never_rate}{$b} && $v->{rate_limited} != 0;
		$viol->($t, "$b: admitted_overdue = $v->{admitted_overdue}, but it was never 'lifo'")
		  if $self->{never_lifo}{$b} && $v->{admitted_overdue} != 0;
		for my $c (qw(would_queue would_reject))
		{
			$viol->($t, "$b: $c = $v->{$c}, but no budget is in shadow mode")
			  if $v->{$c} != 0;
		}
		# how long its longest waiter has waited (a parent: any child's)
		my $limit = $self->{queued_age}{$b} // $self->{max_age};
		if (grep { $_ eq $b } @{ $self->{parents} })
		{
			$limit = 0;
			for my $c (@{ $self->{children} })
			{
				my $l = $self->{queued_age}{$c} // $self->{max_age};
				$limit = $l if $l > $limit;
			}
		}
		$viol->($t, sprintf('%s: oldest_wait %.0f ms, longer than any wait may last (%.0f ms)',
				$b, $v->{oldest_wait}, $limit * 1000))
		  if $v->{oldest_wait} / 1000 > $limit + ($s{t_end} - $t);
		$self->{oldest}{$b} = $v->{oldest_wait}
		  if $v->{oldest_wait} > ($self->{oldest}{$b} // 0);
		next if grep { $_ eq $b } @{ $self->{parents} };
		for my $c (qw(admitted_overdue rate_limited))
		{
			$viol->($t, "$b: $c $v->{$c} > admitted_after_wait $v->{admitted_after_wait}")
			  if $v->{$c} > $v->{admitted_after_wait};
		}
	}
	return;
}

# ---------------------------------------------------------------------
# Memory

sub check_memory
{
	my ($self, %s) = @_;
	my ($t, $te, $st, $rows, $viol) = @s{qw(t t_end status rows viol)};
	for my $bud (@{ $self->{leaves} })
	{
		my ($m, $c1) = $self->value_at($bud, 'max_memory_mb', $t, $te);
		my ($n, $c2) = $self->value_at($bud, 'max_active', $t, $te);
		next unless $c1 && $c2;
		my @active = @{ $rows->{$bud}{active} // [] };
		for my $r (@{ $rows->{$bud}{queued} // [] }, @active)
		{
			my $mb = $r->[ $B{memory_mb} ];
			if (!$m)
			{
				$viol->($t, "$bud has no max_memory_mb, but backend $r->[$B{pid}] has memory_mb $mb")
				  if defined $mb;
				next;
			}
			if (!defined $mb)
			{
				$viol->($t, "$bud has max_memory_mb $m, but backend $r->[$B{pid}] has memory_mb NULL");
				next;
			}
			$viol->($t, "queued backend $r->[$B{pid}] of $bud has memory_mb $mb")
			  if $r->[ $B{state} ] eq 'queued' && $mb != 0;
		}
		next unless $m;
		# slots that may predate a change of the share
		my @changes = (@{ $self->windows($bud, 'max_memory_mb', 1) },
			grep { 1 } @{ $self->raises($bud, 'max_active') });
		my $old = @changes
		  ? Soak::Check::grandfathered([ sort { $a->[1] <=> $b->[1] } @changes ], $t,
			[ @active, @{ $s{prev_rows}{$bud}{active} // [] } ], $te)
		  : 0;
		next if $old;
		my $share = $m / $n;
		for my $r (@active)
		{
			my $mb = $r->[ $B{memory_mb} ] // 0;
			$viol->($t,
				sprintf('backend %d of %s has memory_mb %.3f, over a slot\'s share %.3f '
					  . '(max_memory_mb %d, max_active %d)', $r->[ $B{pid} ], $bud, $mb, $share,
					$m, $n))
			  if $mb > $share + 0.001;
		}
		my $v = $st->{$bud} or next;
		my $lh = $s{lh}{$bud} // 0;
		$viol->($t,
			sprintf('%s: memory_mb_active %.3f > max_memory_mb %d', $bud, $v->{memory_mb_active}, $m))
		  if $v->{memory_mb_active} > $m + $lh * $share + 0.001;
	}
	return;
}

# the windows of the raises of FIELD of BUDGET, as [[t0, t1], ...]
sub raises
{
	my ($self, $b, $f) = @_;
	my $tl = $self->{timeline}{$b}{$f} or return [];
	my @w;
	my $prev = $tl->{init};
	for my $e (@{ $tl->{ev} })
	{
		push @w, [ $e->[0], $e->[1] ] if $e->[2] > $prev;
		$prev = $e->[2];
	}
	return \@w;
}

# ---------------------------------------------------------------------
# Queue order

sub check_order
{
	my ($self, %s) = @_;
	my ($t, $te, $rows, $viol) = @s{qw(t t_end rows viol)};
	my $tol = $self->{tol};
	for my $bud (@{ $self->{leaves} })
	{
		my @q = sort { $a->[ $B{position} ] <=> $b->[ $B{position} ] }
		  @{ $rows->{$bud}{queued} // [] };
		next if @q < 2 || $self->{keyed}{$bud};
		my ($order, $c1) = $self->value_at($bud, 'queue_order', $t, $te);
		my ($ol, $c2) = $self->value_at($bud, 'overtake_limit', $t, $te);
		next unless $c1 && $c2 && defined $order;
		my @since = map { $_->[ $B{since} ] } @q;
		my $ok;
		if ($order eq 'fifo' || !$ol)
		{
			# 'lifo' with overtake_limit 0: newest first
			my @s = $order eq 'fifo' ? @since : reverse @since;
			$ok = !grep { $s[$_] < $s[ $_ - 1 ] - $tol } 1 .. $#s;
		}
		else
		{
			# some k: the first k overdue and oldest first, the rest not
			# overdue and newest first
			my $olss = $ol / 1000;
			for my $k (0 .. @since)
			{
				my @pre = @since[ 0 .. $k - 1 ];
				my @post = @since[ $k .. $#since ];
				next if grep { $te - $_ + $tol < $olss } @pre;
				next if grep { $t - $_ - $tol >= $olss } @post;
				next if grep { $pre[$_] < $pre[ $_ - 1 ] - $tol } 1 .. $#pre;
				next if grep { $post[$_] > $post[ $_ - 1 ] + $tol } 1 .. $#post;
				$ok = 1;
				last;
			}
		}
		$self->{order_checked}++;
		$viol->($t,
			"$bud ('$order', overtake_limit $ol ms): queue positions "
			  . join(' ', map { sprintf('%d:%.3f s', $_->[ $B{position} ], $t - $_->[ $B{since} ]) } @q)
			  . ' (position:waited) are not in its order')
		  unless $ok;
	}
	return;
}

# ---------------------------------------------------------------------
# Liveness

sub check_liveness
{
	my ($self, %s) = @_;
	my ($t, $te, $st, $viol) = @s{qw(t t_end status viol)};
	for my $b (sort keys %{ $self->{live} })
	{
		my $v = $st->{$b};
		my $room = $v && $v->{queued} > 0 && $v->{active} < $v->{max_active};
		if ($room)
		{
			my ($p, $certain) = $self->value_at($b, 'parent', $t, $te);
			$room = 0 unless $certain;
			if ($room && $p ne '')
			{
				my $pv = $st->{$p};
				$room = $pv && $pv->{active} < $pv->{max_active};
			}
		}
		if (!$room)
		{
			delete $self->{starving}{$b};
			next;
		}
		my $k = $self->{starving}{$b};
		if (!$k || $k->{admitted} != $v->{admitted} || $k->{reset} ne $v->{stats_reset})
		{
			$self->{starving}{$b} =
			  { t => $t, admitted => $v->{admitted}, reset => $v->{stats_reset} };
			next;
		}
		if ($t - $k->{t} > $self->{starve_limit} && !$k->{reported}++)
		{
			$viol->($t,
				sprintf('%s: %d statement(s) waited for %.1f s with a free slot at every level '
					  . 'and nothing was admitted', $b, $v->{queued}, $t - $k->{t}));
		}
	}
	return;
}

# ---------------------------------------------------------------------
# Rate

sub check_rates
{
	my ($self, %s) = @_;
	my ($t, $te, $st, $viol) = @s{qw(t t_end status viol)};
	for my $e (sort keys %{ $self->{rated} })
	{
		my $cur = $self->{seg}{$e};
		my ($rate, $c1) = $self->value_at($e, 'max_rate', $t, $te);
		my ($burst, $c2) = $self->value_at($e, 'rate_burst', $t, $te);
		my ($exists, $c3) = $self->value_at($e, 'exists', $t, $te);
		my @members;
		my $certain = $c1 && $c2 && $c3 && $exists;
		if (grep { $_ eq $e } @{ $self->{parents} })
		{
			for my $c (@{ $self->{children} })
			{
				my ($p, $cc) = $self->value_at($c, 'parent', $t, $te);
				$certain = 0 unless $cc;
				push @members, $c if ($p // '') eq $e;
			}
		}
		else
		{
			@members = ($e);
		}
		$certain = 0 if $self->in_gate_window($t, $te);
		$certain = 0 if grep { !$st->{$_} } @members, $e;
		if (!$certain || !$rate)
		{
			delete $self->{seg}{$e};
			next;
		}
		my $id = join(',', $rate, $burst, map { "$_\@$st->{$_}{stats_reset}" } $e, @members);
		if (!$cur || $cur->{id} ne $id)
		{
			my $inflight = 0;
			$inflight += $self->{clients}{$_} // 0 for @members;
			$cur = $self->{seg}{$e} = {
				id => $id,
				rate => $rate,
				burst => $burst,
				inflight => $inflight,
				min => undef,
				first_t => $t,
				first_a => undef
			};
		}
		my $a = 0;
		$a += $st->{$_}{admitted} - $st->{$_}{admitted_lock_holder} for @members;
		my $fig = $self->{rate_fig}{$e} //= { windows => 0, worst => undef, span => 0 };
		if (defined $cur->{min})
		{
			# the largest A_j - A_i - r (t_end_j - t_i) over i < j
			my $excess = $a - $rate * $te - $cur->{min};
			$fig->{windows}++;
			$fig->{worst} = $excess if !defined $fig->{worst} || $excess > $fig->{worst};
			$fig->{span} = $t - $cur->{first_t} if $t - $cur->{first_t} > $fig->{span};
			my $allowed = $burst + $cur->{inflight} + 1 + $rate * $self->{catchup};
			$viol->($t,
				sprintf('%s: %.1f admissions beyond %s per second in a window of this stretch '
					  . '(burst %d, %d client sessions may have been counted late, '
					  . 'one token taken as of when it was due, %.2f of the catch-up)',
					$e, $excess, $rate, $burst, $cur->{inflight}, $rate * $self->{catchup}))
			  if $excess > $allowed && !$cur->{reported}++;
		}
		my $m = $a - $rate * $t;
		$cur->{min} = $m if !defined $cur->{min} || $m < $cur->{min};
	}
	return;
}

# ---------------------------------------------------------------------

sub finish
{
	my ($self, $viol) = @_;
	for my $p (sort keys %{ $self->{streak} })
	{
		my $k = $self->{streak}{$p};
		next if $k->[3];
		$viol->($k->[0], "$k->[2] (and so in every sample until the end)")
		  if $k->[1] >= 5;
	}
	return;
}

sub figures
{
	my ($self) = @_;
	my @f;
	for my $p (@{ $self->{parents} })
	{
		push @f, sprintf('%s: %d samples judged, %d with the shape uncertain, %d short mismatches '
			  . 'of a parent and its children', $p, $self->{judged}{$p} // 0,
			$self->{skipped}{$p} // 0, $self->{transient}{$p} // 0);
		my $sh = $self->{share}{$p} or next;
		push @f, "  $p full with two children or more waiting: mean active "
		  . join(', ', map {
			  my $w = join('/', sort keys %{ $sh->{$_}[2] });
			  sprintf('%s %.2f (weight %s)', $_, $sh->{$_}[0] / ($sh->{$_}[1] || 1), $w)
		  } sort keys %$sh);
	}
	for my $e (sort keys %{ $self->{rate_fig} })
	{
		my $r = $self->{rate_fig}{$e};
		push @f, sprintf('%s: %d rate windows checked (longest stretch %.1f s), '
			  . 'most admissions beyond the rate in one window %.1f', $e, $r->{windows},
			$r->{span}, $r->{worst} // 0);
	}
	push @f, "queue orders checked in $self->{order_checked} samples; longest oldest_wait: "
	  . join(', ', map { sprintf('%s %.0f ms', $_, $self->{oldest}{$_}) } sort keys %{ $self->{oldest} });
	return @f;
}

1;
