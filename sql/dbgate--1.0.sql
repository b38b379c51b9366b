/* dbgate--1.0.sql */

-- complain if script is sourced in psql, rather than via CREATE EXTENSION
\echo Use "CREATE EXTENSION dbgate" to load this file. \quit

--
-- Configuration functions.  Changes are transactional: they take effect at
-- COMMIT, for every database of the instance, and are kept in the data
-- directory across restarts.
--
CREATE FUNCTION create_budget(
    name text,
    max_active integer,
    max_queued integer DEFAULT 0,
    queue_timeout interval DEFAULT '0',
    statement_timeout interval DEFAULT '0',
    lock_timeout interval DEFAULT '0',
    fair boolean DEFAULT true)
RETURNS void
AS 'MODULE_PATHNAME', 'dbgate_create_budget'
LANGUAGE C CALLED ON NULL INPUT VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION alter_budget(
    name text,
    max_active integer DEFAULT NULL,
    max_queued integer DEFAULT NULL,
    queue_timeout interval DEFAULT NULL,
    statement_timeout interval DEFAULT NULL,
    lock_timeout interval DEFAULT NULL,
    fair boolean DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'dbgate_alter_budget'
LANGUAGE C CALLED ON NULL INPUT VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION drop_budget(name text, force boolean DEFAULT false)
RETURNS void
AS 'MODULE_PATHNAME', 'dbgate_drop_budget'
LANGUAGE C CALLED ON NULL INPUT VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION assign_role(role regrole, budget text)
RETURNS void
AS 'MODULE_PATHNAME', 'dbgate_assign_role'
LANGUAGE C CALLED ON NULL INPUT VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION unassign_role(role regrole)
RETURNS void
AS 'MODULE_PATHNAME', 'dbgate_unassign_role'
LANGUAGE C CALLED ON NULL INPUT VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION reset_stats(budget text DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'dbgate_reset_stats'
LANGUAGE C CALLED ON NULL INPUT VOLATILE PARALLEL UNSAFE;

REVOKE ALL ON FUNCTION create_budget(text, integer, integer, interval, interval, interval, boolean) FROM PUBLIC;
REVOKE ALL ON FUNCTION alter_budget(text, integer, integer, interval, interval, interval, boolean) FROM PUBLIC;
REVOKE ALL ON FUNCTION drop_budget(text, boolean) FROM PUBLIC;
REVOKE ALL ON FUNCTION assign_role(regrole, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION unassign_role(regrole) FROM PUBLIC;
REVOKE ALL ON FUNCTION reset_stats(text) FROM PUBLIC;

--
-- Monitoring.  The set-returning functions behind the views are not for
-- direct use; they are readable by the same roles as the views.
--
CREATE FUNCTION budget_config(
    OUT budget text,
    OUT max_active integer,
    OUT max_queued integer,
    OUT queue_timeout interval,
    OUT statement_timeout interval,
    OUT lock_timeout interval,
    OUT fair boolean,
    OUT roles name[])
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'dbgate_budget_config'
LANGUAGE C STRICT VOLATILE PARALLEL RESTRICTED;

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
    OUT stats_reset timestamptz)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'dbgate_budget_status'
LANGUAGE C STRICT VOLATILE PARALLEL RESTRICTED;

CREATE FUNCTION backend_status(
    OUT pid integer,
    OUT role name,
    OUT budget text,
    OUT state text,
    OUT state_since timestamptz,
    OUT queue_position integer)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'dbgate_backend_status'
LANGUAGE C STRICT VOLATILE PARALLEL RESTRICTED;

CREATE VIEW budgets AS
    SELECT * FROM budget_config() ORDER BY budget;

CREATE VIEW status AS
    SELECT * FROM budget_status() ORDER BY budget;

CREATE VIEW backends AS
    SELECT * FROM backend_status() ORDER BY budget, state, queue_position, pid;

REVOKE ALL ON FUNCTION budget_config() FROM PUBLIC;
REVOKE ALL ON FUNCTION budget_status() FROM PUBLIC;
REVOKE ALL ON FUNCTION backend_status() FROM PUBLIC;
REVOKE ALL ON budgets, status, backends FROM PUBLIC;

GRANT USAGE ON SCHEMA dbgate TO pg_monitor;
GRANT EXECUTE ON FUNCTION budget_config() TO pg_monitor;
GRANT EXECUTE ON FUNCTION budget_status() TO pg_monitor;
GRANT EXECUTE ON FUNCTION backend_status() TO pg_monitor;
GRANT SELECT ON budgets, status, backends TO pg_monitor;
