--
-- Keys (1.3), the configuration: the budget fields key_by, key_max_active,
-- key_max_queued, key_max_rate and key_rate_burst in create_budget,
-- alter_budget, dbgate.budgets and config_script().  Their errors are in
-- 20_errors.  This build stores keys and does not enforce them: every
-- change that leaves a budget with key_by says so with a WARNING.
--
-- Runs alone as well as after the other files (pg_regress NAME): the
-- extension is created if it is not there yet.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS dbgate;
RESET client_min_messages;
\set VERBOSITY default
\set SHOW_CONTEXT never

CREATE TEMP VIEW v16_fields AS
  SELECT budget, max_active, key_by, key_max_active, key_max_queued,
         key_max_rate, key_rate_burst
    FROM dbgate.budgets WHERE budget LIKE 'v16%';

--
-- The defaults, every form of key_by, by name and by position
--
SELECT dbgate.create_budget('v16_none', 4);
SELECT dbgate.create_budget('v16_user', 4, key_by => 'user');
SELECT dbgate.create_budget('v16_app', 4, key_by => 'application_name',
                            key_max_active => 2, key_max_queued => 8);
SELECT dbgate.create_budget('v16_addr', 4, key_by => 'client_addr',
                            key_max_rate => 50, key_rate_burst => 5);
SELECT dbgate.create_budget('v16_set', 4, key_by => 'setting:app.tenant');
SELECT dbgate.create_budget('v16_pos', 3, 0, '0', '0', '0', true, 'statement',
                            '0', -1, false, true, 'fifo', '100 ms', NULL,
                            1, 0, 1, 0, 0, 0, 'setting:work_mem', 3, 1,
                            0.5, 2);
-- '' is no key_by, as NULL
SELECT dbgate.create_budget('v16_empty', 4, key_by => '');
SELECT * FROM v16_fields ORDER BY budget;

--
-- alter_budget: NULL keeps a field, '' clears key_by, a value replaces it
--
SELECT dbgate.alter_budget('v16_app', key_by => NULL, key_max_active => 4);
SELECT dbgate.alter_budget('v16_user', key_by => '');
SELECT dbgate.alter_budget('v16_none', key_max_queued => 3);
SELECT dbgate.alter_budget('v16_set', key_by => 'setting:my_ext.sub.Tenant_1$');
SELECT * FROM v16_fields ORDER BY budget;
-- in a transaction, rolled back: nothing changes
BEGIN;
SELECT dbgate.alter_budget('v16_addr', key_by => 'user', key_max_rate => 0);
SELECT key_by, key_max_rate FROM dbgate.budgets WHERE budget = 'v16_addr';
ROLLBACK;
SELECT key_by, key_max_rate FROM dbgate.budgets WHERE budget = 'v16_addr';
-- a budget without key_by may get children; key_max_* alone is allowed
SELECT dbgate.create_budget('v16_child', 1, parent => 'v16_none');
SELECT budget, parent, key_by FROM dbgate.budgets
 WHERE budget IN ('v16_none', 'v16_child') ORDER BY budget;

--
-- config_script() names the key fields only where they are not their
-- defaults
--
\pset format unaligned
\pset tuples_only on
SELECT dbgate.config_script();
\pset format aligned
\pset tuples_only off

SELECT dbgate.drop_budget(budget, true) FROM dbgate.budgets
 WHERE budget LIKE 'v16%' ORDER BY budget DESC;
SELECT count(*) AS left_over FROM dbgate.budgets WHERE budget LIKE 'v16%';
DROP VIEW v16_fields;
