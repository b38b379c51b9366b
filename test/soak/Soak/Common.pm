# Soak::Common - pieces shared by the soak test's processes.
#
# The test (test/t/090_soak.pl) forks one process per client session and one
# monitor; they talk through files in a run directory:
#
#   epoch       "<n> running" or "<n> pending": clients connect only while an
#               epoch is running; the test writes "pending" before it crashes
#               the server and "<n+1> running" once the restarted server's
#               counters were reset.  What a client observes is counted
#               under the epoch its connection belongs to.
#   stop        exists: clients finish their current operation and exit
#   stop-monitor  exists: the monitor exits
#   client-<i>.stats, monitor.samples   written by clients and monitor
package Soak::Common;

use strict;
use warnings;

use Exporter 'import';
use Time::HiRes qw(time);

our @EXPORT_OK = qw(read_epoch write_epoch flag_set dsn classify_error
  error_parts weighted_pick);

sub read_epoch
{
	my ($dir) = @_;
	open(my $fh, '<', "$dir/epoch") or return (-1, 'missing');
	my $line = <$fh> // '';
	close $fh;
	return $line =~ /^(\d+) (\w+)/ ? ($1, $2) : (-1, 'missing');
}

# Written to a temporary file and renamed: readers never see half a line.
sub write_epoch
{
	my ($dir, $epoch, $state) = @_;
	open(my $fh, '>', "$dir/epoch.tmp") or die "epoch.tmp: $!";
	print $fh "$epoch $state\n";
	close $fh or die "epoch.tmp: $!";
	rename("$dir/epoch.tmp", "$dir/epoch") or die "epoch: $!";
	return;
}

# true when the file exists, or when the test process that forked us is
# gone (then nobody would ever create it)
my $parent = $$;    # loaded by the test process before it forks

sub flag_set
{
	my ($dir, $name) = @_;
	return -e "$dir/$name" || getppid() != $parent;
}

# weighted_pick(MIX) -> the name of one entry of MIX ([ [name, weight],
# ... ]), chosen at random with the probability weight / sum of weights
# (the operation mixes of Soak::Client and Fuzz::Utility)
sub weighted_pick
{
	my ($mix) = @_;
	my $total = 0;
	$total += $_->[1] for @$mix;
	my $r = rand($total);
	for my $e (@$mix)
	{
		return $e->[0] if ($r -= $e->[1]) < 0;
	}
	return $mix->[-1][0];
}

sub dsn
{
	my ($host, $port) = @_;
	return "dbi:Pg:dbname=postgres;host=$host;port=$port";
}

# error_parts(ERRSTR) -> (message, detail) from DBD::Pg's error string
# ("ERROR:  message\nDETAIL:  detail\n...").
sub error_parts
{
	my ($errstr) = @_;
	$errstr //= '';
	my ($msg) = $errstr =~ /^(?:ERROR|FATAL|PANIC):\s+(.*)$/m;
	$msg //= (split /\n/, $errstr)[0] // '';
	my ($detail) = $errstr =~ /^DETAIL:\s+(.*)$/m;
	return ($msg, $detail // '');
}

# classify_error(STATE, ERRSTR) -> what a client can tell about a failed
# statement:
#   idle     25P03: the session was ended while idle in a transaction
#            (idle_in_transaction_timeout, the budget's or its own); the
#            statement never ran
#   lost     the connection is gone (terminated, crash, our own disconnect)
#   full     53300 "budget ... is full": rejected at arrival
#   qto      53300 "timed out waiting": rejected by the queue timeout
#   st       57014 statement timeout (the session's or the budget's)
#   ra       57014 canceled by the budget's runaway_after (1.3): it had
#            been admitted and ran that long
#   cancel   57014 canceled by pg_cancel_backend
#   quar     53000 its query is quarantined in the budget (1.3): refused
#            at the gate, never admitted
#   exec     raised while executing: the statement had been admitted
#   parse    raised by the parser or planner: never reached the gate
#   aborted  25P02: the transaction had already failed (a client bug)
#   other    anything else
sub classify_error
{
	my ($state, $errstr) = @_;
	$state //= '';
	$errstr //= '';
	return 'idle'
	  if $state eq '25P03'
	  || $errstr =~ /terminating connection due to idle-in-transaction timeout/;
	return 'lost'
	  if $state =~ /^(08|57P0)/
	  || $errstr =~ /server closed the connection|no connection to the server|connection to server was lost|could not send data|could not receive data|terminating connection/;
	my ($msg) = error_parts($errstr);
	if ($state eq '53300')
	{
		return 'full' if $msg =~ /^budget ".*" is full$/;
		return 'qto' if $msg =~ /^timed out waiting for a slot in budget ".*"$/;
		return 'other';
	}
	if ($state eq '57014')
	{
		return 'st' if $msg =~ /statement timeout/;
		return 'ra' if $msg =~ /^canceling statement because it ran longer than runaway_after \(.*\) of budget ".*"$/;
		return 'cancel' if $msg =~ /user request/;
		return 'other';
	}
	return 'quar' if $state eq '53000' && $msg =~ /^query -?\d+ is quarantined in budget ".*" until /;
	# lock timeout (also NOWAIT), deadlock, division by zero, RAISE
	return 'exec' if $state =~ /^(55P03|40P01|22012|P0001)$/;
	# syntax error, undefined column / table / function
	return 'parse' if $state =~ /^(42601|42703|42P01|42883)$/;
	return 'aborted' if $state eq '25P02';
	return 'other';
}

1;
