# dbgate — PGXS build
MODULE_big = dbgate
OBJS = \
	src/dbgate.o \
	src/shmem.o \
	src/budgets.o \
	src/classify.o \
	src/slot.o \
	src/gate.o \
	src/slotrun.o \
	src/slotxact.o \
	src/admission.o \
	src/waiting.o \
	src/queuewait.o \
	src/queue.o \
	src/install.o \
	src/trees.o \
	src/demote.o \
	src/move.o \
	src/rate.o \
	src/keytab.o \
	src/keydim.o \
	src/keysource.o \
	src/dimension.o \
	src/lockgraph.o \
	src/timeouts.o \
	src/gucvar.o \
	src/fields.o \
	src/confimage.o \
	src/keylimits.o \
	src/config.o \
	src/confcheck.o \
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
	src/planner.o \
	src/adapt.o \
	src/runaway.o \
	src/quarantine.o \
	src/queryid.o

EXTENSION = dbgate
DATA = sql/dbgate--1.0.sql sql/dbgate--1.0--1.1.sql sql/dbgate--1.1--1.2.sql \
	sql/dbgate--1.2--1.3.sql
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
# Debug information names the sources relative to the tree (as Debian's
# package builds do): the library is the same byte for byte wherever the
# tree was built, and profiles name the same files for every checkout.
PG_CFLAGS += -ffile-prefix-map=$(CURDIR)=.

# Set before the include: pgxs.mk's clean rule tests it as make reads it.
EXTRA_CLEAN = tmp_check results regression.diffs regression.out \
	test/isolation/results test/isolation/output_iso src/build-flags

PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

# Only what the server looks up by name is exported (compat.h): PGXS does
# so from 16 on, here also on 15.  The module's calls between its own
# files go straight to the function, not through the PLT (a statement in a
# budget: 17 instructions fewer in the hooks).
ifeq ($(MAJORVERSION),15)
override CFLAGS += -fvisibility=hidden
endif

# Every object and bitcode file (the bitcode is installed for JIT inlining)
# is remade when any header of src/ changes, and everything when the
# command lines change (another PG_CONFIG, COPT or PROFILE, an edited
# flag): src/build-flags holds them and is rewritten, as make reads this
# file, only when they differ.  So an incremental build never keeps what
# a clean one would not make.  (PGXS tracks dependencies itself only when
# PostgreSQL was configured with --enable-depend, which packages are not.)
BUILD_FLAGS = $(strip $(CC) $(CFLAGS) $(CPPFLAGS) | $(CLANG) $(BITCODE_CFLAGS) | \
	$(LDFLAGS) $(LDFLAGS_SL) $(SHLIB_LINK))
BUILT_FLAGS := $(strip $(shell cat src/build-flags 2>/dev/null))
ifneq ($(BUILD_FLAGS),$(BUILT_FLAGS))
$(shell printf '%s\n' '$(subst ','\'',$(BUILD_FLAGS))' > src/build-flags)
endif
$(OBJS) $(OBJS:.o=.bc): $(wildcard $(srcdir)/src/*.h) src/build-flags
$(shlib): src/build-flags
# (should it be missing, e.g. in a tree make may not write to)
src/build-flags: ;

.PHONY: tmp_check_dir
tmp_check_dir:
	$(MKDIR_P) tmp_check

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
