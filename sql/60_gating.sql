--
-- Gating, seen from one session: what takes a slot, that a backend never
-- waits for itself, that every path returns the slot, what is not gated,
-- and the budget's statement_timeout and lock_timeout.
--
-- The budget gate_b1 has max_active = 1 and max_queued = 0: a statement
-- that had to wait for a slot would fail at once with 53300, so any
-- self-wait shows up as an error.  The gated role is a member of
-- pg_monitor, so that it can watch its own slot.
--
-- Runs alone as well as after the other files (pg_regress NAME): the
-- extension is created if it is not there yet.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS dbgate;
RESET client_min_messages;
\set VERBOSITY default
\set SHOW_CONTEXT never
\set sqlstate '\\echo SQLSTATE: :SQLSTATE'
SELECT current_user AS su \gset

CREATE ROLE regress_dbgate_gate_u LOGIN IN ROLE pg_monitor;
CREATE ROLE regress_dbgate_gate_d LOGIN IN ROLE pg_monitor;
SELECT dbgate.create_budget('gate_b1', 1, 0);
SELECT dbgate.create_budget('gate_dflt', 1, 0);
SELECT dbgate.assign_role('regress_dbgate_gate_u', 'gate_b1');

CREATE TABLE gate_secret (i int);
CREATE TABLE gate_t (i int);
INSERT INTO gate_t SELECT generate_series(1, 1000);
ANALYZE gate_t;
GRANT SELECT, INSERT, UPDATE, DELETE ON gate_t TO PUBLIC;

-- the counters of gate_b1; read by the gated session, this SELECT is an
-- admission itself
CREATE VIEW gate_now AS
  SELECT active, admitted, peak_active, queued, admitted_after_wait,
         rejected_full
    FROM dbgate.status WHERE budget = 'gate_b1';
GRANT SELECT ON gate_now TO PUBLIC;

-- a function that runs queries through SPI and reports the slot it sees
CREATE FUNCTION gate_spi() RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    n bigint;
    a int;
BEGIN
    SELECT count(*) INTO n FROM gate_t;
    INSERT INTO gate_t VALUES (-1);
    UPDATE gate_t SET i = -2 WHERE i = -1;
    DELETE FROM gate_t WHERE i = -2;
    SELECT active INTO a FROM gate_now;
    RETURN format('%s rows, active = %s', n, a);
END $$;
-- a SQL function of several statements
CREATE FUNCTION gate_sql() RETURNS int LANGUAGE sql AS $$
    INSERT INTO gate_t VALUES (-3);
    DELETE FROM gate_t WHERE i = -3;
    SELECT active FROM gate_now;
$$;
-- a trigger whose function queries
CREATE FUNCTION gate_trigger() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    a int;
BEGIN
    SELECT active INTO a FROM gate_now;
    RAISE NOTICE 'trigger sees active = %', a;
    RETURN NEW;
END $$;
CREATE TRIGGER gate_t_trigger BEFORE INSERT ON gate_t
    FOR EACH ROW WHEN (NEW.i = -100) EXECUTE FUNCTION gate_trigger();
-- an error caught in an exception block inside an admitted statement
CREATE FUNCTION gate_catch() RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    a int;
BEGIN
    BEGIN
        PERFORM i / 0 FROM gate_t;
    EXCEPTION WHEN division_by_zero THEN
        SELECT active INTO a FROM gate_now;
        RETURN format('caught, active = %s', a);
    END;
    RETURN 'not caught';
END $$;
-- a procedure that commits inside, also inside a loop over a query
CREATE PROCEDURE gate_proc() LANGUAGE plpgsql AS $$
DECLARE
    r record;
    a int;
BEGIN
    INSERT INTO gate_t VALUES (-4);
    COMMIT;
    FOR r IN SELECT i FROM gate_t WHERE i <= 3 ORDER BY i LOOP
        UPDATE gate_t SET i = i WHERE i = r.i;
        COMMIT;
    END LOOP;
    DELETE FROM gate_t WHERE i = -4;
    ROLLBACK;
    DELETE FROM gate_t WHERE i = -4;
    COMMIT;
    SELECT active INTO a FROM gate_now;
    RAISE NOTICE 'procedure done, active = %', a;
END $$;
-- statements of several seconds in total, in one admitted statement
CREATE FUNCTION gate_sleep3() RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_sleep(0.2);
    PERFORM pg_sleep(0.2);
    PERFORM pg_sleep(0.2);
END $$;
SELECT dbgate.reset_stats('gate_b1');

\c - regress_dbgate_gate_u
-- every statement below that reads gate_now counts itself: active = 1 and
-- "admissions" (since the previous reading) includes itself
SELECT active, admitted, peak_active FROM gate_now;

--
-- A plain statement
--
SELECT admitted AS a0 FROM gate_now \gset
SELECT count(*) FROM gate_t;
SELECT admitted - :a0 AS admissions, active, peak_active FROM gate_now;

--
-- Nested executor runs (functions, SPI, triggers) run under the outer slot
--
SELECT admitted AS a0 FROM gate_now \gset
SELECT gate_spi();
SELECT gate_sql();
INSERT INTO gate_t VALUES (-100);
DELETE FROM gate_t WHERE i = -100;
SELECT admitted - :a0 AS admissions, active, peak_active FROM gate_now;

--
-- A DO block: each of its statements is gated on its own until the
-- transaction holds a transaction ID (the INSERT): from then on its slot is
-- kept, so the DELETE and the SELECT run under it
--
SELECT admitted AS a0 FROM gate_now \gset
DO $$
DECLARE
    n bigint;
    a int;
BEGIN
    SELECT count(*) INTO n FROM gate_t;
    INSERT INTO gate_t VALUES (-5);
    DELETE FROM gate_t WHERE i = -5;
    SELECT active INTO a FROM gate_now;
    RAISE NOTICE 'DO block: % rows, active = %', n, a;
END $$;
SELECT admitted - :a0 AS admissions, active, peak_active FROM gate_now;

--
-- Cursors: two open at once share one slot; it is returned when the last
-- one closes
--
SELECT admitted AS a0 FROM gate_now \gset
BEGIN;
DECLARE c1 CURSOR FOR SELECT i FROM gate_t ORDER BY i;
DECLARE c2 CURSOR FOR SELECT i FROM gate_t ORDER BY i DESC;
FETCH 2 FROM c1;
FETCH 2 FROM c2;
SELECT admitted - :a0 AS admissions, active FROM gate_now;
CLOSE c1;
FETCH 1 FROM c2;
SELECT admitted - :a0 AS admissions, active FROM gate_now;
CLOSE c2;
SELECT admitted - :a0 AS admissions, active FROM gate_now;
COMMIT;
-- CLOSE ALL returns the slot as well
SELECT admitted AS a0 FROM gate_now \gset
BEGIN;
DECLARE c1 CURSOR FOR SELECT i FROM gate_t ORDER BY i;
DECLARE c2 CURSOR FOR SELECT i FROM gate_t ORDER BY i DESC;
CLOSE ALL;
SELECT admitted - :a0 AS admissions, active FROM gate_now;
COMMIT;
-- a holdable cursor is read to its end at COMMIT; fetching from it later
-- runs no executor
SELECT admitted AS a0 FROM gate_now \gset
BEGIN;
DECLARE c3 CURSOR WITH HOLD FOR SELECT i FROM gate_t ORDER BY i;
FETCH 1 FROM c3;
COMMIT;
FETCH 2 FROM c3;
CLOSE c3;
SELECT admitted - :a0 AS admissions, active FROM gate_now;

--
-- A procedure that commits, also inside a loop over a query
--
SELECT admitted AS a0 FROM gate_now \gset
CALL gate_proc();
-- INSERT, the loop's query (its first UPDATE runs under the loop's slot;
-- COMMIT returns the slot), three more UPDATEs, two DELETEs, the last SELECT
SELECT admitted - :a0 AS admissions, active FROM gate_now;
SELECT count(*) FROM gate_t WHERE i < 0;

--
-- Errors return the slot
--
-- an error in an admitted statement
SELECT admitted AS a0 FROM gate_now \gset
SELECT i / 0 FROM gate_t;
:sqlstate
SELECT admitted - :a0 AS admissions, active FROM gate_now;
-- an error caught inside an admitted statement: the statement keeps its slot
SELECT admitted AS a0 FROM gate_now \gset
SELECT gate_catch();
SELECT admitted - :a0 AS admissions, active FROM gate_now;
-- an error caught in a DO block: the failed statement's slot is returned,
-- the next statement takes a new one
SELECT admitted AS a0 FROM gate_now \gset
DO $$
DECLARE
    a int;
BEGIN
    BEGIN
        PERFORM i / 0 FROM gate_t;
    EXCEPTION WHEN division_by_zero THEN
        RAISE NOTICE 'caught: %', SQLERRM;
    END;
    SELECT active INTO a FROM gate_now;
    RAISE NOTICE 'after the error, active = %', a;
END $$;
SELECT admitted - :a0 AS admissions, active FROM gate_now;
-- a statement that fails its permission check (in the executor, after
-- admission), caught in a DO block
SELECT admitted AS a0 FROM gate_now \gset
DO $$
DECLARE
    a int;
BEGIN
    BEGIN
        PERFORM * FROM gate_secret;
    EXCEPTION WHEN insufficient_privilege THEN
        RAISE NOTICE 'caught: %', SQLERRM;
    END;
    SELECT active INTO a FROM gate_now;
    RAISE NOTICE 'after the error, active = %', a;
END $$;
SELECT admitted - :a0 AS admissions, active FROM gate_now;
-- an error in a subtransaction
SELECT admitted AS a0 FROM gate_now \gset
BEGIN;
SAVEPOINT s;
SELECT i / 0 FROM gate_t;
:sqlstate
ROLLBACK TO s;
SELECT admitted - :a0 AS admissions, active FROM gate_now;
COMMIT;
-- an error while fetching, in a subtransaction, from a cursor opened
-- before it: the cursor is dead and its slot returned
SELECT admitted AS a0 FROM gate_now \gset
BEGIN;
DECLARE c4 CURSOR FOR SELECT 1 / (i - 500) FROM gate_t ORDER BY i;
SAVEPOINT s;
FETCH ALL FROM c4;
:sqlstate
ROLLBACK TO s;
SELECT admitted - :a0 AS admissions, active FROM gate_now;
COMMIT;
-- a cursor opened in a subtransaction that is rolled back
SELECT admitted AS a0 FROM gate_now \gset
BEGIN;
SAVEPOINT s;
DECLARE c5 CURSOR FOR SELECT i FROM gate_t ORDER BY i;
FETCH 1 FROM c5;
ROLLBACK TO s;
SELECT admitted - :a0 AS admissions, active FROM gate_now;
COMMIT;
-- a cursor that outlives a rolled-back subtransaction keeps its slot, and
-- one whose subtransaction is released as well
SELECT admitted AS a0 FROM gate_now \gset
BEGIN;
DECLARE c6 CURSOR FOR SELECT i FROM gate_t ORDER BY i;
SAVEPOINT s;
FETCH 1 FROM c6;
ROLLBACK TO s;
SAVEPOINT s2;
DECLARE c7 CURSOR FOR SELECT i FROM gate_t ORDER BY i DESC;
RELEASE SAVEPOINT s2;
FETCH 1 FROM c6;
FETCH 1 FROM c7;
SELECT admitted - :a0 AS admissions, active FROM gate_now;
CLOSE c6;
CLOSE c7;
SELECT admitted - :a0 AS admissions, active FROM gate_now;
COMMIT;
-- an error in a transaction block with an open cursor
SELECT admitted AS a0 FROM gate_now \gset
BEGIN;
DECLARE c8 CURSOR FOR SELECT i FROM gate_t;
SELECT i / 0 FROM gate_t;
:sqlstate
ROLLBACK;
SELECT admitted - :a0 AS admissions, active FROM gate_now;

--
-- EXPLAIN without ANALYZE is not gated; EXPLAIN ANALYZE is.  BUFFERS OFF:
-- it is on by default from PostgreSQL 18 on, which also prints row counts
-- with two decimals (expected/60_gating_1.out).
--
SELECT admitted AS a0 FROM gate_now \gset
EXPLAIN (COSTS OFF) SELECT count(*) FROM gate_t;
SELECT admitted - :a0 AS admissions, active FROM gate_now;
SELECT admitted AS a0 FROM gate_now \gset
EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF, BUFFERS OFF) SELECT count(*) FROM gate_t;
SELECT admitted - :a0 AS admissions, active FROM gate_now;

--
-- Utility statements that run a plan are gated, the others are not
--
\c - :"su"
GRANT CREATE ON SCHEMA public TO regress_dbgate_gate_u;
\c - regress_dbgate_gate_u
SELECT admitted AS a0 FROM gate_now \gset
CREATE TEMP TABLE gate_tmp (i int);
COPY gate_tmp FROM STDIN;
1
2
\.
CREATE INDEX ON gate_tmp (i);
VACUUM gate_tmp;
ANALYZE gate_tmp;
PREPARE gate_q AS SELECT count(*) FROM gate_tmp;
SET work_mem = '8MB';
SHOW work_mem;
RESET work_mem;
SELECT admitted - :a0 AS admissions, active FROM gate_now;
SELECT admitted AS a0 FROM gate_now \gset
CREATE TEMP TABLE gate_tmp2 AS SELECT * FROM gate_tmp;
SELECT * INTO TEMP gate_tmp3 FROM gate_tmp;
COPY (SELECT count(*) FROM gate_tmp) TO STDOUT;
EXECUTE gate_q;
MERGE INTO gate_tmp t USING (SELECT 3 AS i) s ON t.i = s.i
  WHEN NOT MATCHED THEN INSERT VALUES (s.i);
WITH d AS (DELETE FROM gate_tmp WHERE i = 3 RETURNING i)
  INSERT INTO gate_tmp SELECT i + 1 FROM d;
CREATE MATERIALIZED VIEW gate_mv AS SELECT count(*) FROM gate_t;
REFRESH MATERIALIZED VIEW gate_mv;
-- eight statements and this one
SELECT admitted - :a0 AS admissions, active FROM gate_now;
DROP MATERIALIZED VIEW gate_mv;
DEALLOCATE gate_q;
\c - :"su"
REVOKE CREATE ON SCHEMA public FROM regress_dbgate_gate_u;
\c - regress_dbgate_gate_u

--
-- A parallel query takes one slot; its workers are not gated
--
SET parallel_setup_cost = 0;
SET parallel_tuple_cost = 0;
SET min_parallel_table_scan_size = 0;
SET max_parallel_workers_per_gather = 2;
SET parallel_leader_participation = off;
EXPLAIN (COSTS OFF) SELECT count(*) FROM gate_t;
SELECT admitted AS a0 FROM gate_now \gset
SELECT count(*), (SELECT active FROM gate_now) AS active_during FROM gate_t;
SELECT admitted - :a0 AS admissions, active, peak_active FROM gate_now;
SELECT admitted AS a0 FROM gate_now \gset
EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF, BUFFERS OFF) SELECT count(*) FROM gate_t;
SELECT admitted - :a0 AS admissions, active, peak_active FROM gate_now;
RESET parallel_setup_cost;
RESET parallel_tuple_cost;
RESET min_parallel_table_scan_size;
RESET max_parallel_workers_per_gather;
RESET parallel_leader_participation;

-- nobody ever waited or was turned away
SELECT queued, admitted_after_wait, rejected_full, peak_active FROM gate_now;
SELECT pid = pg_backend_pid() AS me, role, budget, state, queue_position
  FROM dbgate.backends;

\c - :"su"
-- the gated session is gone, and so is its slot
SELECT active, queued, peak_active, admitted_after_wait, rejected_full FROM gate_now;
SELECT * FROM dbgate.backends;

--
-- Superusers are never gated, not even when assigned to a budget or when
-- dbgate.default_budget names one
--
SET client_min_messages = warning;
SELECT dbgate.assign_role(current_user::regrole, 'gate_b1');
RESET client_min_messages;
SET dbgate.default_budget = 'gate_b1';
SELECT admitted AS a0 FROM gate_now \gset
SELECT count(*) FROM gate_t;
BEGIN;
DECLARE s1 CURSOR FOR SELECT i FROM gate_t ORDER BY i;
DECLARE s2 CURSOR FOR SELECT i FROM gate_t ORDER BY i DESC;
FETCH 1 FROM s1;
FETCH 1 FROM s2;
SELECT count(*) AS my_rows FROM dbgate.backends WHERE pid = pg_backend_pid();
COMMIT;
EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF, BUFFERS OFF) SELECT count(*) FROM gate_t;
SELECT admitted - :a0 AS admissions, active FROM gate_now;
SELECT dbgate.unassign_role(current_user::regrole);
RESET dbgate.default_budget;
-- a role that becomes a superuser is not gated from its next statement on,
-- and is gated again when it stops being one
SET SESSION AUTHORIZATION regress_dbgate_gate_u;
SELECT budget FROM dbgate.backends WHERE pid = pg_backend_pid();
RESET SESSION AUTHORIZATION;
ALTER ROLE regress_dbgate_gate_u SUPERUSER;
SET SESSION AUTHORIZATION regress_dbgate_gate_u;
SELECT budget FROM dbgate.backends WHERE pid = pg_backend_pid();
RESET SESSION AUTHORIZATION;
ALTER ROLE regress_dbgate_gate_u NOSUPERUSER;
SET SESSION AUTHORIZATION regress_dbgate_gate_u;
SELECT budget FROM dbgate.backends WHERE pid = pg_backend_pid();
RESET SESSION AUTHORIZATION;

--
-- dbgate.default_budget gates roles without an assignment (a change of the
-- setting counts from the next statement)
--
SET SESSION AUTHORIZATION regress_dbgate_gate_d;
SELECT budget FROM dbgate.backends WHERE pid = pg_backend_pid();
RESET SESSION AUTHORIZATION;
SET dbgate.default_budget = 'gate_dflt';
SET SESSION AUTHORIZATION regress_dbgate_gate_d;
SELECT role, budget, state FROM dbgate.backends WHERE pid = pg_backend_pid();
SELECT count(*) FROM gate_t;
RESET SESSION AUTHORIZATION;
-- an assignment comes first
SET SESSION AUTHORIZATION regress_dbgate_gate_u;
SELECT role, budget, state FROM dbgate.backends WHERE pid = pg_backend_pid();
RESET SESSION AUTHORIZATION;
-- a default budget that does not exist gates nobody
SET dbgate.default_budget = 'gate_nonexistent';
SET SESSION AUTHORIZATION regress_dbgate_gate_d;
SELECT budget FROM dbgate.backends WHERE pid = pg_backend_pid();
RESET SESSION AUTHORIZATION;
-- ... until it is created
SELECT dbgate.create_budget('gate_nonexistent', 1);
SET SESSION AUTHORIZATION regress_dbgate_gate_d;
SELECT budget FROM dbgate.backends WHERE pid = pg_backend_pid();
RESET SESSION AUTHORIZATION;
SELECT dbgate.drop_budget('gate_nonexistent');
SET SESSION AUTHORIZATION regress_dbgate_gate_d;
SELECT budget FROM dbgate.backends WHERE pid = pg_backend_pid();
RESET SESSION AUTHORIZATION;
RESET dbgate.default_budget;
SELECT budget, active, admitted, peak_active FROM dbgate.status
 WHERE budget = 'gate_dflt';

--
-- Configuration changes reach a running session at its next statement;
-- here the gated role changes its own assignment (given EXECUTE)
--
GRANT EXECUTE ON FUNCTION dbgate.assign_role(regrole, text),
    dbgate.unassign_role(regrole) TO regress_dbgate_gate_u;
\c - regress_dbgate_gate_u
SELECT budget FROM dbgate.backends WHERE pid = pg_backend_pid();
SELECT dbgate.assign_role('regress_dbgate_gate_u', 'gate_dflt');
SELECT budget FROM dbgate.backends WHERE pid = pg_backend_pid();
-- not before COMMIT
BEGIN;
SELECT dbgate.unassign_role('regress_dbgate_gate_u');
SELECT budget FROM dbgate.backends WHERE pid = pg_backend_pid();
COMMIT;
SELECT budget FROM dbgate.backends WHERE pid = pg_backend_pid();
SELECT dbgate.assign_role('regress_dbgate_gate_u', 'gate_b1');
SELECT budget FROM dbgate.backends WHERE pid = pg_backend_pid();
\c - :"su"
REVOKE EXECUTE ON FUNCTION dbgate.assign_role(regrole, text),
    dbgate.unassign_role(regrole) FROM regress_dbgate_gate_u;
SELECT budget, roles FROM dbgate.budgets;

--
-- The budget's statement_timeout: PostgreSQL's own error, counted from
-- admission, for each admitted statement; afterwards the session's own
-- setting is in force again
--
SELECT dbgate.alter_budget('gate_b1', statement_timeout => '500 ms');
\c - regress_dbgate_gate_u
SET statement_timeout = '5min';
SELECT pg_sleep(3);
:sqlstate
SHOW statement_timeout;
-- each statement of a transaction and of a DO block has its own deadline
BEGIN;
SELECT pg_sleep(0.2);
SELECT pg_sleep(0.2);
SELECT pg_sleep(0.2);
COMMIT;
DO $$
BEGIN
    PERFORM pg_sleep(0.2);
    PERFORM pg_sleep(0.2);
    PERFORM pg_sleep(0.2);
END $$;
-- ... while a function's statements share that of the statement calling it
SELECT gate_sleep3();
:sqlstate
-- caught in a DO block, the statement after it runs under its own deadline
DO $$
BEGIN
    BEGIN
        PERFORM pg_sleep(3);
    EXCEPTION WHEN query_canceled THEN
        RAISE NOTICE 'caught: %', SQLERRM;
    END;
    PERFORM pg_sleep(0.2);
    RAISE NOTICE 'the next statement completed';
END $$;
-- nothing of the budget's timeout stays armed between statements: a DO
-- block (not gated) that sleeps without running a query is not canceled
DO $$
DECLARE
    v text;
BEGIN
    v := pg_sleep(0.7);
    RAISE NOTICE 'slept';
END $$;
SHOW statement_timeout;
-- the smaller of the session's and the budget's timeouts wins: here the
-- session's
SET statement_timeout = '100ms';
SELECT pg_sleep(3);
:sqlstate
SHOW statement_timeout;
RESET statement_timeout;
\c - :"su"
SELECT dbgate.alter_budget('gate_b1', statement_timeout => '1 min');
\c - regress_dbgate_gate_u
SET statement_timeout = '100ms';
SELECT pg_sleep(3);
:sqlstate
SHOW statement_timeout;
-- with only the budget's (long) timeout, nothing is canceled
RESET statement_timeout;
SELECT pg_sleep(0.3);

--
-- The budget's lock_timeout applies inside the admitted statement only
--
\c - :"su"
SELECT dbgate.alter_budget('gate_b1', statement_timeout => '0', lock_timeout => '3 s');
\c - regress_dbgate_gate_u
SHOW lock_timeout;
SELECT current_setting('lock_timeout') AS inside;
SHOW lock_timeout;
SET lock_timeout = '1s';
SELECT current_setting('lock_timeout') AS inside;
SHOW lock_timeout;
SET lock_timeout = '10s';
SELECT current_setting('lock_timeout') AS inside;
SHOW lock_timeout;
-- nested statements see it as well, and a DO block (not gated) does not
SELECT gate_sql() IS NOT NULL AS ran, current_setting('lock_timeout') AS inside;
DO $$ BEGIN RAISE NOTICE 'DO block: %', current_setting('lock_timeout'); END $$;
-- after an error caught inside the statement it still applies; after an
-- error caught outside it (in a DO block) the session's value is back
CREATE FUNCTION pg_temp.gate_catch_lt() RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    PERFORM i / 0 FROM gate_t;
    RETURN 'not caught';
EXCEPTION WHEN division_by_zero THEN
    RETURN current_setting('lock_timeout');
END $$;
SELECT pg_temp.gate_catch_lt() AS in_handler, current_setting('lock_timeout') AS same_statement;
DO $$
BEGIN
    BEGIN
        PERFORM i / 0 FROM gate_t;
    EXCEPTION WHEN division_by_zero THEN
        RAISE NOTICE 'in the handler: %', current_setting('lock_timeout');
    END;
    RAISE NOTICE 'after the block: %', current_setting('lock_timeout');
END $$;
SHOW lock_timeout;
-- a SET executed inside the statement is the session's own and stays
SELECT set_config('lock_timeout', '7s', false);
SHOW lock_timeout;
RESET lock_timeout;
SHOW lock_timeout;

-- its temporary function goes with it here, not at some moment after the
-- session has ended (DROP ROLE below must not find it)
DROP FUNCTION pg_temp.gate_catch_lt();
\c - :"su"
SELECT active, queued FROM gate_now;
DROP PROCEDURE gate_proc();
DROP FUNCTION gate_spi(), gate_sql(), gate_catch(), gate_sleep3();
DROP TABLE gate_t, gate_secret;
DROP FUNCTION gate_trigger();
DROP VIEW gate_now;
DROP ROLE regress_dbgate_gate_u, regress_dbgate_gate_d;
SELECT dbgate.drop_budget('gate_b1');
SELECT dbgate.drop_budget('gate_dflt');
SELECT * FROM dbgate.budgets;
