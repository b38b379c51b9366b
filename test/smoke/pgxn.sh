#!/usr/bin/env bash
# PGXN: META.json and the release archive of `make dist`.
#
# META.json must be valid JSON with the keys of the PGXN Meta Spec 1.0.0
# that dbgate fills in, and its version and provides.dbgate.version must be
# the SemVer form of dbgate.control's default_version ('1.2' -> 1.2.0),
# whatever that is.  Then the source tree is committed to a scratch git
# repository (its .gitignore keeps build products and test results out, as
# in a checkout) and `make dist` must write dbgate-VERSION.zip: every entry
# under dbgate-VERSION/; META.json, dbgate.control, the Makefile, README.md,
# the documents under docs/ it links to, the install scripts and the C
# sources in it; no build products, test results, recorded benchmark runs
# or git files.  The unpacked archive must build with PGXS, as `pgxn
# install` builds it.
# Exit 0 = pass, 77 = skipped (git or python3 missing), anything else = fail.
set -euo pipefail

SRC=${DBGATE_SRC:?run from test/check.sh}
WORK=${DBGATE_WORK:?run from test/check.sh}
PG_CONFIG=${PG_CONFIG:-pg_config}

skip() {
	echo "pgxn smoke skipped: $*"
	exit 77
}
fail() {
	echo "pgxn smoke FAILED: $*"
	exit 1
}
command -v git >/dev/null || skip "git is not installed"
command -v python3 >/dev/null || skip "python3 is not installed"

# --- META.json --------------------------------------------------------------
control=$(sed -n "s/^[[:space:]]*default_version[[:space:]]*=[[:space:]]*'\([^']*\)'.*/\1/p" \
	"$SRC/dbgate.control")
[[ -n $control ]] || fail "no default_version in dbgate.control"
version=$(python3 - "$SRC" "$control" <<'EOF'
import json, os, re, sys

src, control = sys.argv[1], sys.argv[2]
parts = control.split(".")
expected = ".".join(parts + ["0"] * (3 - len(parts)))
errors = []

try:
    with open(os.path.join(src, "META.json"), encoding="utf-8") as f:
        meta = json.load(f)
except (OSError, ValueError) as e:
    sys.exit("META.json is not valid JSON: %s" % e)

def need(obj, key, kind, where="META.json"):
    if key not in obj:
        errors.append("%s has no %r" % (where, key))
        return None
    if not isinstance(obj[key], kind):
        errors.append("%s: %r is not a %s" % (where, key, kind.__name__))
        return None
    return obj[key]

semver = re.compile(r"^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)"
                    r"(-[0-9A-Za-z.-]+)?$")
for key in ("name", "abstract", "description", "version", "license"):
    need(meta, key, str)
if meta.get("name") != "dbgate":
    errors.append("name is %r, not 'dbgate'" % meta.get("name"))
version = meta.get("version", "")
if not semver.match(version):
    errors.append("version %r is not SemVer" % version)
if version != expected:
    errors.append("version is %r, but dbgate.control's default_version '%s' is %s"
                  % (version, control, expected))
maint = meta.get("maintainer")
if not (isinstance(maint, str) and maint or
        isinstance(maint, list) and maint and all(isinstance(m, str) for m in maint)):
    errors.append("maintainer is not a string or a list of strings")
licenses = {"agpl_3", "apache_1_1", "apache_2_0", "artistic_1", "artistic_2",
            "bsd", "freebsd", "gfdl_1_2", "gfdl_1_3", "gpl_1", "gpl_2",
            "gpl_3", "lgpl_2_1", "lgpl_3_0", "mit", "mozilla_1_0",
            "mozilla_1_1", "openssl", "perl_5", "postgresql", "qpl_1_0",
            "ssleay", "sun", "zlib", "open_source", "restricted",
            "unrestricted", "unknown"}
if isinstance(meta.get("license"), str) and meta["license"] not in licenses:
    errors.append("license %r is none of the Meta Spec's strings" % meta["license"])
prov = need(meta, "provides", dict) or {}
ext = need(prov, "dbgate", dict, "provides") or {}
for key in ("file", "version", "abstract"):
    need(ext, key, str, "provides.dbgate")
if ext.get("version") != expected:
    errors.append("provides.dbgate.version is %r, expected %s"
                  % (ext.get("version"), expected))
for key in ("file", "docfile"):
    if key in ext and not os.path.isfile(os.path.join(src, ext[key])):
        errors.append("provides.dbgate.%s %r is no file of the tree" % (key, ext[key]))
prereqs = need(meta, "prereqs", dict) or {}
pg = prereqs.get("runtime", {}).get("requires", {}).get("PostgreSQL")
if pg is None:
    errors.append("prereqs.runtime.requires.PostgreSQL is missing")
elif not re.match(r"^(>=\s*)?15(\.0){0,2}$", pg):
    errors.append("prereqs.runtime.requires.PostgreSQL is %r, not >= 15" % pg)
need(meta, "resources", dict)
tags = need(meta, "tags", list) or []
if not tags or not all(isinstance(t, str) and 0 < len(t) < 256 for t in tags):
    errors.append("tags must be a non-empty list of short strings")
spec = need(meta, "meta-spec", dict) or {}
if spec.get("version") != "1.0.0":
    errors.append("meta-spec.version is %r, not '1.0.0'" % spec.get("version"))
if errors:
    sys.exit("\n".join(errors))
print(version)
EOF
) || fail "META.json"
echo "META.json: valid, version $version (dbgate.control: '$control')"

# --- make dist --------------------------------------------------------------
# A repository of its own: the copy leaves out any .git of the tree (a
# file, in a git worktree, that would lead git to the tree's repository),
# and git is told where the repository is instead of searching upwards.
repo=$WORK/repo
mkdir -p "$repo"
tar -C "$SRC" --exclude=./.git -cf - . | tar -C "$repo" -xf -
export GIT_DIR=$repo/.git GIT_WORK_TREE=$repo GIT_CEILING_DIRECTORIES=$WORK
git init -q "$repo"
git add -A
git -c user.name=dist-test -c user.email=dist-test@localhost commit -q -m "release tree"
make -s -C "$repo" PG_CONFIG="$PG_CONFIG" dist >"$WORK/dist.log" 2>&1 ||
	fail "make dist: $(cat "$WORK/dist.log")"
zip=$repo/dbgate-$version.zip
[[ -f $zip ]] || fail "make dist did not write dbgate-$version.zip: $(ls "$repo"/*.zip 2>/dev/null)"

python3 - "$zip" "dbgate-$version" "$SRC/META.json" <<'EOF' || fail "dbgate-$version.zip"
import re, sys, zipfile

path, top, meta_path = sys.argv[1:4]
errors = []
with zipfile.ZipFile(path) as z:
    names = z.namelist()
    for n in names:
        if not n.startswith(top + "/"):
            errors.append("entry outside %s/: %s" % (top, n))
    rel = {n[len(top) + 1:] for n in names if n.startswith(top + "/")}
    for f in ("META.json", "dbgate.control", "Makefile", "README.md",
              "debian/control", "debian/rules"):
        if f not in rel:
            errors.append("missing: %s" % f)
    for pattern, what in ((r"^docs/.*\.md$", "a document under docs/"),
                          (r"^sql/dbgate--[0-9.]+\.sql$", "an install script"),
                          (r"^sql/.*\.sql$", "a regression test"),
                          (r"^expected/.*\.out$", "expected output"),
                          (r"^src/.*\.c$", "a C source"),
                          (r"^src/.*\.h$", "a C header")):
        if not any(re.match(pattern, r) for r in rel):
            errors.append("no %s (%s)" % (what, pattern))
    bad = re.compile(r"(\.(o|so|bc|zip|deb)$|(^|/)(results|tmp_check|output_iso|log"
                     r"|\.git|build-[0-9]+)(/|$)|(^|/)regression\.(diffs|out)$"
                     r"|^test/bench/results(/|$)|^\.ci(/|$)|^\.git(ignore|attributes)$)")
    for r in sorted(rel):
        if bad.search(r):
            errors.append("must not be in a release: %s" % r)
    if "META.json" in rel:
        with open(meta_path, "rb") as f:
            if z.read(top + "/META.json") != f.read():
                errors.append("META.json in the archive differs from the tree's")
if errors:
    sys.exit("\n".join(errors))
print("%s: %d entries under %s/" % (path.rsplit("/", 1)[-1], len(names), top))
EOF

# What `pgxn install` does first: unpack and build with PGXS.  Without
# the bitcode (with_llvm=no): a file missing from the archive fails the
# compile as well, and the bitcode of these sources was made by the build
# that test/check.sh checks (and by build.sh).
mkdir -p "$WORK/unpacked"
python3 -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])' \
	"$zip" "$WORK/unpacked"
make -C "$WORK/unpacked/dbgate-$version" -j"$(nproc)" PG_CONFIG="$PG_CONFIG" with_llvm=no \
	>"$WORK/build.log" 2>&1 || {
	tail -n 30 "$WORK/build.log"
	fail "the unpacked archive does not build"
}
[[ -f $WORK/unpacked/dbgate-$version/dbgate.so ]] || fail "no dbgate.so built from the archive"
echo "pgxn smoke passed: META.json $version, dbgate-$version.zip builds"
