--
-- The budget's lock_timeout is applied by setting the parameter's variable
-- for the run and putting the session's value back, fixing up the GUC stack
-- entries made during the run.  Whatever the statement itself does to
-- lock_timeout must keep PostgreSQL's meaning: the cases below are run by
-- an ungated role and by a gated one (the same text twice), and must
-- print the same.
--
\set VERBOSITY terse
\set SHOW_CONTEXT never
SELECT current_user AS su \gset

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

\c - regress_dbgate_ltc_free
-- Cases of lock_timeout set inside statements.  Run once by an ungated role
-- and once by a role whose budget has lock_timeout = 300ms: every SHOW must
-- print the same in both runs (what PostgreSQL itself does).
RESET lock_timeout;
-- 1. SET inside a statement survives it
SELECT set_config('lock_timeout', '5s', false) IS NOT NULL AS set;
SHOW lock_timeout;
RESET lock_timeout;
-- 2. SET LOCAL inside, then ROLLBACK
BEGIN;
SELECT set_config('lock_timeout', '5s', true) IS NOT NULL AS set;
SHOW lock_timeout;
ROLLBACK;
SHOW lock_timeout;
-- 3. SET inside, then ROLLBACK: the session's value comes back
BEGIN;
SELECT set_config('lock_timeout', '5s', false) IS NOT NULL AS set;
ROLLBACK;
SHOW lock_timeout;
-- 4. a function with a SET clause that fails
SELECT ltc_fail();
SHOW lock_timeout;
-- 5. a SET inside a function with a SET clause for the same parameter
SELECT ltc_set_inside() IS NOT NULL AS called;
SHOW lock_timeout;
RESET lock_timeout;
-- 6. SET, then SET LOCAL inside a statement, then COMMIT: the SET value
BEGIN;
SET lock_timeout = '2s';
SELECT set_config('lock_timeout', '5s', true) IS NOT NULL AS set;
SHOW lock_timeout;
COMMIT;
SHOW lock_timeout;
RESET lock_timeout;
-- 7. the same, then ROLLBACK
BEGIN;
SET lock_timeout = '2s';
SELECT set_config('lock_timeout', '5s', true) IS NOT NULL AS set;
ROLLBACK;
SHOW lock_timeout;
-- 8. SET LOCAL to the budget's own value
BEGIN;
SELECT set_config('lock_timeout', '300ms', true) IS NOT NULL AS set;
SHOW lock_timeout;
COMMIT;
SHOW lock_timeout;
-- 9. SET inside an exception block of a DO block, error caught
DO $$
BEGIN
    BEGIN
        PERFORM set_config('lock_timeout', '7s', false);
        PERFORM 1 / 0;
    EXCEPTION WHEN division_by_zero THEN
        NULL;
    END;
END $$;
SHOW lock_timeout;
-- 10. SET inside a statement that then fails
SELECT set_config('lock_timeout', '8s', false), 1 / 0;
SHOW lock_timeout;
-- 11. a session value tighter than the budget's stays in force and shown
SET lock_timeout = '100ms';
SELECT current_setting('lock_timeout') AS inside;
SHOW lock_timeout;
RESET lock_timeout;

\c - regress_dbgate_ltc_gated
SELECT admitted AS before FROM dbgate.status WHERE budget = 'ltc_b' \gset
-- Cases of lock_timeout set inside statements.  Run once by an ungated role
-- and once by a role whose budget has lock_timeout = 300ms: every SHOW must
-- print the same in both runs (what PostgreSQL itself does).
RESET lock_timeout;
-- 1. SET inside a statement survives it
SELECT set_config('lock_timeout', '5s', false) IS NOT NULL AS set;
SHOW lock_timeout;
RESET lock_timeout;
-- 2. SET LOCAL inside, then ROLLBACK
BEGIN;
SELECT set_config('lock_timeout', '5s', true) IS NOT NULL AS set;
SHOW lock_timeout;
ROLLBACK;
SHOW lock_timeout;
-- 3. SET inside, then ROLLBACK: the session's value comes back
BEGIN;
SELECT set_config('lock_timeout', '5s', false) IS NOT NULL AS set;
ROLLBACK;
SHOW lock_timeout;
-- 4. a function with a SET clause that fails
SELECT ltc_fail();
SHOW lock_timeout;
-- 5. a SET inside a function with a SET clause for the same parameter
SELECT ltc_set_inside() IS NOT NULL AS called;
SHOW lock_timeout;
RESET lock_timeout;
-- 6. SET, then SET LOCAL inside a statement, then COMMIT: the SET value
BEGIN;
SET lock_timeout = '2s';
SELECT set_config('lock_timeout', '5s', true) IS NOT NULL AS set;
SHOW lock_timeout;
COMMIT;
SHOW lock_timeout;
RESET lock_timeout;
-- 7. the same, then ROLLBACK
BEGIN;
SET lock_timeout = '2s';
SELECT set_config('lock_timeout', '5s', true) IS NOT NULL AS set;
ROLLBACK;
SHOW lock_timeout;
-- 8. SET LOCAL to the budget's own value
BEGIN;
SELECT set_config('lock_timeout', '300ms', true) IS NOT NULL AS set;
SHOW lock_timeout;
COMMIT;
SHOW lock_timeout;
-- 9. SET inside an exception block of a DO block, error caught
DO $$
BEGIN
    BEGIN
        PERFORM set_config('lock_timeout', '7s', false);
        PERFORM 1 / 0;
    EXCEPTION WHEN division_by_zero THEN
        NULL;
    END;
END $$;
SHOW lock_timeout;
-- 10. SET inside a statement that then fails
SELECT set_config('lock_timeout', '8s', false), 1 / 0;
SHOW lock_timeout;
-- 11. a session value tighter than the budget's stays in force and shown
SET lock_timeout = '100ms';
SELECT current_setting('lock_timeout') AS inside;
SHOW lock_timeout;
RESET lock_timeout;
-- the cases did run gated
SELECT admitted - :before >= 10 AS gated FROM dbgate.status WHERE budget = 'ltc_b';

\c - :"su"
DROP FUNCTION ltc_fail(), ltc_set_inside();
SELECT dbgate.drop_budget('ltc_b', true);
DROP ROLE regress_dbgate_ltc_free, regress_dbgate_ltc_gated;
