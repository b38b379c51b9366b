--
-- Every documented error of the SQL functions, with its SQLSTATE, and that
-- a call that fails changes nothing.
--
-- Runs alone as well as after the other files (pg_regress NAME): the
-- extension is created if it is not there yet.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS dbgate;
RESET client_min_messages;
\set VERBOSITY default
\set SHOW_CONTEXT never
SET IntervalStyle = postgres;

SELECT dbgate.create_budget('err_a', 2, 1, '1 s', '2 s', '3 s', true);
SELECT dbgate.create_budget('err_b', 1);
CREATE ROLE regress_dbgate_err_r;
SELECT dbgate.assign_role('regress_dbgate_err_r', 'err_a');
SELECT * FROM dbgate.budgets;

-- The whole configuration as one value, taken now; after each failing call
-- ":check" prints the SQLSTATE of the call and whether the configuration
-- is still the same.
CREATE TEMP VIEW err_config AS
  SELECT string_agg(b::text, ' ' ORDER BY b.budget) AS config
    FROM dbgate.budgets b;
SELECT config AS config0 FROM err_config \gset
\set check 'SELECT :''SQLSTATE'' AS sqlstate, config = :''config0'' AS unchanged FROM err_config;'
-- inside a failed transaction block, ":sqlstate" prints the SQLSTATE only
\set sqlstate '\\echo SQLSTATE: :SQLSTATE'

--
-- 22023: invalid values
--
-- max_active < 1, max_queued < 0
SELECT dbgate.create_budget('err_new', 0);
:check
SELECT dbgate.create_budget('err_new', -1);
:check
SELECT dbgate.create_budget('err_new', -2147483648);
:check
SELECT dbgate.create_budget('err_new', 1, -1);
:check
SELECT dbgate.alter_budget('err_a', max_active => 0);
:check
SELECT dbgate.alter_budget('err_a', max_queued => -1);
:check

-- negative durations
SELECT dbgate.create_budget('err_new', 1, queue_timeout => '-1 us');
:check
SELECT dbgate.create_budget('err_new', 1, statement_timeout => '-1 ms');
:check
SELECT dbgate.create_budget('err_new', 1, lock_timeout => '-1 day');
:check
SELECT dbgate.create_budget('err_new', 1, queue_timeout => '1 mon -30 days -1 us');
:check
SELECT dbgate.alter_budget('err_a', queue_timeout => '-1 s');
:check
SELECT dbgate.alter_budget('err_a', statement_timeout => '-00:00:00.001');
:check
SELECT dbgate.alter_budget('err_a', lock_timeout => '-178000000 years');
:check

-- durations over 2147483647 ms (after rounding to whole milliseconds)
SELECT dbgate.create_budget('err_new', 1, queue_timeout => '2147483648 ms');
:check
SELECT dbgate.create_budget('err_new', 1, statement_timeout => '24 days 20:31:23.648');
:check
SELECT dbgate.create_budget('err_new', 1, lock_timeout => '2147483647.5 ms');
:check
SELECT dbgate.alter_budget('err_a', queue_timeout => '1 mon');
:check
SELECT dbgate.alter_budget('err_a', statement_timeout => '178000000 years');
:check
SELECT dbgate.alter_budget('err_a', lock_timeout => '25 days');
:check

-- NULL where a value is required: each argument of create_budget
SELECT dbgate.create_budget(NULL, 1);
:check
SELECT dbgate.create_budget('err_new', NULL);
:check
SELECT dbgate.create_budget('err_new', 1, NULL);
:check
SELECT dbgate.create_budget('err_new', 1, 0, NULL);
:check
SELECT dbgate.create_budget('err_new', 1, 0, '0', NULL);
:check
SELECT dbgate.create_budget('err_new', 1, 0, '0', '0', NULL);
:check
SELECT dbgate.create_budget('err_new', 1, 0, '0', '0', '0', NULL);
:check
-- ... and the names and roles of the others
SELECT dbgate.alter_budget(NULL, 1);
:check
SELECT dbgate.drop_budget(NULL);
:check
SELECT dbgate.drop_budget('err_b', NULL);
:check
SELECT dbgate.assign_role(NULL, 'err_b');
:check
SELECT dbgate.assign_role('regress_dbgate_err_r', NULL);
:check
SELECT dbgate.unassign_role(NULL);
:check

-- budget names: empty, over 63 bytes
SELECT dbgate.create_budget('', 1);
:check
SELECT dbgate.create_budget(repeat('x', 64), 1);
:check
SELECT dbgate.create_budget(repeat('x', 1000), 1);
:check
SELECT dbgate.alter_budget('', 1);
:check
SELECT dbgate.alter_budget(repeat('x', 64), 1);
:check
SELECT dbgate.drop_budget('');
:check
SELECT dbgate.drop_budget(repeat('x', 64));
:check
SELECT dbgate.assign_role('regress_dbgate_err_r', '');
:check
SELECT dbgate.assign_role('regress_dbgate_err_r', repeat('x', 64));
:check
SELECT dbgate.reset_stats('');
:check
SELECT dbgate.reset_stats(repeat('x', 64));
:check
-- multibyte names over 63 bytes: 32 x 2 bytes, 16 x 4 bytes, 21 x 3 + 1
SELECT octet_length(repeat('é', 32)) AS bytes, length(repeat('é', 32)) AS chars;
SELECT dbgate.create_budget(repeat('é', 32), 1);
:check
SELECT dbgate.create_budget(repeat('🚦', 16), 1);
:check
SELECT dbgate.create_budget(repeat('€', 21) || 'x', 1);
:check
-- 63 bytes are fine, also made of multibyte characters
SELECT dbgate.create_budget(repeat('x', 63), 1);
SELECT dbgate.create_budget(repeat('é', 31) || 'x', 1);
SELECT dbgate.create_budget(repeat('🚦', 15) || 'xyz', 1);
SELECT dbgate.create_budget(repeat('€', 21), 1);
SELECT budget, octet_length(budget) AS bytes, length(budget) AS chars
  FROM dbgate.budgets WHERE octet_length(budget) = 63;
SELECT dbgate.drop_budget(repeat('x', 63));
SELECT dbgate.drop_budget(repeat('é', 31) || 'x');
SELECT dbgate.drop_budget(repeat('🚦', 15) || 'xyz');
SELECT dbgate.drop_budget(repeat('€', 21));
SELECT config = :'config0' AS unchanged FROM err_config;

--
-- 42710: the budget exists (names are compared exactly)
--
SELECT dbgate.create_budget('err_a', 1);
:check
SELECT dbgate.create_budget('err_b', 5, 5, '1 s', '1 s', '1 s', false);
:check
-- also when created earlier in the same transaction
BEGIN;
SELECT dbgate.create_budget('err_new', 1);
SELECT dbgate.create_budget('err_new', 2);
:sqlstate
ROLLBACK;
SELECT config = :'config0' AS unchanged FROM err_config;

--
-- 42704: unknown budget, unknown role
--
SELECT dbgate.alter_budget('err_nonexistent', 1);
:check
-- even with nothing to change
SELECT dbgate.alter_budget('err_nonexistent');
:check
-- names are case-sensitive and not trimmed
SELECT dbgate.alter_budget('ERR_A', 1);
:check
SELECT dbgate.alter_budget(' err_a', 1);
:check
SELECT dbgate.drop_budget('err_nonexistent');
:check
SELECT dbgate.drop_budget('err_nonexistent', true);
:check
SELECT dbgate.assign_role('regress_dbgate_err_r', 'err_nonexistent');
:check
SELECT dbgate.reset_stats('err_nonexistent');
:check
-- a role name that does not exist (rejected by the regrole input)
SELECT dbgate.assign_role('regress_dbgate_err_nonexistent', 'err_a');
:check
SELECT dbgate.unassign_role('regress_dbgate_err_nonexistent');
:check
-- an OID that is no role
SELECT dbgate.assign_role(0, 'err_a');
:check
SELECT dbgate.assign_role(4294967295::oid::regrole, 'err_a');
:check
SELECT dbgate.assign_role('pg_class'::regclass::oid::regrole, 'err_a');
:check
SELECT dbgate.unassign_role(0);
:check
SELECT dbgate.unassign_role(4294967295::oid::regrole);
:check
-- a role dropped in this transaction
BEGIN;
CREATE ROLE regress_dbgate_err_gone;
SELECT oid AS gone_oid FROM pg_roles WHERE rolname = 'regress_dbgate_err_gone' \gset
DROP ROLE regress_dbgate_err_gone;
-- (the message names the OID, which varies)
\set VERBOSITY sqlstate
SELECT dbgate.assign_role(:gone_oid::oid::regrole, 'err_a');
\set VERBOSITY default
:sqlstate
ROLLBACK;
SELECT config = :'config0' AS unchanged FROM err_config;

--
-- 2BP01: drop with roles assigned and no force
--
SELECT dbgate.drop_budget('err_a');
:check
SELECT dbgate.drop_budget('err_a', false);
:check
SELECT dbgate.drop_budget('err_a', force => false);
:check

--
-- 53400: more budgets than dbgate.max_budgets
--
SHOW dbgate.max_budgets;
BEGIN;
-- create until it fails; each creation in a subtransaction of its own
DO $$
DECLARE
    n int := 0;
BEGIN
    LOOP
        BEGIN
            PERFORM dbgate.create_budget('err_fill_' || n + 1, 1);
            n := n + 1;
        EXCEPTION WHEN configuration_limit_exceeded THEN
            RAISE NOTICE 'creating budget % of this transaction failed: % (SQLSTATE %)',
                n + 1, SQLERRM, SQLSTATE;
            EXIT;
        END;
        IF n > 100000 THEN
            RAISE EXCEPTION 'no limit found';
        END IF;
    END LOOP;
END $$;
SELECT count(*) AS budgets,
       count(*) = current_setting('dbgate.max_budgets')::int AS at_limit
  FROM dbgate.budgets;
SAVEPOINT at_limit;
SELECT dbgate.create_budget('err_one_more', 1);
:sqlstate
ROLLBACK TO at_limit;
-- a drop makes room for one more
SELECT dbgate.drop_budget('err_fill_1');
SELECT dbgate.create_budget('err_one_more', 1);
SAVEPOINT at_limit;
SELECT dbgate.create_budget('err_two_more', 1);
:sqlstate
ROLLBACK TO at_limit;
ROLLBACK;
SELECT config = :'config0' AS unchanged FROM err_config;

--
-- 53400: more role assignments than dbgate.max_roles
--
SHOW dbgate.max_roles;
BEGIN;
DO $$
DECLARE
    n int := 0;
BEGIN
    FOR i IN 1 .. current_setting('dbgate.max_roles')::int + 1 LOOP
        EXECUTE format('CREATE ROLE %I', 'regress_dbgate_err_fill_' || i);
    END LOOP;
    FOR i IN 1 .. current_setting('dbgate.max_roles')::int + 1 LOOP
        BEGIN
            PERFORM dbgate.assign_role(('regress_dbgate_err_fill_' || i)::regrole, 'err_b');
            n := n + 1;
        EXCEPTION WHEN configuration_limit_exceeded THEN
            RAISE NOTICE 'assignment % of this transaction failed: % (SQLSTATE %)',
                n + 1, SQLERRM, SQLSTATE;
            EXIT;
        END;
    END LOOP;
END $$;
SELECT sum(cardinality(roles)) AS assignments,
       sum(cardinality(roles)) = current_setting('dbgate.max_roles')::int AS at_limit
  FROM dbgate.budgets;
-- at the limit, an assigned role can still move to another budget
SELECT dbgate.assign_role('regress_dbgate_err_fill_1', 'err_a');
SELECT dbgate.assign_role('regress_dbgate_err_r', 'err_b');
SAVEPOINT at_limit;
SELECT dbgate.assign_role('regress_dbgate_err_fill_1025', 'err_a');
:sqlstate
ROLLBACK TO at_limit;
-- an unassignment makes room for one more
SELECT dbgate.unassign_role('regress_dbgate_err_fill_2');
SELECT dbgate.assign_role('regress_dbgate_err_fill_1025', 'err_a');
SELECT budget, cardinality(roles) FROM dbgate.budgets;
ROLLBACK;
SELECT count(*) AS fill_roles FROM pg_roles WHERE rolname LIKE 'regress_dbgate_err_fill%';
SELECT config = :'config0' AS unchanged FROM err_config;

--
-- (1.3) 22023: the key fields
--
-- key_by of another form, with an empty setting name, with a name that is
-- not a setting's, too long
SELECT dbgate.create_budget('err_new', 1, key_by => 'role');
:check
SELECT dbgate.create_budget('err_new', 1, key_by => 'USER');
:check
SELECT dbgate.create_budget('err_new', 1, key_by => 'setting:');
:check
SELECT dbgate.create_budget('err_new', 1, key_by => 'setting:app..tenant');
:check
SELECT dbgate.create_budget('err_new', 1, key_by => 'setting:1app');
:check
SELECT dbgate.create_budget('err_new', 1, key_by => 'setting:app.');
:check
SELECT dbgate.create_budget('err_new', 1, key_by => 'setting:app-tenant');
:check
SELECT dbgate.alter_budget('err_b', key_by => 'setting:' || repeat('x', 64));
:check
SELECT dbgate.alter_budget('err_b', key_by => ' user');
:check
-- key_max_active < 0 or over max_active, also by lowering max_active
SELECT dbgate.create_budget('err_new', 2, key_max_active => -1);
:check
SELECT dbgate.create_budget('err_new', 2, key_max_active => 3);
:check
SELECT dbgate.alter_budget('err_b', key_max_active => 2);
:check
-- key_max_queued < 0
SELECT dbgate.create_budget('err_new', 1, key_max_queued => -1);
:check
SELECT dbgate.alter_budget('err_b', key_max_queued => -2147483648);
:check
-- key_max_rate and key_rate_burst as max_rate and rate_burst
SELECT dbgate.create_budget('err_new', 1, key_max_rate => -1);
:check
SELECT dbgate.create_budget('err_new', 1, key_max_rate => 0.001);
:check
SELECT dbgate.create_budget('err_new', 1, key_max_rate => 1000001);
:check
SELECT dbgate.alter_budget('err_b', key_max_rate => 'NaN');
:check
SELECT dbgate.alter_budget('err_b', key_max_rate => 'Infinity');
:check
SELECT dbgate.create_budget('err_new', 1, key_rate_burst => 0);
:check
SELECT dbgate.alter_budget('err_b', key_rate_burst => 1000001);
:check
-- NULL where create_budget needs a value
SELECT dbgate.create_budget('err_new', 1, key_max_active => NULL);
:check
SELECT dbgate.create_budget('err_new', 1, key_rate_burst => NULL);
:check
-- key_by on a budget with children, a child under a budget with key_by
SET client_min_messages = error;
SELECT dbgate.create_budget('err_kp', 2);
SELECT dbgate.create_budget('err_kc', 1, parent => 'err_kp');
SELECT dbgate.create_budget('err_kk', 2, key_max_active => 2, key_by => 'user');
RESET client_min_messages;
SELECT config AS config0 FROM err_config \gset
SELECT dbgate.alter_budget('err_kp', key_by => 'user');
:check
SELECT dbgate.create_budget('err_new', 1, parent => 'err_kk');
:check
SELECT dbgate.alter_budget('err_kc', parent => 'err_kk');
:check
-- ... and lowering max_active under key_max_active
SELECT dbgate.alter_budget('err_kk', max_active => 1);
:check
SELECT dbgate.drop_budget('err_kc');
SELECT dbgate.drop_budget('err_kp');
SELECT dbgate.drop_budget('err_kk');
SELECT config AS config0 FROM err_config \gset

--
-- 0A000: PREPARE TRANSACTION after a change (refused before the server
-- looks at max_prepared_transactions)
--
BEGIN;
SELECT dbgate.create_budget('err_prepared', 1);
PREPARE TRANSACTION 'regress_dbgate_err';
:check
BEGIN;
SELECT dbgate.alter_budget('err_a', 5);
SELECT dbgate.unassign_role('regress_dbgate_err_r');
PREPARE TRANSACTION 'regress_dbgate_err';
:check
SELECT count(*) AS prepared FROM pg_prepared_xacts WHERE gid = 'regress_dbgate_err';
SELECT config = :'config0' AS unchanged FROM err_config;

--
-- A failing statement undoes the changes made before it in its transaction
--
BEGIN;
SELECT dbgate.alter_budget('err_a', 9);
SELECT dbgate.create_budget('err_new', 1);
SELECT dbgate.drop_budget('err_a');
:sqlstate
COMMIT;
SELECT config = :'config0' AS unchanged FROM err_config;
SELECT * FROM dbgate.budgets;

DROP VIEW err_config;
SELECT dbgate.drop_budget('err_a', true);
SELECT dbgate.drop_budget('err_b');
DROP ROLE regress_dbgate_err_r;
SELECT * FROM dbgate.budgets;
