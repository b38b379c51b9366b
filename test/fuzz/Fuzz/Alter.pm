# Fuzz::Alter - the fuzz test's session that keeps changing the budgets.
#
# Table-driven: @FIELDS lists every field of dbgate.alter_budget() that the
# session may change, the values it takes (and a few invalid ones, which
# must fail with 22023 and change nothing), and which budgets it applies
# to.  A field that the server's alter_budget() does not have (the fields of
# 1.2 on an older server) is left out, and so is a field whose budgets do
# not exist.  To fuzz a new field, add a line.
#
# The session keeps a model of the committed configuration, read from
# dbgate.budgets at the start.  Each change is one call of alter_budget()
# with one to three fields of one budget; one in ten runs in a transaction
# that is rolled back.  The model says whether the call must succeed or
# fail with 22023 (an invalid value; a 'lifo' budget without an overtake
# limit and without a queue timeout; a parent that would make a cycle, a
# chain of more than four budgets, or a parent with assignments; (1.3)
# reserved without a parent, over max_active, or children reserving more
# than their parent's max_active; key_max_active over max_active, key_by on
# a budget with children or a parent with key_by; runaway_action 'demote' without a
# runaway_budget, the budget itself as its runaway_budget, a runaway_budget
# with children, a runaway_budget made a parent) or 42704 (a runaway_budget
# that does not exist); every other outcome is a problem.  After every
# tenth change, and at the end, dbgate.budgets must show the model.  One
# call never changes both parent and runaway_budget (the server checks
# each of them against the configuration as it was before the call).
#
# (1.3) The spare budget (class spare, no roles, never a parent) is
# dropped and created again: one step in twelve.  A drop without force
# of a budget that is another's runaway_budget must fail with 2BP01; with
# force it succeeds, and those budgets lose their runaway_budget (and
# 'demote' becomes 'log'), which dbgate.budgets must show at once.
#
# (1.3) On a server with the quarantine table (dbgate.max_quarantine > 0),
# one step in ten is a quarantine call instead: quarantine_add() of a
# query id that a gated session runs at that moment (else a made-up one)
# for 2 s in a random budget, or quarantine_remove() of one budget or of
# all.  Each must succeed, or fail with 22023 (a budget with children) or
# 42704 (a budget that a generated statement dropped); anything else is a
# problem.
#
# (1.3) On a server with set_key_limit(), one step in five is a key limit
# call instead: set_key_limit() of a key that the sessions use (their
# role, or their app.tenant) or of another, with each limit NULL or a
# value (a few invalid ones), or reset_key_limit() of one key or of all
# of a budget; one in ten is rolled back.  The model has the key limits
# too: set_key_limit must fail with 22023 (an invalid value, a budget
# without key_by, a max_active over the budget's), 42704 (a budget that
# does not exist) or 53400 (a new key with dbgate.max_key_limits taken),
# else succeed and replace the key's limits; reset_key_limit fails only
# for a budget that does not exist; a change of key_by (alter_budget) and
# the drop of a budget remove the budget's key limits.  dbgate.key_limits
# must show the model wherever dbgate.budgets must.
#
# Budget classes (the test says which budget is which):
#   leaf    budgets with roles, always enforcing
#   shadow  a budget with roles that goes in and out of shadow mode
#   pool    budgets without roles that others may take as parent (1.2)
#   spare   (1.3) a budget without roles that is dropped and created again
#
# Stats file alter.stats, one "key TAB ..." a line:
#   tried FIELD N, ok FIELD N, refused FIELD N (expected 22023),
#   rolled_back N, calls N, quarantine_calls N, quarantine_ok N,
#   quarantine_refused N (1.3), spare STEP OUTCOME N (1.3: drops of the
#   spare budget with and without force, and its creations),
#   demote SOURCE TARGET 1 (1.3: SOURCE had runaway_action 'demote' to
#   TARGET at some time: TARGET may hold SOURCE's statements),
#   key_limit WHAT OUTCOME N (1.3: set and reset calls),
#   max BUDGET FIELD VALUE (the highest value of max_active and max_queued
#   ever committed, the initial one included),
#   enforce_off BUDGET 1 (the budget was in shadow mode at some time),
#   problem TEXT
package Fuzz::Alter;

use strict;
use warnings;

use DBI;
use Time::HiRes qw(time sleep);

use Soak::Common qw(flag_set);
use Fuzz::Common qw(dsn pick);

# type: how a value is written in SQL and read back from dbgate.budgets
#   int, float, bool (0/1), text, ms (an interval in milliseconds)
# values: valid values; bad: invalid ones (22023 expected)
# on: the budget classes it applies to (default all)
# weight: how often it is picked, against 1 for the others (default 1)
our @FIELDS = (
	{ field => 'max_active', type => 'int', values => [ 1, 2, 3, 4 ], bad => [0] },
	{ field => 'max_queued', type => 'int', values => [ 0, 1, 2, 4, 6 ], bad => [-1] },
	{ field => 'queue_timeout', type => 'ms', values => [ 0, 20, 100, 300, 800 ], bad => [-10] },
	{ field => 'statement_timeout', type => 'ms', values => [ 0, 50, 200, 700, 1500 ], bad => [-1] },
	{ field => 'lock_timeout', type => 'ms', values => [ 0, 5, 50, 300 ] },
	{ field => 'fair', type => 'bool', values => [ 0, 1 ] },
	{ field => 'scope', type => 'text', values => [ 'statement', 'transaction' ], bad => ['session'] },
	{ field => 'idle_in_transaction_timeout', type => 'ms', values => [ 0, 150, 500, 1500 ] },
	{ field => 'parallel_workers', type => 'int', values => [ -1, 0, 1, 2 ], bad => [ -2, 1025 ] },
	{ field => 'utility', type => 'bool', values => [ 0, 1 ] },
	{ field => 'enforce', type => 'bool', values => [ 0, 1 ], on => [qw(shadow pool)] },
	# 1.2
	{ field => 'queue_order', type => 'text', values => [ 'fifo', 'lifo' ], bad => ['lilo'] },
	{ field => 'overtake_limit', type => 'ms', values => [ 0, 10, 50, 200 ], bad => [-1] },
	{ field => 'parent', type => 'text', values => [ '', 'fz_pool', 'fz_pool2' ] },
	{ field => 'weight', type => 'int', values => [ 1, 2, 5, 100 ], bad => [ 0, 10001 ] },
	{ field => 'max_rate', type => 'float', values => [ 0, 5, 50, 500 ], bad => [ 0.001, -1 ] },
	{ field => 'rate_burst', type => 'int', values => [ 1, 2, 10 ], bad => [0] },
	{ field => 'max_memory_mb', type => 'int', values => [ 0, 1, 4, 64 ], bad => [-1] },
	{ field => 'min_cost', type => 'float', values => [ 0, 1, 10, 1000 ], bad => [-1] },
	# 1.3
	{ field => 'reserved', type => 'int', values => [ 0, 0, 1, 2 ], bad => [-1] },
	{ field => 'key_by', type => 'text', values => [ '', '', 'user', 'setting:app.tenant' ],
		bad => [ 'role', 'setting:' ] },
	{ field => 'key_max_active', type => 'int', values => [ 0, 0, 1, 2 ], bad => [-1] },
	{ field => 'key_max_queued', type => 'int', values => [ 0, 1, 10 ], bad => [-1] },
	{ field => 'key_max_rate', type => 'float', values => [ 0, 5, 50 ], bad => [ 0.001, -1 ] },
	{ field => 'key_rate_burst', type => 'int', values => [ 1, 2, 10 ], bad => [0] },
	{ field => 'runaway_after', type => 'ms', values => [ 0, 100, 200, 1000 ], bad => [-1], weight => 2 },
	{ field => 'runaway_action', type => 'text', values => [ 'log', 'log', 'cancel', 'demote', 'demote' ],
		bad => ['kill'], weight => 3 },
	{ field => 'runaway_budget', type => 'text',
		values => [ '', 'fz_stmt', 'fz_txn', 'fz_shadow', 'fz_pool', 'fz_pool2', 'fz_spare',
			'fz_spare', 'fz_nothere' ], weight => 3 },
	{ field => 'quarantine', type => 'ms', values => [ 0, 0, 60000 ], bad => [-1] },
	{ field => 'adapt', type => 'text', values => [ 'off', 'shadow', 'on' ], bad => ['auto'] },
	{ field => 'adapt_min', type => 'int', values => [ 1, 1, 2 ], bad => [0] },
);

use constant MAX_CHAIN => 4;

# (1.3) The keys of key limits: those the sessions use (key_by 'user':
# the role; 'setting:app.tenant': the role's app.tenant, see 092), one
# that nobody uses and the empty key (app.tenant unset).
our @KEYS = (qw(fz_s1 fz_u1 fz_t1 fz_m1 fz_u2 fz_w1 t_s1 t_u1 t_t1 t_m1 t_u2 t_w1 other), '');

# new(host, port, superuser, dir, seed, budgets => { name => class },
#     assigned => { name => 1 } (budgets with roles or databases))
sub new
{
	my ($class, %p) = @_;
	my $self = bless {%p}, $class;
	$self->{stats} = {};
	$self->{problems} = [];
	return $self;
}

# fields(DBH) -> the entries of @FIELDS that this server's alter_budget()
# and dbgate.budgets both have
sub fields
{
	my ($dbh) = @_;
	my ($args) = $dbh->selectrow_array(
		q{SELECT array_to_string(proargnames, ',') FROM pg_proc
		  WHERE proname = 'alter_budget' AND pronamespace = 'dbgate'::regnamespace
		  ORDER BY pronargs DESC LIMIT 1});
	my $cols = $dbh->selectcol_arrayref(
		q{SELECT attname FROM pg_attribute
		  WHERE attrelid = 'dbgate.budgets'::regclass AND attnum > 0 AND NOT attisdropped});
	my %have = map { $_ => 1 } split /,/, $args // '';
	my %col = map { $_ => 1 } @{ $cols // [] };
	return grep { $have{ $_->{field} } && $col{ $_->{field} } } @FIELDS;
}

sub readback_expr
{
	my ($f) = @_;
	my $c = $f->{field};
	return {
		int => $c,
		float => "${c}::float8",
		bool => "${c}::int",
		text => "coalesce($c, '')",
		ms => "round(extract(epoch FROM $c) * 1000)::bigint",
	}->{ $f->{type} };
}

sub literal
{
	my ($f, $v) = @_;
	my $t = $f->{type};
	return $v ? 'true' : 'false' if $t eq 'bool';
	return "'$v'" if $t eq 'text';
	return "'${v}ms'" if $t eq 'ms';
	return "$v";
}

# read_config(DBH, FIELDS) -> { budget => { field => value } } or undef
sub read_config
{
	my ($dbh, @fields) = @_;
	my $sql = 'SELECT budget, '
	  . join(', ', map { readback_expr($_) . " AS $_->{field}" } @fields)
	  . ' FROM dbgate.budgets';
	return $dbh->selectall_hashref($sql, 'budget');
}

sub same
{
	my ($f, $a, $b) = @_;
	return 0 if !defined $a || !defined $b;
	return $a eq $b if $f->{type} eq 'text';
	return abs($a - $b) <= 1e-9 * (abs($a) + abs($b) + 1);
}

# The SQLSTATE that alter_budget must fail with when BUDGET's fields become
# those of NEW (a hash of the changed fields), or undef for success.
sub expected_error
{
	my ($self, $budget, $new, $bad) = @_;
	return '22023' if $bad;
	my $m = $self->{model};
	my %c = (%{ $m->{$budget} }, %$new);
	if (exists $c{queue_order})
	{
		return '22023'
		  if $c{queue_order} eq 'lifo'
		  && ($c{overtake_limit} // 1) == 0
		  && ($c{queue_timeout} // 0) == 0;
	}
	# a reservation needs a parent (parent => '' alone resets it) and is at
	# most the budget's max_active
	if (($c{reserved} // 0) > 0 && ($c{parent} // '') eq '')
	{
		return '22023' if exists $new->{reserved};
		$c{reserved} = 0;
	}
	return '22023' if ($c{reserved} // 0) > ($c{max_active} // 1);
	return '22023' if ($c{adapt_min} // 1) > ($c{max_active} // 1);
	return '22023' if ($c{key_max_active} // 0) > ($c{max_active} // 1);
	# repeats are held back only of runaways
	return '22023' if ($c{quarantine} // 0) > 0 && ($c{runaway_after} // 0) == 0;
	# (1.3) 'demote' needs a runaway_budget, and none is the budget itself
	return '22023' if ($c{runaway_action} // 'log') eq 'demote' && ($c{runaway_budget} // '') eq '';
	return '22023' if ($c{runaway_budget} // '') eq $budget;
	if (exists $new->{parent} && $new->{parent} ne '')
	{
		my $p = $new->{parent};
		return '42704' unless $m->{$p};
		# (1.3) a budget with key_by has no children
		return '22023' if ($m->{$p}{key_by} // '') ne '';
		# (1.3) a runaway_budget has no children
		return '22023'
		  if grep { (($_ eq $budget ? $c{runaway_budget} : $m->{$_}{runaway_budget}) // '') eq $p }
		  keys %$m;
		return '22023' if $self->{assigned}{$p};
		# a cycle: the new parent is the budget or one of its descendants
		my %parent = map { $_ => $m->{$_}{parent} // '' } keys %$m;
		$parent{$budget} = $p;
		my %seen;
		for (my $b = $budget; $b ne ''; $b = $parent{$b} // '')
		{
			return '22023' if $seen{$b}++;
		}
		# the longest chain through the budget
		my $longest = 0;
		for my $leaf (keys %parent)
		{
			my $n = 0;
			for (my $b = $leaf; $b ne ''; $b = $parent{$b} // '') { $n++; }
			$longest = $n if $n > $longest;
		}
		return '22023' if $longest > MAX_CHAIN;
	}
	# (1.3) a runaway_budget that exists and has no children
	my $rb = $new->{runaway_budget} // '';
	if ($rb ne '' && $rb ne ($m->{$budget}{runaway_budget} // ''))
	{
		return '42704' unless $m->{$rb};
		return '22023' if grep { ($m->{$_}{parent} // '') eq $rb } keys %$m;
	}
	# (1.3) key_by only on a budget without children
	return '22023'
	  if ($c{key_by} // '') ne '' && grep { ($m->{$_}{parent} // '') eq $budget } keys %$m;
	return $self->reservations_error($budget, \%c);
}

# 22023 if, with BUDGET's fields those of C, the children of some budget
# would reserve more than its max_active
sub reservations_error
{
	my ($self, $budget, $c) = @_;
	my $m = $self->{model};
	return undef unless exists $c->{reserved};
	my %sum;
	for my $b (keys %$m)
	{
		my $f = $b eq $budget ? $c : $m->{$b};
		my $p = $f->{parent} // '';
		$sum{$p} += $f->{reserved} // 0 if $p ne '';
	}
	for my $p (keys %sum)
	{
		next unless $m->{$p};
		my $max = $p eq $budget ? $c->{max_active} : $m->{$p}{max_active};
		return '22023' if $sum{$p} > ($max // 1);
	}
	return undef;
}

sub bump
{
	my ($self, @k) = @_;
	$self->{stats}{ join("\t", @k) }++;
	return;
}

sub problem
{
	my ($self, $text) = @_;
	push @{ $self->{problems} }, $text;
	return;
}

sub note_committed
{
	my ($self, $budget) = @_;
	my $m = $self->{model}{$budget};
	for my $f (qw(max_active max_queued))
	{
		next unless defined $m->{$f};
		my $k = "max\t$budget\t$f";
		$self->{max}{$k} = $m->{$f} if !defined $self->{max}{$k} || $m->{$f} > $self->{max}{$k};
	}
	$self->{enforce_off}{$budget} = 1 if defined $m->{enforce} && !$m->{enforce};
	$self->{demote}{"demote\t$budget\t$m->{runaway_budget}"} = 1
	  if ($m->{runaway_action} // '') eq 'demote' && ($m->{runaway_budget} // '') ne '';
	return;
}

sub check_config
{
	my ($self, $when) = @_;
	my $cfg = read_config($self->{dbh}, @{ $self->{fields} });
	if (!$cfg)
	{
		$self->problem("$when: cannot read dbgate.budgets: " . ($self->{dbh}->errstr // ''));
		return;
	}
	for my $b (sort keys %{ $self->{model} })
	{
		for my $f (@{ $self->{fields} })
		{
			my $want = $self->{model}{$b}{ $f->{field} };
			my $have = $cfg->{$b}{ $f->{field} };
			$self->problem(sprintf('%s: dbgate.budgets shows %s.%s = %s, committed %s',
					$when, $b, $f->{field}, $have // 'nothing', $want // 'nothing'))
			  unless same($f, $want, $have);
		}
	}
	if ($self->{keylimits})
	{
		my $have = read_key_limits($self->{dbh});
		my $want = key_limits_text($self->{keylimits});
		if (!defined $have)
		{
			$self->problem("$when: cannot read dbgate.key_limits: " . ($self->{dbh}->errstr // ''));
		}
		elsif (key_limits_text($have) ne $want)
		{
			$self->problem("$when: dbgate.key_limits shows {" . key_limits_text($have)
				  . "}, committed {$want}");
		}
	}
	return;
}

# (1.3) read_key_limits(DBH) -> { budget => { key => "max_active/
# max_queued/max_rate/rate_burst" } } ('-' for NULL: the budget's key_*
# value), or undef
sub read_key_limits
{
	my ($dbh) = @_;
	my $rows = $dbh->selectall_arrayref(
		q{SELECT budget, key, concat_ws('/', coalesce(max_active::text, '-'),
		         coalesce(max_queued::text, '-'), coalesce(max_rate::float8::text, '-'),
		         coalesce(rate_burst::text, '-'))
		    FROM dbgate.key_limits});
	return undef unless $rows;
	my %kl;
	$kl{ $_->[0] }{ $_->[1] } = $_->[2] for @$rows;
	return \%kl;
}

# the key limits as one text, in the order of budget and key
sub key_limits_text
{
	my ($kl) = @_;
	return join(' ', map {
		my $b = $_;
		map { "$b/'$_'=$kl->{$b}{$_}" } sort keys %{ $kl->{$b} }
	} sort keys %$kl);
}

# One key limit call (see the top of this file).
sub key_limit_step
{
	my ($self) = @_;
	my $dbh = $self->{dbh};
	my $m = $self->{model};
	my $kl = $self->{keylimits};
	my $budget = pick(sort(keys %{ $self->{budgets} }), 'fz_nothere');
	my $key = pick(@KEYS);
	my ($sql, $want, $what, $apply);
	if (rand() < 0.3)
	{
		my $all = rand() < 0.3;
		$what = $all ? 'reset all' : 'reset';
		$sql = $all
		  ? "SELECT dbgate.reset_key_limit('$budget')"
		  : "SELECT dbgate.reset_key_limit('$budget', '$key')";
		$want = $m->{$budget} ? undef : '42704';
		$apply = sub {
			delete $kl->{$budget}{$key} unless $all;
			delete $kl->{$budget} if $all || !%{ $kl->{$budget} };
		};
	}
	else
	{
		my $bad;
		my $val = sub {
			my ($good, $wrong) = @_;
			return undef if rand() < 0.4;
			if (rand() < 0.04) { $bad = 1; return pick(@$wrong); }
			return pick(@$good);
		};
		my $ma = $val->([ 0, 1, 2, 3 ], [-1]);
		my $mq = $val->([ 0, 1, 5 ], [-1]);
		my $rate = $val->([ 0, 5, 50 ], [ 0.001, -1 ]);
		my $burst = $val->([ 1, 3 ], [0]);
		my @v = map { $_ // 'NULL' } ($ma, $mq, $rate, $burst);
		$sql = "SELECT dbgate.set_key_limit('$budget', '$key', max_active => $v[0], "
		  . "max_queued => $v[1], max_rate => $v[2], rate_burst => $v[3])";
		$what = 'set';
		my $n = 0;
		$n += keys %{ $kl->{$_} } for keys %$kl;
		$want =
			$bad ? '22023'
		  : !$m->{$budget} ? '42704'
		  : ($m->{$budget}{key_by} // '') eq '' ? '22023'
		  : defined $ma && $ma > ($m->{$budget}{max_active} // 1) ? '22023'
		  : !($kl->{$budget} && exists $kl->{$budget}{$key}) && $n >= $self->{max_key_limits} ? '53400'
		  :   undef;
		my $text = join('/', map { defined $_ ? 0 + $_ : '-' } ($ma, $mq, $rate, $burst));
		$apply = sub { $kl->{$budget}{$key} = $text; };
	}
	my $rollback = rand() < 0.1;
	$self->{kcalls}++;
	$dbh->do('BEGIN') if $rollback;
	my $ok = defined $dbh->do($sql);
	my $state = $ok ? undef : $dbh->state;
	my $err = $ok ? '' : ($dbh->errstr // '');
	$dbh->do('ROLLBACK') if $rollback;
	if (!$ok && $state eq '53200')
	{
		$self->bump('lock_table_full');
		return;
	}
	if (($state // '') ne ($want // ''))
	{
		$self->problem(sprintf('%s: %s, expected %s', $sql,
				$ok ? 'succeeded' : "failed with $state ($err)",
				defined $want ? "SQLSTATE $want" : 'success'));
		# learn what the server has now
		my $have = read_key_limits($dbh);
		%$kl = %$have if $have;
		return;
	}
	$self->bump('key_limit', $what, $rollback ? 'rolled back' : $ok ? 'ok' : 'refused');
	$apply->() if $ok && !$rollback;
	return;
}

# one random change
sub change
{
	my ($self) = @_;
	my $budget = pick(grep { $self->{model}{$_} } sort keys %{ $self->{budgets} });
	my $class = $self->{budgets}{$budget};
	my @fs = grep {
		my $on = $_->{on};
		!$on || grep { $_ eq $class } @$on
	} @{ $self->{fields} };
	return unless @fs;
	my $n = 1 + int(rand(3));
	my (%new, @args, $bad);
	my @weighted = map { ($_) x ($_->{weight} // 1) } @fs;
	for (1 .. $n)
	{
		my $f = pick(@weighted);
		next if exists $new{ $f->{field} };
		# (see the top of this file)
		next if $f->{field} eq 'parent' && exists $new{runaway_budget};
		next if $f->{field} eq 'runaway_budget' && exists $new{parent};
		my $v;
		if ($f->{bad} && rand() < 0.05)
		{
			$v = pick(@{ $f->{bad} });
			$bad = 1;
		}
		else
		{
			$v = pick(@{ $f->{values} });
		}
		$new{ $f->{field} } = $v;
		push @args, "$f->{field} => " . literal($f, $v);
		$self->bump('tried', $f->{field});
	}
	my $want = $self->expected_error($budget, \%new, $bad);
	my $rollback = rand() < 0.1;
	my $dbh = $self->{dbh};
	my $sql = "SELECT dbgate.alter_budget('$budget', " . join(', ', @args) . ')';
	$self->{calls}++;
	$dbh->do('BEGIN') if $rollback;
	my $ok = defined $dbh->do($sql);
	my $state = $ok ? undef : $dbh->state;
	my $err = $ok ? '' : ($dbh->errstr // '');
	$dbh->do('ROLLBACK') if $rollback;
	# the lock table may be full for a moment (a generated statement that
	# locks many rows): nothing was changed; not a finding of dbgate
	if (!$ok && $state eq '53200')
	{
		$self->bump('lock_table_full');
		return;
	}
	if (($state // '') ne ($want // ''))
	{
		$self->problem(sprintf('%s: %s, expected %s', $sql,
				$ok ? 'succeeded' : "failed with $state ($err)",
				defined $want ? "SQLSTATE $want" : 'success'));
		# learn what the server has now
		my $cfg = read_config($dbh, @{ $self->{fields} });
		$self->{model}{$budget} = $cfg->{$budget} if $cfg && $cfg->{$budget};
		$self->note_committed($budget);
		return;
	}
	if ($rollback)
	{
		$self->{rolled_back}++;
		return;
	}
	if ($ok)
	{
		$self->bump('ok', $_) for keys %new;
		# (1.3) a change of key_by removes the budget's key limits
		delete $self->{keylimits}{$budget}
		  if $self->{keylimits} && exists $new{key_by}
		  && $new{key_by} ne ($self->{model}{$budget}{key_by} // '');
		$self->{model}{$budget}{$_} = $new{$_} for keys %new;
		# an orphan reserves nothing (alter_budget says so with a WARNING)
		$self->{model}{$budget}{reserved} = 0
		  if exists $self->{model}{$budget}{reserved}
		  && ($self->{model}{$budget}{parent} // '') eq '';
		$self->note_committed($budget);
	}
	else
	{
		$self->bump('refused', $_) for keys %new;
	}
	return;
}

# (1.3) Drop the spare budget, with force or without, or create it again
# (see the top of this file).
sub spare_step
{
	my ($self) = @_;
	my $dbh = $self->{dbh};
	my $m = $self->{model};
	my $name = (grep { $self->{budgets}{$_} eq 'spare' } sort keys %{ $self->{budgets} })[0]
	  // return;
	if (!$m->{$name})
	{
		my $ok = defined $dbh->do(
			"SELECT dbgate.create_budget('$name', 2, 2, queue_timeout => '200ms')");
		if (!$ok)
		{
			$self->problem("create_budget('$name'): failed with " . ($dbh->state // '')
				  . ' (' . ($dbh->errstr // '') . ')');
			return;
		}
		my $cfg = read_config($dbh, @{ $self->{fields} });
		if (!$cfg || !$cfg->{$name})
		{
			$self->problem("$name was created, but dbgate.budgets does not show it");
			return;
		}
		$m->{$name} = { %{ $cfg->{$name} } };
		delete $m->{$name}{budget};
		$self->bump('spare', 'create', 'ok');
		return;
	}
	my $force = rand() < 0.5;
	my @refs = grep { $_ ne $name && ($m->{$_}{runaway_budget} // '') eq $name } sort keys %$m;
	my $want = !$force && @refs ? '2BP01' : undef;
	my $rollback = rand() < 0.1;
	my $sql = "SELECT dbgate.drop_budget('$name', force => " . ($force ? 'true' : 'false') . ')';
	$dbh->do('BEGIN') if $rollback;
	my $ok = defined $dbh->do($sql);
	my $state = $ok ? undef : $dbh->state;
	my $err = $ok ? '' : ($dbh->errstr // '');
	$dbh->do('ROLLBACK') if $rollback;
	my $what = ($force ? 'drop with force' : 'drop') . (@refs ? ' of a runaway_budget' : '');
	if (($state // '') ne ($want // ''))
	{
		$self->problem(sprintf('%s (referred to by %s): %s, expected %s', $sql,
				@refs ? join(', ', @refs) : 'none', $ok ? 'succeeded' : "failed with $state ($err)",
				defined $want ? "SQLSTATE $want" : 'success'));
		my $cfg = read_config($dbh, @{ $self->{fields} });
		if ($cfg)
		{
			$m->{$_} = { %{ $cfg->{$_} } } for grep { $cfg->{$_} } keys %$m;
			delete $m->{$name} unless $cfg->{$name};
			delete $_->{budget} for values %$m;
		}
		return;
	}
	$self->bump('spare', $what, $rollback ? 'rolled back' : $ok ? 'ok' : 'refused');
	return if $rollback || !$ok;
	delete $m->{$name};
	delete $self->{keylimits}{$name} if $self->{keylimits};
	for my $b (@refs)
	{
		$m->{$b}{runaway_budget} = '';
		$m->{$b}{runaway_action} = 'log' if ($m->{$b}{runaway_action} // '') eq 'demote';
	}
	$self->check_config("after $sql");
	return;
}

# One quarantine call (see the top of this file).
sub quarantine_step
{
	my ($self) = @_;
	my $dbh = $self->{dbh};
	my $budget = pick(sort keys %{ $self->{budgets} });
	my $sql;
	if (rand() < 0.3)
	{
		$sql = rand() < 0.5
		  ? 'SELECT dbgate.quarantine_remove()'
		  : "SELECT dbgate.quarantine_remove('$budget')";
	}
	else
	{
		my ($qid) = $dbh->selectrow_array(
			q{SELECT query_id FROM pg_stat_activity
			   WHERE query_id IS NOT NULL AND query_id <> 0 AND usename LIKE 'fz\_%'
			   ORDER BY random() LIMIT 1});
		$qid //= 1 + int(rand(1000));
		$sql = "SELECT dbgate.quarantine_add('$budget', $qid, '2 s')";
	}
	$self->{qcalls}++;
	my $ok = defined $dbh->do($sql);
	my $state = $ok ? '' : $dbh->state;
	if ($ok) { $self->{qok}++; }
	elsif ($state eq '22023' || $state eq '42704' || $state eq '53200') { $self->{qrefused}++; }
	else
	{
		$self->problem(sprintf('%s: failed with %s (%s)', $sql, $state, $dbh->errstr // ''));
	}
	return;
}

sub run
{
	my ($self) = @_;
	srand($self->{seed});
	$self->{dbh} = DBI->connect(dsn($self->{host}, $self->{port}, $self->{dbname}),
		$self->{superuser}, '',
		{ AutoCommit => 1, RaiseError => 0, PrintError => 0, PrintWarn => 0 })
	  or die "alter: cannot connect: $DBI::errstr";
	$self->{fields} = [ fields($self->{dbh}) ];
	$self->{fields} = [ grep { $_->{field} ne 'parent' || $self->{budgets}{fz_pool} }
		  @{ $self->{fields} } ];
	my $cfg = read_config($self->{dbh}, @{ $self->{fields} }) or die 'alter: no dbgate.budgets';
	$self->{model} = { map { $_ => { %{ $cfg->{$_} } } } keys %{ $self->{budgets} } };
	delete $_->{budget} for values %{ $self->{model} };
	$self->note_committed($_) for keys %{ $self->{model} };
	($self->{quarantine}) = $self->{dbh}->selectrow_array(
		q{SELECT to_regproc('dbgate.quarantine_add') IS NOT NULL
		         AND coalesce(current_setting('dbgate.max_quarantine', true), '0')::int > 0});
	# (1.3) key limits, where the server has them
	my ($has_kl) = $self->{dbh}->selectrow_array(
		q{SELECT to_regproc('dbgate.set_key_limit') IS NOT NULL});
	if ($has_kl)
	{
		($self->{max_key_limits}) = $self->{dbh}->selectrow_array(
			q{SELECT current_setting('dbgate.max_key_limits')::int});
		$self->{keylimits} = read_key_limits($self->{dbh}) or die 'alter: no dbgate.key_limits';
	}
	my $k = 0;
	my $spare = grep { $_ eq 'spare' } values %{ $self->{budgets} };
	while (!flag_set($self->{dir}, 'stop'))
	{
		if ($spare && rand() < 1 / 12)
		{
			$self->spare_step;
			sleep(0.1 + rand(0.3));
			next;
		}
		if ($self->{quarantine} && rand() < 0.1)
		{
			$self->quarantine_step;
			sleep(0.1 + rand(0.3));
			next;
		}
		if ($self->{keylimits} && rand() < 1 / 5)
		{
			$self->key_limit_step;
			$self->check_config('after key limit call ' . $self->{kcalls})
			  if $self->{kcalls} % 10 == 0;
			sleep(0.1 + rand(0.3));
			next;
		}
		$self->change;
		$self->check_config('after change ' . $self->{calls}) if ++$k % 10 == 0;
		sleep(0.1 + rand(0.3));
	}
	$self->check_config('at the end');
	$self->write_stats;
	$self->{dbh}->disconnect;
	return;
}

sub write_stats
{
	my ($self) = @_;
	my $f = "$self->{dir}/alter.stats";
	open(my $fh, '>', "$f.tmp") or die "$f.tmp: $!";
	print $fh "fields\t", join(',', map { $_->{field} } @{ $self->{fields} }), "\n";
	print $fh "calls\t", $self->{calls} // 0, "\n";
	print $fh "rolled_back\t", $self->{rolled_back} // 0, "\n";
	print $fh "quarantine_calls\t", $self->{qcalls} // 0, "\n";
	print $fh "quarantine_ok\t", $self->{qok} // 0, "\n";
	print $fh "quarantine_refused\t", $self->{qrefused} // 0, "\n";
	print $fh "key_limit_calls\t", $self->{kcalls} // 0, "\n";
	print $fh "$_\t$self->{stats}{$_}\n" for sort keys %{ $self->{stats} };
	print $fh "$_\t$self->{max}{$_}\n" for sort keys %{ $self->{max} };
	print $fh "enforce_off\t$_\t1\n" for sort keys %{ $self->{enforce_off} // {} };
	print $fh "$_\t1\n" for sort keys %{ $self->{demote} // {} };
	for my $p (@{ $self->{problems} })
	{
		(my $one = $p) =~ s/\n/ /g;
		print $fh "problem\t$one\n";
	}
	close $fh or die "$f.tmp: $!";
	rename("$f.tmp", $f) or die "$f: $!";
	return;
}

1;
