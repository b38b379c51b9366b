/* dbgate--1.2--1.3.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION dbgate UPDATE TO '1.3'" to load this file. \quit

--
-- Functions whose signature changes.  As in dbgate--1.1--1.2.sql: the 1.2
-- function is renamed, the 1.3 one created under the old name, the EXECUTE
-- privileges granted on the old one are carried over, and the old one is
-- dropped.
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

ALTER FUNCTION create_budget(text, integer, integer, interval, interval, interval, boolean, text, interval, integer, boolean, boolean, text, interval, text, integer, double precision, integer, integer, double precision)
    RENAME TO create_budget_1_2;
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
    enforce boolean DEFAULT true,
    queue_order text DEFAULT 'fifo',
    overtake_limit interval DEFAULT '100ms',
    parent text DEFAULT NULL,
    weight integer DEFAULT 1,
    max_rate double precision DEFAULT 0,
    rate_burst integer DEFAULT 1,
    max_memory_mb integer DEFAULT 0,
    min_cost double precision DEFAULT 0,
    reserved integer DEFAULT 0,
    key_by text DEFAULT NULL,
    key_max_active integer DEFAULT 0,
    key_max_queued integer DEFAULT 0,
    key_max_rate double precision DEFAULT 0,
    key_rate_burst integer DEFAULT 1,
    runaway_after interval DEFAULT '0',
    runaway_action text DEFAULT 'log',
    runaway_budget text DEFAULT NULL,
    quarantine interval DEFAULT '0',
    adapt text DEFAULT 'off',
    adapt_min integer DEFAULT 1)
RETURNS void
AS 'MODULE_PATHNAME', 'dbgate_create_budget_1_3'
LANGUAGE C CALLED ON NULL INPUT VOLATILE PARALLEL UNSAFE;
REVOKE ALL ON FUNCTION create_budget(text, integer, integer, interval, interval, interval, boolean, text, interval, integer, boolean, boolean, text, interval, text, integer, double precision, integer, integer, double precision, integer, text, integer, integer, double precision, integer, interval, text, text, interval, text, integer) FROM PUBLIC;
SELECT dbgate_copy_execute_grants(
    'create_budget_1_2(text, integer, integer, interval, interval, interval, boolean, text, interval, integer, boolean, boolean, text, interval, text, integer, double precision, integer, integer, double precision)',
    'create_budget(text, integer, integer, interval, interval, interval, boolean, text, interval, integer, boolean, boolean, text, interval, text, integer, double precision, integer, integer, double precision, integer, text, integer, integer, double precision, integer, interval, text, text, interval, text, integer)');
DROP FUNCTION create_budget_1_2(text, integer, integer, interval, interval, interval, boolean, text, interval, integer, boolean, boolean, text, interval, text, integer, double precision, integer, integer, double precision);

ALTER FUNCTION alter_budget(text, integer, integer, interval, interval, interval, boolean, text, interval, integer, boolean, boolean, text, interval, text, integer, double precision, integer, integer, double precision)
    RENAME TO alter_budget_1_2;
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
    enforce boolean DEFAULT NULL,
    queue_order text DEFAULT NULL,
    overtake_limit interval DEFAULT NULL,
    parent text DEFAULT NULL,
    weight integer DEFAULT NULL,
    max_rate double precision DEFAULT NULL,
    rate_burst integer DEFAULT NULL,
    max_memory_mb integer DEFAULT NULL,
    min_cost double precision DEFAULT NULL,
    reserved integer DEFAULT NULL,
    key_by text DEFAULT NULL,
    key_max_active integer DEFAULT NULL,
    key_max_queued integer DEFAULT NULL,
    key_max_rate double precision DEFAULT NULL,
    key_rate_burst integer DEFAULT NULL,
    runaway_after interval DEFAULT NULL,
    runaway_action text DEFAULT NULL,
    runaway_budget text DEFAULT NULL,
    quarantine interval DEFAULT NULL,
    adapt text DEFAULT NULL,
    adapt_min integer DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'dbgate_alter_budget_1_3'
LANGUAGE C CALLED ON NULL INPUT VOLATILE PARALLEL UNSAFE;
REVOKE ALL ON FUNCTION alter_budget(text, integer, integer, interval, interval, interval, boolean, text, interval, integer, boolean, boolean, text, interval, text, integer, double precision, integer, integer, double precision, integer, text, integer, integer, double precision, integer, interval, text, text, interval, text, integer) FROM PUBLIC;
SELECT dbgate_copy_execute_grants(
    'alter_budget_1_2(text, integer, integer, interval, interval, interval, boolean, text, interval, integer, boolean, boolean, text, interval, text, integer, double precision, integer, integer, double precision)',
    'alter_budget(text, integer, integer, interval, interval, interval, boolean, text, interval, integer, boolean, boolean, text, interval, text, integer, double precision, integer, integer, double precision, integer, text, integer, integer, double precision, integer, interval, text, text, interval, text, integer)');
DROP FUNCTION alter_budget_1_2(text, integer, integer, interval, interval, interval, boolean, text, interval, integer, boolean, boolean, text, interval, text, integer, double precision, integer, integer, double precision);

--
-- dbgate.budgets gets the 1.3 budget fields at its end.  CREATE OR
-- REPLACE VIEW keeps the view's privileges and the objects that depend on
-- it.
--
ALTER FUNCTION budget_config() RENAME TO budget_config_1_2;
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
    OUT databases name[],
    OUT queue_order text,
    OUT overtake_limit interval,
    OUT parent text,
    OUT weight integer,
    OUT max_rate double precision,
    OUT rate_burst integer,
    OUT max_memory_mb integer,
    OUT min_cost double precision,
    OUT reserved integer,
    OUT key_by text,
    OUT key_max_active integer,
    OUT key_max_queued integer,
    OUT key_max_rate double precision,
    OUT key_rate_burst integer,
    OUT runaway_after interval,
    OUT runaway_action text,
    OUT runaway_budget text,
    OUT quarantine interval,
    OUT adapt text,
    OUT adapt_min integer)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'dbgate_budget_config_1_3'
LANGUAGE C STRICT VOLATILE PARALLEL RESTRICTED;
REVOKE ALL ON FUNCTION budget_config() FROM PUBLIC;
SELECT dbgate_copy_execute_grants('budget_config_1_2()', 'budget_config()');
CREATE OR REPLACE VIEW budgets AS
    SELECT * FROM budget_config() ORDER BY budget;
DROP FUNCTION budget_config_1_2();

--
-- dbgate.status gains columns at the end (runaways, demoted_out, demoted_in,
-- quarantined, adaptive_limit).
--
ALTER FUNCTION budget_status() RENAME TO budget_status_1_2;
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
    OUT would_reject bigint,
    OUT oldest_wait double precision,
    OUT admitted_overdue bigint,
    OUT rate_limited bigint,
    OUT bypassed bigint,
    OUT memory_mb_active double precision,
    OUT keys integer,
    OUT keys_overflowed bigint,
    OUT runaways bigint,
    OUT demoted_out bigint,
    OUT demoted_in bigint,
    OUT quarantined bigint,
    OUT adaptive_limit integer)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'dbgate_budget_status_1_3'
LANGUAGE C STRICT VOLATILE PARALLEL RESTRICTED;
REVOKE ALL ON FUNCTION budget_status() FROM PUBLIC;
SELECT dbgate_copy_execute_grants('budget_status_1_2()', 'budget_status()');
CREATE OR REPLACE VIEW status AS
    SELECT * FROM budget_status() ORDER BY budget;
DROP FUNCTION budget_status_1_2();

--
-- dbgate.backends gains demoted_from at its end: the budget a demoted
-- statement was moved out of.
--
ALTER FUNCTION backend_status() RENAME TO backend_status_1_2;
CREATE FUNCTION backend_status(
    OUT pid integer,
    OUT role name,
    OUT budget text,
    OUT state text,
    OUT state_since timestamptz,
    OUT queue_position integer,
    OUT classified_by text,
    OUT memory_mb double precision,
    OUT key text,
    OUT key_overflow boolean,
    OUT demoted_from text)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'dbgate_backend_status_1_3'
LANGUAGE C STRICT VOLATILE PARALLEL RESTRICTED;
REVOKE ALL ON FUNCTION backend_status() FROM PUBLIC;
SELECT dbgate_copy_execute_grants('backend_status_1_2()', 'backend_status()');
CREATE OR REPLACE VIEW backends AS
    SELECT * FROM backend_status() ORDER BY budget, state, queue_position, pid;
DROP FUNCTION backend_status_1_2();

--
-- The quarantine (1.3): queries held back in a budget after they ran away.
-- Not transactional (like pg_stat_statements_reset()): the functions act
-- at once, also in read-only transactions and on a standby.
--
CREATE FUNCTION quarantine_add(budget text, queryid bigint, duration interval)
RETURNS void
AS 'MODULE_PATHNAME', 'dbgate_quarantine_add'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
REVOKE ALL ON FUNCTION quarantine_add(text, bigint, interval) FROM PUBLIC;

CREATE FUNCTION quarantine_remove(budget text DEFAULT NULL,
                                  queryid bigint DEFAULT NULL)
RETURNS bigint
AS 'MODULE_PATHNAME', 'dbgate_quarantine_remove'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
REVOKE ALL ON FUNCTION quarantine_remove(text, bigint) FROM PUBLIC;

CREATE FUNCTION quarantine_entries(
    OUT database name,
    OUT budget text,
    OUT queryid bigint,
    OUT query text,
    OUT until timestamptz,
    OUT runaways bigint,
    OUT hits bigint,
    OUT last_hit timestamptz)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'dbgate_quarantine_view'
LANGUAGE C STRICT VOLATILE PARALLEL RESTRICTED;
REVOKE ALL ON FUNCTION quarantine_entries() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION quarantine_entries() TO pg_monitor;
CREATE VIEW quarantine AS
    SELECT * FROM quarantine_entries() ORDER BY database, budget, queryid;
REVOKE ALL ON quarantine FROM PUBLIC;
GRANT SELECT ON quarantine TO pg_monitor;

--
-- Key limits (1.3): the limits of one key of a budget with key_by.
-- Transactional, durable and replicated like every configuration change.
--
CREATE FUNCTION set_key_limit(budget text, key text,
                              max_active integer DEFAULT NULL,
                              max_queued integer DEFAULT NULL,
                              max_rate double precision DEFAULT NULL,
                              rate_burst integer DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'dbgate_set_key_limit'
LANGUAGE C CALLED ON NULL INPUT VOLATILE PARALLEL UNSAFE;
REVOKE ALL ON FUNCTION set_key_limit(text, text, integer, integer, double precision, integer) FROM PUBLIC;

CREATE FUNCTION reset_key_limit(budget text, key text DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'dbgate_reset_key_limit'
LANGUAGE C CALLED ON NULL INPUT VOLATILE PARALLEL UNSAFE;
REVOKE ALL ON FUNCTION reset_key_limit(text, text) FROM PUBLIC;

CREATE FUNCTION key_limit_entries(
    OUT budget text,
    OUT key text,
    OUT max_active integer,
    OUT max_queued integer,
    OUT max_rate double precision,
    OUT rate_burst integer)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'dbgate_key_limit_entries'
LANGUAGE C STRICT VOLATILE PARALLEL RESTRICTED;
REVOKE ALL ON FUNCTION key_limit_entries() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION key_limit_entries() TO pg_monitor;
CREATE VIEW key_limits AS
    SELECT * FROM key_limit_entries() ORDER BY budget, key;
REVOKE ALL ON key_limits FROM PUBLIC;
GRANT SELECT ON key_limits TO pg_monitor;

--
-- dbgate.keys (1.3): the live keys of budgets with key_by, the overflow
-- key as key NULL.
--
CREATE FUNCTION key_status(
    OUT budget text,
    OUT key text,
    OUT active integer,
    OUT queued integer,
    OUT max_active integer,
    OUT max_queued integer,
    OUT max_rate double precision,
    OUT admitted bigint,
    OUT rejected bigint,
    OUT rate_limited bigint,
    OUT since timestamptz)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'dbgate_key_status'
LANGUAGE C STRICT VOLATILE PARALLEL RESTRICTED;
REVOKE ALL ON FUNCTION key_status() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION key_status() TO pg_monitor;
CREATE VIEW keys AS
    SELECT * FROM key_status() ORDER BY budget, key NULLS FIRST;
REVOKE ALL ON keys FROM PUBLIC;
GRANT SELECT ON keys TO pg_monitor;

DROP FUNCTION dbgate_copy_execute_grants(regprocedure, regprocedure);
