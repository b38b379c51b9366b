--
-- The 1.1 additions to the SQL interface: the budget fields scope,
-- idle_in_transaction_timeout, parallel_workers, utility and enforce, and
-- database assignments.  Each function's normal use, every error with its
-- SQLSTATE (a failing call changes nothing), privileges, transactions.
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

--
-- create_budget: defaults, every argument by name and by position
--
SELECT dbgate.create_budget('v11_defaults', 2);
SELECT dbgate.create_budget(name => 'v11_full', max_active => 3,
                            scope => 'transaction',
                            idle_in_transaction_timeout => '30 s',
                            parallel_workers => 2, utility => true,
                            enforce => false);
SELECT dbgate.create_budget('v11_pos', 1, 0, '0', '0', '0', true,
                            'statement', '1 min', 0, false, true);
SELECT dbgate.create_budget('v11_max', 1, parallel_workers => 1024,
                            idle_in_transaction_timeout => '2147483647 ms');
SELECT budget, scope, idle_in_transaction_timeout, parallel_workers,
       utility, enforce, roles, databases
  FROM dbgate.budgets WHERE budget LIKE 'v11%';

--
-- alter_budget: each new field alone; NULL keeps a field
--
SELECT dbgate.alter_budget('v11_defaults', scope => 'transaction');
SELECT dbgate.alter_budget('v11_defaults', idle_in_transaction_timeout => '1.5 s');
SELECT dbgate.alter_budget('v11_defaults', parallel_workers => 0);
SELECT dbgate.alter_budget('v11_defaults', utility => true);
SELECT dbgate.alter_budget('v11_defaults', enforce => false);
SELECT * FROM dbgate.budgets WHERE budget = 'v11_defaults';
SELECT dbgate.alter_budget('v11_defaults', NULL, NULL, NULL, NULL, NULL, NULL,
                           NULL, NULL, NULL, NULL, NULL);
SELECT dbgate.alter_budget('v11_defaults', max_active => 4);
SELECT * FROM dbgate.budgets WHERE budget = 'v11_defaults';
SELECT dbgate.alter_budget('v11_defaults', scope => 'statement',
                           idle_in_transaction_timeout => '0',
                           parallel_workers => -1, utility => false,
                           enforce => true);
SELECT * FROM dbgate.budgets WHERE budget = 'v11_defaults';

--
-- assign_database / unassign_database
--
CREATE DATABASE regress_dbgate_db1;
CREATE DATABASE regress_dbgate_db2;
SELECT dbgate.assign_database('regress_dbgate_db2', 'v11_defaults');
SELECT dbgate.assign_database('regress_dbgate_db1', 'v11_defaults');
SELECT dbgate.assign_database(:'db', 'v11_full');
SELECT budget, databases FROM dbgate.budgets WHERE budget LIKE 'v11%';
-- a new assignment replaces the earlier one
SELECT dbgate.assign_database('regress_dbgate_db1', 'v11_full');
SELECT budget, databases FROM dbgate.budgets WHERE budget LIKE 'v11%';
SELECT dbgate.unassign_database('regress_dbgate_db1');
SELECT budget, databases FROM dbgate.budgets WHERE budget LIKE 'v11%';
-- unassigning a database without assignment: a NOTICE, nothing changes
SELECT dbgate.unassign_database('regress_dbgate_db1');
-- a renamed database keeps its assignment (it is kept by OID)
ALTER DATABASE regress_dbgate_db2 RENAME TO regress_dbgate_db2r;
SELECT budget, databases FROM dbgate.budgets WHERE budget = 'v11_defaults';
-- DROP DATABASE removes its assignment; a rolled-back change keeps it
BEGIN;
SELECT dbgate.unassign_database('regress_dbgate_db2r');
ROLLBACK;
SELECT budget, databases FROM dbgate.budgets WHERE budget = 'v11_defaults';
DROP DATABASE regress_dbgate_db2r;
SELECT budget, databases FROM dbgate.budgets WHERE budget = 'v11_defaults';
-- inside a transaction the view shows its own changes, others do not yet
BEGIN;
SELECT dbgate.assign_database('regress_dbgate_db1', 'v11_pos');
SELECT budget, databases FROM dbgate.budgets WHERE budget = 'v11_pos';
ROLLBACK;
SELECT budget, databases FROM dbgate.budgets WHERE budget = 'v11_pos';

--
-- Errors.  After each failing call the configuration must be unchanged.
--
CREATE TEMP VIEW v11_config AS
  SELECT string_agg(b::text, ' ' ORDER BY b.budget) AS config
    FROM dbgate.budgets b;
SELECT config AS config0 FROM v11_config \gset
\set check 'SELECT :''SQLSTATE'' AS sqlstate, config = :''config0'' AS unchanged FROM v11_config;'

-- 22023: scope
SELECT dbgate.create_budget('v11_new', 1, scope => 'Statement');
:check
SELECT dbgate.create_budget('v11_new', 1, scope => '');
:check
SELECT dbgate.alter_budget('v11_full', scope => 'session');
:check
-- 22023: parallel_workers < -1 or > 1024
SELECT dbgate.create_budget('v11_new', 1, parallel_workers => -2);
:check
SELECT dbgate.create_budget('v11_new', 1, parallel_workers => 1025);
:check
SELECT dbgate.alter_budget('v11_full', parallel_workers => -2147483648);
:check
-- 22023: idle_in_transaction_timeout negative or too long
SELECT dbgate.create_budget('v11_new', 1, idle_in_transaction_timeout => '-1 ms');
:check
SELECT dbgate.create_budget('v11_new', 1, idle_in_transaction_timeout => '2147483648 ms');
:check
SELECT dbgate.alter_budget('v11_full', idle_in_transaction_timeout => '-1 day');
:check
-- 22023: NULL where create_budget needs a value
SELECT dbgate.create_budget('v11_new', 1, scope => NULL);
:check
SELECT dbgate.create_budget('v11_new', 1, idle_in_transaction_timeout => NULL);
:check
SELECT dbgate.create_budget('v11_new', 1, parallel_workers => NULL);
:check
SELECT dbgate.create_budget('v11_new', 1, utility => NULL);
:check
SELECT dbgate.create_budget('v11_new', 1, enforce => NULL);
:check
SELECT dbgate.assign_database(NULL, 'v11_full');
:check
SELECT dbgate.assign_database(:'db', NULL);
:check
SELECT dbgate.unassign_database(NULL);
:check
-- 42704: unknown database or budget
SELECT dbgate.assign_database('regress_dbgate_nodb', 'v11_full');
:check
SELECT dbgate.assign_database(:'db', 'v11_nobudget');
:check
SELECT dbgate.unassign_database('regress_dbgate_nodb');
:check
SELECT dbgate.alter_budget('v11_nobudget', enforce => false);
:check
-- 2BP01: drop_budget while databases are assigned (and roles)
SELECT dbgate.drop_budget('v11_full');
:check
CREATE ROLE regress_dbgate_v11_r;
SELECT dbgate.assign_role('regress_dbgate_v11_r', 'v11_full');
SELECT config AS config0 FROM v11_config \gset
SELECT dbgate.drop_budget('v11_full');
:check
SELECT dbgate.assign_database('regress_dbgate_db1', 'v11_pos');
SELECT config AS config0 FROM v11_config \gset
SELECT dbgate.drop_budget('v11_pos');
:check
-- the failed calls left a usable transaction state and nothing pending
SELECT budget, roles, databases FROM dbgate.budgets WHERE budget LIKE 'v11%';

--
-- Privileges: the new functions are revoked from PUBLIC like the others,
-- and a superuser may GRANT them
--
SELECT p.oid::regprocedure AS function,
       has_function_privilege('public', p.oid, 'EXECUTE') AS public,
       has_function_privilege('pg_monitor', p.oid, 'EXECUTE') AS pg_monitor
  FROM pg_proc p
 WHERE p.pronamespace = 'dbgate'::regnamespace
 ORDER BY p.oid::regprocedure::text;
CREATE ROLE regress_dbgate_v11_admin;
GRANT USAGE ON SCHEMA dbgate TO regress_dbgate_v11_admin;
SET ROLE regress_dbgate_v11_admin;
SELECT dbgate.assign_database('regress_dbgate_db1', 'v11_defaults');
:sqlstate
SELECT dbgate.unassign_database('regress_dbgate_db1');
:sqlstate
SELECT dbgate.create_budget('v11_new', 1, enforce => false);
:sqlstate
SELECT dbgate.alter_budget('v11_defaults', utility => true);
:sqlstate
RESET ROLE;
GRANT EXECUTE ON FUNCTION dbgate.assign_database(name, text),
  dbgate.unassign_database(name) TO regress_dbgate_v11_admin;
SET ROLE regress_dbgate_v11_admin;
SELECT dbgate.assign_database('regress_dbgate_db1', 'v11_defaults');
SELECT dbgate.unassign_database('regress_dbgate_db1');
RESET ROLE;

--
-- config_script(): SQL that recreates every budget and assignment
--
CREATE ROLE "regress_dbgate_V11 quoted";
SELECT dbgate.assign_role('"regress_dbgate_V11 quoted"', 'v11_pos');
SELECT dbgate.config_script();
-- it shows what the transaction sees, and pg_monitor may read it
BEGIN;
SELECT dbgate.create_budget('v11_in_txn', 1);
SELECT dbgate.config_script() LIKE '%''v11_in_txn''%' AS shows_own_change;
ROLLBACK;
SELECT has_function_privilege('pg_monitor', 'dbgate.config_script()', 'EXECUTE') AS pg_monitor,
       has_function_privilege('public', 'dbgate.config_script()', 'EXECUTE') AS public;
DROP ROLE "regress_dbgate_V11 quoted";

--
-- drop_budget with force removes the database assignments too
--
SELECT dbgate.drop_budget('v11_full', force => true);
SELECT dbgate.drop_budget('v11_pos', force => true);
SELECT dbgate.drop_budget('v11_defaults');
SELECT dbgate.drop_budget('v11_max');
SELECT * FROM dbgate.budgets;
REVOKE ALL ON SCHEMA dbgate FROM regress_dbgate_v11_admin;
DROP OWNED BY regress_dbgate_v11_admin;
DROP ROLE regress_dbgate_v11_admin;
DROP ROLE regress_dbgate_v11_r;
DROP DATABASE regress_dbgate_db1;
