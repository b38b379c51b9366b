--
-- Focused regressions:
--  * a SET LOCAL lock_timeout executed inside a gated statement of a budget
--    with a lock_timeout lasts until the end of the transaction, as without
--    dbgate (the budget's GUC level used to swallow it);
--  * deferred triggers fired by COMMIT take no slot: a COMMIT never queues
--    and never fails because its budget is full.
--
-- Runs alone as well as after the other files (pg_regress NAME): the
-- extension is created if it is not there yet.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS dbgate;
RESET client_min_messages;
\set VERBOSITY default
\set SHOW_CONTEXT never
SELECT current_user AS su \gset

CREATE ROLE regress_dbgate_cg LOGIN IN ROLE pg_monitor;
SELECT dbgate.create_budget('cg_b', 1, 0, lock_timeout => '300ms');
SELECT dbgate.assign_role('regress_dbgate_cg', 'cg_b');
CREATE TABLE cg_pk (id int PRIMARY KEY);
CREATE TABLE cg_fk (id int REFERENCES cg_pk DEFERRABLE INITIALLY DEFERRED);
INSERT INTO cg_pk VALUES (1);
GRANT SELECT, INSERT ON cg_pk, cg_fk TO regress_dbgate_cg;

\c - regress_dbgate_cg
-- SET LOCAL from inside a gated statement
BEGIN;
SELECT set_config('lock_timeout', '5s', true);
SHOW lock_timeout;
-- inside a gated statement the budget's smaller value is in force
SELECT current_setting('lock_timeout') AS effective;
SHOW lock_timeout;
COMMIT;
SHOW lock_timeout;
-- a session-level SET from inside a gated statement survives it
SELECT set_config('lock_timeout', '7s', false);
SHOW lock_timeout;
RESET lock_timeout;

-- deferred foreign-key checks at COMMIT: one admission per INSERT only
SELECT admitted AS before FROM dbgate.status WHERE budget = 'cg_b' \gset
INSERT INTO cg_fk VALUES (1);
BEGIN;
INSERT INTO cg_fk VALUES (1);
INSERT INTO cg_fk VALUES (1);
COMMIT;
-- the first INSERT, the transaction (its second INSERT runs under the slot
-- the first one kept: it holds a transaction ID) and this SELECT; the
-- deferred checks took no slot
SELECT admitted - :before AS admissions FROM dbgate.status WHERE budget = 'cg_b';
-- a failing deferred check still fails as usual
BEGIN;
INSERT INTO cg_fk VALUES (2);
COMMIT;
SELECT count(*) FROM cg_fk;

\c - :"su"
SELECT active, queued, rejected_full FROM dbgate.status WHERE budget = 'cg_b';
DROP TABLE cg_fk, cg_pk;
SELECT dbgate.drop_budget('cg_b', true);
DROP ROLE regress_dbgate_cg;
