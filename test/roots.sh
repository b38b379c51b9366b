# shellcheck shell=bash
# Variables set here are used by the scripts that source this file.
# shellcheck disable=SC2034
#
# test/roots.sh - Debian root file systems with other PostgreSQL major
# versions, for test/check.sh.
#
# Sourced, not run, by root.  One root per major version, made with
# debootstrap from the Debian archive that this machine's apt configuration
# names, kept between runs under $DBGATE_ROOTS (default /var/cache/dbgate):
#
#   $DBGATE_ROOTS/pg17    Debian trixie, postgresql-17
#   $DBGATE_ROOTS/pg18    Debian forky,  postgresql-18
#
# With ROOT_KIND=pkg (set by test/package.sh) the same functions keep the
# roots that Debian packages are built in: one per tested major version,
# with the version's server, the Debian tool chain and lintian, and never
# anything built from this tree (each build runs in a throwaway copy):
#
#   $DBGATE_ROOTS/pkg15   Debian bookworm, postgresql-15
#   $DBGATE_ROOTS/pkg17   Debian trixie,   postgresql-17
#   $DBGATE_ROOTS/pkg18   Debian forky,    postgresql-18
#
# A root that exists is checked and brought up to date (apt-get install of
# the package list) before each use; one that fails the check is made anew.
# A test root is made as a copy of its version's package root when that
# exists (the matrix makes the package root first), otherwise with
# debootstrap.  A root is built under a temporary name and renamed when complete, so an
# interrupted build leaves no half root behind.  A lock file per root keeps
# two runs from using or rebuilding the same root at once.
#
# While a suite runs in a root, /proc, /dev (bind) and a tmpfs on /dev/shm
# are mounted in it; root_leave undoes that after stopping every process
# still running inside the root.
#
# Environment:
#   DBGATE_ROOTS          where the roots live (default /var/cache/dbgate)
#   DBGATE_DEBIAN_MIRROR  Debian archive URL (default: from apt's sources)
#   DBGATE_ROOTS_READY    a directory: a file KINDVERSION in it (pg17,
#                         pkg15...) says that root was made or updated by
#                         this run already; root_prepare then uses it as it is
#   ROOT_KIND             pg (default: roots that the suites run in) or pkg

DBGATE_ROOTS=${DBGATE_ROOTS:-/var/cache/dbgate}
ROOT_KIND=${ROOT_KIND:-pg}

# root_packages VERSION [debootstrap]: packages a root needs.  pg: the
# server and its build files, a C tool chain and what the suites use (see
# PACKAGES in test/check.sh).  pkg: the server (the package's dependency),
# build-essential and dpkg-dev (what every Debian build has) and lintian;
# the build dependencies named in debian/control are added by
# test/package.sh.  With "debootstrap", the part that debootstrap installs
# itself; apt-get installs the rest (root_update): debootstrap's own
# dependency handling does not configure everything reliably (lintian's
# Perl modules, curl's and git's libraries).
root_packages() {
	local v=$1 for=${2:-} list
	if [[ $ROOT_KIND == pkg ]]; then
		[[ $for == debootstrap ]] || echo "postgresql-$v build-essential dpkg-dev lintian"
		return
	fi
	list="postgresql-$v postgresql-server-dev-$v make gcc libc6-dev"
	list+=" libkrb5-dev perl libipc-run-perl libdbd-pg-perl sqlsmith pgbouncer"
	list+=" gnuplot-nox python3"
	[[ $for == debootstrap ]] || list+=" prometheus-postgres-exporter curl git patroni etcd-server python3-etcd"
	echo "$list"
}

# root_dir VERSION: where the root of the current kind lives.
root_dir() {
	echo "$DBGATE_ROOTS/$ROOT_KIND$1"
}

# root_suite VERSION: the Debian suite that has postgresql-VERSION.
root_suite() {
	case $1 in
	15) echo bookworm ;;
	17) echo trixie ;;
	18) echo forky ;;
	*) return 1 ;;
	esac
}

# debian_mirror: print the URL of the Debian archive from apt's sources
# (one-line *.list files and deb822 *.sources files), skipping the security
# archive and anything that is not Debian's main archive layout.
debian_mirror() {
	if [[ -n ${DBGATE_DEBIAN_MIRROR:-} ]]; then
		echo "$DBGATE_DEBIAN_MIRROR"
		return 0
	fi
	local f files=()
	for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list \
		/etc/apt/sources.list.d/*.sources; do
		[[ -f $f ]] && files+=("$f")
	done
	((${#files[@]} > 0)) || return 1
	awk '
		function take(uris, suites,   u, s, nu, ns, i, j) {
			nu = split(uris, u, " "); ns = split(suites, s, " ")
			for (i = 1; i <= nu; i++)
				for (j = 1; j <= ns; j++)
					if (u[i] ~ /^https?:\/\// && u[i] !~ /security/ &&
						s[j] ~ /^[a-z]+(-updates)?$/) {
						print u[i]; found = 1; exit
					}
		}
		FILENAME ~ /\.sources$/ {
			if ($0 ~ /^[ \t]*$/) { end_stanza(); next }
			if ($0 ~ /^[ \t]*#/) next
			key = tolower($1); sub(/:$/, "", key)
			val = $0; sub(/^[^:]*:[ \t]*/, "", val)
			if (key == "types") types = val
			else if (key == "uris") uris = val
			else if (key == "suites") suites = val
			else if (key == "enabled") enabled = tolower(val)
			next
		}
		FNR == 1 { end_stanza() }
		/^[ \t]*deb[ \t]/ {
			line = $0; sub(/^[ \t]*deb[ \t]+/, "", line)
			if (line ~ /^\[/) sub(/^\[[^]]*\][ \t]*/, "", line)
			split(line, w, /[ \t]+/)
			take(w[1], w[2])
		}
		function end_stanza() {
			if (types ~ /(^| )deb( |$)/ && enabled != "no")
				take(uris, suites)
			types = ""; uris = ""; suites = ""; enabled = ""
		}
		END { if (!found) end_stanza() }
	' "${files[@]}" | sed 's:/*$::' | head -n 1 | grep .
}

# root_mounted ROOT: true if anything is mounted at or below ROOT.
root_mounted() {
	awk -v r="$1" '$5 == r || index($5, r "/") == 1 { m = 1 } END { exit !m }' \
		/proc/self/mountinfo
}

# root_umount ROOT: undo every mount at or below ROOT (deepest first).
root_umount() {
	local r=$1 m
	while IFS= read -r m; do
		umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null ||
			echo "*** could not unmount $m" >&2
	done < <(awk -v r="$r" 'index($5, r "/") == 1 { print $5 }' \
		/proc/self/mountinfo | sort -r)
	! root_mounted "$r"
}

# root_kill ROOT: end every process whose root directory is ROOT (servers a
# suite left running inside it), TERM first, then KILL.
root_kill() {
	local r=$1 p pids i
	for i in 1 2 3 4 5 6 7 8 9 10 11; do
		pids=()
		for p in /proc/[0-9]*; do
			[[ $(readlink "$p/root" 2>/dev/null) == "$r" ]] && pids+=("${p#/proc/}")
		done
		((${#pids[@]} > 0)) || return 0
		if ((i == 1)); then
			echo "stopping ${#pids[@]} process(es) left in $r"
			kill -TERM "${pids[@]}" 2>/dev/null
		elif ((i == 10)); then
			kill -KILL "${pids[@]}" 2>/dev/null
		fi
		sleep 0.5
	done
}

# root_remove DIR: remove a root that nothing is mounted in.
root_remove() {
	local d=$1
	[[ -e $d ]] || return 0
	root_kill "$d"
	root_umount "$d" || return 1
	rm -rf --one-file-system "$d"
}

# in_root ROOT CMD...: run CMD in ROOT with a plain environment.
in_root() {
	local r=$1
	shift
	env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 \
		DEBIAN_FRONTEND=noninteractive chroot "$r" "$@"
}

# root_update ROOT VERSION: install (or keep) the root's packages and the
# server user; fails if the root is not usable.
root_update() {
	local r=$1 v=$2 pkgs
	read -r -a pkgs <<<"$(root_packages "$v")"
	[[ -x $r/bin/bash && -x $r/usr/bin/apt-get ]] || return 1
	root_enter "$r" || return 1
	if ! in_root "$r" apt-get install -y -q --no-install-recommends "${pkgs[@]}" &&
		! { in_root "$r" apt-get update -q &&
			in_root "$r" apt-get install -y -q --no-install-recommends "${pkgs[@]}"; }; then
		root_leave "$r"
		return 1
	fi
	in_root "$r" apt-get clean
	if ! in_root "$r" id -u postgres >/dev/null 2>&1; then
		in_root "$r" useradd --system --create-home --home-dir /var/lib/postgresql \
			--shell /bin/bash postgres || {
			root_leave "$r"
			return 1
		}
	fi
	in_root "$r" "/usr/lib/postgresql/$v/bin/pg_config" --version
	local rc=$?
	root_leave "$r"
	return "$rc"
}

# root_copy_sibling VERSION DEST: copy the package root of VERSION to DEST,
# under that root's lock (on file descriptor 8), if it is complete and
# nothing is mounted in it; fails otherwise.
root_copy_sibling() {
	local v=$1 dest=$2
	local src=$DBGATE_ROOTS/pkg$v rc
	[[ -x $src/usr/lib/postgresql/$v/bin/pg_config && -x $src/usr/bin/apt-get ]] || return 1
	exec 8>"$src.lock" || return 1
	flock 8 || {
		exec 8>&-
		return 1
	}
	if root_mounted "$src"; then
		rc=1
	else
		cp -a --one-file-system "$src" "$dest"
		rc=$?
	fi
	exec 8>&-
	return "$rc"
}

# root_build DIR VERSION LOG: make a new root for VERSION at DIR.
root_build() {
	local dir=$1 v=$2 log=$3 suite script mirror pkgs
	suite=$(root_suite "$v") || {
		echo "*** no Debian suite known for PostgreSQL $v"
		return 1
	}
	mirror=$(debian_mirror) || {
		echo "*** no Debian archive found in /etc/apt/sources.list{,.d/} (set DBGATE_DEBIAN_MIRROR)"
		return 1
	}
	if ! command -v debootstrap >/dev/null; then
		echo "packages: installing debootstrap"
		install_packages debootstrap || return 1
	fi
	# An older debootstrap has no script for the newest suite; the one for
	# sid (unstable) fits every suite that is not released yet.
	script=/usr/share/debootstrap/scripts/$suite
	[[ -e $script ]] || script=/usr/share/debootstrap/scripts/sid
	pkgs=$(root_packages "$v" debootstrap)
	root_remove "$dir.new" || return 1
	# A test root starts as a copy of the version's package root when that
	# exists (same suite; it never holds dbgate, test/package.sh): a copy
	# takes seconds where debootstrap takes minutes, and root_update
	# installs what the test root needs on top.  The package root stays
	# as it was: nothing is ever copied into it.
	if [[ $ROOT_KIND == pg ]] && root_copy_sibling "$v" "$dir.new" >"$log" 2>&1; then
		echo "building root for PostgreSQL $v: a copy of $DBGATE_ROOTS/pkg$v (log: $log)"
		root_umount "$dir.new" || return 1
		root_remove "$dir" || return 1
		mv "$dir.new" "$dir"
		return 0
	fi
	root_remove "$dir.new" || return 1
	echo "building root for PostgreSQL $v: debootstrap $suite from $mirror (log: $log)"
	if ! debootstrap --variant=minbase ${pkgs:+--include="${pkgs// /,}"} \
		"$suite" "$dir.new" "$mirror" "$script" >"$log" 2>&1; then
		echo "*** debootstrap failed; its log ends:"
		tail -n 15 "$log"
		root_remove "$dir.new"
		return 1
	fi
	root_umount "$dir.new" || return 1
	root_remove "$dir" || return 1
	mv "$dir.new" "$dir"
}

# root_prepare VERSION LOGDIR [no-update]: print the path of a usable root
# for VERSION, building or refreshing it as needed.  The caller holds the
# root's lock (root_lock).
root_prepare() {
	local v=$1 logdir=$2 noupdate=${3:-} dir
	dir=$(root_dir "$v")
	# Made or brought up to date a moment ago by this run (check.sh makes
	# the roots of later versions while the first one's suites run).
	if [[ -z $noupdate && -n ${DBGATE_ROOTS_READY:-} &&
		-e $DBGATE_ROOTS_READY/$ROOT_KIND$v ]]; then
		noupdate=ready
	fi
	mkdir -p "$DBGATE_ROOTS" || return 1
	if [[ -d $dir ]]; then
		if [[ -n $noupdate && -x $dir/usr/lib/postgresql/$v/bin/pg_config ]]; then
			echo "root for PostgreSQL $v: $dir (not updated: --no-install)" >&2
			echo "$dir"
			return 0
		fi
		echo "root for PostgreSQL $v: $dir (checking its packages)" >&2
		if root_update "$dir" "$v" >"$logdir/root-$v-update.log" 2>&1; then
			echo "$dir"
			return 0
		fi
		echo "root $dir is not usable (log follows); building it anew" >&2
		tail -n 15 "$logdir/root-$v-update.log" >&2
	fi
	root_build "$dir" "$v" "$logdir/root-$v-debootstrap.log" >&2 || return 1
	root_update "$dir" "$v" >"$logdir/root-$v-update.log" 2>&1 || {
		echo "*** root $dir: package installation failed; its log ends:" >&2
		tail -n 15 "$logdir/root-$v-update.log" >&2
		return 1
	}
	echo "$dir"
}

# root_lock VERSION: take the root's lock on file descriptor 9 (waits).
root_lock() {
	local dir
	dir=$(root_dir "$1")
	mkdir -p "$DBGATE_ROOTS" || return 1
	exec 9>"$dir.lock" || return 1
	if ! flock -n 9; then
		echo "waiting for another run that uses $dir"
		flock 9 || return 1
	fi
}

root_unlock() {
	exec 9>&-
}

# root_enter ROOT: mount /proc, /dev and /dev/shm in ROOT.  The bind mount
# of /dev is made private so that the tmpfs on its shm directory does not
# show up on the host's /dev/shm.
root_enter() {
	local r=$1
	root_mounted "$r" && root_umount "$r"
	if ! { mount -t proc proc "$r/proc" &&
		mount --bind /dev "$r/dev" &&
		mount --make-private "$r/dev" &&
		mount -t tmpfs -o mode=1777 shm "$r/dev/shm"; }; then
		root_umount "$r"
		return 1
	fi
	# resolv.conf and hosts for apt inside, as debootstrap leaves them
	cp -L /etc/resolv.conf "$r/etc/resolv.conf" 2>/dev/null
	return 0
}

# root_leave ROOT: stop what still runs inside ROOT and undo the mounts.
root_leave() {
	local r=$1
	root_kill "$r"
	root_umount "$r"
}
