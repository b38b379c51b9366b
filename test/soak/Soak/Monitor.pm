# Soak::Monitor - samples dbgate.status and dbgate.backends.
#
# A forked process with a superuser connection (never gated) that takes one
# sample every INTERVAL seconds until the run directory's "stop-monitor"
# file appears, and appends it to monitor.samples as one line:
#
#   <server time> TAB <status rows> TAB <backends rows> TAB <server time>
#   TAB <keys rows>
#
# (rows separated by ';', fields by ',', in the order of %S, %B and %K;
# see read_rows; the second time is taken after the status and backends
# views were read, so whatever they saw happened between the two times;
# dbgate.keys (1.3) is read after it, each row under its key's lock)
#
# Both views are read by one statement: each view is consistent per budget
# (read under that budget's lock), the two are a few microseconds apart.
# Budgets are read one after the other: the rows of a parent and of its
# children are not one reading (see Soak::Check12).
# The start of each backend's transaction and its state in pg_stat_activity
# tell one transaction's slot from the next one's.  The statement reads the
# time, then pg_stat_activity (a backend reads it once per transaction, as a
# snapshot), then the views: a backends row whose state began before the
# sample time was in that state when pg_stat_activity was read.
# Through a crash restart the monitor reconnects; Soak::Check tells the
# epochs apart by stats_reset.
package Soak::Monitor;

use strict;
use warnings;

use DBI;
use IO::Handle;
use Time::HiRes qw(time sleep);

use Soak::Common qw(flag_set dsn);

# Rows as "field,field,...;field,..." (no name used here has a comma or a
# semicolon; NULL is an empty field): far quicker to read back than JSON.
my $SAMPLE_SQL = <<'SQL';
SELECT extract(epoch FROM clock_timestamp()),
       (SELECT count(*) FROM pg_stat_activity),
       (SELECT coalesce(string_agg(concat_ws(',',
                 budget, max_active, active, max_queued, queued,
                 admitted, admitted_after_wait, rejected_full,
                 rejected_timeout, canceled_waiting, admitted_lock_holder,
                 peak_active, peak_queued,
                 coalesce(extract(epoch FROM stats_reset)::text, ''),
                 idle_in_transaction, terminated_idle,
                 oldest_wait, admitted_overdue, rate_limited,
                 would_queue, would_reject, wait_time_max, bypassed,
                 memory_mb_active, runaways, demoted_out, demoted_in,
                 quarantined), ';'), '')
          FROM dbgate.status),
       (SELECT coalesce(string_agg(concat_ws(',',
                 b.pid, b.role, b.budget, b.state,
                 extract(epoch FROM b.state_since),
                 coalesce(b.queue_position::text, ''),
                 coalesce(extract(epoch FROM a.xact_start)::text, ''),
                 coalesce(a.state, ''),
                 CASE WHEN a.backend_xid IS NOT NULL THEN 1 ELSE 0 END,
                 coalesce(b.memory_mb::text, ''),
                 coalesce(b.demoted_from, '')), ';'), '')
          FROM dbgate.backends b LEFT JOIN pg_stat_activity a ON a.pid = b.pid),
       extract(epoch FROM clock_timestamp()),
       (SELECT coalesce(string_agg(concat_ws(',',
                 budget, coalesce(key, ''), active, queued, max_active,
                 max_queued), ';'), '')
          FROM dbgate.keys)
SQL

# Column positions in a status sample, used by Soak::Check.
our %S = (
	budget => 0,
	max_active => 1,
	active => 2,
	max_queued => 3,
	queued => 4,
	admitted => 5,
	admitted_after_wait => 6,
	rejected_full => 7,
	rejected_timeout => 8,
	canceled_waiting => 9,
	admitted_lock_holder => 10,
	peak_active => 11,
	peak_queued => 12,
	stats_reset => 13,
	idle_in_transaction => 14,
	terminated_idle => 15,
	oldest_wait => 16,
	admitted_overdue => 17,
	rate_limited => 18,
	would_queue => 19,
	would_reject => 20,
	wait_time_max => 21,
	bypassed => 22,
	memory_mb_active => 23,
	runaways => 24,
	demoted_out => 25,
	demoted_in => 26,
	quarantined => 27);
our %B = (
	pid => 0,
	role => 1,
	budget => 2,
	state => 3,
	since => 4,
	position => 5,
	xact_start => 6,
	pstate => 7,
	has_xid => 8,
	memory_mb => 9,
	demoted_from => 10);
# and in a sample of dbgate.keys (1.3; key undef: the overflow key)
our %K = (
	budget => 0,
	key => 1,
	active => 2,
	queued => 3,
	max_active => 4,
	max_queued => 5);

# read_rows(TEXT) -> [[field, ...], ...]; empty fields are undef.
sub read_rows
{
	my ($text) = @_;
	return [] if !defined $text || $text eq '';
	return [ map { [ map { $_ eq '' ? undef : $_ } split /,/, $_, -1 ] } split /;/, $text ];
}

sub run
{
	my (%p) = @_;
	my $dir = $p{dir};
	my $interval = $p{interval} // 0.025;
	open(my $out, '>>', "$dir/monitor.samples") or die "monitor.samples: $!";
	$out->autoflush(1);
	my $dbh;
	my $errors = 0;
	while (!flag_set($dir, 'stop-monitor'))
	{
		my $t0 = time;
		$dbh //= DBI->connect(dsn($p{host}, $p{port}), $p{superuser}, '',
			{ AutoCommit => 1, RaiseError => 0, PrintError => 0 });
		if (!$dbh)
		{
			sleep 0.1;
			next;
		}
		my $row = $dbh->selectrow_arrayref($SAMPLE_SQL);
		if (!$row)
		{
			# server restarting after a crash: connect again
			$errors++;
			$dbh->disconnect;
			$dbh = undef;
			sleep 0.1;
			next;
		}
		# (without the count that took the activity snapshot)
		print $out join("\t", @$row[ 0, 2 .. $#$row ]), "\n";
		my $left = $interval - (time - $t0);
		sleep $left if $left > 0;
	}
	$dbh->disconnect if $dbh;
	close $out;
	return;
}

1;
