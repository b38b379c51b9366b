--
-- parallel_workers: the most parallel workers one statement of a budget may
-- use.  It caps max_parallel_workers_per_gather when a statement is planned
-- (only tightening), also for a plan cached before the budget changed
-- (prepared statement, PL/pgSQL), and leaves the session's setting as it
-- was.
--
-- (quietly: the output is the same alone and after the other files)
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS dbgate;
RESET client_min_messages;
\set VERBOSITY terse

CREATE ROLE regress_par_u LOGIN;
CREATE TABLE par_t (i int) WITH (parallel_workers = 8);
INSERT INTO par_t SELECT generate_series(1, 50000);
ANALYZE par_t;
GRANT SELECT ON par_t TO PUBLIC;
SELECT dbgate.create_budget('par_b', 10, parallel_workers => 2);
SELECT dbgate.assign_role('regress_par_u', 'par_b');

-- the Gather lines of a statement's EXPLAIN ANALYZE
CREATE FUNCTION par_workers(q text) RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
    line text;
BEGIN
    FOR line IN EXECUTE
        'EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) ' || q
    LOOP
        IF line ~ 'Gather|Workers' THEN
            RETURN NEXT regexp_replace(btrim(line), ' \(actual.*$', '');
        END IF;
    END LOOP;
END $$;

-- the process that evaluates it: the leader, or a parallel worker
CREATE FUNCTION par_pid() RETURNS int LANGUAGE plpgsql STABLE PARALLEL SAFE
  AS $$ BEGIN RETURN pg_backend_pid(); END $$;
-- rows of par_t that parallel workers scanned, by a cached PL/pgSQL plan
-- (RETURN QUERY may run in parallel)
CREATE FUNCTION par_rows_by_workers() RETURNS SETOF bigint LANGUAGE plpgsql AS $$
DECLARE
    me int := pg_backend_pid();
BEGIN
    RETURN QUERY SELECT count(*) FROM par_t WHERE par_pid() <> me;
END $$;

-- immutable, so evaluated while the statement is planned
CREATE FUNCTION par_fail() RETURNS int LANGUAGE plpgsql IMMUTABLE
  SET max_parallel_workers_per_gather = 3
  AS $$ BEGIN RAISE EXCEPTION 'fails while planning'; END $$;
CREATE FUNCTION par_set() RETURNS int LANGUAGE plpgsql IMMUTABLE
  AS $$ BEGIN PERFORM set_config('max_parallel_workers_per_gather', '3', false);
        RETURN 1; END $$;

-- plans are parallel whenever possible
SET SESSION AUTHORIZATION regress_par_u;
SET parallel_setup_cost = 0;
SET parallel_tuple_cost = 0;
SET min_parallel_table_scan_size = 0;
SET max_parallel_workers_per_gather = 4;

-- at most 2, although the session asks for 4
SELECT * FROM par_workers('SELECT count(*) FROM par_t');
SHOW max_parallel_workers_per_gather;
-- only tightens: a session that asks for 1 gets 1
SET max_parallel_workers_per_gather = 1;
SELECT * FROM par_workers('SELECT count(*) FROM par_t');
SHOW max_parallel_workers_per_gather;
SET max_parallel_workers_per_gather = 4;

-- planning that fails leaves the session's value, also when it failed in
-- a function with its own SET of the parameter (evaluated while planning)
SELECT 1 / 0 FROM par_t;
SHOW max_parallel_workers_per_gather;
SELECT par_fail() FROM par_t;
SHOW max_parallel_workers_per_gather;
-- and a SET made while planning keeps its meaning
SELECT par_set() FROM par_t LIMIT 1;
SHOW max_parallel_workers_per_gather;
SET max_parallel_workers_per_gather = 4;
RESET SESSION AUTHORIZATION;

-- 0: no parallel plan at all
SELECT dbgate.alter_budget('par_b', parallel_workers => 0);
SET SESSION AUTHORIZATION regress_par_u;
SELECT * FROM par_workers('SELECT count(*) FROM par_t');
SELECT count(*) FROM par_t;
SHOW max_parallel_workers_per_gather;
RESET SESSION AUTHORIZATION;

-- -1: not capped
SELECT dbgate.alter_budget('par_b', parallel_workers => -1);
SET SESSION AUTHORIZATION regress_par_u;
SELECT * FROM par_workers('SELECT count(*) FROM par_t');

-- plans cached while not capped: a prepared statement and a PL/pgSQL
-- statement (workers scan every row when the leader does not take part)
SET plan_cache_mode = force_generic_plan;
SET parallel_leader_participation = off;
PREPARE par_p AS SELECT count(*) FROM par_t;
SELECT * FROM par_workers('EXECUTE par_p');
SELECT par_rows_by_workers() AS by_workers;
RESET SESSION AUTHORIZATION;

-- the budget now says 2, then 0: the cached plans obey
SELECT dbgate.alter_budget('par_b', parallel_workers => 2);
SET SESSION AUTHORIZATION regress_par_u;
SELECT * FROM par_workers('EXECUTE par_p');
EXECUTE par_p;
RESET SESSION AUTHORIZATION;
SELECT dbgate.alter_budget('par_b', parallel_workers => 0);
SET SESSION AUTHORIZATION regress_par_u;
SELECT * FROM par_workers('EXECUTE par_p');
EXECUTE par_p;
SELECT par_rows_by_workers() AS by_workers;
SHOW max_parallel_workers_per_gather;
RESET SESSION AUTHORIZATION;

-- superusers are not capped
SELECT * FROM par_workers('EXECUTE par_p');

-- a budget in shadow mode caps nothing
SELECT dbgate.alter_budget('par_b', enforce => false);
SET SESSION AUTHORIZATION regress_par_u;
SELECT * FROM par_workers('EXECUTE par_p');
RESET SESSION AUTHORIZATION;

-- clean up
DEALLOCATE par_p;
RESET plan_cache_mode;
RESET parallel_leader_participation;
RESET parallel_setup_cost;
RESET parallel_tuple_cost;
RESET min_parallel_table_scan_size;
RESET max_parallel_workers_per_gather;
DROP FUNCTION par_workers(text), par_rows_by_workers(), par_pid(), par_fail(),
  par_set();
DROP TABLE par_t;
DROP ROLE regress_par_u;
SELECT dbgate.drop_budget('par_b');
