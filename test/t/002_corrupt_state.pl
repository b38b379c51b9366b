# A damaged state file never stops the server: it is reported with a
# WARNING naming dbgate.state, set aside as dbgate.state.corrupt, and the
# server starts with no budgets; new budgets work and persist again.
# A temporary file left by a commit that never finished is ignored.
use strict;
use warnings FATAL => 'all';

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use DbgateTest;

my $node = dbgate_node('corrupt');
my $pgdata = $node->data_dir;
my $state = "$pgdata/dbgate.state";
my $corrupt = "$pgdata/dbgate.state.corrupt";

$node->safe_psql('postgres', 'CREATE ROLE c_role LOGIN');

# Creates budget NAME (with c_role assigned), checks it is in the state file.
sub make_budget
{
	my ($name) = @_;
	$node->safe_psql(
		'postgres', qq{
		SELECT dbgate.create_budget('$name', 2, 3, '1s');
		SELECT dbgate.assign_role('c_role', '$name');
	});
	ok(-s $state, "state file written for $name");
	return;
}

sub budget_list
{
	return $node->safe_psql('postgres',
		q{SELECT coalesce(string_agg(budget || ':' || array_to_string(roles, ','), ' '), '')
		  FROM dbgate.budgets});
}

# Damage the state file with CODE (gets the file's bytes, returns the new
# ones) while the server is stopped, start it and check what happens.
sub damaged_start
{
	my ($what, $code) = @_;
	$node->stop;
	my $bytes = slurp_file($state);
	my $damaged = $code->($bytes);
	isnt($damaged, $bytes, "$what: file changed");
	unlink $corrupt;
	open my $fh, '>:raw', $state or die "cannot write $state: $!";
	print $fh $damaged;
	close $fh;

	my $offset = -s $node->logfile;
	$node->start;
	ok( $node->log_contains(
			qr/WARNING:\s+(?:[0-9A-Z]{5}:\s+)?[^\n]*"dbgate\.state"/, $offset),
		"$what: log has a WARNING naming dbgate.state");
	is(budget_list(), '', "$what: server started with no budgets");
	ok(-e $corrupt, "$what: dbgate.state.corrupt exists");
	is(slurp_file($corrupt), $damaged,
		"$what: dbgate.state.corrupt holds the damaged file");
	ok(!-e $state, "$what: dbgate.state was moved away");
	my ($sqlstate) = run_sql($node, 'SELECT 1', user => 'c_role');
	is($sqlstate, '', "$what: the formerly assigned role can run statements");
	is($node->safe_psql('postgres', 'SELECT count(*) FROM dbgate.status'),
		'0', "$what: dbgate.status is empty");
	return;
}

# Creating a budget after the damaged start works and survives a restart,
# without any further warning.
sub recovers
{
	my ($what, $name) = @_;
	make_budget($name);
	my $offset = -s $node->logfile;
	$node->restart;
	is(budget_list(), "$name:c_role",
		"$what: new budget and assignment survive the next restart");
	ok(!$node->log_contains(qr/WARNING/, $offset),
		"$what: no warning at the next start");
	return;
}

# 1. Garbage instead of the file.
make_budget('c_one');
$node->restart;
is(budget_list(), 'c_one:c_role', 'budget loaded from an intact state file');
damaged_start('garbage',
	sub { return "this is not a dbgate state file\n" x 20; });
recovers('garbage', 'c_two');

# 2. The file cut in half, and cut to zero length.
damaged_start('truncated',
	sub { return substr($_[0], 0, int(length($_[0]) / 2)); });
recovers('truncated', 'c_three');
damaged_start('empty', sub { return ''; });
recovers('empty', 'c_four');

# 3. One flipped byte in the middle (the budget record), and one in the
# last byte (the checksum).
damaged_start(
	'flipped byte',
	sub {
		my $b = $_[0];
		my $i = int(length($b) / 2);
		substr($b, $i, 1) = chr(ord(substr($b, $i, 1)) ^ 0x01);
		return $b;
	});
recovers('flipped byte', 'c_five');
damaged_start(
	'flipped checksum byte',
	sub {
		my $b = $_[0];
		substr($b, -1, 1) = chr(ord(substr($b, -1, 1)) ^ 0x80);
		return $b;
	});
recovers('flipped checksum byte', 'c_six');

# 4. A temporary file left behind by a commit interrupted by a crash is not
# the configuration: the state file wins and the leftover goes away.
$node->stop;
open my $fh, '>:raw', "$state.tmp" or die "cannot write $state.tmp: $!";
print $fh "half-written\n";
close $fh;
my $offset = -s $node->logfile;
$node->start;
is(budget_list(), 'c_six:c_role',
	'a leftover dbgate.state.tmp does not replace the state file');
ok(!-e "$state.tmp", 'the leftover dbgate.state.tmp is removed');
ok(!$node->log_contains(qr/WARNING/, $offset),
	'no warning for a leftover temporary file');

$node->stop;
done_testing();
