# shellcheck shell=bash
# Variables set here are used by the scripts that source this file.
# shellcheck disable=SC2034
#
# test/lib.sh - helpers shared by test/check.sh and test/demo.sh.
#
# Sourced, not run.  Everything here works for two callers:
#   - root on a fresh Debian machine: packages are installed with apt-get,
#     the extension is built and installed, and PostgreSQL programs run as
#     the operating system user $DBGATE_OS_USER (default postgres), because
#     PostgreSQL refuses to run as root;
#   - any other user with --no-install: the dbgate already installed is used
#     and PostgreSQL programs run as that user.
#
# Environment:
#   PG_MAJOR        PostgreSQL major version (default 15)
#   PG_CONFIG       pg_config to build against (default that of PG_MAJOR)
#   DBGATE_OS_USER  operating system user that runs servers when we are root

PG_MAJOR=${PG_MAJOR:-15}
PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/$PG_MAJOR/bin/pg_config}
DBGATE_OS_USER=${DBGATE_OS_USER:-postgres}

# Top of the source tree (the directory above test/).
DBGATE_TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

# AS_PG: command prefix that runs a program as the server user.
if [[ $EUID -eq 0 ]]; then
	AS_PG=(runuser -u "$DBGATE_OS_USER" --)
else
	AS_PG=()
fi

heading() {
	printf '\n==== %s\n' "$*"
}

# install_packages PKG...
# Install with apt-get those of the packages that are not installed yet.
# Runs `apt-get update` once, and only when something is missing.
install_packages() {
	local p missing=()
	for p in "$@"; do
		if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null |
			grep -q 'install ok installed'; then
			missing+=("$p")
		fi
	done
	if ((${#missing[@]} == 0)); then
		echo "packages: all present ($*)"
		return 0
	fi
	echo "packages: installing ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -q || return 1
	apt-get install -y -q "${missing[@]}" || return 1
}

# pg_paths: set BINDIR and PGXS_DIR from $PG_CONFIG (after installation).
pg_paths() {
	if [[ ! -x $PG_CONFIG ]]; then
		echo "error: $PG_CONFIG not found (install postgresql-server-dev-$PG_MAJOR," \
			"or set PG_CONFIG)" >&2
		return 1
	fi
	BINDIR=$("$PG_CONFIG" --bindir)
	PGXS_DIR="$("$PG_CONFIG" --pkglibdir)/pgxs"
}

# copy_tree DEST
# Copy the source tree to DEST without git metadata and build or test
# products, and hand it to the server user.  Tests write their results into
# this copy, so the caller's checkout is never written to.
copy_tree() {
	local dest=$1
	tar_tree "$dest" || return 1
	if [[ $EUID -eq 0 ]]; then
		chown -R "$DBGATE_OS_USER:" "$dest" || return 1
	fi
}

# tar_tree DEST: copy the source tree to DEST as copy_tree does, keeping
# the owner.
tar_tree() {
	local dest=$1
	mkdir -p "$dest"
	tar -C "$DBGATE_TOP" \
		--exclude=./.git --exclude=./tmp_check --exclude=./results \
		--exclude=./log --exclude=./output_iso \
		--exclude=./regression.diffs --exclude=./regression.out \
		--exclude=./test/isolation/output_iso --exclude=./test/isolation/results \
		--exclude='*.o' --exclude='*.so' --exclude='*.bc' \
		-cf - . | tar -C "$dest" -xf -
}

# build_install TREE [install]
# Build the extension in TREE (every warning is an error: see Makefile) and,
# with a second argument "install", install it into PostgreSQL's directories.
build_install() {
	local tree=$1 install=${2:-}
	make -C "$tree" -j"$(nproc)" PG_CONFIG="$PG_CONFIG" || return 1
	if [[ $install == install ]]; then
		make -C "$tree" PG_CONFIG="$PG_CONFIG" install || return 1
	fi
	if [[ $EUID -eq 0 ]]; then
		chown -R "$DBGATE_OS_USER:" "$tree" || return 1
	fi
}

# make_scratch PREFIX
# Print the name of a new empty directory under ${TMPDIR:-/tmp} owned by the
# server user.  Kept short: Unix socket paths are limited to ~100 bytes.
make_scratch() {
	local d
	d=$(mktemp -d "${TMPDIR:-/tmp}/$1.XXXXXX") || return 1
	chmod 755 "$d"
	if [[ $EUID -eq 0 ]]; then
		chown "$DBGATE_OS_USER:" "$d" || return 1
	fi
	echo "$d"
}

# stop_servers DIR
# Stop every server whose pid file lies under DIR: PostgreSQL (postmaster.pid,
# immediate shutdown) and anything else that left a *.pid file there (such as
# pgbouncer).  Only processes named in those files are signalled, and only
# if they still run the program that wrote the file.
stop_servers() {
	local dir=$1 f pid comm left=()
	[[ -d $dir ]] || return 0
	while IFS= read -r -d '' f; do
		pid=$(head -n 1 "$f" 2>/dev/null)
		[[ $pid =~ ^[0-9]+$ ]] || continue
		comm=$(cat "/proc/$pid/comm" 2>/dev/null) || continue
		case $comm in
		postgres | postmaster)
			[[ ${f##*/} == postmaster.pid ]] || continue
			kill -QUIT "$pid" 2>/dev/null || continue
			;;
		pgbouncer)
			kill -INT "$pid" 2>/dev/null || continue
			;;
		patroni | etcd)
			# 059_patroni's pid files; Patroni stops its server
			[[ ${f##*/} == patroni_*.pid || ${f##*/} == etcd.pid ]] || continue
			kill -TERM "$pid" 2>/dev/null || continue
			;;
		*) continue ;;
		esac
		echo "stopped leftover $comm (pid $pid, ${f%/*})"
		left+=("$pid")
	done < <(find "$dir" -name '*.pid' -print0 2>/dev/null)
	# Wait up to 10 s for them to go, so that removing DIR does not race.
	local i
	for ((i = 0; i < 100 && ${#left[@]} > 0; i++)); do
		local still=()
		for pid in "${left[@]}"; do
			[[ -e /proc/$pid ]] && still+=("$pid")
		done
		left=("${still[@]}")
		((${#left[@]} == 0)) || sleep 0.1
	done
	return 0
}
