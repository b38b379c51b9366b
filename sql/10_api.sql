--
-- The SQL interface: the extension's objects, and each function's normal use
-- with its effect on dbgate.budgets and dbgate.status.  Errors are tested in
-- 20_errors, privileges in 40_privileges, transactions in 50_transactions.
--
-- Runs alone as well as after the other files (pg_regress NAME): the
-- extension is created if it is not there yet.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS dbgate;
RESET client_min_messages;
\set VERBOSITY default
\set SHOW_CONTEXT never
-- intervals as plain times (pg_regress's default style is postgres_verbose)
SET IntervalStyle = postgres;
SELECT current_database() AS db \gset

--
-- Objects (the views' row types are left out: newer minor releases of
-- PostgreSQL 17 record them as members of the extension too, older ones
-- and 15 do not)
--
SELECT pg_describe_object(classid, objid, 0) AS object
  FROM pg_depend
 WHERE refclassid = 'pg_extension'::regclass AND deptype = 'e'
   AND refobjid = (SELECT oid FROM pg_extension WHERE extname = 'dbgate')
   AND classid <> 'pg_type'::regclass
 ORDER BY 1;

-- functions: arguments with defaults, result, and properties
\x on
SELECT proname, pg_get_function_arguments(oid) AS arguments,
       pg_get_function_result(oid) AS result,
       prokind, provolatile, proisstrict, proparallel, prosecdef
  FROM pg_proc
 WHERE pronamespace = 'dbgate'::regnamespace
 ORDER BY proname;
\x off

-- views and their columns
SELECT c.relname, c.relkind, a.attnum, a.attname,
       format_type(a.atttypid, a.atttypmod) AS type
  FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid
 WHERE c.relnamespace = 'dbgate'::regnamespace AND a.attnum > 0
 ORDER BY c.relname, a.attnum;

-- the same columns as information_schema reports them
SELECT table_name, ordinal_position, column_name, data_type, udt_name
  FROM information_schema.columns
 WHERE table_schema = 'dbgate'
 ORDER BY table_name, ordinal_position;

-- settings
SELECT name, setting, context, vartype, min_val, max_val, boot_val
  FROM pg_settings WHERE name LIKE 'dbgate.%' ORDER BY name;

--
-- create_budget
--
SELECT now() AS t0 \gset
-- only the required arguments: the defaults
SELECT dbgate.create_budget('api_defaults', 2);
-- every argument, by name
SELECT dbgate.create_budget(name => 'api_full', max_active => 5,
                            max_queued => 10, queue_timeout => '2 s',
                            statement_timeout => '1 min',
                            lock_timeout => '1500 ms', fair => false);
-- every argument, by position
SELECT dbgate.create_budget('api_pos', 1, 0, '0', '0', '0', true);
-- names are case-sensitive and taken as they are
SELECT dbgate.create_budget('API_defaults', 1);
SELECT dbgate.create_budget(' api spaced ', 1);
SELECT dbgate.create_budget('api "quoted" \ it''s', 1);
SELECT dbgate.create_budget('api_ünïcödé_🚦', 1);
SELECT * FROM dbgate.budgets;

-- a new budget has fresh counters and a reset time of its commit
SELECT budget, max_active, active, max_queued, queued, peak_active,
       peak_queued, admitted, admitted_after_wait, rejected_full,
       rejected_timeout, canceled_waiting, admitted_lock_holder,
       wait_time_total, wait_time_max, active_time_total,
       stats_reset BETWEEN :'t0' AND now() AS stats_reset_ok
  FROM dbgate.status;

SELECT dbgate.drop_budget('API_defaults');
SELECT dbgate.drop_budget(' api spaced ');
SELECT dbgate.drop_budget('api "quoted" \ it''s');
SELECT dbgate.drop_budget('api_ünïcödé_🚦');
SELECT budget FROM dbgate.budgets;

--
-- Durations: stored in milliseconds, shown as plain time intervals
--
SELECT dbgate.create_budget('api_iv', 1, 0, '1 day', '1500 ms', '1 us');
SELECT queue_timeout, statement_timeout, lock_timeout
  FROM dbgate.budgets WHERE budget = 'api_iv';
-- a month counts 30 days; the longest accepted duration is 2147483647 ms
SELECT dbgate.alter_budget('api_iv', queue_timeout => '1 mon -10 days',
                           statement_timeout => '24 days 20:31:23.647',
                           lock_timeout => '1 mon -29 days');
SELECT queue_timeout, statement_timeout, lock_timeout
  FROM dbgate.budgets WHERE budget = 'api_iv';
-- milliseconds are rounded; a non-zero duration under 1 ms is 1 ms
SELECT dbgate.alter_budget('api_iv', queue_timeout => '2147483647 ms',
                           statement_timeout => '0.4 ms',
                           lock_timeout => '2.000001 ms');
SELECT queue_timeout, statement_timeout, lock_timeout
  FROM dbgate.budgets WHERE budget = 'api_iv';
-- 0 in any spelling is "no limit"; parts of mixed sign add up
SELECT dbgate.alter_budget('api_iv', queue_timeout => '1 mon -30 days',
                           statement_timeout => '-1 day +24:00:00.001',
                           lock_timeout => '0 s');
SELECT queue_timeout, statement_timeout, lock_timeout
  FROM dbgate.budgets WHERE budget = 'api_iv';
SELECT dbgate.drop_budget('api_iv');

--
-- alter_budget: each field alone; NULL keeps a field
--
SELECT dbgate.alter_budget('api_defaults', max_active => 7);
SELECT * FROM dbgate.budgets WHERE budget = 'api_defaults';
SELECT dbgate.alter_budget('api_defaults', max_queued => 3);
SELECT * FROM dbgate.budgets WHERE budget = 'api_defaults';
SELECT dbgate.alter_budget('api_defaults', queue_timeout => '3 s');
SELECT * FROM dbgate.budgets WHERE budget = 'api_defaults';
SELECT dbgate.alter_budget('api_defaults', statement_timeout => '4 s');
SELECT * FROM dbgate.budgets WHERE budget = 'api_defaults';
SELECT dbgate.alter_budget('api_defaults', lock_timeout => '5 s');
SELECT * FROM dbgate.budgets WHERE budget = 'api_defaults';
SELECT dbgate.alter_budget('api_defaults', fair => false);
SELECT * FROM dbgate.budgets WHERE budget = 'api_defaults';
-- nothing given, or NULL given explicitly: nothing changes
SELECT dbgate.alter_budget('api_defaults');
SELECT dbgate.alter_budget('api_defaults', NULL, NULL, NULL, NULL, NULL, NULL);
SELECT * FROM dbgate.budgets WHERE budget = 'api_defaults';
-- several at once; 0 removes a limit; the other budgets are untouched
SELECT dbgate.alter_budget('api_defaults', 1, 0, '0', '0', '0', true);
SELECT * FROM dbgate.budgets;
-- dbgate.status follows the committed limits
SELECT budget, max_active, max_queued FROM dbgate.status;

--
-- Role assignments
--
CREATE ROLE regress_dbgate_api_a LOGIN;
CREATE ROLE regress_dbgate_api_b;
CREATE ROLE regress_dbgate_api_c;
CREATE ROLE regress_dbgate_api_su SUPERUSER;
SELECT dbgate.assign_role('regress_dbgate_api_a', 'api_defaults');
SELECT dbgate.assign_role('regress_dbgate_api_b', 'api_defaults');
SELECT budget, roles FROM dbgate.budgets;
-- a later assignment replaces the earlier one
SELECT dbgate.assign_role('regress_dbgate_api_b', 'api_full');
SELECT budget, roles FROM dbgate.budgets;
-- assigning again to the same budget changes nothing
SELECT dbgate.assign_role('regress_dbgate_api_b', 'api_full');
SELECT budget, roles FROM dbgate.budgets;
-- a role given by OID
SELECT dbgate.assign_role(oid::regrole, 'api_full')
  FROM pg_roles WHERE rolname = 'regress_dbgate_api_c';
SELECT budget, roles FROM dbgate.budgets;
-- a superuser can be assigned, but is never gated
SELECT dbgate.assign_role('regress_dbgate_api_su', 'api_pos');
SELECT budget, roles FROM dbgate.budgets;
-- unassign; a second time is a notice
SELECT dbgate.unassign_role('regress_dbgate_api_c');
SELECT dbgate.unassign_role('regress_dbgate_api_c');
SELECT dbgate.unassign_role('regress_dbgate_api_su');
SELECT budget, roles FROM dbgate.budgets;
-- a renamed role shows under its new name
ALTER ROLE regress_dbgate_api_b RENAME TO regress_dbgate_api_b2;
SELECT budget, roles FROM dbgate.budgets;
-- DROP ROLE (and DROP USER) removes the assignment: the budget can then be
-- dropped without force
SELECT dbgate.assign_role('regress_dbgate_api_c', 'api_pos');
SELECT dbgate.assign_role('regress_dbgate_api_su', 'api_pos');
SELECT budget, roles FROM dbgate.budgets;
DROP ROLE regress_dbgate_api_c, regress_dbgate_api_su;
DROP USER IF EXISTS regress_dbgate_api_nonexistent;
SELECT budget, roles FROM dbgate.budgets;
SELECT dbgate.drop_budget('api_pos');
SELECT budget, roles FROM dbgate.budgets;

--
-- Counters and reset_stats
--
-- The superuser running this test is not gated; as regress_dbgate_api_a
-- (SET SESSION AUTHORIZATION changes the session user) it is.
SET SESSION AUTHORIZATION regress_dbgate_api_a;
SELECT 1 AS gated_by_api_defaults;
SELECT 2 AS gated_by_api_defaults;
RESET SESSION AUTHORIZATION;
SET SESSION AUTHORIZATION regress_dbgate_api_b2;
SELECT 3 AS gated_by_api_full;
RESET SESSION AUTHORIZATION;
SELECT budget, active, queued, peak_active, peak_queued, admitted,
       admitted_after_wait, rejected_full, rejected_timeout, canceled_waiting,
       admitted_lock_holder, wait_time_total, wait_time_max,
       active_time_total > 0 AS active_time_counted
  FROM dbgate.status;
-- reset one budget: its counters start again from zero, peaks from the
-- current values, and its reset time moves on; the other budget keeps both
SELECT stats_reset AS r_defaults FROM dbgate.status WHERE budget = 'api_defaults' \gset
SELECT stats_reset AS r_full FROM dbgate.status WHERE budget = 'api_full' \gset
SELECT dbgate.reset_stats('api_defaults');
SELECT budget, active, peak_active, admitted, active_time_total > 0 AS active_time,
       stats_reset > CASE budget WHEN 'api_defaults' THEN :'r_defaults'::timestamptz
                                 ELSE :'r_full'::timestamptz END AS reset_moved
  FROM dbgate.status;
-- the configuration is not touched
SELECT * FROM dbgate.budgets;
-- reset all (the argument defaults to NULL)
SELECT stats_reset AS r_defaults FROM dbgate.status WHERE budget = 'api_defaults' \gset
SELECT dbgate.reset_stats();
SELECT budget, active, peak_active, admitted, active_time_total > 0 AS active_time,
       stats_reset > CASE budget WHEN 'api_defaults' THEN :'r_defaults'::timestamptz
                                 ELSE :'r_full'::timestamptz END AS reset_moved
  FROM dbgate.status;
SELECT dbgate.reset_stats(NULL);
SELECT count(*) FROM dbgate.status WHERE admitted > 0;

--
-- drop_budget
--
-- without force, and with force = false, a budget without roles goes
SELECT dbgate.create_budget('api_drop1', 1);
SELECT dbgate.create_budget('api_drop2', 1);
SELECT dbgate.drop_budget('api_drop1');
SELECT dbgate.drop_budget('api_drop2', false);
-- force also removes the assignments
SELECT budget, roles FROM dbgate.budgets;
SELECT dbgate.drop_budget('api_defaults', force => true);
SELECT dbgate.drop_budget('api_full', true);
SELECT * FROM dbgate.budgets;
SELECT * FROM dbgate.status;
SELECT dbgate.unassign_role('regress_dbgate_api_a');
SELECT dbgate.unassign_role('regress_dbgate_api_b2');
-- a name can be used again after a drop, with fresh counters
SELECT now() AS t1 \gset
SELECT dbgate.create_budget('api_full', 1);
SELECT budget, admitted, stats_reset >= :'t1' AS fresh FROM dbgate.status;
SELECT budget, roles FROM dbgate.budgets;

--
-- Budgets are cluster-wide: another database sees and changes the same ones
--
CREATE DATABASE regress_dbgate_api_db;
\c regress_dbgate_api_db
CREATE EXTENSION dbgate;
SELECT budget FROM dbgate.budgets;
SELECT dbgate.create_budget('api_other_db', 1);
\c :db
SELECT budget FROM dbgate.budgets;
SELECT dbgate.drop_budget('api_other_db');
SELECT dbgate.drop_budget('api_full');
DROP DATABASE regress_dbgate_api_db;

DROP ROLE regress_dbgate_api_a, regress_dbgate_api_b2;
SELECT * FROM dbgate.budgets;
