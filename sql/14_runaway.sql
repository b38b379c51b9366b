--
-- Runaway statements (1.3): what a budget's runaway_after does to a
-- statement that runs longer, seen from one session.  The timing (within
-- 100 ms), parallel workers, the LOG line, the worker after a crash and a
-- standby are in test/t/053_runaway.pl.
--
-- The runaway worker counts a runaway a moment after it happened:
-- ra_runaways() waits (at most wait_ms) until the budget's runaways
-- reach n, and returns the count then.
--
-- Runs alone as well as after the other files (pg_regress NAME): the
-- extension is created if it is not there yet.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS dbgate;
RESET client_min_messages;
\set VERBOSITY default
\set SHOW_CONTEXT never
\set sqlstate '\\echo SQLSTATE: :SQLSTATE'

CREATE ROLE regress_dbgate_ra_u LOGIN;
SELECT dbgate.create_budget('ra_b', 2, runaway_after => '200ms',
                            runaway_action => 'cancel');
SELECT dbgate.assign_role('regress_dbgate_ra_u', 'ra_b');
SELECT budget, runaway_after, runaway_action FROM dbgate.budgets
 WHERE budget = 'ra_b';

CREATE FUNCTION ra_runaways(b text, n int, wait_ms int DEFAULT 10000)
RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    r bigint;
BEGIN
    FOR i IN 1 .. greatest(wait_ms / 10, 1) LOOP
        SELECT runaways INTO r FROM dbgate.status WHERE budget = b;
        EXIT WHEN r >= n;
        PERFORM pg_sleep(0.01);
    END LOOP;
    RETURN r;
END $$;

-- 'cancel': 57014 naming the budget and its runaway_after
SET SESSION AUTHORIZATION regress_dbgate_ra_u;
SELECT pg_sleep(2);
:sqlstate
-- a statement shorter than runaway_after is not touched
SELECT pg_sleep(0.05) IS NOT NULL AS ran;
-- the cancel also reaches a statement inside a transaction block, which
-- can go on after a rollback to a savepoint
BEGIN;
SAVEPOINT s;
SELECT count(*) FROM pg_class, pg_sleep(2);
:sqlstate
ROLLBACK TO s;
SELECT 'goes on' AS after_rollback_to;
COMMIT;
RESET SESSION AUTHORIZATION;
SELECT ra_runaways('ra_b', 2) AS runaways;

-- PL/pgSQL catching the cancel outside the statement sees the budget's
-- message
SET SESSION AUTHORIZATION regress_dbgate_ra_u;
DO $$
BEGIN
    PERFORM pg_sleep(2);
EXCEPTION WHEN query_canceled THEN
    RAISE NOTICE 'caught: %', SQLERRM;
END $$;
RESET SESSION AUTHORIZATION;
SELECT ra_runaways('ra_b', 3) AS runaways;

-- other spellings of runaway_after in the message
SELECT dbgate.alter_budget('ra_b', runaway_after => '1.25s');
SET SESSION AUTHORIZATION regress_dbgate_ra_u;
SELECT pg_sleep(3);
RESET SESSION AUTHORIZATION;
SELECT ra_runaways('ra_b', 4) AS runaways;

-- 'log': the statement goes on, counted once (not once per run: a
-- function whose queries run under the statement's slot, and a cursor
-- whose FETCH runs the same statement again is counted per FETCH, each
-- from its own start)
SELECT dbgate.alter_budget('ra_b', runaway_after => '100ms',
                           runaway_action => 'log');
SELECT dbgate.reset_stats('ra_b');
CREATE FUNCTION ra_two_sleeps() RETURNS int LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_sleep(0.15);
    PERFORM pg_sleep(0.15);
    RETURN 2;
END $$;
SET SESSION AUTHORIZATION regress_dbgate_ra_u;
SELECT ra_two_sleeps() AS sleeps;
RESET SESSION AUTHORIZATION;
SELECT ra_runaways('ra_b', 1) AS runaways;
SELECT ra_runaways('ra_b', 2, 300) AS runaways_no_more;
SET SESSION AUTHORIZATION regress_dbgate_ra_u;
BEGIN;
DECLARE c CURSOR FOR SELECT pg_sleep(0.15) FROM generate_series(1, 3);
FETCH 1 FROM c;
FETCH 2 FROM c;
COMMIT;
RESET SESSION AUTHORIZATION;
SELECT ra_runaways('ra_b', 3) AS runaways;
SELECT ra_runaways('ra_b', 4, 300) AS runaways_no_more;

-- shadow mode: 'cancel' acts as 'log', still counted
SELECT dbgate.alter_budget('ra_b', runaway_action => 'cancel', enforce => false);
SELECT dbgate.reset_stats('ra_b');
SET SESSION AUTHORIZATION regress_dbgate_ra_u;
SELECT pg_sleep(0.3) IS NOT NULL AS ran_in_shadow_mode;
RESET SESSION AUTHORIZATION;
SELECT ra_runaways('ra_b', 1) AS runaways;

-- a slot kept by scope 'transaction': each statement counts from its own
-- start, and the time idle in the transaction never counts
SELECT dbgate.alter_budget('ra_b', enforce => true, scope => 'transaction',
                           runaway_after => '300ms');
SELECT dbgate.reset_stats('ra_b');
SET SESSION AUTHORIZATION regress_dbgate_ra_u;
BEGIN;
SELECT pg_sleep(0.2) IS NOT NULL AS first;
\! sleep 0.4
SELECT pg_sleep(0.2) IS NOT NULL AS second;
SELECT pg_sleep(0.2) IS NOT NULL AS third;
COMMIT;
-- ... while one statement that runs longer is canceled
BEGIN;
SELECT 1 AS one;
SELECT pg_sleep(2);
:sqlstate
ROLLBACK;
RESET SESSION AUTHORIZATION;
SELECT ra_runaways('ra_b', 1) AS runaways;
SELECT ra_runaways('ra_b', 2, 300) AS runaways_no_more;

-- a budget without runaway_after counts none
SELECT dbgate.alter_budget('ra_b', runaway_after => '0', runaway_action => 'log',
                           scope => 'statement');
SELECT dbgate.reset_stats('ra_b');
SET SESSION AUTHORIZATION regress_dbgate_ra_u;
SELECT pg_sleep(0.3) IS NOT NULL AS ran;
RESET SESSION AUTHORIZATION;
SELECT ra_runaways('ra_b', 1, 300) AS runaways;

-- clean up
DROP FUNCTION ra_runaways(text, int, int), ra_two_sleeps();
SELECT dbgate.drop_budget('ra_b', true);
DROP ROLE regress_dbgate_ra_u;
