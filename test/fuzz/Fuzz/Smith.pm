# Fuzz::Smith - one sqlsmith session of the fuzz test, and what it did.
#
# A forked driver process runs sqlsmith as one gated role until the run
# directory's "stop" file appears, then stops it (SIGTERM), writes what it
# saw to smith-<id>.stats and exits.  sqlsmith loads the schema through its
# connection (thousands of catalog queries, all gated), then loops:
# ROLLBACK; BEGIN; <generated statement>; ROLLBACK, with its session's
# statement_timeout set to 1 s; it reconnects after a lost connection.
# When it exits (a 53300, cancel or terminate while it loaded the schema
# ends it), the driver starts it again with the next seed.
#
# What the driver reads:
#   stdout (--dump-all-queries): every generated statement, ending with
#     ";" at the end of a line; the last ones are kept to show what ran
#     when something went wrong;
#   stderr (--verbose): one character per statement sent, on lines of
#     their own: "." succeeded, "e" failed, "S" syntax error, "t" timed out
#     (sqlsmith's own timeout, not used with libpq), "C" connection lost;
#     between them sqlsmith's reports and the schema loader's progress.
#
# The file smith-<id>.ran appears once sqlsmith has run a statement (for
# the test, which goes on until every session has).
#
# Stats file, one "key TAB value" a line: ok, failed, syntax, timeout,
# broken (statements by outcome), generated, starts, seeds (of each start,
# comma-separated), stalls (no statement
# finished for STALL_SECONDS while sqlsmith ran past its schema load),
# exit (one line per exit of sqlsmith not asked for: status and its last
# words), stall_queries (the statements last sent before a stall, one per
# line, newlines as "\n").
package Fuzz::Smith;

use strict;
use warnings;

use IO::Handle;
use IO::Select;
use POSIX ();
use Time::HiRes qw(time sleep);

use Soak::Common qw(flag_set);

use constant STALL_SECONDS => 20;
use constant KEEP_QUERIES => 8;

# new(id, role, host, port, dbname, dir, seed, sqlsmith)
sub new
{
	my ($class, %p) = @_;
	my $self = bless {%p}, $class;
	$self->{n} = { map { $_ => 0 } qw(ok failed syntax timeout broken generated starts stalls) };
	$self->{exits} = [];
	$self->{recent} = [];
	$self->{stall_queries} = [];
	return $self;
}

sub connstr
{
	my ($self) = @_;
	return "host=$self->{host} port=$self->{port} dbname=$self->{dbname} user=$self->{role}";
}

# the command line of start number K (0, 1, ...)
sub command
{
	my ($self, $k) = @_;
	return (
		$self->{sqlsmith} // 'sqlsmith',
		'--target=' . $self->connstr,
		'--seed=' . $self->seed($k),
		'--exclude-catalog', '--verbose', '--dump-all-queries');
}

# seeds stay below 2^31 (sqlsmith reads them with stoi)
sub seed
{
	my ($self, $k) = @_;
	return ($self->{seed} + 7919 * $k) % 2147483647;
}

sub run
{
	my ($self) = @_;
	my $k = 0;
	while (!flag_set($self->{dir}, 'stop'))
	{
		$self->run_once($k++);
		sleep 0.3 unless flag_set($self->{dir}, 'stop');
	}
	$self->write_stats;
	return;
}

# Start sqlsmith once and follow it until it exits or the run stops.
sub run_once
{
	my ($self, $k) = @_;
	my @cmd = $self->command($k);
	pipe(my $out_r, my $out_w) or die "pipe: $!";
	pipe(my $err_r, my $err_w) or die "pipe: $!";
	my $pid = fork();
	die "fork: $!" unless defined $pid;
	if (!$pid)
	{
		close $out_r;
		close $err_r;
		POSIX::dup2(fileno($out_w), 1);
		POSIX::dup2(fileno($err_w), 2);
		exec { $cmd[0] } @cmd or POSIX::_exit(127);
	}
	close $out_w;
	close $err_w;
	$self->{n}{starts}++;
	push @{ $self->{seeds} }, $self->seed($k);
	my $sel = IO::Select->new($out_r, $err_r);
	my ($out_buf, $err_buf, $query) = ('', '', '');
	my @err_lines;    # sqlsmith's last words other than progress
	my $loaded = 0;
	my $last_progress = time;
	my $stalled = 0;
	my $stopping = 0;
	while ($sel->count)
	{
		if (!$stopping && flag_set($self->{dir}, 'stop'))
		{
			kill 'TERM', $pid;
			$stopping = 1;
		}
		for my $fh ($sel->can_read(0.2))
		{
			my $got = sysread($fh, my $chunk, 65536);
			if (!$got)
			{
				$sel->remove($fh);
				next;
			}
			if ($fh == $out_r)
			{
				$out_buf .= $chunk;
				# a statement ends with ";" at the end of a line
				while ($out_buf =~ s/\A(.*?);\n//s)
				{
					$self->{n}{generated}++;
					push @{ $self->{recent} }, $1;
					shift @{ $self->{recent} } if @{ $self->{recent} } > KEEP_QUERIES;
				}
			}
			else
			{
				$err_buf .= $chunk;
				while ($err_buf =~ s/\A([^\n]*)\n//)
				{
					my $line = $1;
					if ($line =~ /^[.eStC]+$/)
					{
						$self->count_progress($line);
						$last_progress = time;
						$stalled = 0;
					}
					elsif ($line ne '')
					{
						$loaded = 1 if $line =~ /^Generating indexes/;
						push @err_lines, $line;
						shift @err_lines if @err_lines > 40;
					}
				}
				# progress characters come without a newline until a line
				# is full: count them as they come
				if ($err_buf =~ /\A[.eStC]+\z/)
				{
					$self->count_progress($err_buf);
					$err_buf = '';
					$last_progress = time;
					$stalled = 0;
				}
			}
		}
		if ($loaded && !$stalled && !$stopping && time - $last_progress > STALL_SECONDS)
		{
			$stalled = 1;
			$self->{n}{stalls}++;
			push @{ $self->{stall_queries} },
			  sprintf('session %d (%s, sqlsmith seed %d): no statement finished for %d s; '
				  . 'the last one sent: %s',
				$self->{id}, $self->{role}, $self->seed($k), STALL_SECONDS,
				$self->{recent}[-1] // '(none)');
		}
	}
	waitpid($pid, 0);
	my $status = $?;
	close $out_r;
	close $err_r;
	if (!$stopping)
	{
		my @last = @err_lines;
		@last = @last[ -3 .. -1 ] if @last > 3;
		push @{ $self->{exits} },
		  sprintf('seed %d: %s: %s', $self->seed($k), exit_text($status), join(' | ', @last));
	}
	return;
}

sub count_progress
{
	my ($self, $s) = @_;
	$self->{n}{ok} += ($s =~ tr/.//);
	$self->{n}{failed} += ($s =~ tr/e//);
	$self->{n}{syntax} += ($s =~ tr/S//);
	$self->{n}{timeout} += ($s =~ tr/t//);
	$self->{n}{broken} += ($s =~ tr/C//);
	if (!$self->{ran} && $self->{n}{ok} + $self->{n}{failed} + $self->{n}{syntax} > 0)
	{
		$self->{ran} = 1;
		my $fh;
		close $fh if open($fh, '>', "$self->{dir}/smith-$self->{id}.ran");
	}
	return;
}

sub exit_text
{
	my ($status) = @_;
	return sprintf('killed by signal %d', $status & 127) if $status & 127;
	return sprintf('exit status %d', $status >> 8);
}

sub write_stats
{
	my ($self) = @_;
	my $f = "$self->{dir}/smith-$self->{id}.stats";
	open(my $fh, '>', "$f.tmp") or die "$f.tmp: $!";
	print $fh "$_\t$self->{n}{$_}\n" for sort keys %{ $self->{n} };
	print $fh "seeds\t", join(',', @{ $self->{seeds} // [] }), "\n";
	print $fh "exit\t$_\n" for @{ $self->{exits} };
	for my $q (@{ $self->{stall_queries} })
	{
		(my $one = $q) =~ s/\n/\\n/g;
		print $fh "stall_query\t$one\n";
	}
	close $fh or die "$f.tmp: $!";
	rename("$f.tmp", $f) or die "$f: $!";
	return;
}

# read_stats(FILE) -> { counts..., exits => [...], stall_queries => [...] }
sub read_stats
{
	my ($file) = @_;
	my %s = (exits => [], stall_queries => []);
	open(my $fh, '<', $file) or return undef;
	while (my $line = <$fh>)
	{
		chomp $line;
		my ($k, $v) = split /\t/, $line, 2;
		if ($k eq 'exit') { push @{ $s{exits} }, $v; }
		elsif ($k eq 'stall_query') { $v =~ s/\\n/\n/g; push @{ $s{stall_queries} }, $v; }
		else { $s{$k} = $v; }
	}
	close $fh;
	return \%s;
}

1;
