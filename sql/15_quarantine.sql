--
-- The quarantine (1.3): the query of a runaway is held back in its budget
-- for the budget's quarantine; quarantine_add and quarantine_remove; the
-- view dbgate.quarantine.  Needs dbgate.max_quarantine > 0 (test/dbgate.conf
-- sets 100).  A clean restart, a crash restart and a standby are in
-- test/t/053_runaway.pl.
--
-- Runs alone as well as after the other files (pg_regress NAME): the
-- extension is created if it is not there yet.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS dbgate;
RESET client_min_messages;
\set VERBOSITY default
\set SHOW_CONTEXT never
\set sqlstate '\\echo SQLSTATE: :SQLSTATE'
SHOW dbgate.max_quarantine;

CREATE ROLE regress_dbgate_qa_u LOGIN;
-- (USAGE: so that the privilege checks below are the functions')
GRANT USAGE ON SCHEMA dbgate TO regress_dbgate_qa_u;
SELECT dbgate.create_budget('qa_b', 2, runaway_after => '200ms',
                            runaway_action => 'log', quarantine => '1h');
SELECT dbgate.assign_role('regress_dbgate_qa_u', 'qa_b');

-- the runaway worker notes a runaway a moment after it happened:
-- qa_entries() waits (at most 10 s) until the budget has n entries
CREATE FUNCTION qa_entries(b text, n int) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    r bigint;
BEGIN
    FOR i IN 1 .. 1000 LOOP
        SELECT count(*) INTO r FROM dbgate.quarantine WHERE budget = b;
        EXIT WHEN r >= n;
        PERFORM pg_sleep(0.01);
    END LOOP;
    RETURN r;
END $$;

-- Runs its argument as the gated role and says how it ended: 'ok', or the
-- SQLSTATE and the message with the query id and the time taken out.
CREATE FUNCTION qa_run(q text) RETURNS text
LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE q;
    RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
    RETURN SQLSTATE || ': ' ||
           regexp_replace(regexp_replace(SQLERRM, 'query -?[0-9]+', 'query Q'),
                          'until .*$', 'until T');
END $$;
GRANT EXECUTE ON FUNCTION qa_run(text) TO regress_dbgate_qa_u;

-- 'log': the runaway goes on; its query is quarantined, with its text
SET SESSION AUTHORIZATION regress_dbgate_qa_u;
SELECT pg_sleep(0.8) IS NOT NULL AS ran;
RESET SESSION AUTHORIZATION;
SELECT qa_entries('qa_b', 1) AS entries;
SELECT database = current_database() AS this_db, budget, queryid <> 0 AS has_id,
       query, until > now() + interval '59 min' AS for_an_hour,
       runaways, hits, last_hit
  FROM dbgate.quarantine;
SELECT queryid AS qid FROM dbgate.quarantine WHERE budget = 'qa_b' \gset
-- from here on no statement may run away (the short ones below must not
-- be counted, nor canceled under 'cancel', however slowly they run); a
-- change of runaway_after ends no entries
SELECT dbgate.alter_budget('qa_b', runaway_after => '1h');
SELECT count(*) AS entries_kept FROM dbgate.quarantine WHERE budget = 'qa_b';

-- repeats of the query (other constants, same query id) are counted and,
-- with 'log', run as usual
SET SESSION AUTHORIZATION regress_dbgate_qa_u;
SELECT pg_sleep(0.01) IS NOT NULL AS repeat;
SELECT pg_sleep(0.02) IS NOT NULL AS repeat;
-- another query is not
SELECT 1 AS other;
-- nor the same query under a slot already held (a function's statements)
SELECT qa_run('SELECT pg_sleep(0.01) IS NOT NULL') AS under_a_held_slot;
RESET SESSION AUTHORIZATION;
SELECT quarantined FROM dbgate.status WHERE budget = 'qa_b';
SELECT hits, last_hit IS NOT NULL AS hit FROM dbgate.quarantine;

-- 'cancel': repeats are refused with 53000 before they take a slot
SELECT dbgate.alter_budget('qa_b', runaway_action => 'cancel');
SELECT count(*) AS entries_kept FROM dbgate.quarantine;
SET SESSION AUTHORIZATION regress_dbgate_qa_u;
\set VERBOSITY sqlstate
SELECT pg_sleep(0.01) IS NOT NULL AS refused;
\set VERBOSITY default
SELECT 1 AS other;
RESET SESSION AUTHORIZATION;
SELECT quarantined, admitted FROM dbgate.status WHERE budget = 'qa_b';
-- the message (a DO block is not gated: its statement is), and that the
-- refusal held no slot
SET SESSION AUTHORIZATION regress_dbgate_qa_u;
DO $$ BEGIN RAISE NOTICE '%', qa_run('SELECT pg_sleep(0.01) IS NOT NULL'); END $$;
RESET SESSION AUTHORIZATION;
SELECT active, queued FROM dbgate.status WHERE budget = 'qa_b';

-- with compute_query_id = off, statements have query id 0: not held back
SET compute_query_id = off;
SET SESSION AUTHORIZATION regress_dbgate_qa_u;
SELECT pg_sleep(0.01) IS NOT NULL AS no_query_id;
RESET SESSION AUTHORIZATION;
-- a quarantine set meanwhile cannot take effect: a WARNING says so
SELECT dbgate.alter_budget('qa_b', quarantine => '2h');
RESET compute_query_id;
SELECT dbgate.alter_budget('qa_b', quarantine => '1h');

-- shadow mode: counted, never refused
SELECT dbgate.alter_budget('qa_b', enforce => false);
SELECT dbgate.reset_stats('qa_b');
SET SESSION AUTHORIZATION regress_dbgate_qa_u;
SELECT pg_sleep(0.01) IS NOT NULL AS shadow;
RESET SESSION AUTHORIZATION;
SELECT quarantined FROM dbgate.status WHERE budget = 'qa_b';
SELECT dbgate.alter_budget('qa_b', enforce => true);

-- quarantine_remove ends entries at once (not transactional)
BEGIN;
SELECT dbgate.quarantine_remove('qa_b', :qid);
ROLLBACK;
SELECT count(*) AS entries FROM dbgate.quarantine;
SET SESSION AUTHORIZATION regress_dbgate_qa_u;
SELECT pg_sleep(0.01) IS NOT NULL AS after_remove;
RESET SESSION AUTHORIZATION;

-- quarantine_add: without text, on a budget without quarantine, in a
-- read-only transaction; a second add sets the end anew
SELECT dbgate.create_budget('qa_c', 1);
BEGIN READ ONLY;
SELECT dbgate.quarantine_add('qa_c', 42, '10 min');
COMMIT;
SELECT dbgate.quarantine_add('qa_b', :qid, '1 min');
SELECT budget, queryid = :qid AS qid, query, until < now() + interval '2 min' AS soon,
       runaways, hits
  FROM dbgate.quarantine WHERE budget = 'qa_b';
SELECT dbgate.quarantine_add('qa_b', :qid, '2 days');
SELECT until > now() + interval '1 day' AS later FROM dbgate.quarantine
 WHERE budget = 'qa_b';
SELECT budget, queryid, query FROM dbgate.quarantine WHERE budget = 'qa_c';
SET SESSION AUTHORIZATION regress_dbgate_qa_u;
DO $$ BEGIN RAISE NOTICE 'added: %', qa_run('SELECT pg_sleep(0.01) IS NOT NULL'); END $$;
RESET SESSION AUTHORIZATION;
SELECT dbgate.quarantine_remove(NULL, 42) AS ended_42;
SELECT dbgate.quarantine_remove() AS ended_all;
SELECT count(*) AS entries FROM dbgate.quarantine;

-- a full table: a new entry takes the place of the one that ends first
SELECT count(*) AS added FROM (
  SELECT dbgate.quarantine_add('qa_c', i, i * interval '1 min')
    FROM generate_series(1, 100) i) s;
SELECT dbgate.quarantine_add('qa_c', 1000, '1 h');
SELECT count(*), min(queryid), max(queryid) FROM dbgate.quarantine;
SELECT dbgate.quarantine_remove('qa_c') AS ended;

-- errors, each changing nothing
SELECT dbgate.quarantine_add('qa_c', 7, '1 min');
SELECT dbgate.quarantine_add(NULL, 7, '1 min');
:sqlstate
SELECT dbgate.quarantine_add('qa_c', NULL, '1 min');
:sqlstate
SELECT dbgate.quarantine_add('qa_c', 7, NULL);
:sqlstate
SELECT dbgate.quarantine_add('qa_c', 0, '1 min');
:sqlstate
SELECT dbgate.quarantine_add('qa_c', 7, '0');
:sqlstate
SELECT dbgate.quarantine_add('qa_c', 7, '-1 s');
:sqlstate
SELECT dbgate.quarantine_add('qa_none', 7, '1 min');
:sqlstate
SELECT dbgate.quarantine_remove('qa_none');
:sqlstate
SELECT dbgate.quarantine_add('', 7, '1 min');
:sqlstate
-- a budget with children gates nothing of its own
SELECT dbgate.create_budget('qa_child', 1, parent => 'qa_c');
SELECT dbgate.quarantine_add('qa_c', 8, '1 min');
:sqlstate
SELECT dbgate.drop_budget('qa_child');
-- a budget not committed yet
BEGIN;
SELECT dbgate.create_budget('qa_new', 1);
SELECT dbgate.quarantine_add('qa_new', 7, '1 min');
:sqlstate
ROLLBACK;
SELECT budget, queryid FROM dbgate.quarantine;
-- no privilege
SET SESSION AUTHORIZATION regress_dbgate_qa_u;
SELECT dbgate.quarantine_add('qa_c', 9, '1 min');
:sqlstate
SELECT dbgate.quarantine_remove();
:sqlstate
RESET SESSION AUTHORIZATION;

-- dropping the budget ends its entries at the commit, also when the name
-- is created again
SELECT dbgate.quarantine_add('qa_c', 10, '1 h');
BEGIN;
SELECT dbgate.drop_budget('qa_c');
SELECT count(*) AS before_commit FROM dbgate.quarantine WHERE budget = 'qa_c';
COMMIT;
SELECT dbgate.create_budget('qa_c', 1);
SELECT count(*) AS after_commit FROM dbgate.quarantine WHERE budget = 'qa_c';

-- clean up
SELECT dbgate.quarantine_remove() >= 0 AS removed;
DROP FUNCTION qa_entries(text, int), qa_run(text);
SELECT dbgate.drop_budget('qa_c');
SELECT dbgate.drop_budget('qa_b', true);
REVOKE USAGE ON SCHEMA dbgate FROM regress_dbgate_qa_u;
DROP ROLE regress_dbgate_qa_u;
