# The quarantine (1.3) across restarts, on a standby and without a table:
#
#   1. a runaway of a 'cancel' budget with quarantine: its query is
#      quarantined, and repeats are refused with 53000;
#   2. a clean restart keeps the entries (until, runaways, hits, the text),
#      and the repeats are still refused; a SIGTERM of the runaway worker
#      alone keeps them too;
#   3. a crash restart starts with none;
#   4. a full table: the entry that would end first gives way;
#   5. a streaming standby: quarantine_add there, its own runaways, nothing
#      on the primary; the standby's entries survive its clean restart;
#   6. dbgate.max_quarantine = 0: create_budget and alter_budget warn that
#      a quarantine has no effect, quarantine_add is refused (55000), the
#      view is empty, runaways are still counted;
#   7. cursors (DECLARE and FETCH, as psycopg2's named cursors) and CREATE
#      TABLE AS: the entry is made under the query id that the repeat is
#      looked up by, the one pg_stat_activity shows for the DECLARE or the
#      CREATE TABLE AS; a plain SELECT and EXPLAIN ANALYZE share theirs;
#   8. the check compares an entry's end with the current time: a
#      statement of a DO block that began before the end, gated after it,
#      is not held back (the runaway worker, which frees ended entries, is
#      stopped meanwhile);
#   9. the defaults: dbgate.max_quarantine is 1000; query ids are computed
#      for the statements of budgets with runaway_after or quarantine
#      entries only (PostgreSQL's own jumbling, the same id), also for a
#      statement prepared before, not with compute_query_id = off (then a
#      warning); a quarantine works on a server with nothing set.
#
# Timing: the runaway that makes the entry waits on a lock that the test
# holds until the entry is seen (the worker reads the text while the
# statement runs); the entries that a restart keeps are read back by the
# runaway worker after the server accepts connections, so the test waits
# for its LOG line (or for the entries) first; a statement that must run
# to its end does so under runaway_after '1h' (a short statement is not
# bound to end within 100 ms); no entry has to end during the test.
use strict;
use warnings FATAL => 'all';

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use DbgateTest;

my $node = dbgate_node('quarantine',
	conf => "restart_after_crash = on\n" . "dbgate.max_quarantine = 4\n");
$node->safe_psql(
	'postgres', q{
	CREATE ROLE qa_u LOGIN;
	SELECT dbgate.create_budget('qa_b', 10, runaway_after => '100ms',
	                            runaway_action => 'log', quarantine => '1h');
	SELECT dbgate.assign_role('qa_u', 'qa_b');
	SELECT dbgate.create_budget('qa_other', 1);
});

my $view = q{SELECT budget, query, runaways, hits, until FROM dbgate.quarantine
             ORDER BY budget, queryid};

sub quarantined
{
	my ($n) = @_;
	return $n->safe_psql('postgres',
		q{SELECT quarantined FROM dbgate.status WHERE budget = 'qa_b'});
}

# wait_log(n, re, offset): wait (the default timeout at most) until the
# log of node n from offset on matches re; returns whether it does
sub wait_log
{
	my ($n, $re, $offset) = @_;
	for (1 .. 10 * $PostgreSQL::Test::Utils::timeout_default)
	{
		return 1 if slurp_file($n->logfile, $offset) =~ $re;
		select(undef, undef, undef, 0.1);
	}
	return 0;
}

# the query id that PostgreSQL itself computes for sql (compute_query_id =
# on in that session)
sub pg_query_id
{
	my ($n, $sql) = @_;
	my $plan = $n->safe_psql('postgres',
		"SET compute_query_id = on; EXPLAIN (VERBOSE, COSTS OFF) $sql");
	return $plan =~ /Query Identifier: (-?\d+)/ ? $1 : 'none';
}

# 1. A runaway's query is quarantined; a repeat is refused.  ('log' first,
# and the statement waits on a lock that the test holds until the entry is
# there: the worker reads the text while the statement still runs.)
my $holder = DbgateTest::Session->new($node);
$holder->query('SELECT pg_advisory_lock(54)');
my $r = DbgateTest::Session->new($node, user => 'qa_u');
$r->send('SELECT pg_advisory_xact_lock_shared(54)');
poll_ok($node, q{SELECT count(*) FROM dbgate.quarantine WHERE budget = 'qa_b'},
	'1', 'its query is quarantined');
$holder->query('SELECT pg_advisory_unlock(54)');
my (undef, undef, $state) = $r->result;
is($state, '', "the runaway runs to its end ('log')");
$r->quit;
$holder->quit;
# 'cancel' refuses the repeats; runaway_after '1h' keeps the statements
# that must run to their end from running away (the entry stays)
$node->safe_psql('postgres',
	q{SELECT dbgate.alter_budget('qa_b', runaway_action => 'cancel', runaway_after => '1h')});
($state) = run_sql($node, 'SELECT pg_advisory_xact_lock_shared(1)', user => 'qa_u');
is($state, '53000', 'a repeat with other constants is refused');
($state) = run_sql($node, 'SELECT 1', user => 'qa_u');
is($state, '', 'another query runs');
$node->safe_psql('postgres',
	q{SELECT dbgate.quarantine_add('qa_other', 77, '1 day')});
my $before = $node->safe_psql('postgres', $view);
like($before, qr/^qa_b\|SELECT pg_advisory_xact_lock_shared\(54\);?\|1\|1\|/m,
	'the entry: the text, one runaway, one hit');

# 2. A clean restart keeps the entries; so does a SIGTERM of the worker.
# The runaway worker reads them back after the server accepts
# connections: its LOG line comes first.
my $offset = -s $node->logfile;
$node->restart;
ok(wait_log($node, qr/dbgate: 2 quarantined queries kept across the restart/, $offset),
	'clean restart: the LOG line says how many');
is($node->safe_psql('postgres', $view), $before,
	'clean restart: the entries are kept as they were');
ok(!-e $node->data_dir . '/dbgate.quarantine', 'clean restart: the file is gone once read');
($state) = run_sql($node, 'SELECT pg_advisory_xact_lock_shared(1)', user => 'qa_u');
is($state, '53000', 'clean restart: the repeat is still refused');
is(quarantined($node), '1', 'clean restart: counted in quarantined (from zero)');
my $after = $node->safe_psql('postgres', $view);
my $wpid = worker_pid($node);
ok($wpid ne '', 'the runaway worker runs');
$offset = -s $node->logfile;
kill('TERM', $wpid);
ok($node->poll_query_until('postgres',
		q{SELECT count(*) FROM dbgate.quarantine}, '2'),
	'SIGTERM of the worker: the entries are there');
my $wpid2 = '';
for (1 .. 10 * $PostgreSQL::Test::Utils::timeout_default)
{
	$wpid2 = worker_pid($node);
	last if $wpid2 ne '' && $wpid2 ne $wpid;
	select(undef, undef, undef, 0.1);
}
isnt($wpid2, $wpid, 'SIGTERM of the worker: a new worker runs');
# the old worker wrote them to the file, the new one read them back
ok(wait_log($node, qr/dbgate: 2 quarantined queries kept across the restart/, $offset),
	'SIGTERM of the worker: the new worker read the entries back');
is($node->safe_psql('postgres', $view), $after,
	'SIGTERM of the worker: the entries are as they were');

# 3. A crash restart starts with none.
$offset = -s $node->logfile;
my $s = DbgateTest::Session->new($node);
kill('KILL', $s->pid);
$node->wait_for_log(qr/all server processes terminated; reinitializing/, $offset);
$node->wait_for_log(qr/database system is ready to accept connections/, $offset);
ok($node->poll_query_until('postgres', 'SELECT 1', '1'),
	'crash: the server accepts connections after the crash restart');
is($node->safe_psql('postgres', 'SELECT count(*) FROM dbgate.quarantine'), '0',
	'crash: no entries');
($state) = run_sql($node, 'SELECT pg_advisory_xact_lock_shared(1)', user => 'qa_u');
is($state, '', 'crash: the repeat runs');

# 4. A full table (4 entries): the one that would end first gives way.
$node->safe_psql(
	'postgres', q{
	SELECT dbgate.quarantine_add('qa_other', i, i * interval '1 min')
	  FROM generate_series(1, 4) i;
	SELECT dbgate.quarantine_add('qa_other', 100, '1 h');
});
is($node->safe_psql('postgres',
		q{SELECT string_agg(queryid::text, ',' ORDER BY queryid) FROM dbgate.quarantine}),
	'2,3,4,100', 'full table: the entry that ended first gave way');
$node->safe_psql('postgres', 'SELECT dbgate.quarantine_remove()');

# 5. A streaming standby has its own entries.
{
	my $primary = PostgreSQL::Test::Cluster->new('quarantine_primary');
	$primary->init(allows_streaming => 1);
	$primary->append_conf('postgresql.conf',
		"shared_preload_libraries = 'dbgate'\ndbgate.max_quarantine = 10\n");
	$primary->start;
	$primary->safe_psql(
		'postgres', q{
		CREATE EXTENSION dbgate;
		CREATE ROLE qa_u LOGIN;
		SELECT dbgate.create_budget('qa_b', 10, runaway_after => '100ms',
		                            runaway_action => 'cancel', quarantine => '1h');
		SELECT dbgate.assign_role('qa_u', 'qa_b');
	});
	$primary->backup('b1');
	my $standby = PostgreSQL::Test::Cluster->new('quarantine_standby');
	$standby->init_from_backup($primary, 'b1', has_streaming => 1);
	$standby->start;
	$standby->safe_psql('postgres', q{SELECT dbgate.quarantine_add('qa_b', 5, '1 h')});
	# (5.0, not 5: the same query id as that of pg_sleep(0.01))
	($state) = run_sql($standby, 'SELECT pg_sleep(5.0)', user => 'qa_u');
	is($state, '57014', 'standby: the runaway is canceled');
	poll_ok($standby, 'SELECT count(*) FROM dbgate.quarantine', '2',
		'standby: quarantine_add and the runaway made entries there');
	($state) = run_sql($standby, 'SELECT pg_sleep(0.01)', user => 'qa_u');
	is($state, '53000', 'standby: a repeat is refused there');
	is($primary->safe_psql('postgres', 'SELECT count(*) FROM dbgate.quarantine'),
		'0', 'standby: the primary has none');
	# runaway_after '1h' (replayed by the standby too, whose entries stay):
	# the repeat on the primary then runs to its end however slowly
	$primary->safe_psql('postgres',
		q{SELECT dbgate.alter_budget('qa_b', runaway_after => '1h')});
	($state) = run_sql($primary, 'SELECT pg_sleep(0.01)', user => 'qa_u');
	is($state, '', 'standby: the repeat runs on the primary');
	$standby->restart;
	# read back by the standby's runaway worker after it accepts connections
	poll_ok($standby, 'SELECT count(*) FROM dbgate.quarantine',
		'2', 'standby: a clean restart keeps its entries');
	$standby->stop;
	$primary->stop;
}

# 6. No table (dbgate.max_quarantine = 0).  A quarantine can then never
# take effect: create_budget and alter_budget say so.
{
	my $off = dbgate_node('quarantine_off', conf => "dbgate.max_quarantine = 0\n");
	$off->safe_psql('postgres', 'CREATE ROLE qa_u LOGIN');
	my ($err0, $err1, $err2);
	(undef, undef, $err0) = run_sql($off,
		q{SELECT dbgate.create_budget('qa_plain', 10, runaway_after => '100ms')});
	($state, undef, $err1) = run_sql($off,
		q{SELECT dbgate.create_budget('qa_b', 10, runaway_after => '100ms',
		                              runaway_action => 'cancel', quarantine => '1h')});
	is($state, '', 'off: a budget with a quarantine is created');
	like($err1, qr/WARNING:  01000: quarantine of budget "qa_b" has no effect\n.*DETAIL:  dbgate.max_quarantine is 0/s,
		'off: create_budget warns that the quarantine has no effect');
	unlike($err0, qr/WARNING/, 'off: no warning for a budget without a quarantine');
	(undef, undef, $err2) = run_sql($off,
		q{SELECT dbgate.alter_budget('qa_plain', quarantine => '2h')});
	like($err2, qr/WARNING:  01000: quarantine of budget "qa_plain" has no effect/,
		'off: alter_budget warns as well');
	$off->safe_psql('postgres', q{SELECT dbgate.assign_role('qa_u', 'qa_b')});
	($state) = run_sql($off, q{SELECT dbgate.quarantine_add('qa_b', 5, '1 h')});
	is($state, '55000', 'off: quarantine_add is refused');
	($state) = run_sql($off, 'SELECT pg_sleep(5.0)', user => 'qa_u');
	is($state, '57014', 'off: the runaway is canceled');
	poll_ok($off, q{SELECT runaways FROM dbgate.status WHERE budget = 'qa_b'}, '1',
		'off: and counted');
	# the repeat runs to its end however slowly
	$off->safe_psql('postgres',
		q{SELECT dbgate.alter_budget('qa_b', runaway_after => '1h')});
	($state) = run_sql($off, 'SELECT pg_sleep(0.01)', user => 'qa_u');
	is($state, '', 'off: a repeat runs');
	is($off->safe_psql('postgres', 'SELECT count(*) FROM dbgate.quarantine'), '0',
		'off: the view is empty');
	$off->stop;
}

# 7. Cursors and CREATE TABLE AS (psycopg2's named cursors run every query
# as DECLARE ... CURSOR and FETCH in a transaction): the runaway (in a
# FETCH, or in the command's query) makes its entry under the query id
# that the repeat is looked up by, the one pg_stat_activity.query_id shows
# for the DECLARE or the CREATE TABLE AS; a plain SELECT and EXPLAIN
# ANALYZE of it still share theirs.  Statements that must not run away run
# under runaway_after '1h'; those that must wait on the test's lock.
$node->safe_psql(
	'postgres', q{
	CREATE ROLE qa_cu LOGIN;
	GRANT CREATE ON SCHEMA public TO qa_cu;
	SELECT dbgate.create_budget('qa_c', 1, 4, runaway_after => '1h',
	                            runaway_action => 'cancel', quarantine => '1h');
	SELECT dbgate.assign_role('qa_cu', 'qa_c');
});
my $qa_c_entries = q{SELECT count(*) FROM dbgate.quarantine WHERE budget = 'qa_c'};
my $declare = q{DECLARE "qa_cur" CURSOR WITHOUT HOLD FOR SELECT pg_advisory_xact_lock_shared(81) AS x};
my $locks = DbgateTest::Session->new($node);
$locks->query('SELECT pg_advisory_lock(80), pg_advisory_lock(81)');
# the DECLARE waits in the queue behind h (qa_c has one slot), where its
# query id can be read
my $h = DbgateTest::Session->new($node, user => 'qa_cu');
$h->send('SELECT pg_advisory_xact_lock_shared(80)');
poll_ok($node, q{SELECT active FROM dbgate.status WHERE budget = 'qa_c'}, '1',
	'cursor: the slot is held');
my $c = DbgateTest::Session->new($node, user => 'qa_cu');
$c->query('BEGIN');
$c->send($declare);
poll_ok($node, q{SELECT queued FROM dbgate.status WHERE budget = 'qa_c'}, '1',
	'cursor: the DECLARE waits for the slot');
my $declare_id = $node->safe_psql('postgres',
	'SELECT query_id FROM pg_stat_activity WHERE pid = ' . $c->pid);
like($declare_id, qr/^-?[1-9]\d*$/, 'cursor: pg_stat_activity shows the DECLARE\'s query id');
$node->safe_psql('postgres',
	q{SELECT dbgate.alter_budget('qa_c', runaway_after => '200ms')});
$locks->query('SELECT pg_advisory_unlock(80)');
($state) = ($h->result)[2];
is($state, '', 'cursor: the slot holder ends');
($state) = ($c->result)[2];
is($state, '', 'cursor: the DECLARE is admitted');
$offset = -s $node->logfile;
($state) = ($c->query('FETCH FORWARD 2000 FROM "qa_cur"'))[2];
is($state, '57014', 'cursor: the FETCH runs away and is canceled');
poll_ok($node, $qa_c_entries, '1', 'cursor: its query is quarantined');
is($node->safe_psql('postgres',
		q{SELECT queryid FROM dbgate.quarantine WHERE budget = 'qa_c'}),
	$declare_id, 'cursor: under the DECLARE\'s query id');
ok(wait_log($node,
		qr/runaway statement in budget "qa_c": pid \d+, query id \Q$declare_id\E,/,
		$offset),
	'cursor: the LOG line names the DECLARE\'s query id');
$c->query('ROLLBACK');
$c->query('BEGIN');
my ($out, $err);
(undef, $err, $state) = $c->query($declare);
is($state, '53000', 'cursor: the repeat\'s DECLARE is refused');
like($err, qr/query \Q$declare_id\E is quarantined in budget "qa_c"/,
	'cursor: the message names the DECLARE\'s query id');
$c->query('ROLLBACK');

# CREATE TABLE AS: its id read while it waits on the test's lock
my $ctas = q{CREATE TABLE qa_ctas AS SELECT pg_advisory_xact_lock_shared(82)::text AS x};
$node->safe_psql('postgres',
	q{SELECT dbgate.alter_budget('qa_c', runaway_after => '1h')});
$locks->query('SELECT pg_advisory_lock(82)');
$c->send($ctas);
poll_ok($node,
	'SELECT wait_event_type FROM pg_stat_activity WHERE pid = ' . $c->pid,
	'Lock', 'CREATE TABLE AS: it waits on the lock');
my $ctas_id = $node->safe_psql('postgres',
	'SELECT query_id FROM pg_stat_activity WHERE pid = ' . $c->pid);
like($ctas_id, qr/^-?[1-9]\d*$/, 'CREATE TABLE AS: pg_stat_activity shows its query id');
$locks->query('SELECT pg_advisory_unlock(82)');
($state) = ($c->result)[2];
is($state, '', 'CREATE TABLE AS: ends under runaway_after 1h');
$c->query('DROP TABLE qa_ctas');
$node->safe_psql('postgres',
	q{SELECT dbgate.alter_budget('qa_c', runaway_after => '200ms')});
$locks->query('SELECT pg_advisory_lock(82)');
($state) = ($c->query($ctas))[2];
is($state, '57014', 'CREATE TABLE AS: runs away and is canceled');
poll_ok($node, $qa_c_entries, '2', 'CREATE TABLE AS: its query is quarantined');
is($node->safe_psql('postgres',
		"SELECT count(*) FROM dbgate.quarantine WHERE queryid = $ctas_id"),
	'1', 'CREATE TABLE AS: under its query id');
(undef, $err, $state) = $c->query($ctas);
is($state, '53000', 'CREATE TABLE AS: the repeat is refused');
like($err, qr/query \Q$ctas_id\E is quarantined/, 'CREATE TABLE AS: the message names its id');

# a plain SELECT, and EXPLAIN ANALYZE of the same query (another constant)
$locks->query('SELECT pg_advisory_lock(83)');
($state) = run_sql($node, 'SELECT pg_advisory_xact_lock_shared(83)', user => 'qa_cu');
is($state, '57014', 'SELECT: runs away and is canceled');
poll_ok($node, $qa_c_entries, '3', 'SELECT: its query is quarantined');
my $select_id = pg_query_id($node, 'SELECT pg_advisory_xact_lock_shared(84)');
is($node->safe_psql('postgres',
		"SELECT count(*) FROM dbgate.quarantine WHERE queryid = $select_id"),
	'1', 'SELECT: under the query id that PostgreSQL computes');
($state) = run_sql($node, 'EXPLAIN ANALYZE SELECT pg_advisory_xact_lock_shared(84)',
	user => 'qa_cu');
is($state, '53000', 'EXPLAIN ANALYZE of the query is refused');
($state) = run_sql($node, 'SELECT pg_advisory_xact_lock_shared(85)', user => 'qa_cu');
is($state, '53000', 'a repeat of the SELECT is refused');
$node->safe_psql('postgres',
	q{SELECT dbgate.alter_budget('qa_c', runaway_after => '1h');
	  SELECT dbgate.quarantine_remove('qa_c')});
$locks->query('SELECT pg_advisory_unlock_all()');
$locks->quit;
$c->quit;
$h->quit;

# 8. The check compares an entry's end with the current time, not with
# the statement's start: a statement of a DO block that began before the
# entry ended, gated after its end, is not held back.  The runaway worker,
# which frees ended entries about once a second, is stopped meanwhile: the
# entry that ended is still in the table when the statement is looked up.
{
	my $id = pg_query_id($node, 'SELECT pg_advisory_xact_lock_shared(90)');
	my $wp = worker_pid($node);
	ok($wp ne '', 'DO block: the runaway worker runs');
	kill('STOP', $wp);
	my $lk = DbgateTest::Session->new($node);
	$lk->query('SELECT pg_advisory_lock(91)');
	my $d = DbgateTest::Session->new($node, user => 'qa_u');
	$d->send(q{DO $$ BEGIN
		PERFORM pg_advisory_xact_lock_shared(91);
		EXECUTE 'SELECT pg_advisory_xact_lock_shared(90)';
	END $$});
	poll_ok($node,
		'SELECT wait_event_type FROM pg_stat_activity WHERE pid = ' . $d->pid,
		'Lock', 'DO block: it began, and waits on the lock');
	$node->safe_psql('postgres', "SELECT dbgate.quarantine_add('qa_b', $id, '1 s')");
	# ended: dbgate.quarantine shows live entries only (its until not yet
	# reached), and the stopped worker leaves the entry in the table.  (Its
	# until, read after the add, was gone already when that read took over
	# 1 s on a busy machine.)
	poll_ok($node, "SELECT count(*) FROM dbgate.quarantine WHERE queryid = $id", '0',
		'DO block: the entry has ended');
	my $q0 = quarantined($node);
	$lk->query('SELECT pg_advisory_unlock(91)');
	($state) = ($d->result)[2];
	kill('CONT', $wp);
	is($state, '', 'DO block: its statement after the end runs');
	is(quarantined($node), $q0, 'DO block: and is not counted in quarantined');
	$d->quit;
	$lk->quit;
}
$node->stop;

# 9. The defaults (nothing set): a table of 1000; query ids only for the
# statements of budgets with runaway_after or quarantine entries, and
# PostgreSQL's own ones; nothing computed with compute_query_id = off.
{
	my $def = dbgate_node('quarantine_default');
	is($def->safe_psql('postgres', 'SHOW dbgate.max_quarantine'), '1000',
		'default: dbgate.max_quarantine is 1000');
	$def->safe_psql(
		'postgres', q{
		CREATE ROLE qd_u LOGIN;
		CREATE ROLE qd_plain LOGIN;
		CREATE ROLE qd_free LOGIN;
		CREATE ROLE qd_entry LOGIN;
		SELECT dbgate.create_budget('qd_b', 10, runaway_after => '1h',
		                            runaway_action => 'cancel', quarantine => '1h');
		SELECT dbgate.create_budget('qd_p', 10);
		SELECT dbgate.create_budget('qd_e', 10, runaway_action => 'cancel');
		SELECT dbgate.assign_role('qd_u', 'qd_b');
		SELECT dbgate.assign_role('qd_plain', 'qd_p');
		SELECT dbgate.assign_role('qd_entry', 'qd_e');
	});
	my $own = 'SELECT query_id IS NOT NULL FROM pg_stat_activity WHERE pid = pg_backend_pid()';
	my $o;
	(undef, $o) = run_sql($def, $own, user => 'qd_u');
	is($o, 't', 'default: a statement of a budget with runaway_after has a query id');
	(undef, $o) = run_sql($def, $own, user => 'qd_plain');
	is($o, 'f', 'default: one of a budget without runaway_after has none');
	(undef, $o) = run_sql($def, $own, user => 'qd_free');
	is($o, 'f', 'default: nor one of a session that is not gated');
	(undef, $o) = run_sql($def, $own, user => 'qd_entry');
	is($o, 'f', 'default: nor one of a budget without runaway_after or entries');
	$def->safe_psql('postgres', q{SELECT dbgate.quarantine_add('qd_e', 12345, '1 h')});
	(undef, $o) = run_sql($def, $own, user => 'qd_entry');
	is($o, 't', 'default: a budget with quarantine entries has them');

	# a statement prepared while its budget needed no ids is parsed again,
	# with one, once the budget has entries ('log': counted, run)
	my $p = DbgateTest::Session->new($def, user => 'qd_plain');
	$p->query('PREPARE qd_q AS SELECT pg_advisory_xact_lock_shared(96)');
	($state) = ($p->query('EXECUTE qd_q'))[2];
	is($state, '', 'prepared: runs');
	my $qid96 = pg_query_id($def, 'SELECT pg_advisory_xact_lock_shared(96)');
	$def->safe_psql('postgres', "SELECT dbgate.quarantine_add('qd_p', $qid96, '1 h')");
	($state) = ($p->query('EXECUTE qd_q'))[2];
	is($state, '', 'prepared: runs (\'log\')');
	is($def->safe_psql('postgres',
			q{SELECT quarantined FROM dbgate.status WHERE budget = 'qd_p'}),
		'1', 'prepared: its query was looked up with its id');
	$p->quit;
	$def->safe_psql('postgres', q{SELECT dbgate.quarantine_remove('qd_p')});

	# a quarantine, on a server with nothing set
	my $lk = DbgateTest::Session->new($def);
	$lk->query('SELECT pg_advisory_lock(93)');
	$def->safe_psql('postgres',
		q{SELECT dbgate.alter_budget('qd_b', runaway_after => '200ms')});
	my $off0 = -s $def->logfile;
	($state) = run_sql($def, 'SELECT pg_advisory_xact_lock_shared(93)', user => 'qd_u');
	is($state, '57014', 'default: the runaway is canceled');
	poll_ok($def, q{SELECT count(*) FROM dbgate.quarantine WHERE budget = 'qd_b'}, '1',
		'default: its query is quarantined');
	$def->safe_psql('postgres',
		q{SELECT dbgate.alter_budget('qd_b', runaway_after => '1h')});
	my $pgid = pg_query_id($def, 'SELECT pg_advisory_xact_lock_shared(94)');
	is($def->safe_psql('postgres',
			q{SELECT queryid FROM dbgate.quarantine WHERE budget = 'qd_b'}),
		$pgid, 'default: under the query id that PostgreSQL computes');
	ok(wait_log($def,
			qr/runaway statement in budget "qd_b": pid \d+, query id \Q$pgid\E,/, $off0),
		'default: the LOG line names it');
	($state) = run_sql($def, 'SELECT pg_advisory_xact_lock_shared(94)', user => 'qd_u');
	is($state, '53000', 'default: the repeat is refused');
	$lk->query('SELECT pg_advisory_unlock_all()');
	$lk->quit;

	# compute_query_id = off: no query ids, nothing held back; a quarantine
	# set meanwhile gets a warning
	$def->safe_psql('postgres', q{ALTER ROLE qd_u SET compute_query_id = off});
	(undef, $o) = run_sql($def, $own, user => 'qd_u');
	is($o, 'f', 'compute_query_id = off: no query id');
	($state) = run_sql($def, 'SELECT pg_advisory_xact_lock_shared(95)', user => 'qd_u');
	is($state, '', 'compute_query_id = off: the repeat runs');
	my $e;
	(undef, undef, $e) = run_sql($def,
		q{SET compute_query_id = off; SELECT dbgate.alter_budget('qd_p', runaway_after => '1h', quarantine => '1h')});
	like($e, qr/WARNING:  01000: quarantine of budget "qd_p" has no effect\n.*DETAIL:  compute_query_id is off/s,
		'compute_query_id = off: alter_budget warns');
	$def->stop;
}

done_testing();
