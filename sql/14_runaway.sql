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
-- What must happen is never left to time: a statement that must run away
-- runs longer than runaway_after (its own timer, armed in the backend,
-- then fires before it can end) or waits in ra_self() until the runaway
-- worker has counted (and moved) it.  Statements that must not run away
-- are the feature's bound: they run far below runaway_after (a trivial
-- statement, or sleeps with at least 150 ms to spare).
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
-- start, and the time idle in the transaction never counts.  Each
-- statement runs 0.4 s of the 1 s; a clock from the transaction's start
-- would have run out before the second (0.4 s and 0.7 s idle), one that
-- added up the statements' times during the third (1.2 s).
SELECT dbgate.alter_budget('ra_b', enforce => true, scope => 'transaction',
                           runaway_after => '1s');
SELECT dbgate.reset_stats('ra_b');
SET SESSION AUTHORIZATION regress_dbgate_ra_u;
BEGIN;
SELECT pg_sleep(0.4) IS NOT NULL AS first;
\! sleep 0.7
SELECT pg_sleep(0.4) IS NOT NULL AS second;
SELECT pg_sleep(0.4) IS NOT NULL AS third;
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

--
-- 'demote': the runaway worker moves the runaway's slot to runaway_budget
-- (counted in the source's runaways and demoted_out and in the target's
-- demoted_in, not in the target's admitted); from then on the statement
-- counts in the target (beyond its limits if it is full) and shows the
-- source in dbgate.backends.demoted_from.  The move of a statement that
-- runs while others wait, the timing and the memory grants are in TAP.
--
-- ra_counts() waits (at most wait_ms) until the budget's column reaches n,
-- and returns the count then; ra_self() is called by the statement that
-- runs away: it waits (at most wait_ms) until the runaway is counted in
-- budget b and, if moved, until the move shows in dbgate.backends, and
-- returns what the statement sees of itself then.
--
CREATE ROLE regress_dbgate_ra_d LOGIN;
SELECT dbgate.create_budget('ra_slow', 1);
SELECT dbgate.create_budget('ra_d', 2, runaway_after => '200ms',
                            runaway_action => 'demote',
                            runaway_budget => 'ra_slow');
SELECT dbgate.assign_role('regress_dbgate_ra_d', 'ra_d');
SELECT budget, runaway_after, runaway_action, runaway_budget
  FROM dbgate.budgets WHERE budget IN ('ra_d', 'ra_slow') ORDER BY budget;

CREATE FUNCTION ra_counts(b text, col text, n int, wait_ms int DEFAULT 10000)
RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    r bigint;
BEGIN
    FOR i IN 1 .. greatest(wait_ms / 10, 1) LOOP
        EXECUTE format('SELECT %I FROM dbgate.status WHERE budget = $1', col)
           INTO r USING b;
        EXIT WHEN r >= n;
        PERFORM pg_sleep(0.01);
    END LOOP;
    RETURN r;
END $$;
CREATE FUNCTION ra_self(b text, n int, moved boolean, wait_ms int DEFAULT 10000)
RETURNS TABLE (budget text, state text, demoted_from text,
               active_source integer, active_target integer)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog AS $$
DECLARE
    r bigint;
    f text;
BEGIN
    FOR i IN 1 .. greatest(wait_ms / 10, 1) LOOP
        SELECT s.runaways INTO r FROM dbgate.status s WHERE s.budget = b;
        SELECT k.demoted_from INTO f FROM dbgate.backends k
         WHERE k.pid = pg_backend_pid();
        EXIT WHEN r >= n AND (NOT moved OR f IS NOT NULL);
        PERFORM pg_sleep(0.01);
    END LOOP;
    RETURN QUERY
      SELECT k.budget, k.state, k.demoted_from,
             (SELECT s.active FROM dbgate.status s WHERE s.budget = b),
             (SELECT s.active FROM dbgate.status s
               WHERE s.budget = (SELECT g.runaway_budget FROM dbgate.budgets g
                                  WHERE g.budget = b))
        FROM dbgate.backends k WHERE k.pid = pg_backend_pid();
END $$;

-- a statement that runs away is moved; it ends normally (it runs until it
-- sees itself moved)
SET SESSION AUTHORIZATION regress_dbgate_ra_d;
SELECT demoted_from IS NOT NULL AS ran FROM ra_self('ra_d', 1, true);
RESET SESSION AUTHORIZATION;
SELECT ra_counts('ra_slow', 'demoted_in', 1) AS demoted_in;
SELECT budget, active, admitted, runaways, demoted_out, demoted_in
  FROM dbgate.status WHERE budget IN ('ra_d', 'ra_slow') ORDER BY budget;

-- what the moved statement sees of itself: its slot in the target, the
-- source in demoted_from, counted in the target's active only
SET SESSION AUTHORIZATION regress_dbgate_ra_d;
SELECT * FROM ra_self('ra_d', 2, true);
-- a statement shorter than runaway_after stays where it was admitted
SELECT * FROM ra_self('ra_d', 0, false);
RESET SESSION AUTHORIZATION;
SELECT ra_counts('ra_slow', 'demoted_in', 2) AS demoted_in;
SELECT budget, active, admitted, runaways, demoted_out, demoted_in
  FROM dbgate.status WHERE budget IN ('ra_d', 'ra_slow') ORDER BY budget;
SELECT count(*) AS backends FROM dbgate.backends
 WHERE budget IN ('ra_d', 'ra_slow');

-- the target's statement_timeout applies to the moved statement
SELECT dbgate.alter_budget('ra_slow', statement_timeout => '500ms');
SELECT dbgate.reset_stats('ra_d');
SELECT dbgate.reset_stats('ra_slow');
SET SESSION AUTHORIZATION regress_dbgate_ra_d;
SELECT pg_sleep(5);
:sqlstate
RESET SESSION AUTHORIZATION;
SELECT ra_counts('ra_slow', 'demoted_in', 1) AS demoted_in;
SELECT budget, active, admitted, runaways, demoted_out, demoted_in
  FROM dbgate.status WHERE budget IN ('ra_d', 'ra_slow') ORDER BY budget;
SELECT dbgate.alter_budget('ra_slow', statement_timeout => '0');

-- shadow mode: 'demote' acts as 'log', still counted; the statement stays
-- in its budget
SELECT dbgate.alter_budget('ra_d', enforce => false);
SELECT dbgate.reset_stats('ra_d');
SELECT dbgate.reset_stats('ra_slow');
SET SESSION AUTHORIZATION regress_dbgate_ra_d;
SELECT pg_sleep(0.5) IS NOT NULL AS ran_in_shadow_mode;
RESET SESSION AUTHORIZATION;
SELECT ra_runaways('ra_d', 1) AS runaways;
SET SESSION AUTHORIZATION regress_dbgate_ra_d;
SELECT * FROM ra_self('ra_d', 2, false);
RESET SESSION AUTHORIZATION;
SELECT budget, active, runaways, demoted_out, demoted_in
  FROM dbgate.status WHERE budget IN ('ra_d', 'ra_slow') ORDER BY budget;

-- clean up
DROP FUNCTION ra_runaways(text, int, int), ra_two_sleeps(),
              ra_counts(text, text, int, int), ra_self(text, int, boolean, int);
SELECT dbgate.drop_budget('ra_b', true);
SELECT dbgate.drop_budget('ra_d', true);
SELECT dbgate.drop_budget('ra_slow');
DROP ROLE regress_dbgate_ra_u, regress_dbgate_ra_d;
