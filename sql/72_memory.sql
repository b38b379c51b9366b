--
-- max_memory_mb: the working memory of a budget's statements, by
-- construction.  A slot may use max_memory_mb / max_active; a statement
-- whose plan's estimate (work_mem or hash_mem per sort, hash table,
-- materialisation, ... times the processes that run it) is over what the
-- slot has left runs with work_mem lowered to fit, never below 64 kB.  The
-- lowered value is in force while the plan is initialised and run (also in
-- parallel workers and in queries the statement runs itself), and is gone
-- afterwards.  Grants show in dbgate.backends.memory_mb and
-- dbgate.status.memory_mb_active.
--
-- (quietly: the output is the same alone and after the other files)
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS dbgate;
RESET client_min_messages;
\set VERBOSITY terse

CREATE ROLE regress_mem_u LOGIN;
CREATE TABLE mem_t AS
  SELECT g AS a, md5(g::text) AS b, g % 100 AS c
  FROM generate_series(1, 20000) g;
ALTER TABLE mem_t SET (parallel_workers = 2);
ANALYZE mem_t;
GRANT SELECT ON mem_t TO PUBLIC;
-- two slots of 1 MB each
SELECT dbgate.create_budget('mem_b', 2, max_memory_mb => 2);
SELECT dbgate.assign_role('regress_mem_u', 'mem_b');

-- what the statement that calls it runs with: its work_mem, the backend's
-- grants and the budget's (a function's own queries are nested: no grant)
CREATE FUNCTION mem_now(OUT work_mem text, OUT backend_mb float8,
                        OUT budget_mb float8)
  LANGUAGE plpgsql SECURITY DEFINER PARALLEL RESTRICTED AS $$
BEGIN
    work_mem := current_setting('work_mem');
    SELECT b.memory_mb INTO backend_mb
      FROM dbgate.backends b WHERE b.pid = pg_backend_pid();
    SELECT s.memory_mb_active INTO budget_mb
      FROM dbgate.status s WHERE s.budget = 'mem_b';
END $$;
-- the same after a sort of its own, and its work_mem
CREATE FUNCTION mem_nested() RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    r text;
BEGIN
    SELECT b INTO r FROM mem_t ORDER BY b OFFSET 5 LIMIT 1;
    RETURN mem_now()::text;
END $$;
-- work_mem where it is evaluated (a parallel worker, when it can be), and
-- the process
CREATE FUNCTION mem_wm() RETURNS text LANGUAGE plpgsql STABLE PARALLEL SAFE
  COST 1 AS $$
BEGIN
    RETURN current_setting('work_mem') || ' in ' || pg_backend_pid();
END $$;

-- the lines of a plan, as EXPLAIN prints them
CREATE FUNCTION mem_plan(q text) RETURNS SETOF text LANGUAGE plpgsql AS $$
BEGIN
    RETURN QUERY EXECUTE q;
END $$;

-- how a statement's sorts and hash joins went, without the numbers that
-- vary (top-level: a procedure's statements are not nested in a query)
CREATE PROCEDURE mem_explain(q text) LANGUAGE plpgsql AS $$
DECLARE
    line text;
BEGIN
    FOR line IN EXECUTE
        'EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) ' || q
    LOOP
        line := btrim(line);
        IF line ~ '^(Sort Method|Buckets|Batches|Worker \d+: +Sort Method)' THEN
            line := regexp_replace(line, '(Memory|Disk)( Usage)?: \d+kB',
                                   '\1\2: NkB', 'g');
            line := regexp_replace(line, 'Buckets: \d+( \(originally \d+\))?  ', '');
            line := regexp_replace(line, 'Batches: ([2-9]|\d\d+)( \(originally \d+\))?',
                                   'Batches: more than 1');
            line := regexp_replace(line, 'Batches: 1 \(originally \d+\)', 'Batches: 1');
            RAISE NOTICE '%', line;
        END IF;
    END LOOP;
END $$;

SET SESSION AUTHORIZATION regress_mem_u;
SET max_parallel_workers_per_gather = 0;
SET hash_mem_multiplier = 2;
SET work_mem = '4MB';

-- one sort (1 unit): 4 MB is over the slot's 1 MB, so it runs at 1 MB
-- and its grant is 1 MB
SELECT mem_now() FROM (SELECT b FROM mem_t ORDER BY b LIMIT 1) s;
SHOW work_mem;
-- a sort and a hash join (1 + 2 units): 341 kB, grant 1023 kB
SELECT mem_now()
  FROM (SELECT x.b FROM mem_t x JOIN mem_t y USING (b) ORDER BY x.c LIMIT 1) s;
-- no node that uses work_mem: no grant, the session's value
SELECT mem_now() FROM mem_t WHERE a = 1;
-- only tightens: a session's lower work_mem stays (the grant follows it)
SET work_mem = '256kB';
SELECT mem_now() FROM (SELECT b FROM mem_t ORDER BY b LIMIT 1) s;
SHOW work_mem;
SET work_mem = '4MB';

-- queries a statement runs itself are nested: they run at its work_mem
-- and get no grant of their own (also when the statement has no grant)
SELECT mem_nested() FROM (SELECT b FROM mem_t ORDER BY b LIMIT 1) s;
SELECT mem_nested();

-- the grant is gone after the statement, also after an error or a cancel
SELECT 1 / (a - a) FROM (SELECT a FROM mem_t ORDER BY b LIMIT 1) s;
SHOW work_mem;
SELECT mem_now();
SET statement_timeout = '50ms';
SELECT pg_sleep(2) FROM (SELECT b FROM mem_t ORDER BY b LIMIT 1) s;
RESET statement_timeout;
SHOW work_mem;
SELECT mem_now();

-- a SET inside the statement is not capped and stays, as any SET does
SELECT set_config('work_mem', '8MB', false)
  FROM (SELECT b FROM mem_t ORDER BY b LIMIT 1) s;
SHOW work_mem;
-- a SET LOCAL inside it goes with the transaction
BEGIN;
SET LOCAL work_mem = '10MB';
SELECT set_config('work_mem', '20MB', true), mem_now()
  FROM (SELECT b FROM mem_t ORDER BY b LIMIT 1) s;
SHOW work_mem;
ROLLBACK;
SHOW work_mem;
SET work_mem = '4MB';

-- an open cursor keeps its grant; the next statement gets what is left
-- of the slot (nothing: it runs at 64 kB); closing gives it back
BEGIN;
DECLARE mem_c CURSOR FOR SELECT b FROM mem_t ORDER BY b;
FETCH 1 FROM mem_c;
SHOW work_mem;
SELECT mem_now() FROM (SELECT b FROM mem_t ORDER BY b LIMIT 1) s;
SELECT mem_now();
-- a cursor opened in a savepoint that is rolled back gives its grant back
SAVEPOINT s1;
DECLARE mem_d CURSOR FOR SELECT b FROM mem_t ORDER BY b;
FETCH 1 FROM mem_d;
SELECT mem_now();
ROLLBACK TO SAVEPOINT s1;
SELECT mem_now();
CLOSE mem_c;
SELECT mem_now();
COMMIT;
-- a statement that fails in a savepoint gets no ExecutorEnd: the
-- savepoint's abort gives its grant (64 kB) back, the cursor keeps its own
BEGIN;
DECLARE mem_e CURSOR FOR SELECT b FROM mem_t ORDER BY b;
FETCH 1 FROM mem_e;
SAVEPOINT s2;
SELECT 1 / (a - a) FROM (SELECT a FROM mem_t ORDER BY b LIMIT 1) s;
ROLLBACK TO SAVEPOINT s2;
SELECT mem_now();
COMMIT;

-- the spill: sorts and hash joins that fit the session's 4 MB use disk
-- and more batches at the grant's work_mem
CALL mem_explain('SELECT * FROM mem_t ORDER BY b');
CALL mem_explain('SELECT * FROM mem_t x JOIN mem_t y USING (b)');
RESET SESSION AUTHORIZATION;
SET max_parallel_workers_per_gather = 0;
SET work_mem = '4MB';
SET hash_mem_multiplier = 2;
CALL mem_explain('SELECT * FROM mem_t ORDER BY b');
CALL mem_explain('SELECT * FROM mem_t x JOIN mem_t y USING (b)');

-- parallel query: a sort below a Gather Merge of 2 workers counts 3
-- times; the workers run at the lowered work_mem too
SELECT dbgate.alter_budget('mem_b', parallel_workers => 2);
SET SESSION AUTHORIZATION regress_mem_u;
SET max_parallel_workers_per_gather = 4;
SET parallel_setup_cost = 0;
SET parallel_tuple_cost = 0;
SET min_parallel_table_scan_size = 0;
SET parallel_leader_participation = off;
SET work_mem = '4MB';
EXPLAIN (COSTS OFF)
  SELECT mem_now() FROM (SELECT b FROM mem_t ORDER BY b LIMIT 1) s;
SELECT mem_now() FROM (SELECT b FROM mem_t ORDER BY b LIMIT 1) s;
-- the workers sort (and evaluate mem_wm()): they have 341 kB as well
-- (without the Query Identifier line: the suite's server computes query
-- ids, and their values are not the same on every server)
SELECT line AS "QUERY PLAN"
  FROM mem_plan('EXPLAIN (VERBOSE, COSTS OFF)
                      SELECT mem_wm() AS w FROM mem_t ORDER BY b LIMIT 1') AS line
 WHERE line NOT LIKE 'Query Identifier:%';
SELECT split_part(w, ' in ', 1) AS work_mem,
       split_part(w, ' in ', 2)::int <> pg_backend_pid() AS in_worker
  FROM (SELECT mem_wm() AS w FROM mem_t ORDER BY b LIMIT 1) s;
SHOW work_mem;
-- also when the session's work_mem is the default (a worker is not sent
-- a setting whose value is the default, unless the gate says so)
RESET work_mem;
SELECT split_part(w, ' in ', 1) AS work_mem,
       split_part(w, ' in ', 2)::int <> pg_backend_pid() AS in_worker
  FROM (SELECT mem_wm() AS w FROM mem_t ORDER BY b LIMIT 1) s;
RESET max_parallel_workers_per_gather;
RESET parallel_setup_cost;
RESET parallel_tuple_cost;
RESET min_parallel_table_scan_size;
RESET parallel_leader_participation;
SET max_parallel_workers_per_gather = 0;
RESET SESSION AUTHORIZATION;
-- and it is the default again
SELECT setting, source FROM pg_settings WHERE name = 'work_mem';

-- planning: with 8 slots of 128 kB a hash aggregate would run at 64 kB
-- (2 units); it is planned again at 64 kB, where a sort wins
SELECT dbgate.alter_budget('mem_b', max_active => 8, max_memory_mb => 1);
EXPLAIN (COSTS OFF) SELECT b, count(*) FROM mem_t GROUP BY b;
SET SESSION AUTHORIZATION regress_mem_u;
SET work_mem = '4MB';
EXPLAIN (COSTS OFF) SELECT b, count(*) FROM mem_t GROUP BY b;
-- a plan whose estimate at 64 kB is over the slot's 128 kB runs at 64 kB;
-- its grant is that estimate (3 units: 192 kB)
SELECT mem_now()
  FROM (SELECT x.b FROM mem_t x JOIN mem_t y USING (b) ORDER BY x.c LIMIT 1) s;
RESET SESSION AUTHORIZATION;

-- shadow mode lowers nothing; the grant is the estimate at the session's
-- work_mem
SELECT dbgate.alter_budget('mem_b', max_active => 2, max_memory_mb => 2,
                           enforce => false);
SET SESSION AUTHORIZATION regress_mem_u;
SET work_mem = '4MB';
SELECT mem_now() FROM (SELECT b FROM mem_t ORDER BY b LIMIT 1) s;
RESET SESSION AUTHORIZATION;

-- without max_memory_mb: no grant, and memory_mb is NULL
SELECT dbgate.alter_budget('mem_b', max_memory_mb => 0, enforce => true);
SET SESSION AUTHORIZATION regress_mem_u;
SET work_mem = '4MB';
SELECT mem_now() FROM (SELECT b FROM mem_t ORDER BY b LIMIT 1) s;
RESET SESSION AUTHORIZATION;

-- a parent's memory_mb_active covers its children's grants
SELECT dbgate.alter_budget('mem_b', max_memory_mb => 2);
SELECT dbgate.create_budget('mem_p', 4);
SELECT dbgate.alter_budget('mem_b', parent => 'mem_p');
CREATE FUNCTION mem_tree() RETURNS text LANGUAGE plpgsql SECURITY DEFINER
  AS $$
BEGIN
    RETURN (SELECT string_agg(budget || ': ' || memory_mb_active, ', '
                              ORDER BY budget)
              FROM dbgate.status WHERE budget IN ('mem_b', 'mem_p'));
END $$;
SET SESSION AUTHORIZATION regress_mem_u;
SET work_mem = '4MB';
SELECT mem_tree() FROM (SELECT b FROM mem_t ORDER BY b LIMIT 1) s;
RESET SESSION AUTHORIZATION;
SELECT mem_tree();

-- nothing is left behind
SELECT budget, active, memory_mb_active FROM dbgate.status
  WHERE budget = 'mem_b';

-- clean up
RESET work_mem;
RESET hash_mem_multiplier;
RESET max_parallel_workers_per_gather;
DROP PROCEDURE mem_explain(text);
DROP FUNCTION mem_now(), mem_nested(), mem_wm(), mem_tree(), mem_plan(text);
DROP TABLE mem_t;
DROP ROLE regress_mem_u;
SELECT dbgate.drop_budget('mem_b');
SELECT dbgate.drop_budget('mem_p');
