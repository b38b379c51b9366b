# Keys (1.3) beside the other features of a budget:
#   - the sources 'user', 'application_name' and 'client_addr' ('local'
#     for a Unix socket): the key a statement is counted under, and
#     key_max_active binding per key;
#   - a key longer than 127 bytes is cut at a whole UTF-8 character, and
#     two keys that differ only beyond that are one key;
#   - a shadow budget (enforce => false) with key_by holds nothing back
#     for its keys and counts in would_queue what a key would have held
#     back;
#   - scope 'transaction': a kept slot keeps the key it was admitted
#     with; a SET LOCAL of another tenant inside the transaction does not
#     move it (dbgate.backends, dbgate.keys and the key's limit say so);
#   - a tree: a child with key_by under a parent; the child's key limit
#     and the parent's limit both bind;
#   - a key rate (key_max_rate, burst 1): a second statement of the key
#     waits for its token while another key's passes, and is counted in
#     the key's rate_limited once admitted;
#   - a standby: keys are counted per server (the standby's dbgate.keys
#     shows its own statements' keys, the primary's its own), key limits
#     are replicated and in force there.
# Every step waits for the state it asserts on (no sleeps): slots are held
# by statements that wait for advisory locks the test holds.  The one
# timed event, the key's token, is 100 s away (key_max_rate 0.01) and is
# never waited for: a change of the key's rate fills its bucket.
use strict;
use warnings FATAL => 'all';

use FindBin;
use lib "$FindBin::RealBin/../perl";
use DbgateTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $primary = dbgate_node('keys_more', streaming => 1);
$primary->safe_psql(
	'postgres', q{
	CREATE ROLE km_u1 LOGIN;
	CREATE ROLE km_u2 LOGIN;
	CREATE ROLE km_app LOGIN;
	CREATE ROLE km_addr LOGIN;
	CREATE ROLE km_set LOGIN;
	CREATE ROLE km_shadow LOGIN;
	CREATE ROLE km_txn LOGIN;
	CREATE ROLE km_tree LOGIN;
	CREATE ROLE km_rate LOGIN;
	CREATE ROLE km_sb LOGIN;
	BEGIN;
	SELECT dbgate.create_budget('km_user', 4, max_queued => 10,
		key_by => 'user', key_max_active => 1);
	SELECT dbgate.assign_role('km_u1', 'km_user');
	SELECT dbgate.assign_role('km_u2', 'km_user');
	SELECT dbgate.create_budget('km_app', 4, max_queued => 10,
		key_by => 'application_name', key_max_active => 1);
	SELECT dbgate.assign_role('km_app', 'km_app');
	SELECT dbgate.create_budget('km_addr', 4, max_queued => 10,
		key_by => 'client_addr', key_max_active => 1);
	SELECT dbgate.assign_role('km_addr', 'km_addr');
	SELECT dbgate.create_budget('km_set', 4, max_queued => 10,
		key_by => 'setting:app.tenant', key_max_active => 1);
	SELECT dbgate.assign_role('km_set', 'km_set');
	SELECT dbgate.create_budget('km_shadow', 10, max_queued => 10, enforce => false,
		key_by => 'setting:app.tenant', key_max_active => 1);
	SELECT dbgate.assign_role('km_shadow', 'km_shadow');
	SELECT dbgate.create_budget('km_txn', 3, max_queued => 10, scope => 'transaction',
		key_by => 'setting:app.tenant', key_max_active => 1);
	SELECT dbgate.assign_role('km_txn', 'km_txn');
	SELECT dbgate.create_budget('km_parent', 2, max_queued => 10);
	SELECT dbgate.create_budget('km_child', 3, max_queued => 10, parent => 'km_parent',
		key_by => 'setting:app.tenant', key_max_active => 1);
	SELECT dbgate.assign_role('km_tree', 'km_child');
	SELECT dbgate.create_budget('km_rate', 4, max_queued => 10,
		key_by => 'setting:app.tenant', key_max_rate => 0.01, key_rate_burst => 1);
	SELECT dbgate.assign_role('km_rate', 'km_rate');
	SELECT dbgate.create_budget('km_sb', 6, max_queued => 10,
		key_by => 'setting:app.tenant', key_max_active => 2);
	SELECT dbgate.assign_role('km_sb', 'km_sb');
	COMMIT;
});
my $ctl = DbgateTest::Session->new($primary);

# session(NODE, USER, [SQL]) -> a new session of USER that ran SQL (a SET)
sub session
{
	my ($node, $user, $sql) = @_;
	my $s = DbgateTest::Session->new($node, user => $user);
	if (defined $sql)
	{
		my (undef, $err) = $s->query($sql);
		die $err if $err ne '';
	}
	return $s;
}

sub tenant
{
	my ($node, $user, $t) = @_;
	return session($node, $user, "SET app.tenant = '$t'");
}

# hold(S, LOCK): S's next statement waits for advisory lock LOCK
sub hold
{
	my ($s, $lock) = @_;
	$s->send("SELECT pg_advisory_lock_shared($lock), pg_advisory_unlock_shared($lock)");
	return;
}

sub wait_state
{
	my ($node, $s, $want, $name) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	poll_ok($node,
		"SELECT state || coalesce(':' || key, '') FROM dbgate.backends WHERE pid = " . $s->pid,
		$want, $name);
}

# keys_view(NODE, BUDGET) -> "key:active/queued ..." of dbgate.keys
sub keys_view
{
	my ($node, $budget) = @_;
	return poll_psql($node,
		qq{SELECT coalesce(string_agg(format('%s:%s/%s', coalesce(key, '-'), active, queued), ' ' ORDER BY key NULLS FIRST), '')
		    FROM dbgate.keys WHERE budget = '$budget'});
}

sub ran_ok
{
	my ($name, @s) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	my @bad;
	for my $s (@s)
	{
		my ($o, $e) = $s->result;
		push @bad, $e if $e ne '';
	}
	is(join("\n", @bad), '', $name);
}

sub drained_ok
{
	my ($node, $budget, $name) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	poll_ok($node,
		qq{SELECT count(*) || '/' || (SELECT active + queued FROM dbgate.status WHERE budget = '$budget')
		     FROM dbgate.keys WHERE budget = '$budget'},
		'0/0', $name);
}

# --- the sources: key_max_active 1 binds per key --------------------------
# (S1, S2, OTHER): S1 of a key holds a slot, S2 of the same key queues
# for the key, OTHER of another key is admitted beside them.
sub one_per_key
{
	my ($what, $budget, $key, $okey, $s1, $s2, $other) = @_;
	$ctl->query('SELECT pg_advisory_lock(1)');
	hold($s1, 1);
	wait_state($primary, $s1, "active:$key", "$what: the first statement holds a slot under key $key");
	hold($s2, 1);
	wait_state($primary, $s2, "queued:$key", "$what: a second of the same key waits for the key");
	hold($other, 1);
	wait_state($primary, $other, "active:$okey", "$what: one of key $okey is admitted beside them");
	is(keys_view($primary, $budget), join(' ', sort ("$key:1/1", "$okey:1/0")),
		"$what: dbgate.keys");
	$ctl->query('SELECT pg_advisory_unlock(1)');
	ran_ok("$what: the statements ran", $s1, $s2, $other);
	drained_ok($primary, $budget, "$what: after the drain no key of $budget is live");
	$_->quit for ($s1, $s2, $other);
}

one_per_key("key_by 'user'", 'km_user', 'km_u1', 'km_u2',
	session($primary, 'km_u1'), session($primary, 'km_u1'), session($primary, 'km_u2'));
one_per_key("key_by 'application_name'", 'km_app', 'app_x', 'app_y',
	session($primary, 'km_app', "SET application_name = 'app_x'"),
	session($primary, 'km_app', "SET application_name = 'app_x'"),
	session($primary, 'km_app', "SET application_name = 'app_y'"));
# client_addr: the test's sessions come through the Unix socket, whose
# key is 'local': two sessions, one key
{
	my $s1 = session($primary, 'km_addr');
	my $s2 = session($primary, 'km_addr');
	$ctl->query('SELECT pg_advisory_lock(1)');
	hold($s1, 1);
	wait_state($primary, $s1, 'active:local', "key_by 'client_addr': a Unix socket's key is 'local'");
	hold($s2, 1);
	wait_state($primary, $s2, 'queued:local', "key_by 'client_addr': a second session of 'local' waits for the key");
	is(keys_view($primary, 'km_addr'), 'local:1/1', "key_by 'client_addr': dbgate.keys");
	$ctl->query('SELECT pg_advisory_unlock(1)');
	ran_ok("key_by 'client_addr': the statements ran", $s1, $s2);
	drained_ok($primary, 'km_addr', "key_by 'client_addr': after the drain no key is live");
	$_->quit for ($s1, $s2);
}

# --- a key longer than 127 bytes -------------------------------------------
SKIP:
{
	skip 'the database encoding is not UTF8', 5
	  if poll_psql($primary, 'SHOW server_encoding') ne 'UTF8';
	# 100 times U+00E9 (200 bytes): cut to 63 of them (126 bytes; the
	# 64th would end at byte 128); 64 of them and 'abc' are cut to the
	# same 126 bytes (byte 127 is the first of the 64th character)
	my $l1 = session($primary, 'km_set', q{SELECT set_config('app.tenant', repeat(U&'\00E9', 100), false)});
	my $l2 = session($primary, 'km_set', q{SELECT set_config('app.tenant', repeat(U&'\00E9', 64) || 'abc', false)});
	$ctl->query('SELECT pg_advisory_lock(1)');
	hold($l1, 1);
	poll_ok($primary, 'SELECT state FROM dbgate.backends WHERE pid = ' . $l1->pid,
		'active', 'a long key: the statement holds a slot');
	hold($l2, 1);
	poll_ok($primary, 'SELECT state FROM dbgate.backends WHERE pid = ' . $l2->pid,
		'queued', 'another long key with the same first 126 bytes waits for the same key');
	is(poll_psql($primary,
			q{SELECT octet_length(key) || '/' || (key = repeat(U&'\00E9', 63)) || '/' || active || '/' || queued
			    FROM dbgate.keys WHERE budget = 'km_set'}),
		'126/true/1/1', 'dbgate.keys: one key, cut at a whole character (126 bytes)');
	is(poll_psql($primary,
			q{SELECT count(*) FROM dbgate.backends WHERE budget = 'km_set' AND key = repeat(U&'\00E9', 63)}),
		'2', 'dbgate.backends: both statements under the cut key');
	$ctl->query('SELECT pg_advisory_unlock(1)');
	ran_ok('the long keys\' statements ran', $l1, $l2);
	$_->quit for ($l1, $l2);
}
drained_ok($primary, 'km_set', 'after the drain no key of km_set is live');

# --- a shadow budget ---------------------------------------------------------
{
	my ($a1, $a2, $b1) = map { tenant($primary, 'km_shadow', $_) } qw(a a b);
	$ctl->query('SELECT pg_advisory_lock(1)');
	hold($a1, 1);
	wait_state($primary, $a1, 'active:a', 'shadow: a statement of a holds a slot');
	hold($a2, 1);
	wait_state($primary, $a2, 'active:a', 'shadow: a second of a is not held back by its key_max_active 1');
	hold($b1, 1);
	wait_state($primary, $b1, 'active:b', 'shadow: one of b runs too');
	is(keys_view($primary, 'km_shadow'), 'a:2/0 b:1/0', 'shadow: dbgate.keys counts a\'s two');
	is(poll_psql($primary, q{SELECT active || '/' || queued || '/' || would_queue FROM dbgate.status WHERE budget = 'km_shadow'}),
		'3/0/1', 'shadow: would_queue counts the one a\'s key would have held back');
	$ctl->query('SELECT pg_advisory_unlock(1)');
	ran_ok('shadow: the statements ran', $a1, $a2, $b1);
	drained_ok($primary, 'km_shadow', 'shadow: after the drain no key is live');
	$_->quit for ($a1, $a2, $b1);
}

# --- scope 'transaction': a kept slot keeps its key ------------------------------
{
	my $t = session($primary, 'km_txn');
	my ($out, $err) = $t->query(q{BEGIN; SET LOCAL app.tenant = 'a'; SELECT 1});
	is($err, '', 'transaction: the first statement of tenant a ran');
	poll_ok($primary, 'SELECT state || \':\' || key FROM dbgate.backends WHERE pid = ' . $t->pid,
		'idle in transaction:a', 'transaction: the kept slot is a\'s');
	($out, $err) = $t->query(q{SET LOCAL app.tenant = 'b'; SELECT current_setting('app.tenant')});
	is($out . $err, 'b', 'transaction: SET LOCAL of tenant b, and a statement under it ran');
	is(poll_psql($primary, 'SELECT state || \':\' || key FROM dbgate.backends WHERE pid = ' . $t->pid),
		'idle in transaction:a', 'transaction: dbgate.backends shows the key it was admitted with');
	is(keys_view($primary, 'km_txn'), 'a:1/0', 'transaction: dbgate.keys: a holds it, b nothing');
	my $a2 = tenant($primary, 'km_txn', 'a');
	$a2->send('SELECT 2');
	wait_state($primary, $a2, 'queued:a', 'transaction: another statement of a waits for the key');
	my $b2 = tenant($primary, 'km_txn', 'b');
	($out, $err) = $b2->query('SELECT 3');
	is($out . $err, '3', 'transaction: one of b is admitted at once: b counts nothing');
	is(poll_psql($primary, 'SELECT state FROM dbgate.backends WHERE pid = ' . $a2->pid),
		'queued', 'transaction: a\'s waiter still waits');
	($out, $err) = $t->query('COMMIT');
	is($err, '', 'transaction: commit');
	($out, $err) = $a2->result;
	is($out . $err, '2', 'transaction: the commit gave a\'s key back: its waiter ran');
	drained_ok($primary, 'km_txn', 'transaction: after the drain no key is live');
	$_->quit for ($t, $a2, $b2);
}

# --- a tree: the child's key limit and the parent's limit ------------------------
{
	my ($a1, $a2, $b1, $c1) = map { tenant($primary, 'km_tree', $_) } qw(a a b c);
	$ctl->query('SELECT pg_advisory_lock(1)');
	$ctl->query('SELECT pg_advisory_lock(2)');
	hold($a1, 1);
	wait_state($primary, $a1, 'active:a', 'tree: a holds a slot');
	hold($a2, 1);
	wait_state($primary, $a2, 'queued:a', 'tree: a second of a waits for its key (the parent has room)');
	hold($b1, 2);
	wait_state($primary, $b1, 'active:b', 'tree: b takes the parent\'s other slot');
	hold($c1, 1);
	wait_state($primary, $c1, 'queued:c', 'tree: c waits for the parent (2 of 2; the child has 3)');
	is(poll_psql($primary, q{SELECT string_agg(budget || ':' || active || '/' || queued, ' ' ORDER BY budget) FROM dbgate.status WHERE budget IN ('km_parent', 'km_child')}),
		'km_child:2/2 km_parent:2/2', 'tree: dbgate.status of parent and child');
	is(keys_view($primary, 'km_child'), 'a:1/1 b:1/0 c:0/1', 'tree: dbgate.keys of the child');
	$ctl->query('SELECT pg_advisory_unlock(2)');
	wait_state($primary, $c1, 'active:c', 'tree: the parent\'s freed slot goes to c');
	is(poll_psql($primary, 'SELECT state FROM dbgate.backends WHERE pid = ' . $a2->pid),
		'queued', 'tree: not to a, at its key\'s limit');
	ran_ok('tree: b\'s statement ran', $b1);
	$ctl->query('SELECT pg_advisory_unlock(1)');
	ran_ok('tree: the statements ran', $a1, $a2, $c1);
	drained_ok($primary, 'km_child', 'tree: after the drain no key of the child is live');
	is(poll_psql($primary, q{SELECT active + queued FROM dbgate.status WHERE budget = 'km_parent'}),
		'0', 'tree: and the parent is empty');
	$_->quit for ($a1, $a2, $b1, $c1);
}

# --- a key rate ------------------------------------------------------------------
{
	my ($a1, $b1) = map { tenant($primary, 'km_rate', $_) } qw(a b);
	my ($out, $err) = $a1->query('SELECT 1');
	is($out . $err, '1', 'rate: the first statement of a takes the key\'s one token');
	$a1->send('SELECT 2');
	wait_state($primary, $a1, 'queued:a', 'rate: the second waits for a\'s next token (100 s away)');
	($out, $err) = $b1->query('SELECT 3');
	is($out . $err, '3', 'rate: one of b passes meanwhile: its own bucket');
	is(poll_psql($primary, q{SELECT format('%s:%s/%s', key, admitted, rate_limited) FROM dbgate.keys WHERE budget = 'km_rate' AND key = 'a'}),
		'a:1/0', 'rate: a admitted once, nothing counted in rate_limited yet');
	# a change of the key's rate fills its bucket: the waiter takes the token
	$primary->safe_psql('postgres', q{SELECT dbgate.set_key_limit('km_rate', 'a', max_rate => 0.02)});
	($out, $err) = $a1->result;
	is($out . $err, '2', 'rate: a new rate for a fills its bucket: the waiter is admitted');
	is(poll_psql($primary, q{SELECT format('%s:%s/%s/%s', key, admitted, rate_limited, max_rate) FROM dbgate.keys WHERE budget = 'km_rate' AND key = 'a'}),
		'a:2/1/0.02', 'rate: a admitted twice, once after waiting for its token (rate_limited), under its own rate');
	is(poll_psql($primary, q{SELECT rate_limited FROM dbgate.keys WHERE budget = 'km_rate' AND key = 'b'}),
		'0', 'rate: b waited for nothing');
	$_->quit for ($a1, $b1);
}

# --- a standby: keys per server, key limits replicated ------------------------
$primary->safe_psql('postgres', q{SELECT dbgate.set_key_limit('km_sb', 'big', max_active => 1)});
my $standby = dbgate_standby($primary, 'keys_more_standby', 'b1');
$primary->safe_psql('postgres', q{SELECT dbgate.set_key_limit('km_sb', 'small', max_active => 3)});
my $limits_sql = q{SELECT string_agg(format('%s:%s:%s', budget, key, max_active), ' ' ORDER BY key) FROM dbgate.key_limits WHERE budget = 'km_sb'};
poll_ok($standby, $limits_sql, 'km_sb:big:1 km_sb:small:3',
	'standby: the key limits of the base backup and the one set after it are there');
{
	my $sctl = DbgateTest::Session->new($standby);
	$sctl->query('SELECT pg_advisory_lock(1)');
	$ctl->query('SELECT pg_advisory_lock(1)');
	my ($g1, $g2, $s1, $s2, $s3) = map { tenant($standby, 'km_sb', $_) } qw(big big small small small);
	hold($g1, 1);
	wait_state($standby, $g1, 'active:big', 'standby: big holds a slot');
	hold($g2, 1);
	wait_state($standby, $g2, 'queued:big', 'standby: a second of big waits: its own limit 1 binds on the standby');
	hold($_, 1) for ($s1, $s2, $s3);
	wait_state($standby, $_, 'active:small', 'standby: small runs 3 (its own limit above key_max_active 2)')
	  for ($s1, $s2, $s3);
	my $p1 = tenant($primary, 'km_sb', 'p');
	hold($p1, 1);
	wait_state($primary, $p1, 'active:p', 'primary: a statement of p holds a slot');
	is(keys_view($standby, 'km_sb'), 'big:1/1 small:3/0', 'standby: dbgate.keys shows its own statements\' keys only');
	is(keys_view($primary, 'km_sb'), 'p:1/0', 'primary: dbgate.keys shows its own only');
	is(poll_psql($standby, q{SELECT keys || '/' || active || '/' || queued FROM dbgate.status WHERE budget = 'km_sb'}),
		'2/4/1', 'standby: dbgate.status counts its own keys and slots');
	# a limit changed on the primary is in force on the standby at once
	$primary->safe_psql('postgres', q{SELECT dbgate.set_key_limit('km_sb', 'big', max_active => 2)});
	poll_ok($standby, $limits_sql, 'km_sb:big:2 km_sb:small:3', 'standby: big\'s raised limit is replayed');
	poll_ok($standby, q{SELECT max_active FROM dbgate.keys WHERE budget = 'km_sb' AND key = 'big'}, '2',
		'standby: dbgate.keys shows big\'s raised limit');
	wait_state($standby, $g2, 'active:big', 'standby: big\'s raised limit, replayed, admits its waiter');
	$sctl->query('SELECT pg_advisory_unlock(1)');
	ran_ok('standby: the statements ran', $g1, $g2, $s1, $s2, $s3);
	drained_ok($standby, 'km_sb', 'standby: after the drain no key is live');
	is(keys_view($primary, 'km_sb'), 'p:1/0', 'primary: its key is still there');
	$ctl->query('SELECT pg_advisory_unlock(1)');
	ran_ok('primary: the statement ran', $p1);
	drained_ok($primary, 'km_sb', 'primary: after the drain no key is live');
	$_->quit for ($g1, $g2, $s1, $s2, $s3, $p1, $sctl);
}

$ctl->quit;
$standby->stop;
$primary->stop;
done_testing();
