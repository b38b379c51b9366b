# DbgateLoad - the run of a load test (test/t/090_soak.pl,
# test/t/092_fuzz.pl): its run directory, the processes it forks, and a
# load that goes on past its length until what the checks need is there.
#
#   my $load = DbgateLoad->new('soak', duration => $duration);
#   my $dir = $load->dir;                   # tmp_check/soak, made anew
#   my $pid = $load->spawn('monitor', sub { ... });
#   $load->start;                           # the length counts from here
#   while (1) { last if $load->done(\&premises_missing, \&nudge); ... }
#   my $seconds = $load->report('the load', 1);
#   my @stragglers = $load->stop_clients(\%client_pids, 60);
#   $load->stop_monitor($monitor_pid);
#
# The processes talk through files in the run directory: `stop` (exists:
# the clients finish and exit), `stop-monitor` (the monitor exits),
# `died` (a forked process that died, with why) and `monitor.samples`
# (one line a sample of the monitor).  The checks that need a situation
# (a count, an order, a rate) cannot tell anything when it never arose:
# the load goes on past its length until the test's premises hold (a
# state, however long the machine takes to get there), at most
# extra_max() s more (its length, at least 120 s).

package DbgateLoad;

use strict;
use warnings FATAL => 'all';

use File::Path qw(rmtree);
use POSIX ();
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time sleep);

my @runs;    # every load of this process, for END

# new(NAME, duration => SECONDS): the run directory tmp_check/NAME, made
# empty, and the load's length.
sub new
{
	my ($class, $name, %p) = @_;
	my $dir = "$PostgreSQL::Test::Utils::tmp_check/$name";
	rmtree($dir);
	mkdir $dir or die "$dir: $!";
	my $duration = $p{duration};
	my $self = bless {
		dir => $dir,
		duration => $duration,
		min_samples => 5 * $duration,
		extra_max => $duration > 120 ? $duration : 120,
		main_pid => $$,
		children => [],
		samples_fh => undef,
		samples_seen => 0,
		missing => [],
	}, $class;
	push @runs, $self;
	return $self;
}

sub dir { return $_[0]->{dir}; }

# the samples the monitor must take: 5 per second of the length
sub min_samples { return $_[0]->{min_samples}; }

# the most the load goes on past its length, in seconds
sub extra_max { return $_[0]->{extra_max}; }

# If the test dies early, stop the children (they also stop on their own
# when this process is gone).
END
{
	for my $self (@runs)
	{
		next unless $$ == $self->{main_pid} && @{ $self->{children} };
		for my $f (qw(stop stop-monitor))
		{
			my $fh;
			close $fh if open($fh, '>', "$self->{dir}/$f");
		}
		kill 'TERM', @{ $self->{children} };
	}
}

# spawn(NAME, CODE) -> pid of a forked process that runs CODE and exits;
# when CODE dies, the process writes "NAME: why" to `died`.  Children
# never return into the test: no TAP output, no END blocks.
sub spawn
{
	my ($self, $name, $code) = @_;
	my $pid = fork();
	die "fork: $!" unless defined $pid;
	if ($pid)
	{
		push @{ $self->{children} }, $pid;
		return $pid;
	}
	my $ok = eval { $code->(); 1 };
	if (!$ok)
	{
		print STDERR "$name died: $@";
		if (open(my $fh, '>>', "$self->{dir}/died"))
		{
			print $fh "$name: $@\n";
			close $fh;
		}
	}
	POSIX::_exit($ok ? 0 : 1);
}

# monitor_samples() -> the monitor's samples so far (complete lines of
# monitor.samples; the file is read on from where the last call stopped)
sub monitor_samples
{
	my ($self) = @_;
	if (!$self->{samples_fh})
	{
		open($self->{samples_fh}, '<', "$self->{dir}/monitor.samples") or return 0;
	}
	my $fh = $self->{samples_fh};
	seek($fh, 0, 1);    # forget the end of file seen before
	while (defined(my $l = <$fh>))
	{
		$self->{samples_seen}++ if $l =~ /\n\z/;
	}
	return $self->{samples_seen};
}

# samples_lacking() -> the premise that the monitor has not met yet (a
# sentence), or nothing once it has taken min_samples() samples after
# its first
sub samples_lacking
{
	my ($self) = @_;
	return $self->monitor_samples() < $self->{min_samples} + 1
	  ? ("the monitor took fewer than $self->{min_samples} samples")
	  : ();
}

# start() -> now: the load's length counts from here
sub start
{
	my ($self) = @_;
	$self->{t_start} = time;
	return $self->{t_start};
}

# done(MISSING, NUDGE) -> true when the load may stop.  Before the end of
# its length, false without asking.  After it, MISSING->() lists what
# the checks still lack (sentences): the load may stop when that is
# nothing, or when extra_max() s more have passed (missing() keeps what
# was lacking then); else NUDGE->(the list), when given, steers the load
# towards it and the load goes on.
sub done
{
	my ($self, $missing, $nudge) = @_;
	my $t_end = $self->{t_start} + $self->{duration};
	return 0 if time < $t_end;
	my @m = $missing->();
	$self->{missing} = \@m;
	return 1 if !@m || time >= $t_end + $self->{extra_max};
	$nudge->(@m) if $nudge;
	return 0;
}

# what the checks lacked when the load stopped (see done())
sub missing { return @{ $_[0]->{missing} }; }

# report(WHAT, SLACK) -> the seconds the load ran: notes how much longer
# than its length it ran (when over SLACK s), and diag()s what WHAT
# ('the load') lacks when the load stopped without it.
sub report
{
	my ($self, $what, $slack) = @_;
	my $seconds = time - $self->{t_start};
	my $duration = $self->{duration};
	note sprintf('the load ran %.1f s longer than %d s to produce what the checks need',
		$seconds - $duration, $duration)
	  if $seconds > $duration + $slack;
	my @m = $self->missing;
	diag "$what lacks what some checks need: " . join('; ', @m) if @m;
	return $seconds;
}

# stop_clients(PIDS, SECONDS) -> the names of the stragglers: creates
# `stop` and waits until every process of PIDS (pid => name; emptied as
# they exit) has exited, for SECONDS at most; those still running then
# are killed (SIGKILL) and named.  stopped_at() is when `stop` was made.
sub stop_clients
{
	my ($self, $pids, $seconds) = @_;
	open(my $fh, '>', "$self->{dir}/stop") or die "stop: $!";
	close $fh;
	my $t_stop = $self->{t_stop} = time;
	my @stragglers;
	while (%$pids && time - $t_stop < $seconds)
	{
		my $pid = waitpid(-1, POSIX::WNOHANG());
		if ($pid > 0) { delete $pids->{$pid}; next; }
		sleep 0.1;
	}
	for my $pid (sort keys %$pids)
	{
		push @stragglers, $pids->{$pid};
		kill 'KILL', $pid;
		waitpid($pid, 0);
	}
	return @stragglers;
}

sub stopped_at { return $_[0]->{t_stop}; }

# stop_monitor(PID): creates `stop-monitor` and waits for the monitor
# PID to exit; every child has ended then (stop_clients() first).
sub stop_monitor
{
	my ($self, $pid) = @_;
	open(my $fh, '>', "$self->{dir}/stop-monitor") or die "stop-monitor: $!";
	close $fh;
	waitpid($pid, 0);
	$self->{children} = [];
	return;
}

1;
