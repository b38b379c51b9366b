# Fuzz::Common - small pieces shared by the fuzz test's processes.
#
# The processes of the fuzz test (test/t/092_fuzz.pl) talk through files
# in a run directory, as the soak test's do (see Soak::Common): "stop"
# tells every client, the budget changer and the fault injector to finish;
# each writes its figures to a stats file of its own.
package Fuzz::Common;

use strict;
use warnings;

use Exporter 'import';

our @EXPORT_OK = qw(dsn pick);

sub dsn
{
	my ($host, $port, $dbname) = @_;
	return "dbi:Pg:dbname=$dbname;host=$host;port=$port";
}

sub pick
{
	return $_[ int(rand(@_)) ];
}

1;
