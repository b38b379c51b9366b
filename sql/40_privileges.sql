--
-- Privileges: who may change budgets, who may look at them, who may change
-- the settings, and that a gated session cannot leave its budget (SET ROLE,
-- SECURITY DEFINER, SET SESSION AUTHORIZATION, settings).
--
-- Runs alone as well as after the other files (pg_regress NAME): the
-- extension is created if it is not there yet.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS dbgate;
RESET client_min_messages;
\set VERBOSITY default
\set SHOW_CONTEXT never
\set sqlstate '\\echo SQLSTATE: :SQLSTATE'
SELECT current_user AS su \gset

--
-- Privileges as the extension script grants them
--
SELECT p.proname,
       has_function_privilege('public', p.oid, 'EXECUTE') AS public,
       has_function_privilege('pg_monitor', p.oid, 'EXECUTE') AS pg_monitor
  FROM pg_proc p
 WHERE p.pronamespace = 'dbgate'::regnamespace
 ORDER BY p.proname;
SELECT c.relname,
       has_table_privilege('public', c.oid, 'SELECT') AS public,
       has_table_privilege('pg_monitor', c.oid, 'SELECT') AS pg_monitor
  FROM pg_class c
 WHERE c.relnamespace = 'dbgate'::regnamespace
 ORDER BY c.relname;
SELECT has_schema_privilege('public', 'dbgate', 'USAGE') AS public,
       has_schema_privilege('pg_monitor', 'dbgate', 'USAGE') AS pg_monitor;

SELECT dbgate.create_budget('priv_a', 3);
SELECT dbgate.create_budget('priv_gated', 5);
SELECT dbgate.create_budget('priv_other', 5);
SELECT dbgate.create_budget('priv_dflt', 5);
CREATE ROLE regress_dbgate_priv_plain LOGIN;
CREATE ROLE regress_dbgate_priv_mon LOGIN IN ROLE pg_monitor;
CREATE ROLE regress_dbgate_priv_admin LOGIN;

--
-- A plain role: no access to the schema at all
--
\c - regress_dbgate_priv_plain
SELECT dbgate.create_budget('priv_x', 1);
:sqlstate
SELECT dbgate.alter_budget('priv_a', 1);
:sqlstate
SELECT dbgate.drop_budget('priv_a');
:sqlstate
SELECT dbgate.assign_role('regress_dbgate_priv_plain', 'priv_a');
:sqlstate
SELECT dbgate.unassign_role('regress_dbgate_priv_plain');
:sqlstate
SELECT dbgate.reset_stats();
:sqlstate
SELECT * FROM dbgate.budgets;
:sqlstate
SELECT * FROM dbgate.status;
:sqlstate
SELECT * FROM dbgate.backends;
:sqlstate
SELECT * FROM dbgate.budget_config();
:sqlstate
SELECT * FROM dbgate.budget_status();
:sqlstate
SELECT * FROM dbgate.backend_status();
:sqlstate

-- with USAGE on the schema, the objects themselves are still closed
\c - :"su"
GRANT USAGE ON SCHEMA dbgate TO regress_dbgate_priv_plain;
\c - regress_dbgate_priv_plain
SELECT dbgate.create_budget('priv_x', 1);
:sqlstate
SELECT dbgate.alter_budget('priv_a', 1);
:sqlstate
SELECT dbgate.drop_budget('priv_a');
:sqlstate
SELECT dbgate.assign_role('regress_dbgate_priv_plain', 'priv_a');
:sqlstate
SELECT dbgate.unassign_role('regress_dbgate_priv_plain');
:sqlstate
SELECT dbgate.reset_stats();
:sqlstate
SELECT * FROM dbgate.budgets;
:sqlstate
SELECT * FROM dbgate.status;
:sqlstate
SELECT * FROM dbgate.backends;
:sqlstate
SELECT * FROM dbgate.budget_config();
:sqlstate
SELECT * FROM dbgate.budget_status();
:sqlstate
SELECT * FROM dbgate.backend_status();
:sqlstate

-- the settings: dbgate.default_budget is for superusers only
SET dbgate.default_budget = 'priv_a';
:sqlstate
BEGIN;
SET LOCAL dbgate.default_budget = 'priv_a';
:sqlstate
ROLLBACK;
SELECT set_config('dbgate.default_budget', 'priv_a', false);
:sqlstate
ALTER ROLE regress_dbgate_priv_plain SET dbgate.default_budget = 'priv_a';
:sqlstate
ALTER ROLE regress_dbgate_priv_plain IN DATABASE contrib_regression
  SET dbgate.default_budget = 'priv_a';
:sqlstate
-- dbgate.enabled cannot be changed by a plain role in any way
SET dbgate.enabled = off;
:sqlstate
BEGIN;
SET LOCAL dbgate.enabled = off;
:sqlstate
ROLLBACK;
SELECT set_config('dbgate.enabled', 'off', false);
:sqlstate
SELECT set_config('dbgate.enabled', 'off', true);
:sqlstate
RESET dbgate.enabled;
:sqlstate
ALTER ROLE regress_dbgate_priv_plain SET dbgate.enabled = off;
:sqlstate
ALTER DATABASE contrib_regression SET dbgate.enabled = off;
:sqlstate
ALTER SYSTEM SET dbgate.enabled = off;
:sqlstate
SELECT pg_reload_conf();
:sqlstate
CREATE FUNCTION pg_temp.priv_off() RETURNS int LANGUAGE sql
  SET dbgate.enabled = off AS 'SELECT 1';
:sqlstate
SHOW dbgate.enabled;
-- nor become someone else
SET SESSION AUTHORIZATION regress_dbgate_priv_mon;
:sqlstate
SET ROLE regress_dbgate_priv_mon;
:sqlstate
\c - :"su"
REVOKE USAGE ON SCHEMA dbgate FROM regress_dbgate_priv_plain;
SELECT setrole::regrole, setconfig FROM pg_db_role_setting
 WHERE setrole = 'regress_dbgate_priv_plain'::regrole;

--
-- A member of pg_monitor reads the views and their functions, but changes
-- nothing
--
\c - regress_dbgate_priv_mon
SELECT budget, max_active, roles FROM dbgate.budgets;
SELECT budget, active, admitted FROM dbgate.status;
SELECT * FROM dbgate.backends;
SELECT budget FROM dbgate.budget_config() ORDER BY 1;
SELECT budget FROM dbgate.budget_status() ORDER BY 1;
SELECT * FROM dbgate.backend_status();
SELECT dbgate.create_budget('priv_x', 1);
:sqlstate
SELECT dbgate.alter_budget('priv_a', 1);
:sqlstate
SELECT dbgate.drop_budget('priv_a');
:sqlstate
SELECT dbgate.assign_role('regress_dbgate_priv_mon', 'priv_a');
:sqlstate
SELECT dbgate.unassign_role('regress_dbgate_priv_mon');
:sqlstate
SELECT dbgate.reset_stats();
:sqlstate
SELECT dbgate.reset_stats('priv_a');
:sqlstate
SET dbgate.default_budget = 'priv_a';
:sqlstate

--
-- A superuser may delegate: a role granted EXECUTE (and USAGE on the
-- schema) may change budgets
--
\c - :"su"
GRANT USAGE ON SCHEMA dbgate TO regress_dbgate_priv_admin;
GRANT EXECUTE ON FUNCTION
    dbgate.create_budget(text, integer, integer, interval, interval, interval, boolean, text, interval, integer, boolean, boolean, text, interval, text, integer, double precision, integer, integer, double precision, integer, text, integer, integer, double precision, integer, interval, text, text, interval, text, integer),
    dbgate.alter_budget(text, integer, integer, interval, interval, interval, boolean, text, interval, integer, boolean, boolean, text, interval, text, integer, double precision, integer, integer, double precision, integer, text, integer, integer, double precision, integer, interval, text, text, interval, text, integer),
    dbgate.drop_budget(text, boolean),
    dbgate.assign_role(regrole, text),
    dbgate.unassign_role(regrole),
    dbgate.reset_stats(text)
  TO regress_dbgate_priv_admin;
\c - regress_dbgate_priv_admin
SELECT dbgate.create_budget('priv_delegated', 2);
SELECT dbgate.alter_budget('priv_delegated', max_queued => 4);
SELECT dbgate.assign_role('regress_dbgate_priv_plain', 'priv_delegated');
SELECT dbgate.assign_role('regress_dbgate_priv_mon', 'priv_delegated');
SELECT dbgate.unassign_role('regress_dbgate_priv_mon');
SELECT dbgate.reset_stats('priv_delegated');
SELECT dbgate.reset_stats();
-- EXECUTE on the functions does not open the views
SELECT * FROM dbgate.budgets;
:sqlstate
\c - :"su"
SELECT budget, max_active, max_queued, roles FROM dbgate.budgets;
\c - regress_dbgate_priv_admin
SELECT dbgate.drop_budget('priv_delegated', true);
\c - :"su"
SELECT budget, roles FROM dbgate.budgets;
REVOKE EXECUTE ON FUNCTION
    dbgate.create_budget(text, integer, integer, interval, interval, interval, boolean, text, interval, integer, boolean, boolean, text, interval, text, integer, double precision, integer, integer, double precision, integer, text, integer, integer, double precision, integer, interval, text, text, interval, text, integer),
    dbgate.alter_budget(text, integer, integer, interval, interval, interval, boolean, text, interval, integer, boolean, boolean, text, interval, text, integer, double precision, integer, integer, double precision, integer, text, integer, integer, double precision, integer, interval, text, text, interval, text, integer),
    dbgate.drop_budget(text, boolean),
    dbgate.assign_role(regrole, text),
    dbgate.unassign_role(regrole),
    dbgate.reset_stats(text)
  FROM regress_dbgate_priv_admin;
REVOKE USAGE ON SCHEMA dbgate FROM regress_dbgate_priv_admin;

--
-- A gated session stays in the budget of its login role
--
CREATE ROLE regress_dbgate_priv_gated LOGIN IN ROLE pg_monitor;
CREATE ROLE regress_dbgate_priv_other IN ROLE pg_monitor;
CREATE ROLE regress_dbgate_priv_su SUPERUSER;
GRANT regress_dbgate_priv_other, regress_dbgate_priv_su TO regress_dbgate_priv_gated;
SELECT dbgate.assign_role('regress_dbgate_priv_gated', 'priv_gated');
SELECT dbgate.assign_role('regress_dbgate_priv_other', 'priv_other');
-- who runs the statement, and which budget gates it (a NULL budget: the
-- statement holds no slot)
CREATE FUNCTION priv_where_am_i(
    OUT current_user_is_superuser boolean, OUT session_user_name name,
    OUT budget text, OUT budget_role name, OUT state text)
LANGUAGE sql AS $$
    SELECT (SELECT rolsuper FROM pg_roles WHERE rolname = current_user),
           session_user, b.budget, b.role, b.state
      FROM (SELECT 1) one
      LEFT JOIN dbgate.backends b ON b.pid = pg_backend_pid()
$$;
CREATE FUNCTION priv_where_am_i_definer(
    OUT current_user_is_superuser boolean, OUT session_user_name name,
    OUT budget text, OUT budget_role name, OUT state text)
LANGUAGE sql SECURITY DEFINER AS 'SELECT * FROM priv_where_am_i()';
-- in a procedure, each statement is gated on its own
CREATE PROCEDURE priv_proc_definer()
LANGUAGE plpgsql SECURITY DEFINER AS $$
DECLARE
    r record;
BEGIN
    SELECT * INTO r FROM priv_where_am_i();
    RAISE NOTICE 'in a SECURITY DEFINER procedure: %', r;
END $$;
SELECT dbgate.reset_stats();

\c - regress_dbgate_priv_gated
SELECT * FROM priv_where_am_i();
-- SET ROLE to a role with a budget of its own
SET ROLE regress_dbgate_priv_other;
SELECT * FROM priv_where_am_i();
RESET ROLE;
-- SET ROLE to a superuser
SET ROLE regress_dbgate_priv_su;
SELECT * FROM priv_where_am_i();
-- ... which still cannot change the session user
SET SESSION AUTHORIZATION regress_dbgate_priv_other;
:sqlstate
RESET ROLE;
-- a SECURITY DEFINER function and procedure owned by a superuser
SELECT * FROM priv_where_am_i_definer();
CALL priv_proc_definer();
-- as a plain role, no SET SESSION AUTHORIZATION either
SET SESSION AUTHORIZATION regress_dbgate_priv_other;
:sqlstate
SET SESSION AUTHORIZATION regress_dbgate_priv_su;
:sqlstate
SELECT budget, admitted FROM dbgate.status WHERE budget LIKE 'priv_%';

\c - :"su"
-- each statement of the gated session above counted in its budget:
-- five SELECTs and the one statement of the procedure
SELECT budget, active, admitted FROM dbgate.status WHERE budget LIKE 'priv_%';

--
-- dbgate.default_budget, set by a superuser for a role, cannot be escaped
--
CREATE ROLE regress_dbgate_priv_dflt LOGIN IN ROLE pg_monitor;
ALTER ROLE regress_dbgate_priv_dflt SET dbgate.default_budget = 'priv_dflt';
\c - regress_dbgate_priv_dflt
SHOW dbgate.default_budget;
SELECT * FROM priv_where_am_i();
SET dbgate.default_budget = '';
:sqlstate
BEGIN;
SET LOCAL dbgate.default_budget = '';
:sqlstate
ROLLBACK;
RESET dbgate.default_budget;
:sqlstate
SELECT set_config('dbgate.default_budget', '', false);
:sqlstate
ALTER ROLE regress_dbgate_priv_dflt SET dbgate.default_budget = '';
:sqlstate
ALTER ROLE regress_dbgate_priv_dflt RESET dbgate.default_budget;
:sqlstate
-- RESET ALL succeeds, but leaves the superuser's setting in place
ALTER ROLE regress_dbgate_priv_dflt RESET ALL;
DISCARD ALL;
SHOW dbgate.default_budget;
SELECT * FROM priv_where_am_i();
\c - regress_dbgate_priv_dflt
SHOW dbgate.default_budget;
SELECT * FROM priv_where_am_i();
-- a role without an assignment or a default budget is not gated
\c - regress_dbgate_priv_mon
SHOW dbgate.default_budget;
SELECT * FROM priv_where_am_i();

\c - :"su"
-- priv_dflt counted the three SELECTs of priv_where_am_i() and the SELECT
-- that called set_config(); SHOW, SET and the others are not gated
SELECT budget, active, admitted FROM dbgate.status WHERE budget LIKE 'priv_%';
DROP FUNCTION priv_where_am_i_definer();
DROP PROCEDURE priv_proc_definer();
DROP FUNCTION priv_where_am_i();
DROP ROLE regress_dbgate_priv_plain, regress_dbgate_priv_mon,
    regress_dbgate_priv_admin, regress_dbgate_priv_gated,
    regress_dbgate_priv_other, regress_dbgate_priv_su,
    regress_dbgate_priv_dflt;
SELECT dbgate.drop_budget('priv_a');
SELECT dbgate.drop_budget('priv_gated');
SELECT dbgate.drop_budget('priv_other');
SELECT dbgate.drop_budget('priv_dflt');
SELECT * FROM dbgate.budgets;
