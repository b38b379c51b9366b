--
-- min_cost: a read-only statement whose planned total cost is below the
-- budget's min_cost is not gated (no slot, no queue) and is counted in
-- dbgate.status.bypassed.  Writes, row locks, data-modifying CTEs and the
-- queries of CREATE TABLE AS / SELECT INTO / materialized views always
-- are gated, and so is every statement that starts while the backend
-- holds a slot.
--
-- (quietly: the output is the same alone and after the other files)
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS dbgate;
RESET client_min_messages;
\set VERBOSITY terse

CREATE ROLE regress_mc_u LOGIN;
CREATE SCHEMA mc AUTHORIZATION regress_mc_u;
CREATE TABLE mc.small AS SELECT g AS a FROM generate_series(1, 10) g;
CREATE TABLE mc.big AS SELECT g AS a FROM generate_series(1, 20000) g;
ANALYZE mc.small, mc.big;
ALTER TABLE mc.small OWNER TO regress_mc_u;
ALTER TABLE mc.big OWNER TO regress_mc_u;
SELECT dbgate.create_budget('mc_b', 2, min_cost => 100);
SELECT dbgate.assign_role('regress_mc_u', 'mc_b');

-- what the budget counted since the last look
CREATE FUNCTION mc_counts(OUT bypassed bigint, OUT admitted bigint)
  LANGUAGE plpgsql AS $$
BEGIN
    SELECT s.bypassed, s.admitted INTO bypassed, admitted
      FROM dbgate.status s WHERE s.budget = 'mc_b';
    PERFORM dbgate.reset_stats('mc_b');
END $$;
-- a cheap read that runs a costly one (stable: a volatile one is gated
-- itself)
CREATE FUNCTION mc.inner_big() RETURNS bigint STABLE LANGUAGE sql
  AS $$ SELECT count(*) FROM mc.big $$;

-- the cost the rule compares: the top plan node's total cost
CREATE FUNCTION mc_cost(q text) RETURNS float8 LANGUAGE plpgsql AS $$
DECLARE
    plan json;
BEGIN
    EXECUTE 'EXPLAIN (FORMAT JSON) ' || q INTO plan;
    RETURN (plan -> 0 -> 'Plan' ->> 'Total Cost')::float8;
END $$;
-- a scan of 10 rows is below 100, one of 20000 rows is not
SELECT mc_cost('SELECT * FROM mc.small') AS small,
       mc_cost('SELECT * FROM mc.big') > 100 AS big_over_100;

SELECT * FROM mc_counts();
SET SESSION AUTHORIZATION regress_mc_u;
-- cheap reads pass: counted in bypassed, not admitted
SELECT count(*) FROM mc.small;
SELECT a FROM mc.small WHERE a = 3;
-- a costly read is gated
SELECT count(*) FROM mc.big;
RESET SESSION AUTHORIZATION;
SELECT * FROM mc_counts();

-- never for writes, row locks, data-modifying CTEs
SET SESSION AUTHORIZATION regress_mc_u;
INSERT INTO mc.small VALUES (11);
UPDATE mc.small SET a = 11 WHERE a = 11;
DELETE FROM mc.small WHERE a = 11;
SELECT a FROM mc.small WHERE a = 1 FOR UPDATE;
SELECT a FROM mc.small WHERE a = 1 FOR KEY SHARE;
WITH w AS (INSERT INTO mc.small VALUES (12) RETURNING a) SELECT a FROM w;
DELETE FROM mc.small WHERE a = 12;
RESET SESSION AUTHORIZATION;
SELECT * FROM mc_counts();

-- never for the query of a command that writes a table: CREATE TABLE AS,
-- SELECT INTO, CREATE TABLE AS EXECUTE, EXPLAIN ANALYZE CREATE TABLE AS,
-- CREATE and REFRESH MATERIALIZED VIEW
SET SESSION AUTHORIZATION regress_mc_u;
CREATE TABLE mc.c1 AS SELECT * FROM mc.small;
SELECT * INTO mc.c2 FROM mc.small;
PREPARE mc_p AS SELECT * FROM mc.small;
CREATE TABLE mc.c3 AS EXECUTE mc_p;
DO $$ BEGIN
    EXECUTE 'EXPLAIN ANALYZE CREATE TABLE mc.c4 AS SELECT * FROM mc.small';
END $$;
CREATE MATERIALIZED VIEW mc.mv AS SELECT * FROM mc.small;
REFRESH MATERIALIZED VIEW mc.mv;
RESET SESSION AUTHORIZATION;
SELECT * FROM mc_counts();
-- while a prepared cheap read passes, executed or explained with ANALYZE,
-- and a cursor over one too
SET SESSION AUTHORIZATION regress_mc_u;
EXECUTE mc_p;
DO $$ BEGIN
    EXECUTE 'EXPLAIN ANALYZE SELECT * FROM mc.small';
END $$;
BEGIN;
DECLARE mc_c CURSOR FOR SELECT * FROM mc.small;
FETCH 2 FROM mc_c;
COMMIT;
RESET SESSION AUTHORIZATION;
SELECT * FROM mc_counts();

-- a transaction that holds a slot (scope 'transaction') runs every
-- statement under it: only its first statement can pass
SELECT dbgate.alter_budget('mc_b', scope => 'transaction');
SET SESSION AUTHORIZATION regress_mc_u;
BEGIN;
SELECT count(*) FROM mc.small;
SELECT count(*) FROM mc.big;
SELECT count(*) FROM mc.small;
COMMIT;
RESET SESSION AUTHORIZATION;
SELECT * FROM mc_counts();
SELECT dbgate.alter_budget('mc_b', scope => 'statement');

-- a query run by a bypassed statement is gated on its own
SET SESSION AUTHORIZATION regress_mc_u;
SELECT mc.inner_big();
RESET SESSION AUTHORIZATION;
SELECT * FROM mc_counts();

-- (1.3) a plan that calls a function that may write is gated whatever
-- its cost: a volatile function (nextval, lo_from_bytea, random, a
-- PL/pgSQL function without a volatility, which is VOLATILE) wherever the
-- plan calls it, txid_current() and pg_current_xact_id() (stable, but they
-- assign a transaction ID), a user aggregate whose transition function is
-- volatile
CREATE SEQUENCE mc.s;
GRANT USAGE, SELECT ON SEQUENCE mc.s TO regress_mc_u;
CREATE FUNCTION mc.vol() RETURNS int LANGUAGE plpgsql
  AS $$ BEGIN RETURN 1; END $$;
CREATE FUNCTION mc.stab() RETURNS int STABLE LANGUAGE plpgsql
  AS $$ BEGIN RETURN 1; END $$;
-- (PL/pgSQL steps: a SQL one would run a nested query per row)
CREATE FUNCTION mc.vstep(int, int) RETURNS int LANGUAGE plpgsql
  AS $$ BEGIN RETURN coalesce($1, 0) + $2; END $$;
CREATE FUNCTION mc.istep(int, int) RETURNS int IMMUTABLE LANGUAGE plpgsql
  AS $$ BEGIN RETURN coalesce($1, 0) + $2; END $$;
CREATE AGGREGATE mc.vsum(int) (sfunc = mc.vstep, stype = int);
CREATE AGGREGATE mc.isum(int) (sfunc = mc.istep, stype = int);
-- mislabelled: nextval's C function declared stable; trusted
CREATE FUNCTION mc.liar(regclass) RETURNS bigint STABLE STRICT
  LANGUAGE internal AS 'nextval_oid';
-- runs its queries as nested runs: each is gated (or bypassed) on its own
CREATE FUNCTION mc.loop(vol bool) RETURNS bigint STABLE LANGUAGE plpgsql AS $$
DECLARE
    n bigint := 0;
BEGIN
    FOR i IN 1 .. 3 LOOP
        IF vol THEN
            PERFORM nextval('mc.s');
        ELSE
            n := n + (SELECT count(*) FROM mc.small);
        END IF;
    END LOOP;
    RETURN n;
END $$;
GRANT EXECUTE ON FUNCTION mc.liar(regclass) TO regress_mc_u;
SET SESSION AUTHORIZATION regress_mc_u;
SELECT nextval('mc.s') > 0 AS nextval;
SELECT txid_current() > 0 AS txid_current;
SELECT pg_current_xact_id() IS NOT NULL AS pg_current_xact_id;
SELECT lo_from_bytea(0, '\x00') > 0 AS lo_from_bytea;
SELECT count(*) FROM mc.small WHERE random() >= 0;
SELECT mc.vol();
SELECT mc.vsum(a) FROM mc.small;
SELECT mc.vsum(a) OVER () FROM mc.small LIMIT 1;
RESET SESSION AUTHORIZATION;
SELECT * FROM mc_counts();
-- in every part of a plan: an initplan, a correlated subplan, a CTE, a
-- function in FROM, VALUES, LIMIT, a join qual, a sort key, a window frame
SET SESSION AUTHORIZATION regress_mc_u;
SELECT (SELECT nextval('mc.s')) > 0 AS initplan;
SELECT count(*) FROM mc.small x
 WHERE x.a > (SELECT random() - 1 FROM mc.small y WHERE y.a = x.a);
WITH c AS MATERIALIZED (SELECT nextval('mc.s') AS v) SELECT count(*) FROM c;
SELECT count(*) FROM nextval('mc.s');
SELECT count(*) FROM (VALUES (1), (nextval('mc.s'))) v(x);
SELECT a FROM mc.small ORDER BY a LIMIT (random() * 0 + 1)::int;
SELECT count(*) FROM mc.small x JOIN mc.small y ON x.a = y.a AND random() >= 0;
SELECT count(*) FROM (SELECT a FROM mc.small ORDER BY random()) o;
SELECT sum(a) OVER (ORDER BY a ROWS BETWEEN (random() * 0)::int PRECEDING
                    AND CURRENT ROW)
  FROM mc.small ORDER BY 1 LIMIT 1;
RESET SESSION AUTHORIZATION;
SELECT * FROM mc_counts();
-- while stable and immutable calls still pass, also a mislabelled one (it
-- advances the sequence), and the queries of a stable function each pass
-- or are gated by themselves
SET SESSION AUTHORIZATION regress_mc_u;
SELECT now() IS NOT NULL AS now, abs(-1),
       txid_current_if_assigned() IS NULL AS no_xid;
SELECT mc.stab();
SELECT mc.isum(a) FROM mc.small;
SELECT last_value > 0 AS read_sequence FROM mc.s;
SELECT mc.liar('mc.s') > 0 AS liar;
RESET SESSION AUTHORIZATION;
SELECT * FROM mc_counts();
SET SESSION AUTHORIZATION regress_mc_u;
SELECT mc.loop(false);
RESET SESSION AUTHORIZATION;
SELECT * FROM mc_counts();
SET SESSION AUTHORIZATION regress_mc_u;
SELECT mc.loop(true);
RESET SESSION AUTHORIZATION;
SELECT * FROM mc_counts();
-- each plan gets its own answer: statements planned one after the other
-- into the same memory, two in one message, prepared generic plans run in
-- turn
SET SESSION AUTHORIZATION regress_mc_u;
SELECT abs(-1);
SELECT nextval('mc.s') > 0 AS nextval;
SELECT abs(-2);
SELECT nextval('mc.s') > 0 AS nextval;
SELECT abs(-3) \; SELECT nextval('mc.s') > 0 AS nextval;
RESET SESSION AUTHORIZATION;
SELECT * FROM mc_counts();
SET SESSION AUTHORIZATION regress_mc_u;
SET plan_cache_mode = force_generic_plan;
PREPARE mc_v AS SELECT nextval('mc.s') > 0 AS nextval;
PREPARE mc_r AS SELECT count(*) FROM mc.small;
EXECUTE mc_r;
EXECUTE mc_v;
EXECUTE mc_r;
EXECUTE mc_v;
EXECUTE mc_r;
DEALLOCATE mc_v;
DEALLOCATE mc_r;
RESET plan_cache_mode;
RESET SESSION AUTHORIZATION;
SELECT * FROM mc_counts();
-- nineteen queries of a function planned into one memory context: the
-- answers kept there are bounded in number and stay right
DO $$ BEGIN
    EXECUTE format('CREATE FUNCTION mc.many() RETURNS bool STABLE LANGUAGE sql AS %L',
                   repeat('SELECT 1; ', 18) || 'SELECT nextval(''mc.s'') > 0');
END $$;
SET SESSION AUTHORIZATION regress_mc_u;
SELECT mc.many();
SELECT mc.many();
RESET SESSION AUTHORIZATION;
SELECT * FROM mc_counts();
SELECT count(lo_unlink(oid)) FROM pg_largeobject_metadata;

-- the bound is strict, and 0 gates everything
SELECT dbgate.alter_budget('mc_b', min_cost => 1.1);
SET SESSION AUTHORIZATION regress_mc_u;
SELECT * FROM mc.small WHERE false;
SELECT count(*) FROM mc.small;
RESET SESSION AUTHORIZATION;
SELECT * FROM mc_counts();
SELECT dbgate.alter_budget('mc_b', min_cost => 0);
SET SESSION AUTHORIZATION regress_mc_u;
SELECT count(*) FROM mc.small;
RESET SESSION AUTHORIZATION;
SELECT * FROM mc_counts();

-- shadow mode: cheap reads are not counted as active either
SELECT dbgate.alter_budget('mc_b', min_cost => 100, enforce => false);
SET SESSION AUTHORIZATION regress_mc_u;
SELECT count(*) FROM mc.small;
SELECT count(*) FROM mc.big;
RESET SESSION AUTHORIZATION;
SELECT * FROM mc_counts();

-- superusers are never gated nor counted
SELECT count(*) FROM mc.small;
SELECT * FROM mc_counts();

-- reset_stats zeroes bypassed
SET SESSION AUTHORIZATION regress_mc_u;
SELECT count(*) FROM mc.small;
RESET SESSION AUTHORIZATION;
SELECT dbgate.reset_stats('mc_b');
SELECT bypassed FROM dbgate.status WHERE budget = 'mc_b';

-- clean up
DEALLOCATE mc_p;
DROP FUNCTION mc_counts(), mc_cost(text);
SET client_min_messages = warning;
DROP SCHEMA mc CASCADE;
RESET client_min_messages;
DROP ROLE regress_mc_u;
SELECT dbgate.drop_budget('mc_b');
