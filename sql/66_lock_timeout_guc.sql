--
-- The budget's lock_timeout is applied by setting the parameter's variable
-- for the run and putting the session's value back, fixing up the GUC stack
-- entries made during the run.  Whatever the statement itself does to
-- lock_timeout must keep PostgreSQL's meaning: the cases below are run by
-- an ungated role and by a gated one (the same file,
-- sql/66_lock_timeout_cases.inc, included twice), and must print the same.
--
-- Runs alone as well as after the other files (pg_regress NAME): the
-- extension is created if it is not there yet.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS dbgate;
RESET client_min_messages;
\set VERBOSITY terse
\set SHOW_CONTEXT never
SELECT current_user AS su \gset
-- the cases, one text for both runs; included by a relative name from the
-- source directory, so that errors are located the same way everywhere
\getenv abs_srcdir PG_ABS_SRCDIR
\cd :abs_srcdir
\set cases 'sql/66_lock_timeout_cases.inc'

CREATE ROLE regress_dbgate_ltc_free LOGIN;
CREATE ROLE regress_dbgate_ltc_gated LOGIN IN ROLE pg_monitor;
SELECT dbgate.create_budget('ltc_b', 5, 0, lock_timeout => '300ms');
SELECT dbgate.assign_role('regress_dbgate_ltc_gated', 'ltc_b');

CREATE FUNCTION ltc_fail() RETURNS int LANGUAGE plpgsql
    SET lock_timeout = '4s' AS $$ BEGIN RETURN 1 / 0; END $$;
CREATE FUNCTION ltc_set_inside() RETURNS text LANGUAGE plpgsql
    SET lock_timeout = '4s' AS $$
BEGIN
    RETURN set_config('lock_timeout', '6s', false);
END $$;
-- owned by the superuser: its SETs are made in context PGC_SUSET
CREATE FUNCTION ltc_definer_set(v text, is_local boolean) RETURNS text
    LANGUAGE plpgsql SECURITY DEFINER AS $$
BEGIN
    RETURN set_config('lock_timeout', v, is_local);
END $$;

\c - regress_dbgate_ltc_free
\i :cases

\c - regress_dbgate_ltc_gated
SELECT admitted AS before FROM dbgate.status WHERE budget = 'ltc_b' \gset
\i :cases
-- the cases did run gated
SELECT admitted - :before >= 10 AS gated FROM dbgate.status WHERE budget = 'ltc_b';

\c - :"su"
DROP FUNCTION ltc_fail(), ltc_set_inside(), ltc_definer_set(text, boolean);
SELECT dbgate.drop_budget('ltc_b', true);
DROP ROLE regress_dbgate_ltc_free, regress_dbgate_ltc_gated;
