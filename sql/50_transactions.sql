--
-- Configuration changes are transactional: recorded in the transaction,
-- visible to it in dbgate.budgets, applied at COMMIT (dbgate.status and
-- gating see only committed budgets), undone by ROLLBACK and ROLLBACK TO
-- SAVEPOINT.  reset_stats() is not transactional.
--
-- Runs alone as well as after the other files (pg_regress NAME): the
-- extension is created if it is not there yet.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS dbgate;
RESET client_min_messages;
\set VERBOSITY default
\set SHOW_CONTEXT never
\set sqlstate '\\echo SQLSTATE: :SQLSTATE'
SET IntervalStyle = postgres;

SELECT dbgate.create_budget('tx_a', 2, 1, '1 s', '0', '0', true);
SELECT dbgate.create_budget('tx_b', 1);
CREATE ROLE regress_dbgate_tx_r;
CREATE ROLE regress_dbgate_tx_s IN ROLE pg_monitor;
SELECT dbgate.assign_role('regress_dbgate_tx_r', 'tx_a');
CREATE TEMP VIEW tx_config AS
  SELECT string_agg(b::text, ' ' ORDER BY b.budget) AS config
    FROM dbgate.budgets b;
CREATE TEMP VIEW tx_status AS
  SELECT string_agg(format('%s:%s:%s', budget, max_active, max_queued), ' '
                    ORDER BY budget) AS status
    FROM dbgate.status;
SELECT config AS config0 FROM tx_config \gset
SELECT status AS status0 FROM tx_status \gset
\set unchanged 'SELECT config = :''config0'' AS budgets_unchanged, status = :''status0'' AS status_unchanged FROM tx_config, tx_status;'
SELECT * FROM dbgate.budgets;

--
-- ROLLBACK undoes every kind of change
--
BEGIN;
SELECT dbgate.create_budget('tx_new', 3);
SELECT dbgate.alter_budget('tx_a', 5, 0, '0', '2 s', '3 s', false);
SELECT dbgate.assign_role('regress_dbgate_tx_s', 'tx_new');
SELECT dbgate.unassign_role('regress_dbgate_tx_r');
SELECT dbgate.drop_budget('tx_b');
-- the transaction sees its own changes in dbgate.budgets ...
SELECT * FROM dbgate.budgets;
-- ... while dbgate.status shows the committed budgets only
SELECT budget, max_active, max_queued FROM dbgate.status;
ROLLBACK;
:unchanged
SELECT * FROM dbgate.budgets;

--
-- COMMIT applies them, to both views
--
BEGIN;
SELECT dbgate.create_budget('tx_new', 3);
SELECT dbgate.alter_budget('tx_a', max_active => 5);
SELECT dbgate.assign_role('regress_dbgate_tx_s', 'tx_new');
SELECT dbgate.unassign_role('regress_dbgate_tx_r');
SELECT dbgate.drop_budget('tx_b');
SELECT budget, max_active, max_queued FROM dbgate.status;
COMMIT;
SELECT * FROM dbgate.budgets;
SELECT budget, max_active, max_queued FROM dbgate.status;
-- back to the start, in one transaction
BEGIN;
SELECT dbgate.drop_budget('tx_new', true);
SELECT dbgate.alter_budget('tx_a', max_active => 2);
SELECT dbgate.create_budget('tx_b', 1);
SELECT dbgate.assign_role('regress_dbgate_tx_r', 'tx_a');
COMMIT;
:unchanged

--
-- Later calls in a transaction check against what the transaction sees
--
BEGIN;
SELECT dbgate.create_budget('tx_new', 1);
SELECT dbgate.alter_budget('tx_new', 2);
SELECT dbgate.assign_role('regress_dbgate_tx_s', 'tx_new');
SAVEPOINT s;
-- the role assigned in this transaction blocks a drop without force
SELECT dbgate.drop_budget('tx_new');
:sqlstate
ROLLBACK TO s;
SELECT dbgate.unassign_role('regress_dbgate_tx_s');
SELECT dbgate.drop_budget('tx_new');
SAVEPOINT s;
-- dropped in this transaction: unknown
SELECT dbgate.alter_budget('tx_new', 3);
:sqlstate
ROLLBACK TO s;
SAVEPOINT s;
SELECT dbgate.assign_role('regress_dbgate_tx_s', 'tx_new');
:sqlstate
ROLLBACK TO s;
-- ... and can be created again
SELECT dbgate.create_budget('tx_new', 4);
SELECT budget, max_active, roles FROM dbgate.budgets;
ROLLBACK;
:unchanged

--
-- Savepoints: ROLLBACK TO undoes what came after the savepoint, RELEASE
-- keeps it
--
BEGIN;
SELECT dbgate.alter_budget('tx_a', max_active => 3);
SAVEPOINT s1;
SELECT dbgate.create_budget('tx_sp', 1);
SELECT dbgate.assign_role('regress_dbgate_tx_s', 'tx_sp');
SELECT dbgate.drop_budget('tx_a', true);
SELECT budget, max_active, roles FROM dbgate.budgets;
ROLLBACK TO s1;
SELECT budget, max_active, roles FROM dbgate.budgets;
SAVEPOINT s2;
SELECT dbgate.create_budget('tx_rel', 1);
SAVEPOINT s3;
SELECT dbgate.alter_budget('tx_rel', 4);
RELEASE SAVEPOINT s3;
SAVEPOINT s4;
SELECT dbgate.drop_budget('tx_rel');
SELECT dbgate.unassign_role('regress_dbgate_tx_r');
ROLLBACK TO s4;
RELEASE SAVEPOINT s2;
SELECT budget, max_active, roles FROM dbgate.budgets;
SELECT budget, max_active FROM dbgate.status;
COMMIT;
SELECT budget, max_active, roles FROM dbgate.budgets;
SELECT budget, max_active FROM dbgate.status;
-- a savepoint rolled back to, then the whole transaction rolled back
BEGIN;
SAVEPOINT s1;
SELECT dbgate.drop_budget('tx_rel');
ROLLBACK TO s1;
SELECT dbgate.alter_budget('tx_rel', 9);
ROLLBACK;
SELECT budget, max_active FROM dbgate.budgets WHERE budget = 'tx_rel';
SELECT dbgate.drop_budget('tx_rel');
SELECT dbgate.alter_budget('tx_a', max_active => 2);
:unchanged

--
-- Subtransactions of PL/pgSQL: an exception block undoes its own changes
--
DO $$
BEGIN
    PERFORM dbgate.create_budget('tx_do1', 1);
    BEGIN
        PERFORM dbgate.create_budget('tx_do2', 1);
        PERFORM dbgate.create_budget('tx_do1', 1);
    EXCEPTION WHEN duplicate_object THEN
        RAISE NOTICE 'caught: % (SQLSTATE %)', SQLERRM, SQLSTATE;
    END;
    BEGIN
        PERFORM dbgate.create_budget('tx_do3', 1);
    END;
END $$;
SELECT budget FROM dbgate.budgets;
SELECT budget FROM dbgate.status;
SELECT dbgate.drop_budget('tx_do1');
SELECT dbgate.drop_budget('tx_do3');
-- an error that ends the transaction undoes everything in it
DO $$
BEGIN
    PERFORM dbgate.create_budget('tx_do4', 1);
    PERFORM dbgate.drop_budget('tx_nonexistent');
END $$;
:sqlstate
:unchanged

--
-- Roles: DROP ROLE and ALTER ROLE ... RENAME are transactional as well
--
BEGIN;
DROP ROLE regress_dbgate_tx_r;
SELECT budget, roles FROM dbgate.budgets;
ROLLBACK;
SELECT budget, roles FROM dbgate.budgets;
BEGIN;
ALTER ROLE regress_dbgate_tx_r RENAME TO regress_dbgate_tx_renamed;
SELECT budget, roles FROM dbgate.budgets;
ROLLBACK;
SELECT budget, roles FROM dbgate.budgets;
-- a role created and assigned in a transaction that rolls back leaves no
-- assignment behind
BEGIN;
CREATE ROLE regress_dbgate_tx_temp;
SELECT dbgate.assign_role('regress_dbgate_tx_temp', 'tx_b');
SELECT budget, roles FROM dbgate.budgets;
ROLLBACK;
:unchanged

--
-- Gating follows the committed configuration only
--
BEGIN;
SELECT dbgate.assign_role('regress_dbgate_tx_s', 'tx_b');
SET SESSION AUTHORIZATION regress_dbgate_tx_s;
SELECT budget FROM dbgate.backends WHERE pid = pg_backend_pid();
RESET SESSION AUTHORIZATION;
COMMIT;
SET SESSION AUTHORIZATION regress_dbgate_tx_s;
SELECT budget, state FROM dbgate.backends WHERE pid = pg_backend_pid();
RESET SESSION AUTHORIZATION;
-- an uncommitted drop does not stop gating
BEGIN;
SELECT dbgate.drop_budget('tx_b', true);
SET SESSION AUTHORIZATION regress_dbgate_tx_s;
SELECT budget, state FROM dbgate.backends WHERE pid = pg_backend_pid();
RESET SESSION AUTHORIZATION;
ROLLBACK;
SELECT dbgate.unassign_role('regress_dbgate_tx_s');

--
-- reset_stats() is not transactional: ROLLBACK does not bring the counters
-- back
--
SET SESSION AUTHORIZATION regress_dbgate_tx_r;
SELECT 1 AS counted;
SELECT 2 AS counted;
RESET SESSION AUTHORIZATION;
SELECT budget, admitted, peak_active FROM dbgate.status WHERE budget = 'tx_a';
SELECT stats_reset AS reset0 FROM dbgate.status WHERE budget = 'tx_a' \gset
BEGIN;
SELECT dbgate.reset_stats('tx_a');
ROLLBACK;
SELECT budget, admitted, peak_active, stats_reset > :'reset0' AS reset_moved
  FROM dbgate.status WHERE budget = 'tx_a';

--
-- Dropping a budget and creating one of the same name in one transaction
-- gives a new budget, as in two transactions: fresh counters
--
SET SESSION AUTHORIZATION regress_dbgate_tx_r;
SELECT 3 AS counted;
RESET SESSION AUTHORIZATION;
SELECT stats_reset AS reset1 FROM dbgate.status WHERE budget = 'tx_a' \gset
SELECT budget, admitted FROM dbgate.status WHERE budget = 'tx_a';
BEGIN;
SELECT dbgate.drop_budget('tx_a', true);
SELECT dbgate.create_budget('tx_a', 2, 1, '1 s', '0', '0', true);
SELECT dbgate.assign_role('regress_dbgate_tx_r', 'tx_a');
COMMIT;
SELECT budget, admitted, peak_active, stats_reset > :'reset1' AS reset_moved
  FROM dbgate.status WHERE budget = 'tx_a';
:unchanged

DROP VIEW tx_config;
DROP VIEW tx_status;
SELECT dbgate.drop_budget('tx_a', true);
SELECT dbgate.drop_budget('tx_b');
DROP ROLE regress_dbgate_tx_r, regress_dbgate_tx_s;
SELECT * FROM dbgate.budgets;
