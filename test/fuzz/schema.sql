-- The schema that the fuzz test (test/t/092_fuzz.pl) gives sqlsmith to
-- generate queries from.  Small tables of many types, views (one with
-- INSTEAD rules of several actions, one WITH CHECK OPTION, one over a
-- function), rules on tables, triggers that write and read, functions that
-- run queries while a statement is planned (IMMUTABLE in name only), while
-- it executes (nested queries, cursors, subtransactions, writes, advisory
-- locks, SET clauses) or while a domain checks a value, an aggregate whose
-- transition function runs a query, and views over dbgate's own views.
--
-- sqlsmith calls functions with constants 1..100 for integer arguments and
-- NULL for most other types, or with columns of the tables: the functions
-- accept any such input and bound the work it asks for.  Text columns hold
-- the names of budgets and roles (fz.labels), so that calls of dbgate's
-- functions with a column argument may name a real budget.  sqlsmith rolls
-- back every statement it sends; the utility clients commit.
--
-- Run by a superuser in an empty database; the objects belong to fz_owner,
-- whose members the fuzz roles are; those over dbgate's views belong to the
-- superuser who runs this file.

CREATE ROLE fz_owner NOLOGIN;
CREATE SCHEMA fz AUTHORIZATION fz_owner;
GRANT USAGE ON SCHEMA fz TO PUBLIC;

SET ROLE fz_owner;

CREATE TYPE fz.mood AS ENUM ('low', 'mid', 'high');
CREATE DOMAIN fz.posint AS integer CHECK (VALUE > 0);

CREATE TABLE fz.labels (
	name text PRIMARY KEY,
	kind text NOT NULL
);
INSERT INTO fz.labels VALUES
	('fz_stmt', 'budget'), ('fz_txn', 'budget'), ('fz_shadow', 'budget'),
	('fz_pool', 'budget'), ('fz_pool2', 'budget'), ('no_such_budget', 'budget'),
	('fz_s1', 'role'), ('fz_t1', 'role'), ('fz_grp', 'role'),
	('statement', 'scope'), ('transaction', 'scope'),
	('fifo', 'order'), ('lifo', 'order'), ('', 'empty');

-- a check that runs a query for every value checked
CREATE FUNCTION fz.is_label(t text) RETURNS boolean
	LANGUAGE sql STABLE
	AS $$SELECT t IS NULL OR EXISTS (SELECT 1 FROM fz.labels WHERE name = t)$$;
CREATE DOMAIN fz.label AS text CHECK (fz.is_label(VALUE));

CREATE TABLE fz.accounts (
	id integer PRIMARY KEY,
	owner text NOT NULL,
	balance numeric(12, 2) NOT NULL DEFAULT 0,
	mood fz.mood,
	opened timestamptz NOT NULL DEFAULT now(),
	tags text[],
	doc jsonb,
	span int4range
);
INSERT INTO fz.accounts
SELECT g, (SELECT name FROM fz.labels ORDER BY name OFFSET g % 14 LIMIT 1),
	   (g * 37) % 500, (ARRAY['low', 'mid', 'high'])[1 + g % 3]::fz.mood,
	   '2024-01-01'::timestamptz + g * interval '1 hour',
	   ARRAY['t' || g % 5, 't' || g % 7],
	   jsonb_build_object('g', g, 'odd', g % 2 = 1),
	   int4range(g, g + g % 10)
FROM generate_series(1, 200) g;

CREATE TABLE fz.moves (
	id bigserial PRIMARY KEY,
	account integer NOT NULL REFERENCES fz.accounts ON DELETE CASCADE,
	amount fz.posint NOT NULL,
	note fz.label,
	at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX moves_account ON fz.moves (account);
ALTER TABLE fz.moves SET (parallel_workers = 1);
INSERT INTO fz.moves (account, amount, note)
SELECT 1 + g % 200, 1 + g % 50, CASE WHEN g % 3 = 0 THEN 'fz_stmt' END
FROM generate_series(1, 1000) g;

CREATE TABLE fz.audit (
	id bigserial PRIMARY KEY,
	what text NOT NULL,
	n integer,
	at timestamptz NOT NULL DEFAULT clock_timestamp()
);
INSERT INTO fz.audit (what, n) SELECT 'seed', g FROM generate_series(1, 100) g;

CREATE TABLE fz.parts (
	k integer NOT NULL,
	v text,
	w double precision
) PARTITION BY RANGE (k);
CREATE TABLE fz.parts_lo PARTITION OF fz.parts FOR VALUES FROM (MINVALUE) TO (50);
CREATE TABLE fz.parts_hi PARTITION OF fz.parts FOR VALUES FROM (50) TO (MAXVALUE);
INSERT INTO fz.parts SELECT g, 'v' || g, g / 7.0 FROM generate_series(1, 100) g;

-- scanned in parallel (the fuzz roles make parallel plans cheap; the
-- catalogs, which sqlsmith reads thousands of times, are too small)
CREATE TABLE fz.big (
	id integer PRIMARY KEY,
	grp integer NOT NULL,
	val double precision NOT NULL,
	pad text
) WITH (parallel_workers = 2);
INSERT INTO fz.big SELECT g, g % 17, (g * 7919) % 10007 / 10.0, repeat('x', g % 40)
FROM generate_series(1, 50000) g;

CREATE TABLE fz.gen (
	a integer,
	b integer GENERATED ALWAYS AS (a * 2) STORED,
	c text DEFAULT 'x'
);
INSERT INTO fz.gen (a) SELECT g FROM generate_series(1, 50) g;

CREATE UNLOGGED TABLE fz.scratch (
	k integer,
	v jsonb,
	l fz.label
);
INSERT INTO fz.scratch SELECT g, to_jsonb(g), NULL FROM generate_series(1, 20) g;

CREATE TABLE fz.inh_parent (a integer, b text);
CREATE TABLE fz.inh_child (c integer) INHERITS (fz.inh_parent);
INSERT INTO fz.inh_parent SELECT g, 'p' || g FROM generate_series(1, 10) g;
INSERT INTO fz.inh_child SELECT g, 'c' || g, g FROM generate_series(1, 10) g;

-- ---------------------------------------------------------------------
-- Triggers

-- a move changes its account's balance: a nested UPDATE takes row locks
CREATE FUNCTION fz.moves_apply() RETURNS trigger
	LANGUAGE plpgsql
	AS $$
BEGIN
	UPDATE fz.accounts SET balance = balance + NEW.amount WHERE id = NEW.account;
	RETURN NEW;
END$$;
CREATE TRIGGER moves_apply AFTER INSERT ON fz.moves
	FOR EACH ROW EXECUTE FUNCTION fz.moves_apply();

-- a statement trigger that reads its transition table
CREATE FUNCTION fz.accounts_audit() RETURNS trigger
	LANGUAGE plpgsql
	AS $$
BEGIN
	INSERT INTO fz.audit (what, n) SELECT TG_OP, count(*)::int FROM changed;
	RETURN NULL;
END$$;
CREATE TRIGGER accounts_audit AFTER UPDATE ON fz.accounts
	REFERENCING NEW TABLE AS changed
	FOR EACH STATEMENT EXECUTE FUNCTION fz.accounts_audit();

-- a row trigger that sleeps a little
CREATE FUNCTION fz.parts_touch() RETURNS trigger
	LANGUAGE plpgsql
	AS $$
BEGIN
	NEW.w := coalesce(NEW.w, 0) + 1;
	PERFORM pg_sleep(0.001);
	RETURN NEW;
END$$;
CREATE TRIGGER parts_touch BEFORE INSERT OR UPDATE ON fz.parts
	FOR EACH ROW EXECUTE FUNCTION fz.parts_touch();

-- a deferred constraint trigger: runs at COMMIT (the utility clients')
CREATE FUNCTION fz.gen_check() RETURNS trigger
	LANGUAGE plpgsql
	AS $$
BEGIN
	PERFORM count(*) FROM fz.gen WHERE a = NEW.a;
	RETURN NULL;
END$$;
CREATE CONSTRAINT TRIGGER gen_check AFTER INSERT ON fz.gen
	DEFERRABLE INITIALLY DEFERRED
	FOR EACH ROW EXECUTE FUNCTION fz.gen_check();

-- ---------------------------------------------------------------------
-- Views and rules

-- INSTEAD rules of several actions: one portal, several executor runs
CREATE VIEW fz.account_book AS SELECT id, owner, balance FROM fz.accounts;
CREATE RULE account_book_ins AS ON INSERT TO fz.account_book DO INSTEAD (
	INSERT INTO fz.accounts (id, owner, balance)
		VALUES (NEW.id, coalesce(NEW.owner, 'nobody'), coalesce(NEW.balance, 0));
	INSERT INTO fz.audit (what, n) VALUES ('book insert', NEW.id)
);
CREATE RULE account_book_upd AS ON UPDATE TO fz.account_book DO INSTEAD (
	UPDATE fz.accounts SET owner = NEW.owner, balance = NEW.balance WHERE id = OLD.id;
	INSERT INTO fz.audit (what, n) VALUES ('book update', OLD.id);
	SELECT pg_sleep(0.001)
);
CREATE RULE account_book_del AS ON DELETE TO fz.account_book DO INSTEAD
	INSERT INTO fz.audit (what, n) VALUES ('book delete refused', OLD.id);

-- rules on tables: ALSO actions (one with NOTIFY), a conditional one
CREATE RULE moves_del_log AS ON DELETE TO fz.moves DO ALSO (
	INSERT INTO fz.audit (what, n) VALUES ('move deleted', OLD.account);
	NOTIFY fz_moves
);
CREATE RULE scratch_ins_big AS ON INSERT TO fz.scratch WHERE NEW.k > 50 DO ALSO
	INSERT INTO fz.audit (what, n) VALUES ('scratch big', NEW.k);
CREATE RULE gen_upd_nothing AS ON UPDATE TO fz.gen WHERE OLD.a < 0 DO INSTEAD NOTHING;

CREATE VIEW fz.balances AS
SELECT a.id, a.owner, a.balance, count(m.id) AS moves,
	   coalesce(sum(m.amount), 0) AS moved
FROM fz.accounts a LEFT JOIN fz.moves m ON m.account = a.id
GROUP BY a.id;

CREATE VIEW fz.rich AS
SELECT * FROM fz.accounts WHERE balance > 100
WITH CASCADED CHECK OPTION;

CREATE VIEW fz.recent_audit AS SELECT * FROM fz.audit ORDER BY id DESC LIMIT 50;

CREATE VIEW fz.grp_stats AS
SELECT grp, count(*) AS n, avg(val) AS avg_val FROM fz.big GROUP BY grp;

CREATE VIEW fz.hidden WITH (security_barrier) AS
SELECT id, owner FROM fz.accounts WHERE mood = 'high';

CREATE MATERIALIZED VIEW fz.owner_totals AS
SELECT owner, count(*) AS n, sum(balance) AS total FROM fz.accounts GROUP BY owner;
CREATE UNIQUE INDEX owner_totals_owner ON fz.owner_totals (owner);
-- sqlsmith does not list materialized views; a view over it does
CREATE VIEW fz.owner_totals_v AS SELECT * FROM fz.owner_totals;

-- ---------------------------------------------------------------------
-- Functions

-- sleeps up to 20 ms: statements last long enough for queues to form
CREATE FUNCTION fz.sleepy(n integer) RETURNS integer
	LANGUAGE plpgsql VOLATILE
	AS $$
BEGIN
	PERFORM pg_sleep(least(abs(coalesce(n, 0)), 20) / 1000.0);
	RETURN n;
END$$;

CREATE VIEW fz.slow AS SELECT id, fz.sleepy(id) AS s FROM fz.accounts WHERE id <= 3;

-- IMMUTABLE in name only: with constant arguments the planner calls them,
-- and their queries run while the statement is planned
CREATE FUNCTION fz.frozen_count(n integer) RETURNS bigint
	LANGUAGE sql IMMUTABLE PARALLEL SAFE
	AS $$SELECT count(*) FROM fz.moves WHERE account <= n$$;
CREATE FUNCTION fz.frozen_lock(n integer) RETURNS integer
	LANGUAGE plpgsql IMMUTABLE
	AS $$
BEGIN
	PERFORM pg_advisory_xact_lock(1000 + abs(coalesce(n, 0)) % 3);
	RETURN (SELECT count(*) FROM fz.labels)::int + coalesce(n, 0);
END$$;

-- an advisory lock taken while the statement executes (waits for the
-- holder's transaction, which may be queued)
CREATE FUNCTION fz.take_lock(n integer) RETURNS integer
	LANGUAGE plpgsql VOLATILE
	AS $$
BEGIN
	PERFORM pg_advisory_xact_lock(1000 + abs(coalesce(n, 0)) % 3);
	PERFORM pg_sleep(0.005);
	RETURN n;
END$$;

-- nested queries in a loop
CREATE FUNCTION fz.walk(n integer) RETURNS bigint
	LANGUAGE plpgsql STABLE
	AS $$
DECLARE
	s bigint := 0;
BEGIN
	FOR i IN 1 .. least(abs(coalesce(n, 0)), 20) LOOP
		s := s + (SELECT count(*) FROM fz.moves WHERE account = i);
	END LOOP;
	RETURN s;
END$$;

-- a write from inside a query: the transaction gets an ID
CREATE FUNCTION fz.note(n integer) RETURNS integer
	LANGUAGE plpgsql VOLATILE
	AS $$
BEGIN
	INSERT INTO fz.audit (what, n) VALUES ('note', n);
	RETURN n;
END$$;

-- a subtransaction that writes when it catches an error
CREATE FUNCTION fz.careful(n integer) RETURNS integer
	LANGUAGE plpgsql VOLATILE
	AS $$
BEGIN
	BEGIN
		RETURN 100 / (coalesce(n, 0) % 3);
	EXCEPTION WHEN division_by_zero THEN
		UPDATE fz.accounts SET balance = balance WHERE id = 1 + abs(coalesce(n, 0)) % 200;
		RETURN -1;
	END;
END$$;

-- fails for some arguments
CREATE FUNCTION fz.picky(n integer) RETURNS integer
	LANGUAGE plpgsql IMMUTABLE
	AS $$
BEGIN
	IF n % 5 = 0 THEN
		RAISE EXCEPTION 'fz.picky does not take %', n USING ERRCODE = 'P0001';
	END IF;
	RETURN n;
END$$;

-- settings of its own while it runs (and undone after it)
CREATE FUNCTION fz.tight(n integer) RETURNS bigint
	LANGUAGE sql STABLE
	SET work_mem = '64kB' SET lock_timeout = '50ms' SET statement_timeout = '300ms'
	AS $$SELECT count(*) FROM (SELECT * FROM fz.big ORDER BY val LIMIT greatest(coalesce(n, 1), 1) * 100) s$$;
-- and a SET LOCAL from inside a query
CREATE FUNCTION fz.loosen(n integer) RETURNS text
	LANGUAGE sql VOLATILE
	AS $$SELECT set_config('work_mem', (greatest(abs(coalesce(n, 1)), 1) * 64)::text || 'kB', true)$$;

-- a cursor inside
CREATE FUNCTION fz.cursor_sum(n integer) RETURNS numeric
	LANGUAGE plpgsql STABLE
	AS $$
DECLARE
	c refcursor;
	r record;
	s numeric := 0;
BEGIN
	OPEN c FOR SELECT balance FROM fz.accounts ORDER BY id;
	LOOP
		FETCH c INTO r;
		EXIT WHEN NOT FOUND OR s > coalesce(n, 0) * 1000;
		s := s + r.balance;
	END LOOP;
	CLOSE c;
	RETURN s;
END$$;

-- dynamic SQL on a name from the data
CREATE FUNCTION fz.count_of(t text) RETURNS bigint
	LANGUAGE plpgsql STABLE
	AS $$
DECLARE
	r bigint;
BEGIN
	EXECUTE format('SELECT count(*) FROM fz.%I', t) INTO r;
	RETURN r;
END$$;

-- an aggregate whose transition function runs a query
CREATE FUNCTION fz.sum_weighted_step(s numeric, v integer) RETURNS numeric
	LANGUAGE sql STABLE
	AS $$SELECT coalesce(s, 0) + coalesce(v, 0) * (SELECT count(*) FROM fz.labels)$$;
CREATE AGGREGATE fz.sum_weighted(integer) (
	SFUNC = fz.sum_weighted_step,
	STYPE = numeric
);

-- a procedure that commits (called by the utility clients)
CREATE PROCEDURE fz.churn(k integer)
	LANGUAGE plpgsql
	AS $$
BEGIN
	FOR i IN 1 .. least(coalesce(k, 1), 5) LOOP
		INSERT INTO fz.audit (what, n) VALUES ('churn', i);
		COMMIT;
	END LOOP;
END$$;

RESET ROLE;

-- ---------------------------------------------------------------------
-- dbgate's views, read from inside gated statements (owned by the
-- superuser, who may read them)

CREATE VIEW fz.gate AS
SELECT budget, max_active, active, max_queued, queued, admitted FROM dbgate.status;
CREATE VIEW fz.gate_backends AS
SELECT pid, role, budget, state, queue_position FROM dbgate.backends;
GRANT SELECT ON fz.gate, fz.gate_backends TO PUBLIC;

CREATE FUNCTION fz.gate_load(b text) RETURNS integer
	LANGUAGE sql STABLE SECURITY DEFINER
	SET search_path = pg_catalog
	AS $$SELECT coalesce(sum(active + queued), 0)::int FROM dbgate.status
		  WHERE b IS NULL OR budget = b$$;

ANALYZE;
