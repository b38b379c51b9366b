# DbgateSnapshot - a statement that waits in a queue while a row is
# committed, for the TAP tests of the snapshot a queued statement holds
# (016 statements, 040 gated utility commands).
#
#   my ($out, $err) = queued_snapshot_case($node, 'VACUUM', 'VACUUM t',
#       user => 'u', table => 't', budget => 'b', id => $next_id++,
#       noun => 'command', keeps_xmin => 1);

package DbgateSnapshot;

use strict;
use warnings FATAL => 'all';

use Exporter 'import';
use DbgateTest;
use Test::More;

our @EXPORT = qw(queued_snapshot_case);

# queued_snapshot_case(NODE, NAME, SQL, %p) -> (STDOUT, STDERR) of SQL.
# The counters of budget p{budget} (one slot) are reset; two new sessions
# of role p{user}: H takes the slot with a transaction that holds a
# transaction ID (it updates the row id 0 of p{table}, columns id and v),
# W runs p{setup} when given (not gated) and sends SQL, which queues.
# Once W is seen queued and asleep, a row (p{id}, 1) is committed into
# p{table}; then H commits and W's result is read.  Assertions, each
# named "NAME: ...", with p{noun} ('statement' or 'command'):
#   - the NOUN queues (waits for W to be queued with wait event type
#     Extension, up to the default timeout);
#   - its backend_xmin is set with keeps_xmin => 1, else not;
#   - with expect => OUTPUT: SQL gives OUTPUT (with notice => REGEXP, the
#     first group of REGEXP in its messages: what a DO block reports in a
#     NOTICE), the rows of when it started with keeps_xmin => 1, else the
#     rows committed while it waited;
#   - no error;
#   - the budget counts two admissions, one of them after a wait.
# txn => 1: W is in a transaction block, which it rolls back at the end.
sub queued_snapshot_case
{
	my ($node, $name, $sql, %p) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	my $noun = $p{noun} // 'statement';
	$node->safe_psql('postgres', 'SELECT dbgate.reset_stats()');
	my $h = DbgateTest::Session->new($node, user => $p{user});
	my $w = DbgateTest::Session->new($node, user => $p{user});
	my $wpid = $w->pid;

	$w->query($p{setup}) if defined $p{setup};
	# H keeps the slot: its transaction holds a transaction ID
	$h->query("BEGIN; UPDATE $p{table} SET v = v WHERE id = 0;");
	$w->send($sql);
	# queued, and asleep: a backend is marked queued before it lets go of
	# its snapshot, and sleeps (wait event type Extension) only after
	poll_ok($node,
		"SELECT b.state || '/' || a.wait_event_type
		   FROM dbgate.backends b JOIN pg_stat_activity a USING (pid)
		  WHERE pid = $wpid",
		'queued/Extension', "$name: the $noun queues");
	my $xmin = $node->safe_psql('postgres',
		"SELECT backend_xmin IS NOT NULL FROM pg_stat_activity WHERE pid = $wpid");
	is($xmin, $p{keeps_xmin} ? 't' : 'f',
		$p{keeps_xmin}
		? "$name: the queued $noun keeps its snapshot"
		: "$name: the queued $noun holds no snapshot (no backend_xmin)");

	# committed while it waits
	$node->safe_psql('postgres', "INSERT INTO $p{table} VALUES ($p{id}, 1)");

	$h->query('COMMIT');
	my ($out, $err) = $w->result;
	if (exists $p{expect})
	{
		my $seen = $out;
		($seen) = $err =~ $p{notice} if $p{notice};
		is($seen, $p{expect}, "$name: the $noun sees "
			  . ($p{keeps_xmin} ? 'the rows of when it started' : 'the rows committed while it waited'));
	}
	is($err =~ /ERROR/ ? $err : '', '', "$name: no error");
	$w->query('ROLLBACK') if $p{txn};
	$h->quit;
	$w->quit;
	counters_are($node, $p{budget}, { admitted => 2, admitted_after_wait => 1 },
		"$name: counted as one admission after a wait");
	return ($out, $err);
}

1;
