# dbgate — PGXS build
MODULE_big = dbgate
OBJS = \
	src/dbgate.o \
	src/shmem.o \
	src/budgets.o \
	src/classify.o \
	src/slot.o \
	src/admission.o \
	src/waiting.o \
	src/queue.o \
	src/trees.o \
	src/rate.o \
	src/lockgraph.o \
	src/timeouts.o \
	src/gucvar.o \
	src/fields.o \
	src/confimage.o \
	src/config.o \
	src/persist.o \
	src/wal.o \
	src/sqlfuncs.o \
	src/status.o \
	src/parallel.o \
	src/utility.o \
	src/waitsnap.o \
	src/memestimate.o \
	src/memgrant.o \
	src/mincost.o \
	src/planner.o

EXTENSION = dbgate
DATA = sql/dbgate--1.0.sql sql/dbgate--1.0--1.1.sql sql/dbgate--1.1--1.2.sql
PGFILEDESC = "dbgate - workload admission control"

# Regression tests (sql/*.sql, expected/*.out) run against a throwaway
# instance with dbgate preloaded; test/check.sh is the full suite.
REGRESS = $(patsubst sql/%.sql,%,$(filter-out sql/dbgate--%.sql,$(wildcard sql/*.sql)))
REGRESS_OPTS = --temp-instance=$(CURDIR)/tmp_check/regress \
	--temp-config=$(srcdir)/test/dbgate.conf --port=54391
# Isolation specs (test/isolation/specs/*.spec, test/isolation/expected/),
# run by `make installcheck` after the regression tests.
ISOLATION = $(patsubst test/isolation/specs/%.spec,%,$(wildcard test/isolation/specs/*.spec))
ISOLATION_OPTS = --inputdir=$(srcdir)/test/isolation \
	--outputdir=$(CURDIR)/test/isolation/output_iso \
	--temp-instance=$(CURDIR)/tmp_check/isolation \
	--temp-config=$(srcdir)/test/dbgate.conf --port=54392
# Expected output must not depend on the caller's locale (test/check.sh
# passes the same flags).
NO_LOCALE = 1
ENCODING = UTF8
# pg_regress makes its --temp-instance directory but not the parent.
REGRESS_PREP = tmp_check_dir

PG_CONFIG ?= pg_config
PG_CPPFLAGS = -I$(srcdir)/src
# PostgreSQL's warning flags plus -Wextra; every warning is an error.
PG_CFLAGS = -Wextra -Wno-unused-parameter -Wno-missing-field-initializers \
	-Wno-sign-compare -Werror

PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

# every object depends on every header of src/
$(OBJS): $(wildcard src/*.h)

.PHONY: tmp_check_dir
tmp_check_dir:
	$(MKDIR_P) tmp_check

EXTRA_CLEAN = tmp_check results regression.diffs regression.out \
	test/isolation/results test/isolation/output_iso

# `make dist`: the release archive for PGXN, dbgate-VERSION.zip, made with
# git archive from the committed tree (HEAD) under a top directory
# dbgate-VERSION/.  VERSION is the SemVer form of dbgate.control's
# default_version ('1.2' gives 1.2.0), as in META.json; .gitattributes
# leaves out what a release does not need (recorded benchmark runs, CI).
DIST_VERSION = $(shell sed -n "s/^[[:space:]]*default_version[[:space:]]*=[[:space:]]*'\([^']*\)'.*/\1/p" \
	$(srcdir)/dbgate.control | sed 's/^[0-9]*\.[0-9]*$$/&.0/')
DIST_ARCHIVE = dbgate-$(DIST_VERSION).zip

.PHONY: dist
dist:
	git -C $(srcdir) archive --format=zip --prefix=dbgate-$(DIST_VERSION)/ \
		-o $(abspath $(DIST_ARCHIVE)) HEAD
	@echo "$(DIST_ARCHIVE): dbgate $(DIST_VERSION) for PGXN"
