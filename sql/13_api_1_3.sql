--
-- The 1.3 additions to the SQL interface: the budget fields reserved (slots
-- of the parent kept for a child), runaway_after, runaway_action,
-- runaway_budget and quarantine (runaway statements), adapt and adapt_min
-- (the adaptive limit) and the 1.3 columns of dbgate.status.  Their normal use, every error with its
-- SQLSTATE (a failing call changes nothing), what a change of the
-- hierarchy does to it, config_script() with reservations.  What a
-- reservation does to admission is in the isolation tests.
--
-- Runs alone as well as after the other files (pg_regress NAME): the
-- extension is created if it is not there yet.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS dbgate;
RESET client_min_messages;
\set VERBOSITY default
\set SHOW_CONTEXT never
SET IntervalStyle = postgres;

CREATE TEMP VIEW v13_fields AS
  SELECT budget, max_active, parent, reserved
    FROM dbgate.budgets WHERE budget LIKE 'v13%';

--
-- create_budget and alter_budget: the default, by name and by position
--
SELECT dbgate.create_budget('v13_top', 4);
SELECT dbgate.create_budget('v13_a', 2, parent => 'v13_top', reserved => 2);
SELECT dbgate.create_budget('v13_b', 3, 0, '0', '0', '0', true, 'statement',
                            '0', -1, false, true, 'fifo', '100 ms', 'v13_top',
                            1, 0, 1, 0, 0, 1);
SELECT dbgate.create_budget('v13_c', 4, parent => 'v13_top');
SELECT * FROM v13_fields;
-- alter_budget: NULL keeps it, a value replaces it
SELECT dbgate.alter_budget('v13_b', reserved => NULL, max_queued => 1);
SELECT dbgate.alter_budget('v13_a', reserved => 1);
SELECT dbgate.alter_budget('v13_c', reserved => 1);
SELECT * FROM v13_fields;
-- reservations up to the parent's max_active together
SELECT dbgate.alter_budget('v13_b', reserved => 2);
SELECT sum(reserved) AS reserved_together FROM dbgate.budgets
 WHERE parent = 'v13_top';
-- in one transaction the checks see the fields as they are after each call
BEGIN;
SELECT dbgate.alter_budget('v13_b', reserved => 0);
SELECT dbgate.alter_budget('v13_c', reserved => 3);
SELECT * FROM v13_fields;
ROLLBACK;
SELECT * FROM v13_fields;

--
-- config_script() names reserved only where it is not 0
--
\pset format unaligned
\pset tuples_only on
SELECT dbgate.config_script();
\pset format aligned
\pset tuples_only off

--
-- Errors.  After each failing call the configuration must be unchanged.
--
CREATE TEMP VIEW v13_config AS
  SELECT string_agg(b::text, ' ' ORDER BY b.budget) AS config
    FROM dbgate.budgets b;
SELECT config AS config0 FROM v13_config \gset
\set check 'SELECT :''SQLSTATE'' AS sqlstate, config = :''config0'' AS unchanged FROM v13_config;'

-- 22023: reserved < 0
SELECT dbgate.create_budget('v13_new', 1, parent => 'v13_top', reserved => -1);
:check
SELECT dbgate.alter_budget('v13_a', reserved => -2147483648);
:check
-- 22023: reserved over the budget's own max_active, also by lowering it
SELECT dbgate.create_budget('v13_new', 1, parent => 'v13_c', reserved => 2);
:check
SELECT dbgate.alter_budget('v13_b', max_active => 1);
:check
-- 22023: reserved on a budget without parent, also by leaving the parent
SELECT dbgate.create_budget('v13_new', 2, reserved => 1);
:check
SELECT dbgate.alter_budget('v13_top', reserved => 1);
:check
-- (parent => '' alone resets it instead, below)
SELECT dbgate.alter_budget('v13_b', parent => '', reserved => 2);
:check
-- 22023: the siblings' reservations over the parent's max_active, by a new
-- child, a larger reservation, a move to another parent, a smaller parent
SELECT dbgate.create_budget('v13_new', 1, parent => 'v13_top', reserved => 1);
:check
SELECT dbgate.alter_budget('v13_c', reserved => 2);
:check
SELECT dbgate.create_budget('v13_top2', 1);
SELECT config AS config0 FROM v13_config \gset
SELECT dbgate.alter_budget('v13_b', parent => 'v13_top2');
:check
SELECT dbgate.alter_budget('v13_top', max_active => 3);
:check
-- 22023: NULL where create_budget needs a value
SELECT dbgate.create_budget('v13_new', 1, parent => 'v13_top', reserved => NULL);
:check
-- ... but a parent may grow, and a move that fits is fine
SELECT dbgate.alter_budget('v13_top', max_active => 5);
SELECT dbgate.alter_budget('v13_c', reserved => 2);
SELECT dbgate.alter_budget('v13_top2', max_active => 2);
SELECT dbgate.alter_budget('v13_b', parent => 'v13_top2');
SELECT dbgate.alter_budget('v13_b', reserved => 0, parent => '');
SELECT * FROM v13_fields;
-- parent => '' without reserved: the orphan's reservation is reset, with a
-- WARNING (once, also when the transaction's image is rebuilt and at COMMIT)
SELECT dbgate.alter_budget('v13_b', parent => 'v13_top2', reserved => 1);
BEGIN;
SELECT dbgate.alter_budget('v13_b', parent => '');
SAVEPOINT s;
SELECT dbgate.create_budget('v13_x', 1);
ROLLBACK TO s;
SELECT * FROM v13_fields WHERE budget = 'v13_b';
COMMIT;
SELECT * FROM v13_fields WHERE budget = 'v13_b';

--
-- drop_budget of a parent with force: its children become top-level and
-- reserve nothing (a WARNING for each that had a reservation)
--
SELECT dbgate.drop_budget('v13_top', force => true);
SELECT * FROM v13_fields;

--
-- adapt and adapt_min: the fields, their rules (22023, nothing changed),
-- status.adaptive_limit (what the limit does is in TAP 060_adapt)
--
CREATE TEMP VIEW v13_adapt AS
  SELECT b.budget, b.max_active, b.adapt, b.adapt_min, s.adaptive_limit
    FROM dbgate.budgets b JOIN dbgate.status s USING (budget)
   WHERE b.budget LIKE 'v13%';
SELECT dbgate.create_budget('v13_ad', 4, adapt => 'shadow', adapt_min => 2);
SELECT dbgate.create_budget('v13_off', 4);
SELECT * FROM v13_adapt ORDER BY budget;
SELECT dbgate.alter_budget('v13_ad', adapt => 'on');
SELECT dbgate.alter_budget('v13_off', adapt_min => 4);
SELECT * FROM v13_adapt ORDER BY budget;
\pset format unaligned
\pset tuples_only on
SELECT dbgate.config_script();
\pset format aligned
\pset tuples_only off
SELECT config AS config0 FROM v13_config \gset
-- 22023: adapt other than 'off', 'shadow', 'on'
SELECT dbgate.create_budget('v13_new', 1, adapt => 'ON');
:check
SELECT dbgate.alter_budget('v13_ad', adapt => 'auto');
:check
-- 22023: adapt_min < 1, over max_active (also by lowering max_active)
SELECT dbgate.create_budget('v13_new', 1, adapt_min => 0);
:check
SELECT dbgate.create_budget('v13_new', 2, adapt_min => 3);
:check
SELECT dbgate.alter_budget('v13_off', max_active => 3);
:check
-- 22023: NULL where create_budget needs a value
SELECT dbgate.create_budget('v13_new', 1, adapt => NULL);
:check
SELECT dbgate.create_budget('v13_new', 1, adapt_min => NULL);
:check
-- 'off' forgets the limit
SELECT dbgate.alter_budget('v13_ad', adapt => 'off');
SELECT * FROM v13_adapt ORDER BY budget;

--
-- runaway_after, runaway_action, runaway_budget, quarantine: the fields,
-- their rules (22023, 42704, 2BP01; nothing changed), 'demote' accepted,
-- config_script() sets the last three with alter_budget once every budget
-- exists, the status counters (what a runaway does is in 14_runaway and
-- TAP)
--
CREATE TEMP VIEW v13_runaway AS
  SELECT budget, runaway_after, runaway_action, runaway_budget, quarantine
    FROM dbgate.budgets WHERE budget LIKE 'v13_r%';
SELECT dbgate.create_budget('v13_rslow', 1);
SELECT dbgate.create_budget('v13_ra', 4, runaway_after => '1s',
                            runaway_action => 'cancel', quarantine => '1 min');
SELECT dbgate.create_budget('v13_rb', 4, runaway_after => '250ms',
                            runaway_budget => 'v13_rslow');
SELECT dbgate.create_budget('v13_rp', 2);
SELECT dbgate.create_budget('v13_rpc', 1, parent => 'v13_rp');
SELECT * FROM v13_runaway ORDER BY budget;
SELECT dbgate.alter_budget('v13_ra', runaway_action => 'log');
SELECT dbgate.alter_budget('v13_rb', runaway_after => '0.5 s', runaway_action => NULL);
SELECT * FROM v13_runaway ORDER BY budget;
SELECT budget, runaways, demoted_out, demoted_in, quarantined
  FROM dbgate.status WHERE budget LIKE 'v13_r%' ORDER BY budget;
\pset format unaligned
\pset tuples_only on
SELECT dbgate.config_script();
\pset format aligned
\pset tuples_only off
SELECT config AS config0 FROM v13_config \gset
-- 22023: runaway_action other than 'log', 'demote', 'cancel'
SELECT dbgate.create_budget('v13_rnew', 1, runaway_action => 'kill');
:check
-- 22023: a negative runaway_after or quarantine
SELECT dbgate.create_budget('v13_rnew', 1, runaway_after => '-1s');
:check
SELECT dbgate.alter_budget('v13_ra', quarantine => '-1 min');
:check
-- 22023: 'demote' without a runaway_budget
SELECT dbgate.create_budget('v13_rnew', 1, runaway_after => '1s',
                            runaway_action => 'demote');
:check
-- 22023: the budget itself as its runaway_budget
SELECT dbgate.alter_budget('v13_rb', runaway_budget => 'v13_rb');
:check
-- 42704: a runaway_budget that does not exist
SELECT dbgate.alter_budget('v13_rb', runaway_budget => 'v13_nothere');
:check
-- 22023: a runaway_budget with children; a runaway_budget as a parent
SELECT dbgate.alter_budget('v13_rb', runaway_budget => 'v13_rp');
:check
SELECT dbgate.create_budget('v13_rnew', 1, parent => 'v13_rslow');
:check
-- 22023: quarantine without runaway_after, also by clearing runaway_after
SELECT dbgate.create_budget('v13_rnew', 1, quarantine => '1 min');
:check
SELECT dbgate.alter_budget('v13_ra', runaway_after => '0');
:check
-- 2BP01: dropping another budget's runaway_budget without force
SELECT dbgate.drop_budget('v13_rslow');
:check

-- 'demote' is accepted by create_budget and alter_budget (what it does is
-- in 14_runaway), shown in dbgate.budgets, and config_script() sets it
-- together with its runaway_budget in one alter_budget
SELECT dbgate.create_budget('v13_rd', 2, runaway_after => '2s',
                            runaway_action => 'demote',
                            runaway_budget => 'v13_rslow');
SELECT dbgate.alter_budget('v13_rb', runaway_action => 'demote');
SELECT * FROM v13_runaway ORDER BY budget;
\x on
SELECT * FROM dbgate.budgets WHERE budget = 'v13_rd';
\x off
SELECT budget, runaways, demoted_out, demoted_in, quarantined
  FROM dbgate.status WHERE budget LIKE 'v13_r%' ORDER BY budget;
\pset format unaligned
\pset tuples_only on
SELECT dbgate.config_script();
\pset format aligned
\pset tuples_only off
SELECT config AS config0 FROM v13_config \gset
-- with 'demote' in use the rules stay: 22023, clearing the runaway_budget
-- of a 'demote' budget
SELECT dbgate.alter_budget('v13_rb', runaway_budget => '');
:check
SELECT dbgate.alter_budget('v13_rd', max_active => 3, runaway_after => '1s',
                           runaway_budget => '');
:check
-- 22023: the budget itself as its runaway_budget
SELECT dbgate.alter_budget('v13_rd', runaway_budget => 'v13_rd');
:check
-- 42704: a runaway_budget that does not exist, on create and alter
SELECT dbgate.create_budget('v13_rnew', 1, runaway_after => '1s',
                            runaway_action => 'demote',
                            runaway_budget => 'v13_nothere');
:check
SELECT dbgate.alter_budget('v13_rd', runaway_budget => 'v13_nothere');
:check
-- 22023: a runaway_budget with children; the runaway_budget made a parent
SELECT dbgate.alter_budget('v13_rd', runaway_budget => 'v13_rp');
:check
SELECT dbgate.create_budget('v13_rnew', 1, runaway_after => '1s',
                            runaway_action => 'demote',
                            runaway_budget => 'v13_rp');
:check
SELECT dbgate.alter_budget('v13_rpc', parent => 'v13_rslow');
:check
-- 2BP01: dropping the runaway_budget of 'demote' budgets without force
SELECT dbgate.drop_budget('v13_rslow');
:check
-- runaway_budget => '' clears it together with another action; in one
-- transaction, then rolled back
BEGIN;
SELECT dbgate.alter_budget('v13_rb', runaway_action => 'log', runaway_budget => '');
SELECT dbgate.alter_budget('v13_rd', runaway_action => 'cancel', runaway_budget => '');
SELECT dbgate.drop_budget('v13_rslow');
SELECT * FROM v13_runaway ORDER BY budget;
ROLLBACK;
:check
-- drop_budget with force: the budgets that named it lose it, with a
-- WARNING, and those that demoted to it get runaway_action 'log'
SELECT dbgate.drop_budget('v13_rslow', force => true);
SELECT * FROM v13_runaway ORDER BY budget;

--
-- Privileges: the 1.3 signatures are revoked from PUBLIC like the others
--
SELECT p.oid::regprocedure AS function,
       has_function_privilege('public', p.oid, 'EXECUTE') AS public,
       has_function_privilege('pg_monitor', p.oid, 'EXECUTE') AS pg_monitor
  FROM pg_proc p
 WHERE p.pronamespace = 'dbgate'::regnamespace
   AND p.proname IN ('create_budget', 'alter_budget', 'budget_config')
 ORDER BY p.oid::regprocedure::text;

--
-- Clean up
--
-- children first, so that no drop needs force
SELECT dbgate.drop_budget(budget) FROM dbgate.budgets
 WHERE budget LIKE 'v13%' ORDER BY parent IS NULL, budget;
SELECT * FROM v13_fields;
