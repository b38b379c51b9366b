# shellcheck shell=bash
# test/bench/lib.sh — parts shared by the benchmark scripts (run.sh,
# tpcb.sh, shares.sh, rate.sh, monitor.sh): packages and build, a scratch
# directory removed on exit, throwaway clusters, PgBouncer, one pgbench run
# reduced to throughput and latency percentiles, CPU accounting, sampling of
# dbgate.status every 100 ms, and the alternation of contenders.
#
# Sourced, not run.  The script that sources it sets BENCH_NAME (its name in
# messages and, for the scripts that keep their results in the repository,
# the directory under test/bench/results/) and may set, before calling the
# functions below:
#   INSTALL=0|1  BUILD=0|1  OUT  DB (database, default bench)
#   BENCH_ROLES  roles whose sessions wait_idle waits for (space-separated)
#   BOUNCER_USERS  roles PgBouncer lets in (space-separated)
# Environment: PG_CONFIG (default: PostgreSQL 15 of Debian, or PG_MAJOR's),
# BENCH_UNLOCK_FD (bench_loaded).
#
# Conventions every script keeps: servers and PgBouncer run as postgres when
# started by root (PostgreSQL refuses root), as the caller otherwise
# (--no-install); unix sockets only, in the scratch directory; everything is
# stopped and removed on exit, also on failure or Ctrl-C.
# shellcheck disable=SC2034 # variables set here are used by the scripts

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
PG_MAJOR=${PG_MAJOR:-}
if [ -z "${PG_CONFIG:-}" ]; then
	PG_CONFIG=/usr/lib/postgresql/${PG_MAJOR:-15}/bin/pg_config
fi
if [ -z "$PG_MAJOR" ]; then
	PG_MAJOR=$(echo "$PG_CONFIG" | sed -n 's|.*/postgresql/\([0-9][0-9]*\)/bin/pg_config$|\1|p')
	if [ -z "$PG_MAJOR" ] && [ -x "$PG_CONFIG" ]; then
		PG_MAJOR=$("$PG_CONFIG" --version | sed -n 's/^PostgreSQL \([0-9][0-9]*\).*/\1/p')
	fi
	PG_MAJOR=${PG_MAJOR:-15}
fi
DB=${DB:-bench}
INSTALL=${INSTALL:-1}
BUILD=${BUILD:-1}
NPROC=$(nproc)
CLK_TCK=$(getconf CLK_TCK)
CLUSTERS=()
BOUNCER_PID=
BOUNCER_TICKS=0
BG_PIDS=()
SAMPLER_PID=
BENCH_ROLES=${BENCH_ROLES:-}
BENCH_TXNS=
BOUNCER_USERS=${BOUNCER_USERS:-postgres}

# Usage text: the script's header comment, from line 2 to "set -euo".
usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; }
die() { echo "$BENCH_NAME: $*" >&2; exit 2; }
log() { printf '%s %s\n' "$(date +%H:%M:%S)" "$*"; }

# need_ints VALUE...: every value a positive integer, else die.
need_ints() {
	local v
	for v in "$@"; do
		[[ "$v" =~ ^[1-9][0-9]*$ ]] || die "not a positive integer: '$v'"
	done
}

# need_root: the scripts install packages and run servers as postgres.
need_root() {
	if [ "$(id -u)" != 0 ] && [ "$INSTALL" = 1 ]; then
		die "must be run as root (it installs packages and runs the servers as user postgres), or with --no-install"
	fi
}

# ---------------------------------------------------------------------------
# packages, build

# bench_install [PACKAGE...]: with INSTALL=1, apt-get what is missing of the
# server and build packages of PG_MAJOR, python3 and the packages given.
bench_install() {
	[ "$INSTALL" = 1 ] || return 0
	local missing=() p
	for p in "postgresql-$PG_MAJOR" "postgresql-server-dev-$PG_MAJOR" make gcc libc6-dev libkrb5-dev python3 "$@"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
	done
	if [ ${#missing[@]} -gt 0 ]; then
		log "installing ${missing[*]}"
		apt-get update -qq
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
	fi
}

# bench_build: with BUILD=1, make && make install in the repository; then
# check that dbgate is installed for PG_CONFIG.  Sets PGBIN.
bench_build() {
	[ -x "$PG_CONFIG" ] || die "$PG_CONFIG not found (install postgresql-server-dev-$PG_MAJOR or set PG_CONFIG)"
	PGBIN=$("$PG_CONFIG" --bindir)
	local t
	for t in pgbench initdb pg_ctl psql createdb; do
		[ -x "$PGBIN/$t" ] || die "$PGBIN/$t not found (install postgresql-$PG_MAJOR)"
	done
	command -v python3 >/dev/null || die "python3 not found"
	[ "${BENCH_DBGATE:-1}" = 1 ] || return 0
	if [ "$BUILD" = 1 ]; then
		log "building and installing dbgate ($REPO, PostgreSQL $PG_MAJOR)"
		local buildlog
		buildlog=$(mktemp -t dbgate-bench-build.XXXXXX)
		if ! { make -C "$REPO" PG_CONFIG="$PG_CONFIG" && make -C "$REPO" PG_CONFIG="$PG_CONFIG" install; } >"$buildlog" 2>&1; then
			tail -n 30 "$buildlog" >&2
			rm -f "$buildlog"
			die "build failed"
		fi
		rm -f "$buildlog"
	fi
	[ -f "$("$PG_CONFIG" --pkglibdir)/dbgate.so" ] && [ -f "$("$PG_CONFIG" --sharedir)/extension/dbgate.control" ] ||
		die "dbgate is not installed for $PG_CONFIG (drop --no-install)"
}

# bench_loaded: the servers run with dbgate preloaded and the extension is
# created.  From here on another install of the extension changes nothing
# of this run (every backend runs the library its postmaster loaded at
# start, and CREATE EXTENSION has read the scripts).  With BENCH_UNLOCK_FD
# set, the lock (flock) that the caller holds on that file descriptor
# around builds and installs is let go here, so that a long run holds it
# only while it starts:
#   exec 9>LOCKFILE; flock 9; BENCH_UNLOCK_FD=9 test/bench/lifo.sh --targets
bench_loaded() {
	[ -n "${BENCH_UNLOCK_FD:-}" ] || return 0
	flock -u "$BENCH_UNLOCK_FD" || die "cannot release the lock on file descriptor $BENCH_UNLOCK_FD"
	log "dbgate loaded: the lock on file descriptor $BENCH_UNLOCK_FD is released"
}

# bench_tools: PgBouncer (BOUNCER) and gnuplot (GNUPLOT, may be empty).
bench_tools() {
	BOUNCER=$(command -v pgbouncer || echo /usr/sbin/pgbouncer)
	GNUPLOT=$(command -v gnuplot || true)
	# a free loopback port (PgBouncer also listens on TCP)
	PORT_BOUNCER=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
}

# ---------------------------------------------------------------------------
# scratch and result directories, clean-up

if [ "$(id -u)" = 0 ]; then
	as_pg() { runuser -u postgres -- "$@"; }
	give_pg() { chown -R postgres: "$@"; }
else
	as_pg() { "$@"; }
	give_pg() { :; }
fi

# bench_dirs: WORK (a new scratch directory), OUT (as given, else
# test/bench/results/BENCH_NAME with BENCH_OUT_DEFAULT=repo, else a new
# temporary directory), RAW = OUT/raw (emptied), TXLOG; installs the
# clean-up trap.
bench_dirs() {
	WORK=$(mktemp -d -t "dbgate-$BENCH_NAME.XXXXXX")
	chmod 755 "$WORK"
	give_pg "$WORK"
	if [ -z "${OUT:-}" ] && [ "${BENCH_OUT_DEFAULT:-}" = repo ]; then
		OUT=$HERE/results/$BENCH_NAME
	fi
	if [ -n "${OUT:-}" ]; then
		mkdir -p "$OUT"
		OUT=$(cd "$OUT" && pwd)
	else
		OUT=$(mktemp -d -t "dbgate-$BENCH_NAME-results.XXXXXX")
	fi
	RAW=$OUT/raw
	TXLOG=$WORK/txlog
	rm -rf "$RAW"
	mkdir -p "$RAW" "$TXLOG"
	give_pg "$TXLOG"
	trap bench_cleanup EXIT
	trap 'exit 130' INT TERM
}

# Results written into the repository by root belong to the repository's
# owner, like the rest of the checkout.
bench_chown_out() {
	case "$OUT" in "$REPO"/*) chown -R --reference="$REPO" "$OUT" 2>/dev/null || true ;; esac
}

# bench_huge_pages N: N more 2 MB huge pages reserved (vm.nr_hugepages)
# for the run, for a server with huge_pages = on; bench_cleanup gives them
# back.  Root only; after bench_dirs.
HP_OLD=
bench_huge_pages() {
	[ "$(id -u)" = 0 ] || die "huge pages need root (vm.nr_hugepages)"
	HP_OLD=$(cat /proc/sys/vm/nr_hugepages)
	echo $((HP_OLD + $1)) >/proc/sys/vm/nr_hugepages
	[ "$(cat /proc/sys/vm/nr_hugepages)" -ge $((HP_OLD + $1)) ] ||
		die "could not reserve $1 huge pages (vm.nr_hugepages $(cat /proc/sys/vm/nr_hugepages))"
}

bench_cleanup() {
	local rc=$?
	set +e
	trap - EXIT INT TERM
	sampler_stop
	local p c
	for p in "${BG_PIDS[@]}"; do kill "$p" 2>/dev/null; done
	bouncer_stop
	for c in "${CLUSTERS[@]}"; do
		as_pg "$PGBIN/pg_ctl" -D "$WORK/$c" -m immediate -w stop >/dev/null 2>&1
		cp "$WORK/$c.log" "$RAW/server-$c.log" 2>/dev/null
	done
	[ -n "$HP_OLD" ] && echo "$HP_OLD" >/proc/sys/vm/nr_hugepages
	rm -rf "$WORK"
	bench_chown_out
	[ $rc -ne 0 ] && [ $rc -ne 3 ] && echo "$BENCH_NAME: stopped (status $rc); partial results in $OUT" >&2
	exit $rc
}

# ---------------------------------------------------------------------------
# clusters

psql_at() { # port user sql...
	local port=$1 user=$2
	shift 2
	"$PGBIN/psql" -X -q -At -v ON_ERROR_STOP=1 -h "$WORK" -p "$port" -U "$user" -d "$DB" "$@"
}

# cluster_create NAME PORT: initdb WORK/NAME with PostgreSQL's default
# settings except the socket (unix only, in WORK), the port and
# max_connections = 200; settings read from standard input are appended.
cluster_create() {
	local name=$1 port=$2
	as_pg "$PGBIN/initdb" -D "$WORK/$name" -U postgres -A trust -E UTF8 >"$RAW/initdb-$name.log" 2>&1 ||
		die "initdb failed (see $RAW/initdb-$name.log)"
	{
		echo "listen_addresses = ''"
		echo "unix_socket_directories = '$WORK'"
		echo "port = $port"
		echo "max_connections = 200"
		cat
	} >>"$WORK/$name/postgresql.conf"
}

cluster_start() { # name
	as_pg "$PGBIN/pg_ctl" -D "$WORK/$1" -l "$WORK/$1.log" -w -t 60 start >/dev/null ||
		die "server $1 did not start (see $RAW/server-$1.log)"
	CLUSTERS+=("$1")
}

cluster_stop() { # name
	as_pg "$PGBIN/pg_ctl" -D "$WORK/$1" -w stop >/dev/null
	local c keep=()
	for c in "${CLUSTERS[@]}"; do [ "$c" = "$1" ] || keep+=("$c"); done
	CLUSTERS=(${keep[@]+"${keep[@]}"})
}

# ---------------------------------------------------------------------------
# PgBouncer: transaction pooling in front of the server on SERVER_PORT,
# reached by clients over its unix socket in WORK (like the server itself)
# on PORT_BOUNCER; loopback TCP is also open.

bouncer_start() { # pool-size server-port
	local u
	mkdir -p "$WORK/bouncer"
	: >"$WORK/bouncer/users.txt"
	for u in $BOUNCER_USERS; do printf '"%s" ""\n' "$u" >>"$WORK/bouncer/users.txt"; done
	cat >"$WORK/bouncer/pgbouncer.ini" <<-EOF
		[databases]
		$DB = host=$WORK port=$2 dbname=$DB
		[pgbouncer]
		listen_addr = 127.0.0.1
		listen_port = $PORT_BOUNCER
		unix_socket_dir = $WORK
		auth_type = trust
		auth_file = $WORK/bouncer/users.txt
		pool_mode = transaction
		default_pool_size = $1
		min_pool_size = 0
		reserve_pool_size = 0
		max_client_conn = 1000
		log_connections = 0
		log_disconnections = 0
		logfile = $WORK/bouncer/pgbouncer.log
		pidfile = $WORK/bouncer/pgbouncer.pid
	EOF
	give_pg "$WORK/bouncer"
	as_pg "$BOUNCER" -d -q "$WORK/bouncer/pgbouncer.ini"
	local i
	for i in $(seq 50); do
		if psql_at "$PORT_BOUNCER" "${BOUNCER_USERS%% *}" -c 'SELECT 1' >/dev/null 2>&1; then
			BOUNCER_PID=$(cat "$WORK/bouncer/pgbouncer.pid")
			return 0
		fi
		sleep 0.1
	done
	cat "$WORK/bouncer/pgbouncer.log" >&2
	die "pgbouncer did not start"
}

bouncer_stop() {
	[ -n "$BOUNCER_PID" ] || return 0
	BOUNCER_TICKS=$((BOUNCER_TICKS + $(python3 "$HERE/stats.py" ticks "$BOUNCER_PID")))
	kill -INT "$BOUNCER_PID" 2>/dev/null || true
	local i
	for i in $(seq 100); do
		kill -0 "$BOUNCER_PID" 2>/dev/null || break
		sleep 0.1
	done
	cat "$WORK/bouncer/pgbouncer.log" >>"$RAW/pgbouncer.log" 2>/dev/null || true
	rm -f "$WORK/bouncer/pgbouncer.log"
	BOUNCER_PID=
}

# ---------------------------------------------------------------------------
# one pgbench run

# run_pgbench TAG PORT USER CLIENTS DURATION LOG(0|1|keep) ARGS...
# pgbench -n -T DURATION (or the -t/-T in ARGS when DURATION is "-") with
# min(clients, nproc) threads.  Sets R_STATUS (ok|error|timeout), R_NOTE,
# R_TPS, R_PROC and, with LOG=1 or keep, R_N R_P50 R_P99 R_MEAN (latency of
# a transaction in microseconds, from pgbench's per-transaction log).  With
# LOG=keep the log stays in TXLOG/TAG.* for the caller to read and delete.
# pgbench runs as postgres when root (it writes the log into TXLOG).
# BENCH_TXNS=N (set by the script, e.g. run.sh --transactions): -t N instead
# of -T DURATION.  pgbench -T counts from its own start, the connections
# included, so a short point whose clients are still connecting when the
# time is up completes nothing (64 clients on a busy machine can take
# seconds); with -t every client runs N transactions, counted (tps and the
# log) from the moment all clients have connected, however long that took.
run_pgbench() {
	local tag=$1 port=$2 user=$3 clients=$4 dur=$5 logit=$6
	shift 6
	local j=$((clients < NPROC ? clients : NPROC)) out="$RAW/$tag.txt" rc=0 la=() ta=()
	[ "$logit" = 0 ] || la=(-l "--log-prefix=$TXLOG/$tag")
	if [ "$dur" != - ]; then
		if [ -n "$BENCH_TXNS" ]; then ta=(-t "$BENCH_TXNS"); else ta=(-T "$dur"); fi
	fi
	local limit=$(( ${dur/-/0} + ${RUN_SLACK:-60} ))
	rm -f "$TXLOG/$tag".*
	timeout -k 5 "$limit" "$PGBIN/pgbench" -n -h "$WORK" -p "$port" -U "$user" \
		-c "$clients" -j "$j" ${ta[@]+"${ta[@]}"} ${la[@]+"${la[@]}"} "$@" "$DB" >"$out" 2>&1 || rc=$?
	R_TPS=$(sed -n 's/^tps = \([0-9.]*\).*/\1/p' "$out" | head -n 1)
	R_PROC=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' "$out" | head -n 1)
	local failed
	failed=$(sed -n 's/^number of failed transactions: \([0-9]*\).*/\1/p' "$out" | head -n 1)
	R_STATUS=ok R_NOTE=
	if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
		R_STATUS=timeout R_NOTE="pgbench still running $limit s after start; killed"
	elif [ $rc -ne 0 ]; then
		R_STATUS=error R_NOTE="pgbench exit $rc: $(grep -m 1 -iE 'error|abort|fatal' "$out" | tr ',\n' '; ')"
	elif [ -n "$failed" ] && [ "$failed" != 0 ]; then
		R_STATUS=error R_NOTE="$failed failed transactions"
	elif [ -z "$R_TPS" ]; then
		R_STATUS=error R_NOTE="no tps in pgbench output"
		[ "${R_PROC:-0}" != 0 ] || [ -n "$BENCH_TXNS" ] ||
			R_NOTE="no transaction completed (pgbench -T counts from its start, the clients' connections included)"
	fi
	R_N= R_P50= R_P99= R_MEAN=
	if [ "$logit" != 0 ]; then
		local files=("$TXLOG/$tag".*)
		if [ -e "${files[0]}" ]; then
			read -r R_N R_P50 R_P99 R_MEAN _ < <(python3 "$HERE/stats.py" lat "${files[@]}")
			[ "$logit" = keep ] || rm -f "${files[@]}"
		fi
	fi
}

# pgbench_bg TAG PORT USER CLIENTS ARGS...: a pgbench in the background
# (its pid in BG_PID and BG_PIDS; output in RAW/TAG.txt); pgbench_wait TAG
# waits for it and sets R_* as run_pgbench does (LOG=keep if it logged).
pgbench_bg() {
	local tag=$1 port=$2 user=$3 clients=$4
	shift 4
	local j=$((clients < NPROC ? clients : NPROC))
	rm -f "$TXLOG/$tag".*
	"$PGBIN/pgbench" -n -h "$WORK" -p "$port" -U "$user" -c "$clients" -j "$j" \
		"$@" "$DB" >"$RAW/$tag.txt" 2>&1 &
	BG_PID=$!
	BG_PIDS+=("$BG_PID")
}
pgbench_wait() { # tag pid
	local tag=$1 pid=$2 rc=0 out="$RAW/$1.txt"
	wait "$pid" || rc=$?
	local keep=() p
	for p in "${BG_PIDS[@]}"; do [ "$p" = "$pid" ] || keep+=("$p"); done
	BG_PIDS=(${keep[@]+"${keep[@]}"})
	R_TPS=$(sed -n 's/^tps = \([0-9.]*\).*/\1/p' "$out" | head -n 1)
	R_PROC=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' "$out" | head -n 1)
	R_STATUS=ok R_NOTE=
	if [ $rc -ne 0 ]; then
		# no matching line is no reason to stop a script under set -e
		R_STATUS=error R_NOTE="pgbench $tag exit $rc: $({ grep -m 1 -iE 'error|abort|fatal' "$out" || true; } | tr ',\n' '; ')"
	fi
	R_N= R_P50= R_P99= R_MEAN=
	local files=("$TXLOG/$tag".*)
	if [ -e "${files[0]}" ]; then
		read -r R_N R_P50 R_P99 R_MEAN _ < <(python3 "$HERE/stats.py" lat "${files[@]}")
	fi
}

# wait_idle PORT: wait until no session of BENCH_ROLES is left on the
# server; terminate stragglers after 15 s (returns 1 then).
wait_idle() {
	local i n list
	list=$(printf "'%s'," $BENCH_ROLES)
	list=${list%,}
	for i in $(seq 150); do
		n=$(psql_at "$1" postgres -c "SELECT count(*) FROM pg_stat_activity WHERE usename IN ($list)")
		[ "$n" = 0 ] && return 0
		sleep 0.1
	done
	psql_at "$1" postgres -c "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
		WHERE usename IN ($list)" >/dev/null
	return 1
}

# ---------------------------------------------------------------------------
# CPU

# CPU used by other processes while a point ran, in % of the machine: all
# CPU time spent (/proc/stat) minus that of the benchmark's own processes
# (this shell's children, the postmasters with their backends, PgBouncer).
cpu_probe() {
	local pidfiles=() c
	for c in "${CLUSTERS[@]}"; do pidfiles+=("$WORK/$c/postmaster.pid"); done
	python3 "$HERE/stats.py" cpu $$ "$BOUNCER_TICKS" ${pidfiles[@]+"${pidfiles[@]}"}
}
cpu_begin() {
	read -r CPU_BUSY0 CPU_OURS0 < <(cpu_probe)
	CPU_T0=$(date +%s%N)
}
cpu_end() { # sets R_OTHER
	local busy ours t1
	read -r busy ours < <(cpu_probe)
	t1=$(date +%s%N)
	R_OTHER=$(awk -v b=$((busy - CPU_BUSY0)) -v o=$((ours - CPU_OURS0)) -v ns=$((t1 - CPU_T0)) \
		-v hz="$CLK_TCK" -v n="$NPROC" 'BEGIN { v = 100 * (b - o) / (ns / 1e9 * hz * n); if (v < 0) v = 0; printf "%.0f", v }')
}

# server_ticks NAME: CPU time (clock ticks) of cluster NAME's processes so
# far: the postmaster, its live children and the children it has reaped.
server_ticks() {
	python3 "$HERE/stats.py" server "$WORK/$1/postmaster.pid"
}

# ---------------------------------------------------------------------------
# sampling dbgate.status and dbgate.wait_histogram

# sampler_start FILE PORT BUDGET...: every 100 ms one line per budget into
# FILE: epoch|budget|active|queued|oldest_wait|admitted|admitted_after_wait|
# rate_limited|active_time_total|histogram counts (space-separated, in
# order of le_ms).  A psql of its own (\watch); the superuser's sampling
# query is not gated.  report.py reads these files.
sampler_start() {
	local file=$1 port=$2
	shift 2
	local list
	list=$(printf "'%s'," "$@")
	list=${list%,}
	sampler_stop
	printf '%s\n' "SELECT extract(epoch FROM clock_timestamp()), s.budget, s.active, s.queued,
		round(s.oldest_wait::numeric, 3), s.admitted, s.admitted_after_wait, s.rate_limited,
		round(s.active_time_total::numeric, 3),
		(SELECT string_agg(h.count::text, ' ' ORDER BY h.le_ms) FROM dbgate.wait_histogram h
		 WHERE h.budget = s.budget)
		FROM dbgate.status s WHERE s.budget IN ($list) ORDER BY s.budget" '\watch 0.1' >"$WORK/sampler.sql"
	"$PGBIN/psql" -X -q -At -h "$WORK" -p "$port" -U postgres -d "$DB" -f "$WORK/sampler.sql" \
		>"$file" 2>"$file.err" </dev/null &
	SAMPLER_PID=$!
	# the first sample is there: sampling runs
	local i
	for i in $(seq 50); do
		[ -s "$file" ] && return 0
		sleep 0.05
	done
	die "the sampler wrote nothing (see $file.err)"
}
sampler_stop() {
	[ -n "$SAMPLER_PID" ] || return 0
	kill -INT "$SAMPLER_PID" 2>/dev/null
	wait "$SAMPLER_PID" 2>/dev/null
	SAMPLER_PID=
}

# Wall-clock time as the server sees it (seconds since the epoch), to mark
# phases in a sample file.
server_epoch() { # port
	psql_at "$1" postgres -c "SELECT extract(epoch FROM clock_timestamp())"
}

# ---------------------------------------------------------------------------
# statements

# one_client_p50 PORT USER TAG ARGS...: median latency (microseconds) of one
# pgbench client running ARGS for CAL_DUR seconds.
one_client_p50() {
	local port=$1 user=$2 tag=$3
	shift 3
	run_pgbench "cal-$tag" "$port" "$user" 1 "${CAL_DUR:-4}" 1 "$@"
	[ "$R_STATUS" = ok ] || die "calibration run $tag failed: $R_NOTE"
	wait_idle "$port" || true
	echo "$R_P50"
}

# write_range WIDTH: WORK/range.sql, the "~1 ms statement": the sum of
# abalance over WIDTH consecutive rows of pgbench_accounts (scale SCALE)
# from a random start.
write_range() {
	cat >"$WORK/range.sql" <<-EOF
		\\set a random(1, $((100000 * SCALE - $1)))
		SELECT sum(abalance) FROM pgbench_accounts WHERE aid BETWEEN :a AND :a + $1;
	EOF
}

# calibrate_range PORT USER: unless RANGE_WIDTH is set, adjust the width of
# range.sql until one client's median latency is within 15 % of 1 ms (three
# tries); sets RANGE_WIDTH and LAT_RANGE (that median, microseconds).
calibrate_range() {
	local port=$1 user=$2 w=${RANGE_WIDTH:-2000} p i
	write_range "$w"
	if [ -z "${RANGE_WIDTH:-}" ]; then
		for i in 1 2 3; do
			p=$(one_client_p50 "$port" "$user" "range$i" -f "$WORK/range.sql")
			log "calibration: range width $w -> p50 ${p} us (one client)"
			# aim at 1000 us; stop once within 15 %
			[ "$p" -ge 850 ] && [ "$p" -le 1150 ] && break
			[ "$i" = 3 ] && break
			w=$(python3 -c "import sys; w=int(int(sys.argv[1])*1000/max(1,int(sys.argv[2]))); print(max(100, min(w, 100000*int(sys.argv[3])//2)))" "$w" "$p" "$SCALE")
			write_range "$w"
		done
	fi
	RANGE_WIDTH=$w
	LAT_RANGE=$(one_client_p50 "$port" "$user" range -f "$WORK/range.sql")
}

# ---------------------------------------------------------------------------
# alternation

# repeat_points FUNCTION POINT...: REPS repetitions of every point, forwards
# in odd and backwards in even repetitions (A B C, C B A, ...), so that a
# slow drift of the machine's background load favours no contender.
repeat_points() {
	local fn=$1 rep i
	shift
	local pts=("$@")
	for rep in $(seq "$REPS"); do
		if [ $((rep % 2)) = 1 ]; then
			for ((i = 0; i < ${#pts[@]}; i++)); do "$fn" "${pts[i]}" "$rep"; done
		else
			for ((i = ${#pts[@]} - 1; i >= 0; i--)); do "$fn" "${pts[i]}" "$rep"; done
		fi
	done
}

# meta_common: lines for OUT/meta.txt that every script writes.
meta_common() {
	echo "date=$(date -u '+%Y-%m-%d %H:%M UTC')"
	echo "machine=$NPROC cores (nproc), $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1), $(uname -sr)"
	echo "PostgreSQL=$("$PGBIN/postgres" --version | sed 's/^postgres (PostgreSQL) //')"
	echo "dbgate=$(git -c safe.directory='*' -C "$REPO" describe --always --dirty 2>/dev/null || echo 'built from a tree without git metadata')"
	echo "load average at start=$(cut -d' ' -f1-3 /proc/loadavg) (other work on the machine shows here)"
}
