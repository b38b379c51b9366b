--
-- Classification: which budget gates a session, and by which rule.  The
-- session user's own assignment beats an assigned group it is a member of,
-- which beats the database's assignment, which beats
-- dbgate.default_budget; the nearest group wins, ties go to the group whose
-- name sorts first; SET ROLE, SECURITY DEFINER and superusers change
-- nothing.  dbgate.backends.classified_by says which rule applied.
--
-- A session sees its own classification in dbgate.backends while its
-- statement runs (the statement holds a slot); the roles are members of
-- pg_monitor to read it.  Every budget has room, so nothing ever queues.
--
-- (quietly: the output is the same alone and after the other files)
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS dbgate;
RESET client_min_messages;
\set VERBOSITY terse

CREATE ROLE regress_cls_u LOGIN IN ROLE pg_monitor;
-- groups: u is in g1 and, created in reverse name order (so that OID order
-- and name order differ), in gb and ga; g1 is in g2, g2 is in g3
CREATE ROLE regress_cls_g3;
CREATE ROLE regress_cls_g2 IN ROLE regress_cls_g3;
CREATE ROLE regress_cls_g1 IN ROLE regress_cls_g2;
CREATE ROLE regress_cls_gb;
CREATE ROLE regress_cls_ga;
GRANT regress_cls_g1, regress_cls_gb, regress_cls_ga TO regress_cls_u;
-- a membership that does not inherit privileges counts as well (v reads
-- the view by privileges of its own)
CREATE ROLE regress_cls_gn;
CREATE ROLE regress_cls_v LOGIN NOINHERIT IN ROLE regress_cls_gn;
GRANT USAGE ON SCHEMA dbgate TO regress_cls_v;
GRANT EXECUTE ON FUNCTION dbgate.backend_status() TO regress_cls_v;
GRANT SELECT ON dbgate.backends TO regress_cls_v;
-- x is a role u may SET ROLE to; x is in its own assigned group gx
CREATE ROLE regress_cls_gx;
CREATE ROLE regress_cls_x IN ROLE regress_cls_gx, pg_monitor;
GRANT regress_cls_x TO regress_cls_u;
-- a superuser in an assigned group
CREATE ROLE regress_cls_su SUPERUSER IN ROLE regress_cls_g1;

SELECT dbgate.create_budget(b, 10, 0)
  FROM unnest(ARRAY['cls_own', 'cls_g1', 'cls_g2', 'cls_g3', 'cls_ga',
                    'cls_gb', 'cls_gn', 'cls_gx', 'cls_db', 'cls_default']) AS b;

CREATE VIEW cls_me AS
  SELECT budget, classified_by FROM dbgate.backends WHERE pid = pg_backend_pid();
GRANT SELECT ON cls_me TO PUBLIC;

-- nothing assigned: not gated
SET SESSION AUTHORIZATION regress_cls_u;
SELECT count(*) AS gated FROM cls_me;
RESET SESSION AUTHORIZATION;

-- the default budget
SET dbgate.default_budget = 'cls_default';
SET SESSION AUTHORIZATION regress_cls_u;
SELECT * FROM cls_me;
RESET SESSION AUTHORIZATION;

-- the database's assignment beats the default
SELECT dbgate.assign_database(current_database(), 'cls_db');
SET SESSION AUTHORIZATION regress_cls_u;
SELECT * FROM cls_me;
RESET SESSION AUTHORIZATION;

-- a group three steps away beats the database
SELECT dbgate.assign_role('regress_cls_g3', 'cls_g3');
SET SESSION AUTHORIZATION regress_cls_u;
SELECT * FROM cls_me;
RESET SESSION AUTHORIZATION;

-- a nearer group wins: two steps, then one
SELECT dbgate.assign_role('regress_cls_g2', 'cls_g2');
SET SESSION AUTHORIZATION regress_cls_u;
SELECT * FROM cls_me;
RESET SESSION AUTHORIZATION;
SELECT dbgate.assign_role('regress_cls_g1', 'cls_g1');
SET SESSION AUTHORIZATION regress_cls_u;
SELECT * FROM cls_me;
RESET SESSION AUTHORIZATION;
SELECT dbgate.unassign_role('regress_cls_g1');

-- equally near (one step): the name that sorts first, whatever the OIDs
-- (ga was created after gb)
SELECT dbgate.assign_role('regress_cls_gb', 'cls_gb');
SET SESSION AUTHORIZATION regress_cls_u;
SELECT * FROM cls_me;
RESET SESSION AUTHORIZATION;
SELECT dbgate.assign_role('regress_cls_ga', 'cls_ga');
SET SESSION AUTHORIZATION regress_cls_u;
SELECT * FROM cls_me;
RESET SESSION AUTHORIZATION;
SELECT dbgate.unassign_role('regress_cls_ga');
SET SESSION AUTHORIZATION regress_cls_u;
SELECT * FROM cls_me;
RESET SESSION AUTHORIZATION;
-- 'regress_cls_g1' < 'regress_cls_gb'
SELECT dbgate.assign_role('regress_cls_g1', 'cls_g1');
SET SESSION AUTHORIZATION regress_cls_u;
SELECT * FROM cls_me;
RESET SESSION AUTHORIZATION;

-- the own assignment beats every group
SELECT dbgate.assign_role('regress_cls_u', 'cls_own');
SET SESSION AUTHORIZATION regress_cls_u;
SELECT * FROM cls_me;
RESET SESSION AUTHORIZATION;
SELECT dbgate.unassign_role('regress_cls_u');

-- SET ROLE to x, whose nearest assigned group is gx, changes nothing: the
-- session user's nearest is g1 (or gb), one step, and gx is two steps away
SELECT dbgate.assign_role('regress_cls_gx', 'cls_gx');
SET SESSION AUTHORIZATION regress_cls_u;
SET ROLE regress_cls_x;
SELECT current_user, budget, classified_by FROM cls_me;
RESET ROLE;
RESET SESSION AUTHORIZATION;
-- a SECURITY DEFINER function owned by x changes nothing either
CREATE FUNCTION cls_definer() RETURNS text LANGUAGE sql SECURITY DEFINER
  AS $$ SELECT current_user || ' ' || budget || ' ' || classified_by FROM cls_me $$;
ALTER FUNCTION cls_definer() OWNER TO regress_cls_x;
SET SESSION AUTHORIZATION regress_cls_u;
SELECT cls_definer();
RESET SESSION AUTHORIZATION;

-- a membership without INHERIT
SELECT dbgate.assign_role('regress_cls_gn', 'cls_gn');
SET SESSION AUTHORIZATION regress_cls_v;
SELECT * FROM cls_me;
RESET SESSION AUTHORIZATION;

-- superusers are never gated, whatever their groups
SET SESSION AUTHORIZATION regress_cls_su;
SELECT count(*) AS gated FROM cls_me;
RESET SESSION AUTHORIZATION;

-- a group that loses its assignment falls through to the next rule
SELECT dbgate.unassign_role(r)
  FROM unnest(ARRAY['regress_cls_g1', 'regress_cls_gb', 'regress_cls_gx',
                    'regress_cls_g2']::regrole[]) AS r;
SET SESSION AUTHORIZATION regress_cls_u;
SELECT * FROM cls_me;
RESET SESSION AUTHORIZATION;
-- ... and a dropped group too
DROP ROLE regress_cls_g2;
SET SESSION AUTHORIZATION regress_cls_u;
SELECT * FROM cls_me;
RESET SESSION AUTHORIZATION;
SELECT dbgate.unassign_database(current_database());
SET SESSION AUTHORIZATION regress_cls_u;
SELECT * FROM cls_me;
RESET SESSION AUTHORIZATION;

-- clean up
RESET dbgate.default_budget;
REVOKE USAGE ON SCHEMA dbgate FROM regress_cls_v;
REVOKE EXECUTE ON FUNCTION dbgate.backend_status() FROM regress_cls_v;
REVOKE SELECT ON dbgate.backends FROM regress_cls_v;
DROP VIEW cls_me;
DROP FUNCTION cls_definer();
DROP ROLE regress_cls_u, regress_cls_v, regress_cls_su, regress_cls_x,
  regress_cls_g1, regress_cls_g3, regress_cls_ga, regress_cls_gb,
  regress_cls_gn, regress_cls_gx;
SELECT dbgate.drop_budget(b, force => true)
  FROM unnest(ARRAY['cls_own', 'cls_g1', 'cls_g2', 'cls_g3', 'cls_ga',
                    'cls_gb', 'cls_gn', 'cls_gx', 'cls_db', 'cls_default']) AS b;
SELECT count(*) AS leftover FROM dbgate.budgets WHERE budget LIKE 'cls\_%';
