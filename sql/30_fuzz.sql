--
-- Bad-input fuzz: every SQL function and the dbgate settings are called many
-- times with valid and invalid arguments (NULL, negative, zero, limits,
-- huge and negative intervals, odd names).  An oracle written from the
-- specification says which SQLSTATEs each call may end with:
--   - no SQLSTATE: the call must succeed and have exactly its effect;
--   - otherwise it must fail with one of them and change nothing.
-- The choice of calls is pseudo-random with a fixed seed, so the summary
-- (calls per function and SQLSTATE) printed at the end is always the same.
--
-- Runs alone as well as after the other files (pg_regress NAME): the
-- extension is created if it is not there yet.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS dbgate;
RESET client_min_messages;
\set VERBOSITY default
\set SHOW_CONTEXT never
SET IntervalStyle = postgres;

CREATE ROLE regress_dbgate_fuzz_r;       -- assigned to fuzz_a
CREATE ROLE regress_dbgate_fuzz_s;       -- not assigned
CREATE ROLE regress_dbgate_fuzz_su SUPERUSER;
SELECT dbgate.create_budget('fuzz_a', 2, 3, '1 s', '2 s', '3 s', true);
SELECT dbgate.create_budget('fuzz_b', 1);
SELECT dbgate.assign_role('regress_dbgate_fuzz_r', 'fuzz_a');

CREATE TEMP TABLE fuzz_log (
    seq serial,
    fn text,            -- what was called
    call text,          -- the statement
    expected text[],    -- the SQLSTATEs allowed; empty: must succeed
    got text,           -- the SQLSTATE it ended with, 00000 for success
    message text,
    unchanged boolean,  -- configuration the same after the call
    effect_ok boolean,  -- after success: the effect was the expected one
    ok boolean,
    versioned boolean DEFAULT false  -- depends on the PostgreSQL version
);

-- The configuration as text; optionally without one budget, or without the
-- roles column.
CREATE FUNCTION pg_temp.fuzz_config(except_budget text DEFAULT NULL,
                                    with_roles boolean DEFAULT true)
RETURNS text LANGUAGE sql AS $$
    SELECT coalesce(string_agg(
               format('%s|%s|%s|%s|%s|%s|%s|%s', b.budget, b.max_active,
                      b.max_queued, b.queue_timeout, b.statement_timeout,
                      b.lock_timeout, b.fair,
                      CASE WHEN with_roles THEN b.roles::text END),
               ' ' ORDER BY b.budget), '')
      FROM dbgate.budgets b
     WHERE except_budget IS NULL OR b.budget <> except_budget
$$;

-- A duration in milliseconds as the specification defines it: a month is
-- 30 days, a day 24 hours.
CREATE FUNCTION pg_temp.fuzz_ms(iv interval)
RETURNS numeric LANGUAGE sql IMMUTABLE AS $$
    SELECT (extract(year FROM iv) * 12 + extract(month FROM iv)) * 30 * 86400000
         + extract(day FROM iv) * 86400000
         + extract(epoch FROM iv - make_interval(
               years => extract(year FROM iv)::int,
               months => extract(month FROM iv)::int,
               days => extract(day FROM iv)::int)) * 1000
$$;

-- Is a duration argument invalid?  (NULL is invalid where required.)
CREATE FUNCTION pg_temp.fuzz_bad_duration(iv interval, required boolean)
RETURNS boolean LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN iv IS NULL THEN required
                ELSE pg_temp.fuzz_ms(iv) < 0
                  OR round(pg_temp.fuzz_ms(iv)) > 2147483647 END
$$;

-- Does a stored duration (as the view shows it) match the one given?
-- Whole milliseconds, rounded; 0 stays 0 and anything between 0 and 1 ms
-- becomes 1 ms.
CREATE FUNCTION pg_temp.fuzz_same_duration(shown interval, given interval)
RETURNS boolean LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN g = 0 THEN s = 0
                WHEN g < 1 THEN s = 1
                ELSE abs(s - g) <= 0.5 AND s = trunc(s) END
      FROM (SELECT pg_temp.fuzz_ms(shown) AS s, pg_temp.fuzz_ms(given) AS g) x
$$;

CREATE FUNCTION pg_temp.fuzz_bad_name(name text)
RETURNS boolean LANGUAGE sql IMMUTABLE AS $$
    SELECT name IS NULL OR name = '' OR octet_length(name) > 63
$$;

CREATE FUNCTION pg_temp.fuzz_budget_exists(name text)
RETURNS boolean LANGUAGE sql AS $$
    SELECT EXISTS (SELECT 1 FROM dbgate.budgets WHERE budget = name)
$$;

-- Run one call; log what happened.  p_verify is a boolean SQL expression
-- that must hold after a successful call; p_except and p_with_roles say
-- which part of the configuration a successful call must leave alone.
-- Whatever the call did is undone afterwards, so every call sees the same
-- configuration.
CREATE FUNCTION pg_temp.fuzz_call(p_fn text, p_sql text, p_expected text[],
                                  p_verify text DEFAULT NULL,
                                  p_except text DEFAULT NULL,
                                  p_with_roles boolean DEFAULT true,
                                  p_versioned boolean DEFAULT false)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    before_all text := pg_temp.fuzz_config();
    before_part text := pg_temp.fuzz_config(p_except, p_with_roles);
    v_got text;
    v_msg text;
    v_same boolean;
    v_effect boolean;
BEGIN
    BEGIN
        BEGIN
            EXECUTE p_sql;
            v_got := '00000';
        EXCEPTION WHEN OTHERS THEN
            v_got := SQLSTATE;
            v_msg := SQLERRM;
        END;
        v_same := pg_temp.fuzz_config() = before_all;
        IF v_got = '00000' THEN
            v_effect := pg_temp.fuzz_config(p_except, p_with_roles) = before_part;
            IF p_verify IS NOT NULL THEN
                EXECUTE 'SELECT ' || p_verify INTO v_effect;
                v_effect := v_effect
                    AND pg_temp.fuzz_config(p_except, p_with_roles) = before_part;
            END IF;
        END IF;
        RAISE SQLSTATE 'ZZ001';     -- undo the call
    EXCEPTION WHEN SQLSTATE 'ZZ001' THEN
        NULL;
    END;
    IF pg_temp.fuzz_config() <> before_all THEN
        RAISE EXCEPTION 'fuzz: undoing % did not restore the configuration', p_sql;
    END IF;
    INSERT INTO fuzz_log (fn, call, expected, got, message, unchanged,
                          effect_ok, ok, versioned)
    VALUES (p_fn, p_sql, p_expected, v_got, v_msg, v_same, v_effect,
            CASE WHEN cardinality(p_expected) = 0
                 THEN v_got = '00000' AND v_effect
                 ELSE v_got = ANY (p_expected) AND v_same END,
            p_versioned);
END $$;

-- One call of each function, with the oracle.
CREATE FUNCTION pg_temp.fuzz_create(n text, ma int, mq int, qt interval,
                                    st interval, lt interval, f boolean)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    e text[] := '{}';
BEGIN
    IF pg_temp.fuzz_bad_name(n) OR ma IS NULL OR ma < 1 OR mq IS NULL OR mq < 0
       OR pg_temp.fuzz_bad_duration(qt, true)
       OR pg_temp.fuzz_bad_duration(st, true)
       OR pg_temp.fuzz_bad_duration(lt, true) OR f IS NULL THEN
        e := e || '22023'::text;
    END IF;
    IF NOT pg_temp.fuzz_bad_name(n) AND pg_temp.fuzz_budget_exists(n) THEN
        e := e || '42710'::text;
    END IF;
    PERFORM pg_temp.fuzz_call('create_budget',
        format('SELECT dbgate.create_budget(%L::text, %L::int, %L::int, %L::interval, %L::interval, %L::interval, %L::boolean)',
               n, ma, mq, qt, st, lt, f),
        e,
        format('EXISTS (SELECT 1 FROM dbgate.budgets WHERE budget = %L AND max_active = %L AND max_queued = %L'
               ' AND pg_temp.fuzz_same_duration(queue_timeout, %L) AND pg_temp.fuzz_same_duration(statement_timeout, %L)'
               ' AND pg_temp.fuzz_same_duration(lock_timeout, %L) AND fair = %L AND roles = ''{}'')',
               n, ma, mq, qt, st, lt, f),
        n);
END $$;

CREATE FUNCTION pg_temp.fuzz_alter(n text, ma int, mq int, qt interval,
                                   st interval, lt interval, f boolean)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    e text[] := '{}';
    old record;
BEGIN
    IF pg_temp.fuzz_bad_name(n) OR ma < 1 OR mq < 0
       OR pg_temp.fuzz_bad_duration(qt, false)
       OR pg_temp.fuzz_bad_duration(st, false)
       OR pg_temp.fuzz_bad_duration(lt, false) THEN
        e := e || '22023'::text;
    END IF;
    IF NOT pg_temp.fuzz_bad_name(n) AND NOT pg_temp.fuzz_budget_exists(n) THEN
        e := e || '42704'::text;
    END IF;
    SELECT * INTO old FROM dbgate.budgets WHERE budget = n;
    PERFORM pg_temp.fuzz_call('alter_budget',
        format('SELECT dbgate.alter_budget(%L::text, %L::int, %L::int, %L::interval, %L::interval, %L::interval, %L::boolean)',
               n, ma, mq, qt, st, lt, f),
        e,
        format('EXISTS (SELECT 1 FROM dbgate.budgets WHERE budget = %L AND max_active = %L AND max_queued = %L'
               ' AND pg_temp.fuzz_same_duration(queue_timeout, %L) AND pg_temp.fuzz_same_duration(statement_timeout, %L)'
               ' AND pg_temp.fuzz_same_duration(lock_timeout, %L) AND fair = %L AND roles = %L)',
               n, coalesce(ma, old.max_active), coalesce(mq, old.max_queued),
               coalesce(qt, old.queue_timeout), coalesce(st, old.statement_timeout),
               coalesce(lt, old.lock_timeout), coalesce(f, old.fair), old.roles),
        n);
END $$;

CREATE FUNCTION pg_temp.fuzz_drop(n text, f boolean)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    e text[] := '{}';
    old_roles name[];
BEGIN
    IF pg_temp.fuzz_bad_name(n) OR f IS NULL THEN
        e := e || '22023'::text;
    END IF;
    IF NOT pg_temp.fuzz_bad_name(n) THEN
        IF NOT pg_temp.fuzz_budget_exists(n) THEN
            e := e || '42704'::text;
        ELSE
            SELECT roles INTO old_roles FROM dbgate.budgets WHERE budget = n;
            IF cardinality(old_roles) > 0 AND NOT f THEN
                e := e || '2BP01'::text;
            END IF;
        END IF;
    END IF;
    PERFORM pg_temp.fuzz_call('drop_budget',
        format('SELECT dbgate.drop_budget(%L::text, %L::boolean)', n, f),
        e,
        format('NOT pg_temp.fuzz_budget_exists(%L) AND NOT EXISTS (SELECT 1 FROM dbgate.budgets, unnest(roles) r WHERE r = ANY (%L::name[]))',
               n, old_roles),
        n);
END $$;

CREATE FUNCTION pg_temp.fuzz_assign(r oid, n text)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    e text[] := '{}';
    rname name := (SELECT rolname FROM pg_roles WHERE oid = r);
BEGIN
    IF r IS NULL OR pg_temp.fuzz_bad_name(n) THEN
        e := e || '22023'::text;
    END IF;
    IF r IS NOT NULL AND rname IS NULL THEN
        e := e || '42704'::text;
    END IF;
    IF NOT pg_temp.fuzz_bad_name(n) AND NOT pg_temp.fuzz_budget_exists(n) THEN
        e := e || '42704'::text;
    END IF;
    PERFORM pg_temp.fuzz_call('assign_role',
        format('SELECT dbgate.assign_role(%L::oid::regrole, %L::text)', r, n),
        e,
        format('(SELECT array_agg(budget) FROM dbgate.budgets WHERE %L = ANY (roles)) = ARRAY[%L]',
               rname, n),
        NULL, false);
END $$;

CREATE FUNCTION pg_temp.fuzz_unassign(r oid)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    e text[] := '{}';
    rname name := (SELECT rolname FROM pg_roles WHERE oid = r);
BEGIN
    IF r IS NULL THEN
        e := e || '22023'::text;
    ELSIF rname IS NULL THEN
        e := e || '42704'::text;
    END IF;
    PERFORM pg_temp.fuzz_call('unassign_role',
        format('SELECT dbgate.unassign_role(%L::oid::regrole)', r),
        e,
        format('NOT EXISTS (SELECT 1 FROM dbgate.budgets WHERE %L = ANY (roles))', rname),
        NULL, false);
END $$;

CREATE FUNCTION pg_temp.fuzz_reset(n text)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    e text[] := '{}';
BEGIN
    -- NULL means all budgets
    IF n IS NOT NULL AND pg_temp.fuzz_bad_name(n) THEN
        e := e || '22023'::text;
    END IF;
    IF NOT pg_temp.fuzz_bad_name(n) AND NOT pg_temp.fuzz_budget_exists(n) THEN
        e := e || '42704'::text;
    END IF;
    PERFORM pg_temp.fuzz_call('reset_stats',
        format('SELECT dbgate.reset_stats(%L::text)', n), e);
END $$;

-- dbgate.default_budget (superuser-settable): any name of at most 63 bytes
CREATE FUNCTION pg_temp.fuzz_default_budget(v text, how text)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    e text[] := '{}';
BEGIN
    IF v IS NULL AND how LIKE 'SET%' THEN
        RETURN;                 -- no NULL in SQL syntax
    END IF;
    IF octet_length(v) > 63 THEN
        e := e || '22023'::text;
    END IF;
    PERFORM pg_temp.fuzz_call('SET dbgate.default_budget',
        CASE how
            WHEN 'set_config' THEN format('SELECT set_config(''dbgate.default_budget'', %L, false)', v)
            WHEN 'set_config local' THEN format('SELECT set_config(''dbgate.default_budget'', %L, true)', v)
            WHEN 'SET' THEN format('SET dbgate.default_budget = %L', v)
            WHEN 'SET LOCAL' THEN format('SET LOCAL dbgate.default_budget = %L', v)
        END,
        e,
        format('current_setting(''dbgate.default_budget'') = %L', coalesce(v, '')));
END $$;

-- dbgate.enabled (sighup), dbgate.max_budgets and dbgate.max_roles
-- (postmaster) cannot be changed in a session, whatever the value
CREATE FUNCTION pg_temp.fuzz_fixed_guc(g text, v text, how text)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF v IS NULL AND how LIKE 'SET%' THEN
        RETURN;                 -- no NULL in SQL syntax
    END IF;
    PERFORM pg_temp.fuzz_call('SET ' || lower(g),
        CASE how
            WHEN 'set_config' THEN format('SELECT set_config(%L, %L, false)', g, v)
            WHEN 'set_config local' THEN format('SELECT set_config(%L, %L, true)', g, v)
            WHEN 'SET' THEN format('SET %s = %L', g, v)
            WHEN 'SET LOCAL' THEN format('SET LOCAL %s = %L', g, v)
            WHEN 'RESET' THEN format('RESET %s', g)
        END,
        '{55P02}');
END $$;

-- the harness notices a wrong outcome: a failure where success is expected,
-- a success where a failure is expected
SELECT pg_temp.fuzz_call('self-test', 'SELECT dbgate.create_budget(''fuzz_a'', 1)', '{}');
SELECT pg_temp.fuzz_call('self-test', 'SELECT dbgate.alter_budget(''fuzz_a'', 9)', '{22023}');
SELECT pg_temp.fuzz_call('self-test', 'SELECT dbgate.alter_budget(''fuzz_a'', 9)', '{}',
                         'EXISTS (SELECT 1 FROM dbgate.budgets WHERE max_active = 8)');
SELECT fn, call, expected, got, unchanged, effect_ok, ok FROM fuzz_log ORDER BY seq;
TRUNCATE fuzz_log;

SELECT count(*) AS fixture_budgets FROM dbgate.budgets;
SET client_min_messages = warning;   -- no notices from the calls

DO $$
DECLARE
    ints int[] := ARRAY[NULL, -2147483648, -1, 0, 1, 2, 2147483647];
    ivs interval[] := ARRAY[NULL, '-178000000 years', '-1 day', '-1 ms',
        '-1 us', '0', '-0 s', '1 us', '0.5 ms', '1 ms', '1.5 ms', '2.5 ms',
        '1 s', '1 day', '1 mon -30 days', '1 mon -30 days -1 us',
        '-1 mon 30 days 1 ms', '24 days 20:31:23.647', '24 days 20:31:23.648',
        '2147483647 ms', '2147483647.4 ms', '2147483647.5 ms',
        '2147483648 ms', '1 mon', '1000000 years', '178000000 years',
        '-1 year 1 mon 360 days']::interval[];
    names text[] := ARRAY[NULL, '', 'fuzz_a', 'fuzz_b', 'fuzz_new', 'FUZZ_A',
        ' fuzz_a', 'fuzz_a ', ' ', repeat('n', 63), repeat('n', 64),
        repeat('é', 31) || 'n', repeat('é', 32), repeat('€', 21),
        repeat('€', 21) || 'n', repeat('🚦', 15) || 'nnn', repeat('🚦', 16),
        'it''s', 'a"b', 'back\slash', E'tab\tand\nnewline', '%s%d',
        'fuzz_a''; SELECT 1; --', 'Ωμέγα', '🚦', repeat('x', 10000)];
    bools boolean[] := ARRAY[NULL, true, false];
    roles oid[];
BEGIN
    roles := ARRAY[NULL, 0, 1259, 4294967295,
                   'regress_dbgate_fuzz_r'::regrole, 'regress_dbgate_fuzz_s'::regrole,
                   'regress_dbgate_fuzz_su'::regrole]::oid[];
    PERFORM setseed(0.4711);

    -- 1. each argument through its whole pool, the others valid
    FOR i IN 1 .. array_length(names, 1) LOOP
        PERFORM pg_temp.fuzz_create(names[i], 1, 0, '0', '0', '0', true);
        PERFORM pg_temp.fuzz_alter(names[i], 3, NULL, NULL, NULL, NULL, NULL);
        PERFORM pg_temp.fuzz_drop(names[i], false);
        PERFORM pg_temp.fuzz_drop(names[i], true);
        PERFORM pg_temp.fuzz_assign('regress_dbgate_fuzz_s'::regrole, names[i]);
        PERFORM pg_temp.fuzz_reset(names[i]);
        PERFORM pg_temp.fuzz_default_budget(names[i], 'set_config');
        PERFORM pg_temp.fuzz_default_budget(names[i], 'SET LOCAL');
    END LOOP;
    FOR i IN 1 .. array_length(ints, 1) LOOP
        PERFORM pg_temp.fuzz_create('fuzz_new', ints[i], 0, '0', '0', '0', true);
        PERFORM pg_temp.fuzz_create('fuzz_new', 1, ints[i], '0', '0', '0', true);
        PERFORM pg_temp.fuzz_alter('fuzz_b', ints[i], NULL, NULL, NULL, NULL, NULL);
        PERFORM pg_temp.fuzz_alter('fuzz_b', NULL, ints[i], NULL, NULL, NULL, NULL);
    END LOOP;
    FOR i IN 1 .. array_length(ivs, 1) LOOP
        PERFORM pg_temp.fuzz_create('fuzz_new', 1, 0, ivs[i], '0', '0', true);
        PERFORM pg_temp.fuzz_create('fuzz_new', 1, 0, '0', ivs[i], '0', true);
        PERFORM pg_temp.fuzz_create('fuzz_new', 1, 0, '0', '0', ivs[i], true);
        PERFORM pg_temp.fuzz_alter('fuzz_a', NULL, NULL, ivs[i], NULL, NULL, NULL);
        PERFORM pg_temp.fuzz_alter('fuzz_a', NULL, NULL, NULL, ivs[i], NULL, NULL);
        PERFORM pg_temp.fuzz_alter('fuzz_a', NULL, NULL, NULL, NULL, ivs[i], NULL);
    END LOOP;
    FOR i IN 1 .. array_length(bools, 1) LOOP
        PERFORM pg_temp.fuzz_create('fuzz_new', 1, 0, '0', '0', '0', bools[i]);
        PERFORM pg_temp.fuzz_alter('fuzz_a', NULL, NULL, NULL, NULL, NULL, bools[i]);
    END LOOP;
    FOR i IN 1 .. array_length(roles, 1) LOOP
        PERFORM pg_temp.fuzz_assign(roles[i], 'fuzz_b');
        PERFORM pg_temp.fuzz_unassign(roles[i]);
    END LOOP;

    -- 2. random combinations
    FOR i IN 1 .. 1500 LOOP
        PERFORM pg_temp.fuzz_create(
            names[1 + floor(random() * array_length(names, 1))::int],
            ints[1 + floor(random() * array_length(ints, 1))::int],
            ints[1 + floor(random() * array_length(ints, 1))::int],
            ivs[1 + floor(random() * array_length(ivs, 1))::int],
            ivs[1 + floor(random() * array_length(ivs, 1))::int],
            ivs[1 + floor(random() * array_length(ivs, 1))::int],
            bools[1 + floor(random() * array_length(bools, 1))::int]);
        PERFORM pg_temp.fuzz_alter(
            names[1 + floor(random() * array_length(names, 1))::int],
            ints[1 + floor(random() * array_length(ints, 1))::int],
            ints[1 + floor(random() * array_length(ints, 1))::int],
            ivs[1 + floor(random() * array_length(ivs, 1))::int],
            ivs[1 + floor(random() * array_length(ivs, 1))::int],
            ivs[1 + floor(random() * array_length(ivs, 1))::int],
            bools[1 + floor(random() * array_length(bools, 1))::int]);
    END LOOP;
    FOR i IN 1 .. 300 LOOP
        PERFORM pg_temp.fuzz_drop(
            names[1 + floor(random() * array_length(names, 1))::int],
            bools[1 + floor(random() * array_length(bools, 1))::int]);
        PERFORM pg_temp.fuzz_assign(
            roles[1 + floor(random() * array_length(roles, 1))::int],
            names[1 + floor(random() * array_length(names, 1))::int]);
        PERFORM pg_temp.fuzz_unassign(
            roles[1 + floor(random() * array_length(roles, 1))::int]);
        PERFORM pg_temp.fuzz_reset(
            names[1 + floor(random() * array_length(names, 1))::int]);
    END LOOP;

    -- 3. settings
    FOR i IN 1 .. array_length(names, 1) LOOP
        PERFORM pg_temp.fuzz_default_budget(names[i], 'set_config local');
        PERFORM pg_temp.fuzz_default_budget(names[i], 'SET');
    END LOOP;
    FOR g IN 1 .. 4 LOOP
        FOR i IN 1 .. 12 LOOP
            PERFORM pg_temp.fuzz_fixed_guc(
                (ARRAY['dbgate.enabled', 'dbgate.max_budgets', 'dbgate.max_roles', 'DBGATE.Enabled'])[g],
                (ARRAY['on', 'off', 'true', '0', '1', '64', '10000', '10001',
                       '-1', 'abc', '', NULL])[i],
                (ARRAY['set_config', 'set_config local', 'SET', 'SET LOCAL'])[1 + i % 4]);
        END LOOP;
        PERFORM pg_temp.fuzz_fixed_guc(
            (ARRAY['dbgate.enabled', 'dbgate.max_budgets', 'dbgate.max_roles', 'DBGATE.Enabled'])[g],
            NULL, 'RESET');
    END LOOP;
END $$;

-- Infinite intervals exist from PostgreSQL 17 on; where they do, each
-- duration argument must reject them.  Logged apart from the summary.
DO $$
DECLARE
    txt text;
    inf interval;
BEGIN
    FOREACH txt IN ARRAY ARRAY['infinity', '-infinity'] LOOP
        BEGIN
            inf := txt::interval;
        EXCEPTION WHEN invalid_datetime_format THEN
            CONTINUE;
        END;
        PERFORM pg_temp.fuzz_call('infinity',
            format('SELECT dbgate.create_budget(''fuzz_new'', 1, 0, %L::interval)', txt), '{22023}',
            p_versioned => true);
        PERFORM pg_temp.fuzz_call('infinity',
            format('SELECT dbgate.create_budget(''fuzz_new'', 1, 0, ''0'', %L::interval)', txt), '{22023}',
            p_versioned => true);
        PERFORM pg_temp.fuzz_call('infinity',
            format('SELECT dbgate.create_budget(''fuzz_new'', 1, 0, ''0'', ''0'', %L::interval)', txt), '{22023}',
            p_versioned => true);
        PERFORM pg_temp.fuzz_call('infinity',
            format('SELECT dbgate.alter_budget(''fuzz_a'', queue_timeout => %L::interval)', txt), '{22023}',
            p_versioned => true);
        PERFORM pg_temp.fuzz_call('infinity',
            format('SELECT dbgate.alter_budget(''fuzz_a'', statement_timeout => %L::interval)', txt), '{22023}',
            p_versioned => true);
        PERFORM pg_temp.fuzz_call('infinity',
            format('SELECT dbgate.alter_budget(''fuzz_a'', lock_timeout => %L::interval)', txt), '{22023}',
            p_versioned => true);
    END LOOP;
END $$;
RESET client_min_messages;

-- Summary: calls per function and SQLSTATE
SELECT fn, got AS sqlstate, count(*) AS calls
  FROM fuzz_log WHERE NOT versioned
 GROUP BY fn, got ORDER BY fn, got;
SELECT count(*) AS calls, count(*) FILTER (WHERE got = '00000') AS succeeded,
       count(DISTINCT call) AS distinct_calls
  FROM fuzz_log WHERE NOT versioned;
-- every call ended as the oracle says (this list must be empty)
SELECT seq, fn, call, expected, got, message, unchanged, effect_ok
  FROM fuzz_log WHERE ok IS NOT TRUE ORDER BY seq LIMIT 50;

-- the fuzz left everything as it was
SELECT * FROM dbgate.budgets;
SHOW dbgate.default_budget;
SHOW dbgate.enabled;

SELECT dbgate.drop_budget('fuzz_a', true);
SELECT dbgate.drop_budget('fuzz_b');
DROP ROLE regress_dbgate_fuzz_r, regress_dbgate_fuzz_s, regress_dbgate_fuzz_su;
