--
-- The 1.2 additions to the SQL interface: the budget fields queue_order,
-- overtake_limit, parent, weight, max_rate, rate_burst, max_memory_mb and
-- min_cost, the hierarchy of budgets, and read-only transactions.  Each
-- function's normal use, every error with its SQLSTATE (a failing call
-- changes nothing), config_script() with a hierarchy.
--
-- Runs alone as well as after the other files (pg_regress NAME): the
-- extension is created if it is not there yet.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS dbgate;
RESET client_min_messages;
\set VERBOSITY default
\set SHOW_CONTEXT never
SET IntervalStyle = postgres;
SELECT current_database() AS db \gset
\set sqlstate '\\echo SQLSTATE: :SQLSTATE'

CREATE TEMP VIEW v12_fields AS
  SELECT budget, queue_order, overtake_limit, parent, weight, max_rate,
         rate_burst, max_memory_mb, min_cost
    FROM dbgate.budgets WHERE budget LIKE 'v12%';

--
-- create_budget: defaults, every new argument by name and by position,
-- the bounds of each range
--
SELECT dbgate.create_budget('v12_defaults', 2);
SELECT dbgate.create_budget(name => 'v12_named', max_active => 3,
                            queue_order => 'lifo', overtake_limit => '250 ms',
                            weight => 7, max_rate => 12.5, rate_burst => 4,
                            max_memory_mb => 256, min_cost => 1000.25);
SELECT dbgate.create_budget('v12_pos', 1, 0, '0', '0', '0', true,
                            'statement', '0', -1, false, true,
                            'fifo', '1 s', NULL, 2, 0, 1, 0, 0);
SELECT dbgate.create_budget('v12_low', 1, queue_order => 'lifo',
                            overtake_limit => '0', queue_timeout => '1 s',
                            weight => 1, max_rate => 0.01, rate_burst => 1,
                            max_memory_mb => 0, min_cost => 0);
SELECT dbgate.create_budget('v12_high', 1, overtake_limit => '2147483647 ms',
                            weight => 10000, max_rate => 1000000,
                            rate_burst => 1000000,
                            max_memory_mb => 2147483647, min_cost => 1e308);
-- parent => '' is the same as no parent
SELECT dbgate.create_budget('v12_empty_parent', 1, parent => '');
SELECT * FROM v12_fields;

--
-- alter_budget: each new field alone; NULL keeps a field
--
SELECT dbgate.alter_budget('v12_defaults', queue_order => 'lifo');
SELECT dbgate.alter_budget('v12_defaults', overtake_limit => '1.5 s');
SELECT dbgate.alter_budget('v12_defaults', weight => 3);
SELECT dbgate.alter_budget('v12_defaults', max_rate => 100);
SELECT dbgate.alter_budget('v12_defaults', rate_burst => 10);
SELECT dbgate.alter_budget('v12_defaults', max_memory_mb => 64);
SELECT dbgate.alter_budget('v12_defaults', min_cost => 50);
SELECT * FROM v12_fields WHERE budget = 'v12_defaults';
SELECT dbgate.alter_budget('v12_defaults', NULL, NULL, NULL, NULL, NULL, NULL,
                           NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
                           NULL, NULL, NULL, NULL, NULL);
SELECT dbgate.alter_budget('v12_defaults', max_active => 4);
SELECT max_active, queue_order, overtake_limit, weight, max_rate, rate_burst,
       max_memory_mb, min_cost
  FROM dbgate.budgets WHERE budget = 'v12_defaults';
SELECT dbgate.alter_budget('v12_defaults', queue_order => 'fifo',
                           overtake_limit => '100 ms', weight => 1,
                           max_rate => 0, rate_burst => 1, max_memory_mb => 0,
                           min_cost => 0);
SELECT * FROM v12_fields WHERE budget = 'v12_defaults';

--
-- The hierarchy: v12_top > v12_mid > v12_leaf, v12_top > v12_a_child
-- (a name that sorts before its parent's)
--
SELECT dbgate.create_budget('v12_top', 10);
SELECT dbgate.create_budget('v12_mid', 6, parent => 'v12_top', weight => 3);
SELECT dbgate.create_budget('v12_leaf', 2, parent => 'v12_mid');
SELECT dbgate.create_budget('v12_a_child', 4, parent => 'v12_top');
SELECT budget, parent, weight FROM dbgate.budgets
 WHERE budget IN ('v12_top', 'v12_mid', 'v12_leaf', 'v12_a_child');
-- a child may be moved to another parent, and made top-level with ''
SELECT dbgate.alter_budget('v12_a_child', parent => 'v12_mid');
SELECT dbgate.alter_budget('v12_a_child', parent => '');
SELECT dbgate.alter_budget('v12_a_child', parent => 'v12_top');
SELECT budget, parent FROM dbgate.budgets WHERE budget = 'v12_a_child';
-- roles and databases are assigned to the leaves
CREATE ROLE regress_dbgate_v12_r;
CREATE ROLE regress_dbgate_v12_s;
SELECT dbgate.assign_role('regress_dbgate_v12_r', 'v12_leaf');
CREATE DATABASE regress_dbgate_v12_db;
SELECT dbgate.assign_database('regress_dbgate_v12_db', 'v12_a_child');

--
-- config_script(): max_active and the fields not at their defaults, parents
-- before children
--
\pset format unaligned
\pset tuples_only on
SELECT dbgate.config_script();
\pset format aligned
\pset tuples_only off

--
-- Errors.  After each failing call the configuration must be unchanged.
--
CREATE TEMP VIEW v12_config AS
  SELECT string_agg(b::text, ' ' ORDER BY b.budget) AS config
    FROM dbgate.budgets b;
SELECT config AS config0 FROM v12_config \gset
\set check 'SELECT :''SQLSTATE'' AS sqlstate, config = :''config0'' AS unchanged FROM v12_config;'

-- 22023: queue_order
SELECT dbgate.create_budget('v12_new', 1, queue_order => 'LIFO');
:check
SELECT dbgate.create_budget('v12_new', 1, queue_order => '');
:check
SELECT dbgate.alter_budget('v12_named', queue_order => 'random');
:check
-- 22023: overtake_limit negative or too long
SELECT dbgate.create_budget('v12_new', 1, overtake_limit => '-1 ms');
:check
SELECT dbgate.alter_budget('v12_named', overtake_limit => '2147483648 ms');
:check
-- 22023: weight outside 1..10000
SELECT dbgate.create_budget('v12_new', 1, weight => 0);
:check
SELECT dbgate.create_budget('v12_new', 1, weight => 10001);
:check
SELECT dbgate.alter_budget('v12_named', weight => -1);
:check
-- 22023: max_rate not 0 and not a finite value from 0.01 to 1000000
SELECT dbgate.create_budget('v12_new', 1, max_rate => -1);
:check
SELECT dbgate.create_budget('v12_new', 1, max_rate => 0.005);
:check
SELECT dbgate.create_budget('v12_new', 1, max_rate => 1000000.5);
:check
SELECT dbgate.create_budget('v12_new', 1, max_rate => 'NaN');
:check
SELECT dbgate.create_budget('v12_new', 1, max_rate => 'Infinity');
:check
SELECT dbgate.alter_budget('v12_named', max_rate => '-Infinity');
:check
SELECT dbgate.alter_budget('v12_named', max_rate => '-0.01');
:check
-- 22023: rate_burst outside 1..1000000
SELECT dbgate.create_budget('v12_new', 1, rate_burst => 0);
:check
SELECT dbgate.create_budget('v12_new', 1, rate_burst => 1000001);
:check
SELECT dbgate.alter_budget('v12_named', rate_burst => -5);
:check
-- 22023: max_memory_mb < 0
SELECT dbgate.create_budget('v12_new', 1, max_memory_mb => -1);
:check
SELECT dbgate.alter_budget('v12_named', max_memory_mb => -2147483648);
:check
-- 22023: min_cost negative, NaN or infinite
SELECT dbgate.create_budget('v12_new', 1, min_cost => -0.5);
:check
SELECT dbgate.create_budget('v12_new', 1, min_cost => 'NaN');
:check
SELECT dbgate.create_budget('v12_new', 1, min_cost => 'Infinity');
:check
SELECT dbgate.alter_budget('v12_named', min_cost => '-Infinity');
:check
-- 22023: NULL where create_budget needs a value (parent may be NULL)
SELECT dbgate.create_budget('v12_new', 1, queue_order => NULL);
:check
SELECT dbgate.create_budget('v12_new', 1, overtake_limit => NULL);
:check
SELECT dbgate.create_budget('v12_new', 1, weight => NULL);
:check
SELECT dbgate.create_budget('v12_new', 1, max_rate => NULL);
:check
SELECT dbgate.create_budget('v12_new', 1, rate_burst => NULL);
:check
SELECT dbgate.create_budget('v12_new', 1, max_memory_mb => NULL);
:check
SELECT dbgate.create_budget('v12_new', 1, min_cost => NULL);
:check
-- 22023: a 'lifo' budget with overtake_limit 0 and queue_timeout 0, as
-- the fields are after the call
SELECT dbgate.create_budget('v12_new', 1, queue_order => 'lifo',
                            overtake_limit => '0');
:check
SELECT dbgate.alter_budget('v12_defaults', queue_order => 'lifo',
                           overtake_limit => '0');
:check
SELECT dbgate.alter_budget('v12_low', queue_timeout => '0');
:check
SELECT dbgate.alter_budget('v12_named', overtake_limit => '0');
:check
-- ... but either bound is enough, and 'fifo' needs none
SELECT dbgate.alter_budget('v12_named', overtake_limit => '0',
                           queue_timeout => '10 s');
SELECT dbgate.alter_budget('v12_low', queue_timeout => '0',
                           overtake_limit => '1 ms');
SELECT dbgate.alter_budget('v12_low', queue_order => 'fifo',
                           overtake_limit => '0');
SELECT budget, queue_order, overtake_limit, queue_timeout FROM dbgate.budgets
 WHERE budget IN ('v12_named', 'v12_low');
SELECT config AS config0 FROM v12_config \gset
-- 22023: a parent name that cannot be a budget name
SELECT dbgate.create_budget('v12_new', 1, parent => repeat('p', 64));
:check
-- 42704: unknown parent
SELECT dbgate.create_budget('v12_new', 1, parent => 'v12_nobudget');
:check
SELECT dbgate.alter_budget('v12_named', parent => 'v12_nobudget');
:check
SELECT dbgate.alter_budget('v12_nobudget', parent => 'v12_top');
:check
-- 22023: a budget naming itself, a cycle
SELECT dbgate.create_budget('v12_new', 1, parent => 'v12_new');
:check
SELECT dbgate.alter_budget('v12_named', parent => 'v12_named');
:check
SELECT dbgate.alter_budget('v12_top', parent => 'v12_leaf');
:check
SELECT dbgate.alter_budget('v12_top', parent => 'v12_mid');
:check
-- 22023: a chain of more than four budgets.  v12_d1 > v12_d2 > v12_d3 >
-- v12_d4 is the longest chain; v12_t2 > v12_t1 has two levels.
SELECT dbgate.create_budget('v12_d1', 1);
SELECT dbgate.create_budget('v12_d2', 1, parent => 'v12_d1');
SELECT dbgate.create_budget('v12_d3', 1, parent => 'v12_d2');
SELECT dbgate.create_budget('v12_d4', 1, parent => 'v12_d3');
SELECT dbgate.create_budget('v12_t2', 1);
SELECT dbgate.create_budget('v12_t1', 1, parent => 'v12_t2');
SELECT config AS config0 FROM v12_config \gset
SELECT dbgate.create_budget('v12_new', 1, parent => 'v12_d4');
:check
-- v12_t2 (two levels) under v12_d3 (three)
SELECT dbgate.alter_budget('v12_t2', parent => 'v12_d3');
:check
-- v12_d1 (four levels) under v12_t1 (two)
SELECT dbgate.alter_budget('v12_d1', parent => 'v12_t1');
:check
-- ... v12_t2 under v12_d2 makes four: fine
SELECT dbgate.alter_budget('v12_t2', parent => 'v12_d2');
SELECT budget, parent FROM dbgate.budgets WHERE budget ~ '^v12_[dt][0-9]$';
SELECT dbgate.drop_budget('v12_d1', force => true);
SELECT dbgate.drop_budget('v12_d2', force => true);
SELECT dbgate.drop_budget('v12_d3', force => true);
SELECT dbgate.drop_budget('v12_d4');
SELECT dbgate.drop_budget('v12_t2', force => true);
SELECT dbgate.drop_budget('v12_t1');
SELECT config AS config0 FROM v12_config \gset
-- 22023: assigning a role or database to a budget that has children
SELECT dbgate.assign_role('regress_dbgate_v12_s', 'v12_mid');
:check
SELECT dbgate.assign_role('regress_dbgate_v12_r', 'v12_top');
:check
SELECT dbgate.assign_database(:'db', 'v12_top');
:check
-- 22023: making a budget that has role or database assignments a parent
SELECT dbgate.create_budget('v12_new', 1, parent => 'v12_leaf');
:check
SELECT dbgate.alter_budget('v12_named', parent => 'v12_a_child');
:check
-- 2BP01: drop_budget of a budget that has children, without force
SELECT dbgate.drop_budget('v12_top');
:check
SELECT dbgate.drop_budget('v12_mid');
:check
-- the failed calls left a usable transaction state and nothing pending
SELECT budget, parent, roles, databases FROM dbgate.budgets
 WHERE budget IN ('v12_top', 'v12_mid', 'v12_leaf', 'v12_a_child');

--
-- In a transaction: the checks see the transaction's own changes, and a
-- rolled-back change leaves nothing
--
BEGIN;
SELECT dbgate.unassign_role('regress_dbgate_v12_r');
SELECT dbgate.create_budget('v12_under_leaf', 1, parent => 'v12_leaf');
SELECT budget, parent FROM dbgate.budgets WHERE budget = 'v12_under_leaf';
SELECT dbgate.assign_role('regress_dbgate_v12_r', 'v12_leaf');
:sqlstate
ROLLBACK;
SELECT budget, parent, roles FROM dbgate.budgets
 WHERE budget IN ('v12_leaf', 'v12_under_leaf');

--
-- drop_budget with force makes the children top-level
--
SELECT dbgate.drop_budget('v12_mid', force => true);
SELECT budget, parent, roles FROM dbgate.budgets
 WHERE budget IN ('v12_top', 'v12_mid', 'v12_leaf', 'v12_a_child');
-- a former parent without children may be assigned to
SELECT dbgate.alter_budget('v12_a_child', parent => '');
SELECT dbgate.assign_role('regress_dbgate_v12_s', 'v12_top');
SELECT dbgate.unassign_role('regress_dbgate_v12_s');

--
-- Read-only transactions: the mutating functions fail like any write
-- (25006) and change nothing; reset_stats(), config_script() and the views
-- work.
--
SELECT config AS config0 FROM v12_config \gset
BEGIN READ ONLY;
SELECT dbgate.create_budget('v12_new', 1);
:sqlstate
ROLLBACK;
:check
SET default_transaction_read_only = on;
SELECT dbgate.create_budget('v12_new', 1);
:check
SELECT dbgate.alter_budget('v12_top', weight => 2);
:check
SELECT dbgate.drop_budget('v12_top');
:check
SELECT dbgate.assign_role('regress_dbgate_v12_s', 'v12_top');
:check
SELECT dbgate.unassign_role('regress_dbgate_v12_r');
:check
SELECT dbgate.assign_database(:'db', 'v12_top');
:check
SELECT dbgate.unassign_database('regress_dbgate_v12_db');
:check
SELECT dbgate.reset_stats('v12_top');
SELECT dbgate.reset_stats();
SELECT length(dbgate.config_script()) > 0 AS config_script_works;
SELECT count(*) > 0 AS budgets_readable FROM dbgate.budgets;
RESET default_transaction_read_only;

--
-- Privileges: the 1.2 signatures are revoked from PUBLIC like the others
--
SELECT p.oid::regprocedure AS function,
       has_function_privilege('public', p.oid, 'EXECUTE') AS public,
       has_function_privilege('pg_monitor', p.oid, 'EXECUTE') AS pg_monitor
  FROM pg_proc p
 WHERE p.pronamespace = 'dbgate'::regnamespace
   AND p.proname IN ('create_budget', 'alter_budget', 'budget_config')
 ORDER BY p.oid::regprocedure::text;

--
-- Clean up
--
SELECT dbgate.unassign_role('regress_dbgate_v12_r');
SELECT dbgate.unassign_database('regress_dbgate_v12_db');
SELECT dbgate.drop_budget(budget) FROM dbgate.budgets
 WHERE budget LIKE 'v12%' AND parent IS NOT NULL;
SELECT dbgate.drop_budget(budget) FROM dbgate.budgets WHERE budget LIKE 'v12%';
SELECT * FROM dbgate.budgets WHERE budget LIKE 'v12%';
DROP DATABASE regress_dbgate_v12_db;
DROP ROLE regress_dbgate_v12_r;
DROP ROLE regress_dbgate_v12_s;
