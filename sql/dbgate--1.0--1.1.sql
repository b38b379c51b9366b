/* dbgate--1.0--1.1.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION dbgate UPDATE TO '1.1'" to load this file. \quit

--
-- Functions whose signature changes.  The 1.0 function is renamed, the 1.1
-- one created under the old name, the EXECUTE privileges granted on the
-- old one (to a delegated administrator, say) are carried over, and the
-- old one is dropped.
--
CREATE FUNCTION dbgate_copy_execute_grants(old regprocedure, new regprocedure)
RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    r record;
BEGIN
    FOR r IN
        SELECT a.grantee, a.is_grantable
          FROM pg_proc p, aclexplode(p.proacl) a
         WHERE p.oid = old AND a.privilege_type = 'EXECUTE'
           AND a.grantee <> 0 AND a.grantee <> p.proowner
    LOOP
        EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO %s%s', new,
                       r.grantee::regrole,
                       CASE WHEN r.is_grantable THEN ' WITH GRANT OPTION' ELSE '' END);
    END LOOP;
END;
$$;

ALTER FUNCTION create_budget(text, integer, integer, interval, interval, interval, boolean)
    RENAME TO create_budget_1_0;
CREATE FUNCTION create_budget(
    name text,
    max_active integer,
    max_queued integer DEFAULT 0,
    queue_timeout interval DEFAULT '0',
    statement_timeout interval DEFAULT '0',
    lock_timeout interval DEFAULT '0',
    fair boolean DEFAULT true,
    scope text DEFAULT 'statement',
    idle_in_transaction_timeout interval DEFAULT '0',
    parallel_workers integer DEFAULT -1,
    utility boolean DEFAULT false,
    enforce boolean DEFAULT true)
RETURNS void
AS 'MODULE_PATHNAME', 'dbgate_create_budget_1_1'
LANGUAGE C CALLED ON NULL INPUT VOLATILE PARALLEL UNSAFE;
REVOKE ALL ON FUNCTION create_budget(text, integer, integer, interval, interval, interval, boolean, text, interval, integer, boolean, boolean) FROM PUBLIC;
SELECT dbgate_copy_execute_grants(
    'create_budget_1_0(text, integer, integer, interval, interval, interval, boolean)',
    'create_budget(text, integer, integer, interval, interval, interval, boolean, text, interval, integer, boolean, boolean)');
DROP FUNCTION create_budget_1_0(text, integer, integer, interval, interval, interval, boolean);

ALTER FUNCTION alter_budget(text, integer, integer, interval, interval, interval, boolean)
    RENAME TO alter_budget_1_0;
CREATE FUNCTION alter_budget(
    name text,
    max_active integer DEFAULT NULL,
    max_queued integer DEFAULT NULL,
    queue_timeout interval DEFAULT NULL,
    statement_timeout interval DEFAULT NULL,
    lock_timeout interval DEFAULT NULL,
    fair boolean DEFAULT NULL,
    scope text DEFAULT NULL,
    idle_in_transaction_timeout interval DEFAULT NULL,
    parallel_workers integer DEFAULT NULL,
    utility boolean DEFAULT NULL,
    enforce boolean DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'dbgate_alter_budget_1_1'
LANGUAGE C CALLED ON NULL INPUT VOLATILE PARALLEL UNSAFE;
REVOKE ALL ON FUNCTION alter_budget(text, integer, integer, interval, interval, interval, boolean, text, interval, integer, boolean, boolean) FROM PUBLIC;
SELECT dbgate_copy_execute_grants(
    'alter_budget_1_0(text, integer, integer, interval, interval, interval, boolean)',
    'alter_budget(text, integer, integer, interval, interval, interval, boolean, text, interval, integer, boolean, boolean)');
DROP FUNCTION alter_budget_1_0(text, integer, integer, interval, interval, interval, boolean);

--
-- Database assignments.
--
CREATE FUNCTION assign_database(database name, budget text)
RETURNS void
AS 'MODULE_PATHNAME', 'dbgate_assign_database'
LANGUAGE C CALLED ON NULL INPUT VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION unassign_database(database name)
RETURNS void
AS 'MODULE_PATHNAME', 'dbgate_unassign_database'
LANGUAGE C CALLED ON NULL INPUT VOLATILE PARALLEL UNSAFE;

REVOKE ALL ON FUNCTION assign_database(name, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION unassign_database(name) FROM PUBLIC;

--
-- dbgate.budgets gets six columns at its end.  CREATE OR REPLACE VIEW
-- keeps the view's privileges and the objects that depend on it.
--
ALTER FUNCTION budget_config() RENAME TO budget_config_1_0;
CREATE FUNCTION budget_config(
    OUT budget text,
    OUT max_active integer,
    OUT max_queued integer,
    OUT queue_timeout interval,
    OUT statement_timeout interval,
    OUT lock_timeout interval,
    OUT fair boolean,
    OUT roles name[],
    OUT scope text,
    OUT idle_in_transaction_timeout interval,
    OUT parallel_workers integer,
    OUT utility boolean,
    OUT enforce boolean,
    OUT databases name[])
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'dbgate_budget_config_1_1'
LANGUAGE C STRICT VOLATILE PARALLEL RESTRICTED;
REVOKE ALL ON FUNCTION budget_config() FROM PUBLIC;
SELECT dbgate_copy_execute_grants('budget_config_1_0()', 'budget_config()');
CREATE OR REPLACE VIEW budgets AS
    SELECT * FROM budget_config() ORDER BY budget;
DROP FUNCTION budget_config_1_0();

--
-- The live views gain columns at the end (idle_in_transaction,
-- terminated_idle, would_queue, would_reject; classified_by), in the same
-- way as dbgate.budgets.
--
ALTER FUNCTION budget_status() RENAME TO budget_status_1_0;
CREATE FUNCTION budget_status(
    OUT budget text,
    OUT max_active integer,
    OUT active integer,
    OUT max_queued integer,
    OUT queued integer,
    OUT peak_active integer,
    OUT peak_queued integer,
    OUT admitted bigint,
    OUT admitted_after_wait bigint,
    OUT rejected_full bigint,
    OUT rejected_timeout bigint,
    OUT canceled_waiting bigint,
    OUT admitted_lock_holder bigint,
    OUT wait_time_total double precision,
    OUT wait_time_max double precision,
    OUT active_time_total double precision,
    OUT stats_reset timestamptz,
    OUT idle_in_transaction integer,
    OUT terminated_idle bigint,
    OUT would_queue bigint,
    OUT would_reject bigint)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'dbgate_budget_status_1_1'
LANGUAGE C STRICT VOLATILE PARALLEL RESTRICTED;
REVOKE ALL ON FUNCTION budget_status() FROM PUBLIC;
SELECT dbgate_copy_execute_grants('budget_status_1_0()', 'budget_status()');
CREATE OR REPLACE VIEW status AS
    SELECT * FROM budget_status() ORDER BY budget;
DROP FUNCTION budget_status_1_0();

ALTER FUNCTION backend_status() RENAME TO backend_status_1_0;
CREATE FUNCTION backend_status(
    OUT pid integer,
    OUT role name,
    OUT budget text,
    OUT state text,
    OUT state_since timestamptz,
    OUT queue_position integer,
    OUT classified_by text)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'dbgate_backend_status_1_1'
LANGUAGE C STRICT VOLATILE PARALLEL RESTRICTED;
REVOKE ALL ON FUNCTION backend_status() FROM PUBLIC;
SELECT dbgate_copy_execute_grants('backend_status_1_0()', 'backend_status()');
CREATE OR REPLACE VIEW backends AS
    SELECT * FROM backend_status() ORDER BY budget, state, queue_position, pid;
DROP FUNCTION backend_status_1_0();

DROP FUNCTION dbgate_copy_execute_grants(regprocedure, regprocedure);

--
-- The configuration as SQL, for carrying it to another cluster.
--
CREATE FUNCTION config_script()
RETURNS text
AS 'MODULE_PATHNAME', 'dbgate_config_script'
LANGUAGE C STRICT VOLATILE PARALLEL RESTRICTED;
REVOKE ALL ON FUNCTION config_script() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION config_script() TO pg_monitor;
