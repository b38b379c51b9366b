--
-- Runs last: the tests before left no budgets, assignments, roles or
-- settings behind, and no slot is held.
--
SELECT * FROM dbgate.budgets;
SELECT budget, active, queued FROM dbgate.status;
SELECT * FROM dbgate.backends;
SELECT rolname FROM pg_roles WHERE rolname LIKE 'regress_dbgate%' ORDER BY 1;
SELECT setdatabase, setrole, setconfig FROM pg_db_role_setting
 WHERE array_to_string(setconfig, ',') LIKE '%dbgate%';
SHOW dbgate.default_budget;
