# DbgateState - configuration images as dbgate encodes them, built byte
# by byte for the TAP tests of the state file and of WAL records (see the
# header of src/persist.c for the layout).
#
#   my $bytes = state_image(
#       version => 3, lsn => 0,
#       budgets => [ { name => 'b', max_active => 2, parent => 'p' }, ... ],
#       roles   => [ [ $roleid, 'b' ] ],
#       dbs     => [ [ $dbid, 'b' ] ]);
#
# Fields not given take their defaults; each version stores the fields of
# the table of src/fields.c whose format is at most the version, in table
# order, and pads the record to a multiple of 8 bytes.  Versions above 3
# give a header that a newer dbgate might write (and no more).

package DbgateState;

use strict;
use warnings FATAL => 'all';

use Exporter 'import';

our @EXPORT = qw(crc32c state_image state_version);

# CRC-32C (Castagnoli), as PostgreSQL's pg_crc32c computes it
my @crc_table;
for my $i (0 .. 255)
{
	my $c = $i;
	for (1 .. 8)
	{
		$c = ($c & 1) ? (($c >> 1) ^ 0x82F63B78) : ($c >> 1);
	}
	$crc_table[$i] = $c;
}

# (read 64 kB at a time: a state file of 100,000 assignments is 13 MB)
sub crc32c
{
	my ($data) = @_;
	my $crc = 0xFFFFFFFF;
	for (my $off = 0; $off < length($data); $off += 65536)
	{
		for my $byte (unpack('C*', substr($data, $off, 65536)))
		{
			$crc = $crc_table[ ($crc ^ $byte) & 0xFF ] ^ ($crc >> 8);
		}
	}
	return $crc ^ 0xFFFFFFFF;
}

# The table of fields: name, pack code, format version, default.  Booleans
# and enumerations are given as their stored integers (scope: 0 statement,
# 1 transaction; queue_order: 0 fifo, 1 lifo; adapt: 0 off, 1 shadow, 2 on;
# runaway_action: 0 log, 1 demote, 2 cancel).
my @FIELDS = (
	[ 'max_active', 'l', 1, 1 ],
	[ 'max_queued', 'l', 1, 0 ],
	[ 'queue_timeout', 'l', 1, 0 ],
	[ 'statement_timeout', 'l', 1, 0 ],
	[ 'lock_timeout', 'l', 1, 0 ],
	[ 'fair', 'l', 1, 1 ],
	[ 'scope', 'l', 2, 0 ],
	[ 'idle_in_transaction_timeout', 'l', 2, 0 ],
	[ 'parallel_workers', 'l', 2, -1 ],
	[ 'utility', 'l', 2, 0 ],
	[ 'enforce', 'l', 2, 1 ],
	[ 'queue_order', 'l', 3, 0 ],
	[ 'overtake_limit', 'l', 3, 100 ],
	[ 'parent', 'a64', 3, '' ],
	[ 'weight', 'l', 3, 1 ],
	[ 'max_rate', 'd', 3, 0 ],
	[ 'rate_burst', 'l', 3, 1 ],
	[ 'max_memory_mb', 'l', 3, 0 ],
	[ 'min_cost', 'd', 3, 0 ],
	[ 'reserved', 'l', 4, 0 ],
	[ 'key_by', 'a72', 4, '' ],
	[ 'key_max_active', 'l', 4, 0 ],
	[ 'key_max_queued', 'l', 4, 0 ],
	[ 'key_max_rate', 'd', 4, 0 ],
	[ 'key_rate_burst', 'l', 4, 1 ],
	[ 'runaway_after', 'l', 4, 0 ],
	[ 'runaway_action', 'l', 4, 0 ],
	[ 'runaway_budget', 'a64', 4, '' ],
	[ 'quarantine', 'l', 4, 0 ],
	[ 'adapt', 'l', 4, 0 ],
	[ 'adapt_min', 'l', 4, 1 ],);

sub budget_record
{
	my ($version, $b) = @_;
	my $rec = pack('a64', $b->{name});
	for my $f (@FIELDS)
	{
		my ($name, $code, $format, $default) = @$f;
		next if $format > $version;
		$rec .= pack($code, $b->{$name} // $default);
	}
	$rec .= "\0" x ((8 - length($rec) % 8) % 8);
	return $rec;
}

sub state_image
{
	my (%p) = @_;
	my $version = $p{version};
	my @budgets = @{ $p{budgets} // [] };
	my @roles = @{ $p{roles} // [] };
	my @dbs = @{ $p{dbs} // [] };
	my @keylimits = @{ $p{keylimits} // [] };
	my $bytes;

	if ($version == 1)
	{
		$bytes = pack('L4', 0x44424754, 1, scalar(@budgets), scalar(@roles));
	}
	else
	{
		$bytes = pack('L6 Q', 0x44424754, $version, scalar(@budgets),
			scalar(@roles), scalar(@dbs), scalar(@keylimits), $p{lsn} // 0);
	}
	return $bytes . pack('L', crc32c($bytes)) if $version > 4;
	$bytes .= budget_record($version, $_) for @budgets;
	$bytes .= pack('L a64', @$_) for @roles;
	if ($version > 1)
	{
		$bytes .= pack('L a64', @$_) for @dbs;
	}
	# (format 4) key limits: budget, key, max_active, max_queued,
	# rate_burst, 0, max_rate; -1 (the default) is NULL
	$bytes .= pack('a64 a128 l4 d', $_->{budget}, $_->{key},
		$_->{max_active} // -1, $_->{max_queued} // -1, $_->{rate_burst} // -1,
		$_->{pad} // 0, $_->{max_rate} // -1)
	  for @keylimits;
	return $bytes . pack('L', crc32c($bytes));
}

# The format version of an encoded image (a state file's contents).
sub state_version
{
	my ($bytes) = @_;
	return (unpack('L2', $bytes))[1];
}

1;
