--
-- Key limits (1.3): set_key_limit, reset_key_limit and dbgate.key_limits;
-- transactional like every configuration change, in config_script(),
-- removed with their budget or when its key_by changes; every error with
-- its SQLSTATE, and that a failing call changes nothing.  This build does
-- not enforce keys: set_key_limit says so with a WARNING.  Durability,
-- replication and dbgate.max_key_limits are in TAP 062_key_limits.
--
-- Runs alone as well as after the other files (pg_regress NAME): the
-- extension is created if it is not there yet.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS dbgate;
RESET client_min_messages;
\set VERBOSITY default
\set SHOW_CONTEXT never

SET client_min_messages = error;
SELECT dbgate.create_budget('v17_keys', 4, key_by => 'setting:app.tenant',
                            key_max_active => 1);
SELECT dbgate.create_budget('v17_user', 2, key_by => 'user');
SELECT dbgate.create_budget('v17_plain', 2);
RESET client_min_messages;

--
-- set_key_limit: NULL is the budget's key_* value; a second call replaces
--
SELECT dbgate.set_key_limit('v17_keys', 'tenant 42', max_active => 3);
SELECT dbgate.set_key_limit('v17_keys', '', max_queued => 0, max_rate => 2.5,
                            rate_burst => 4);
SELECT dbgate.set_key_limit('v17_keys', 'éè', 2, 5, 0, 1);
SELECT dbgate.set_key_limit('v17_user', repeat('k', 127));
SELECT * FROM dbgate.key_limits ORDER BY budget, key;
SELECT dbgate.set_key_limit('v17_keys', 'tenant 42', max_queued => 7);
SELECT budget, key, max_active, max_queued FROM dbgate.key_limits
 WHERE key = 'tenant 42';

--
-- transactional: a rolled-back change leaves nothing
--
BEGIN;
SELECT dbgate.set_key_limit('v17_keys', 'tenant 7', 1);
SELECT dbgate.reset_key_limit('v17_keys', 'tenant 42');
SELECT budget, key FROM dbgate.key_limits ORDER BY budget, key;
ROLLBACK;
SELECT budget, key FROM dbgate.key_limits ORDER BY budget, key;

--
-- config_script(): after the budgets, naming only the values set
--
\pset format unaligned
\pset tuples_only on
SELECT dbgate.config_script();
\pset format aligned
\pset tuples_only off

--
-- reset_key_limit: one key (none there: nothing), or every key
--
SELECT dbgate.reset_key_limit('v17_keys', 'tenant 42');
SELECT dbgate.reset_key_limit('v17_keys', 'no such key');
SELECT budget, key FROM dbgate.key_limits ORDER BY budget, key;
SELECT dbgate.reset_key_limit('v17_user');
SELECT budget, key FROM dbgate.key_limits ORDER BY budget, key;

--
-- changing or clearing key_by removes the budget's key limits (a NOTICE
-- with the count); a change of other fields keeps them; so does the same
-- key_by again
--
SELECT dbgate.set_key_limit('v17_user', 'alice', 1);
SELECT dbgate.set_key_limit('v17_user', 'bob', 1);
SELECT dbgate.alter_budget('v17_user', max_queued => 3, key_by => 'user');
SELECT count(*) AS user_limits FROM dbgate.key_limits WHERE budget = 'v17_user';
SELECT dbgate.alter_budget('v17_user', key_by => 'application_name');
SELECT count(*) AS user_limits FROM dbgate.key_limits WHERE budget = 'v17_user';
SELECT dbgate.set_key_limit('v17_user', 'psql', 1);
SELECT dbgate.alter_budget('v17_user', key_by => '');
SELECT count(*) AS user_limits FROM dbgate.key_limits WHERE budget = 'v17_user';

--
-- Errors.  After each failing call the key limits must be unchanged.
--
CREATE TEMP VIEW v17_config AS
  SELECT coalesce(string_agg(k::text, ' ' ORDER BY k.budget, k.key), '') AS config
    FROM dbgate.key_limits k;
SELECT config AS config0 FROM v17_config \gset
\set check 'SELECT :''SQLSTATE'' AS sqlstate, config = :''config0'' AS unchanged FROM v17_config;'
\set sqlstate '\\echo SQLSTATE: :SQLSTATE'

-- 42704: unknown budget
SELECT dbgate.set_key_limit('v17_none', 'k', 1);
:check
SELECT dbgate.reset_key_limit('v17_none');
:check
-- 22023: a budget without key_by
SELECT dbgate.set_key_limit('v17_plain', 'k', 1);
:check
-- 22023: NULL budget or key, a key over 127 bytes (also by its characters)
SELECT dbgate.set_key_limit(NULL, 'k', 1);
:check
SELECT dbgate.set_key_limit('v17_keys', NULL, 1);
:check
SELECT dbgate.set_key_limit('v17_keys', repeat('k', 128));
:check
SELECT dbgate.set_key_limit('v17_keys', repeat('é', 64));
:check
SELECT dbgate.reset_key_limit('v17_keys', repeat('k', 128));
:check
-- 22023: values outside the key_* ranges
SELECT dbgate.set_key_limit('v17_keys', 'k', max_active => -1);
:check
SELECT dbgate.set_key_limit('v17_keys', 'k', max_active => 5);
:check
SELECT dbgate.set_key_limit('v17_keys', 'k', max_queued => -1);
:check
SELECT dbgate.set_key_limit('v17_keys', 'k', max_rate => 0.001);
:check
SELECT dbgate.set_key_limit('v17_keys', 'k', max_rate => 'NaN');
:check
SELECT dbgate.set_key_limit('v17_keys', 'k', max_rate => 1000001);
:check
SELECT dbgate.set_key_limit('v17_keys', 'k', rate_burst => 0);
:check
SELECT dbgate.set_key_limit('v17_keys', 'k', rate_burst => 1000001);
:check
-- 25006: in a read-only transaction
BEGIN READ ONLY;
SELECT dbgate.set_key_limit('v17_keys', 'k', 1);
:sqlstate
ROLLBACK;
BEGIN READ ONLY;
SELECT dbgate.reset_key_limit('v17_keys');
:sqlstate
ROLLBACK;
:check
-- 42501: without EXECUTE (revoked from PUBLIC); the view is pg_monitor's
CREATE ROLE regress_dbgate_v17;
GRANT USAGE ON SCHEMA dbgate TO regress_dbgate_v17;
SET ROLE regress_dbgate_v17;
SELECT dbgate.set_key_limit('v17_keys', 'k', 1);
:sqlstate
SELECT dbgate.reset_key_limit('v17_keys');
:sqlstate
SELECT count(*) FROM dbgate.key_limits;
:sqlstate
RESET ROLE;
:check
GRANT pg_monitor TO regress_dbgate_v17;
SET ROLE regress_dbgate_v17;
SELECT budget, key FROM dbgate.key_limits ORDER BY budget, key;
RESET ROLE;
REVOKE USAGE ON SCHEMA dbgate FROM regress_dbgate_v17;
REVOKE pg_monitor FROM regress_dbgate_v17;
DROP ROLE regress_dbgate_v17;

--
-- drop_budget removes the budget's key limits
--
SELECT dbgate.drop_budget('v17_keys');
SELECT count(*) AS left_over FROM dbgate.key_limits;
SELECT dbgate.drop_budget('v17_user');
SELECT dbgate.drop_budget('v17_plain');
DROP VIEW v17_config;
