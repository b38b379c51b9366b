--
-- Set-up for the regression tests: the extension, created once.
--
-- The tests of this directory run one after the other in one throwaway
-- instance with dbgate preloaded (test/dbgate.conf).  Budgets are
-- cluster-wide, so each test drops every budget and role it creates;
-- 99_leftovers checks that nothing was left behind.  Each test also runs
-- alone on a fresh instance (test/check.sh alone): it creates the extension
-- if needed (CREATE EXTENSION IF NOT EXISTS between SET client_min_messages
-- = warning and RESET, so that its output is the same either way) and its
-- own roles and budgets.
--
SHOW shared_preload_libraries;
CREATE EXTENSION dbgate;
SELECT extname, extversion, extrelocatable, extnamespace::regnamespace AS schema
  FROM pg_extension WHERE extname = 'dbgate';
-- a fresh instance: no budgets, nothing gated
SELECT count(*) AS budgets FROM dbgate.budgets;
SELECT count(*) AS status_rows FROM dbgate.status;
SELECT count(*) AS backends FROM dbgate.backends;
SHOW dbgate.enabled;
SHOW dbgate.default_budget;
