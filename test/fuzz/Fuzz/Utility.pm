# Fuzz::Utility - a client of the fuzz test that sends what sqlsmith does
# not: the heavy utility commands that a budget with utility => true gates
# (ANALYZE, VACUUM, CREATE INDEX, REINDEX, CLUSTER, REFRESH MATERIALIZED
# VIEW, COPY ... FROM), COPY ... TO, a procedure that commits, and write
# transactions that pause idle while they keep their slot (some longer
# than an idle_in_transaction_timeout the budget may have).
#
# Each client works on tables of its own (TABLES), so that two clients
# never ANALYZE or VACUUM the same table at once (PostgreSQL itself may
# then fail with "tuple concurrently updated"); the test turns autovacuum
# off for the same reason.  It reconnects when its connection is gone
# (terminated, idle timeout).  Errors are counted by SQLSTATE; one that no
# fault of the test explains (not in %EXPECTED) is listed in the stats file.
#
# Stats file utility-<id>.stats: "op NAME N", "err SQLSTATE N",
# "statements N", "connects N", "unexpected TEXT".
package Fuzz::Utility;

use strict;
use warnings;

use DBI;
use Time::HiRes qw(time sleep);

use Soak::Common qw(flag_set classify_error weighted_pick);
use Fuzz::Common qw(dsn pick);

# Errors the test's faults explain: rejected or timed out by the gate (53300),
# canceled or timed out (57014), lock timeout (55P03), deadlock (40P01),
# terminated or ended idle (57P01, 25P03, 08xxx: the connection is gone),
# the lock table full for a moment (53200, from a generated statement),
# (1.3) a query quarantined in its budget (53000 with dbgate's message: the
# budget churn gives budgets runaway_after with 'cancel' and a quarantine,
# and quarantines the queries the clients run).
# (A cancel that arrives as COMMIT starts fails it before it ends the
# transaction, which stays open and failed: after a failed COMMIT or
# ROLLBACK the client rolls back before anything else, so 25P02 is not
# expected.)
my %EXPECTED = map { $_ => 1 } qw(53300 57014 55P03 40P01 57P01 25P03 53200);

# per client: the tables it maintains, and whether it refreshes the
# materialized view
my @TABLES = ([qw(accounts moves audit gen)], [qw(parts big scratch)]);

# operation => weight
my %MIX = (
	analyze => 8,
	vacuum => 5,
	vacuum_full => 1,
	create_index => 4,
	drop_index => 4,
	reindex => 3,
	cluster => 2,
	refresh => 3,
	copy_in => 6,
	copy_out => 3,
	write_txn => 10,
	procedure => 3,
	query => 6,
	trim => 2);

# new(id, role, host, port, dbname, dir, seed, slot (0 or 1: which tables))
sub new
{
	my ($class, %p) = @_;
	my $self = bless {%p}, $class;
	$self->{n} = {};
	$self->{unexpected} = [];
	my @ops = sort keys %MIX;
	$self->{mix} = [ map { [ $_, $MIX{$_} ] } @ops ];
	$self->{tables} = $TABLES[ $p{slot} % @TABLES ];
	return $self;
}

sub bump
{
	my ($self, @k) = @_;
	$self->{n}{ join("\t", @k) }++;
	return;
}

sub connect_db
{
	my ($self) = @_;
	$self->{dbh} = DBI->connect(dsn($self->{host}, $self->{port}, $self->{dbname}),
		$self->{role}, '',
		{ AutoCommit => 1, RaiseError => 0, PrintError => 0, PrintWarn => 0, AutoInactiveDestroy => 1 });
	$self->bump('connects') if $self->{dbh};
	return $self->{dbh};
}

# run one statement; false after an error (counted)
sub st
{
	my ($self, $sql) = @_;
	$self->bump('statements');
	return 1 if defined $self->{dbh}->do($sql);
	$self->error($sql);
	return 0;
}

sub error
{
	my ($self, $sql) = @_;
	my $dbh = $self->{dbh};
	my $state = $dbh->state // '';
	my $err = $dbh->errstr // '';
	my $kind = classify_error($state, $err);
	if ($kind eq 'lost' || $kind eq 'idle')
	{
		# the connection is gone: terminated, ended idle, or lost
		$self->{lost} = 1;
		$state = '08000' if $state !~ /^(08|57P0|25P03)/;
	}
	# a cancel that arrives as COMMIT or ROLLBACK starts fails it before
	# it ends the transaction: roll back before the next operation
	$self->{need_rollback} = 1
	  if $state eq '25P02' || $sql eq 'COMMIT' || $sql eq 'ROLLBACK';
	$self->bump('err', $state);
	if (!$EXPECTED{$state} && $state !~ /^08/ &&
		!($state eq '53000' && $err =~ /query -?\d+ is quarantined in budget "fz_\w+" until /))
	{
		(my $one = "$state: $err (statement: $sql)") =~ s/\n/ /g;
		push @{ $self->{unexpected} }, $one if @{ $self->{unexpected} } < 20;
	}
	return;
}

sub gone
{
	my ($self) = @_;
	return !$self->{dbh} || $self->{lost};
}

sub op
{
	my ($self, $op) = @_;
	my $t = pick(@{ $self->{tables} });
	my $idx = "fz_u_idx_$self->{id}";
	my $own = $self->{slot} == 0;
	if ($op eq 'analyze') { $self->st("ANALYZE fz.$t"); }
	elsif ($op eq 'vacuum') { $self->st("VACUUM fz.$t"); }
	elsif ($op eq 'vacuum_full') { $self->st($own ? 'VACUUM FULL fz.gen' : 'VACUUM FULL fz.scratch'); }
	elsif ($op eq 'create_index')
	{
		$self->st($own
			? "CREATE INDEX IF NOT EXISTS $idx ON fz.accounts (balance)"
			: "CREATE INDEX IF NOT EXISTS $idx ON fz.parts_lo (w)");
	}
	elsif ($op eq 'drop_index') { $self->st("DROP INDEX IF EXISTS fz.$idx"); }
	elsif ($op eq 'reindex') { $self->st("REINDEX TABLE fz.$t"); }
	elsif ($op eq 'cluster')
	{
		$self->st($own ? 'CLUSTER fz.moves USING moves_account' : 'CLUSTER fz.big USING big_pkey');
	}
	elsif ($op eq 'refresh')
	{
		$self->st(rand() < 0.5
			? 'REFRESH MATERIALIZED VIEW fz.owner_totals'
			: 'REFRESH MATERIALIZED VIEW CONCURRENTLY fz.owner_totals');
	}
	elsif ($op eq 'copy_in')
	{
		my $dbh = $self->{dbh};
		$self->bump('statements');
		if (!defined $dbh->do('COPY fz.audit (what, n) FROM STDIN'))
		{
			$self->error('COPY fz.audit FROM STDIN');
			return;
		}
		my $ok = 1;
		for my $i (1 .. 1 + int(rand(20)))
		{
			$ok &&= $dbh->pg_putcopydata("copy $self->{id}\t$i\n");
		}
		$self->error('COPY fz.audit FROM STDIN (end)') unless $ok && $dbh->pg_putcopyend();
		return;
	}
	elsif ($op eq 'copy_out')
	{
		my $dbh = $self->{dbh};
		$self->bump('statements');
		if (!defined $dbh->do("COPY (SELECT * FROM fz.$t LIMIT 50) TO STDOUT"))
		{
			$self->error('COPY TO STDOUT');
			return;
		}
		my $line;
		my $r;
		1 while ($r = $dbh->pg_getcopydata($line)) >= 0;
		$self->error('COPY TO STDOUT (data)') if $r == -2;
	}
	elsif ($op eq 'write_txn') { $self->write_txn; }
	elsif ($op eq 'procedure') { $self->st('CALL fz.churn(' . (1 + int(rand(4))) . ')'); }
	elsif ($op eq 'query')
	{
		$self->st(pick('SELECT count(*) FROM fz.big WHERE val > 500',
				'SELECT grp, avg(val) FROM fz.big GROUP BY grp',
				'SELECT fz.walk(10), fz.sleepy(15)',
				'SELECT * FROM fz.balances ORDER BY moved DESC LIMIT 5',
				'SELECT fz.gate_load(NULL)'));
	}
	elsif ($op eq 'trim')
	{
		$self->st('DELETE FROM fz.audit WHERE id < (SELECT max(id) - 2000 FROM fz.audit)');
	}
	return;
}

# a transaction that writes, pauses while it keeps its slot, and commits or
# rolls back
sub write_txn
{
	my ($self) = @_;
	my $dbh = $self->{dbh};
	my $k = 1 + int(rand(200));
	$self->st('BEGIN') or return;
	my $ok = $self->st("UPDATE fz.accounts SET balance = balance + 1 WHERE id = $k");
	if ($ok)
	{
		# idle in the transaction, with the slot kept
		sleep(rand() < 0.2 ? 0.2 + rand(1.5) : rand(0.05));
		$ok = $self->st("INSERT INTO fz.moves (account, amount) VALUES ($k, 1 + $k % 9)")
		  && $self->st("INSERT INTO fz.gen (a) VALUES ($k)");
	}
	return if $self->gone;
	if ($ok && rand() < 0.7)
	{
		$self->st('COMMIT');
	}
	else
	{
		$self->st('ROLLBACK');
	}
	return;
}

sub run
{
	my ($self) = @_;
	srand($self->{seed});
	local $SIG{__WARN__} = sub {
		my ($w) = @_;
		print STDERR "utility client $self->{id}: $w" unless $w =~ /^(NOTICE|WARNING|INFO):/;
	};
	while (!flag_set($self->{dir}, 'stop'))
	{
		if ($self->gone)
		{
			if ($self->{dbh})
			{
				$self->{dbh}->disconnect;
				$self->{dbh} = undef;
			}
			$self->connect_db or do { sleep 0.2; next; };
			$self->{lost} = 0;
		}
		if ($self->{need_rollback})
		{
			$self->{need_rollback} = 0;
			$self->st('ROLLBACK');
			next;
		}
		my $op = weighted_pick($self->{mix});
		$self->bump('op', $op);
		$self->op($op);
		sleep(rand(0.05));
	}
	$self->{dbh}->disconnect if $self->{dbh};
	$self->write_stats;
	return;
}

sub write_stats
{
	my ($self) = @_;
	my $f = "$self->{dir}/utility-$self->{id}.stats";
	open(my $fh, '>', "$f.tmp") or die "$f.tmp: $!";
	print $fh "$_\t$self->{n}{$_}\n" for sort keys %{ $self->{n} };
	print $fh "unexpected\t$_\n" for @{ $self->{unexpected} };
	close $fh or die "$f.tmp: $!";
	rename("$f.tmp", $f) or die "$f: $!";
	return;
}

1;
