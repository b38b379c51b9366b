--
-- Runs last: the tests before left no budgets, assignments, roles or
-- settings behind, and no slot is held.
--
-- Runs alone as well as after the other files (pg_regress NAME): the
-- extension is created if it is not there yet.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS dbgate;
RESET client_min_messages;
SELECT * FROM dbgate.budgets;
SELECT budget, active, queued FROM dbgate.status;
SELECT * FROM dbgate.backends;
SELECT rolname FROM pg_roles WHERE rolname LIKE 'regress_dbgate%' ORDER BY 1;
SELECT setdatabase, setrole, setconfig FROM pg_db_role_setting
 WHERE array_to_string(setconfig, ',') LIKE '%dbgate%';
SHOW dbgate.default_budget;
