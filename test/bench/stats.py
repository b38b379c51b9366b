#!/usr/bin/env python3
"""Statistics for test/bench/run.sh (python3 standard library only).

  stats.py lat FILE...        per-transaction pgbench logs (-l) -> "n p50 p99 mean"
                              (latencies in microseconds; nearest-rank percentiles)
  stats.py cpu SHELL_PID EXTRA PIDFILE...
                              "busy_ticks our_ticks": CPU time of the whole machine
                              and of the benchmark's own processes
  stats.py ticks PID          utime + stime of one process
  stats.py server PIDFILE     CPU ticks of a cluster so far: its postmaster, the
                              children it has reaped and its live children
  stats.py summary OUTDIR     OUTDIR/runs.csv + OUTDIR/meta.txt -> summary.md,
                              summary.csv and the gnuplot data files; prints the
                              markdown to stdout

Every figure in the summary is a median over repetitions.  A ratio is the
median of per-repetition ratios: each repetition runs all contenders of a
scenario back to back, so a contender is compared with the baseline measured
minutes (not half an hour) apart.
"""
import csv
import math
import os
import statistics
import sys


# ----------------------------------------------------------------------------
# per-run latency percentiles

def percentile(sorted_vals, q):
    """Nearest-rank percentile of an ascending list (q in 0..1)."""
    if not sorted_vals:
        return float("nan")
    k = max(1, math.ceil(q * len(sorted_vals)))
    return sorted_vals[k - 1]


def cmd_lat(paths):
    # pgbench 15 log line: client_id transaction_no time script_no time_epoch
    # time_us [schedule_lag [retries]]; "time" is the latency in microseconds,
    # or "failed" / "skipped".
    lat = []
    failed = 0
    for p in paths:
        with open(p) as f:
            for line in f:
                parts = line.split()
                if len(parts) < 3:
                    continue
                try:
                    lat.append(int(parts[2]))
                except ValueError:
                    failed += 1
    lat.sort()
    if not lat:
        print("0 nan nan nan %d" % failed)
        return
    print("%d %d %d %.1f %d" % (len(lat), percentile(lat, 0.50),
                                percentile(lat, 0.99),
                                sum(lat) / len(lat), failed))


# ----------------------------------------------------------------------------
# CPU used by other processes on the machine (a noise indicator)

def proc_ticks(pid, children_too=False):
    """utime + stime (+ cutime + cstime) of a process, in clock ticks."""
    try:
        with open("/proc/%s/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0, None
    # fields[0] is field 3 (state): utime = 14, stime = 15, cutime = 16,
    # cstime = 17, ppid = 4
    t = int(fields[11]) + int(fields[12])
    if children_too:
        t += int(fields[13]) + int(fields[14])
    return t, int(fields[1])


def cmd_cpu(args):
    """cpu SHELL_PID EXTRA_TICKS PIDFILE... -> "busy_ticks our_ticks".

    busy: all CPU time spent on the machine (/proc/stat); ours: the calling
    shell with every child it has reaped (pgbench, psql), each postmaster
    named by a pid file with its reaped children (backends) and live ones,
    plus EXTRA_TICKS (PgBouncer processes already gone)."""
    with open("/proc/stat") as f:
        cpu = [int(x) for x in f.readline().split()[1:]]
    # user nice system idle iowait irq softirq steal (guest time is already
    # part of user and nice)
    busy = sum(cpu[:8]) - cpu[3] - cpu[4]
    shell, extra = args[0], int(args[1])
    ours = proc_ticks(shell, True)[0] + extra
    masters = set()
    for pf in args[2:]:
        try:
            with open(pf) as f:
                pm = f.readline().strip()
        except OSError:
            continue
        masters.add(int(pm))
        ours += proc_ticks(pm, True)[0]
    if masters:
        for d in os.listdir("/proc"):
            if d.isdigit():
                t, ppid = proc_ticks(d)
                if ppid in masters:
                    ours += t
    print("%d %d" % (busy, ours))


def cmd_ticks(args):
    print(proc_ticks(args[0])[0])


def cmd_server(args):
    with open(args[0]) as f:
        pm = int(f.readline().strip())
    total = proc_ticks(pm, True)[0]
    for d in os.listdir("/proc"):
        if d.isdigit():
            t, ppid = proc_ticks(d)
            if ppid == pm:
                total += t
    print(total)


# ----------------------------------------------------------------------------
# summary

def fnum(s):
    try:
        v = float(s)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(v) else v


def med(vals):
    vals = [v for v in vals if v is not None]
    return statistics.median(vals) if vals else None


def fmt(v, nd=0):
    if v is None:
        return "n/a"
    if nd == 0:
        return "%.0f" % v
    return "%.*f" % (nd, v)


def ms(us):
    return None if us is None else us / 1000.0


class Runs:
    def __init__(self, path):
        with open(path) as f:
            self.rows = list(csv.DictReader(f))

    def select(self, scenario, group=None, contender=None, n=None, ok_only=True):
        out = []
        for r in self.rows:
            if r["scenario"] != scenario:
                continue
            if group is not None and r["group"] != group:
                continue
            if contender is not None and r["contender"] != contender:
                continue
            if n is not None and r["n"] != n:
                continue
            if ok_only and r["status"] != "ok":
                continue
            out.append(r)
        return out

    def contenders(self, scenario, group=None):
        seen = []
        for r in self.rows:
            if r["scenario"] == scenario and (group is None or r["group"] == group):
                key = (r["group"], r["contender"], r["n"])
                if key not in seen:
                    seen.append(key)
        return seen

    def median(self, scenario, group, contender, col, n=""):
        return med([fnum(r[col]) for r in self.select(scenario, group, contender, n)])

    def reps(self, scenario, group, contender, n=""):
        return len(self.select(scenario, group, contender, n))

    def ratio(self, scenario, group, contender, col, base_contender, n="", base_n=""):
        """Median over repetitions of contender[col] / base[col] (same rep)."""
        base = {r["rep"]: fnum(r[col])
                for r in self.select(scenario, group, base_contender, base_n)}
        vals = []
        for r in self.select(scenario, group, contender, n):
            b = base.get(r["rep"])
            v = fnum(r[col])
            if b and v is not None:
                vals.append(v / b)
        return med(vals)


def verdict(value, ok):
    if value is None:
        return "n/a"
    return "met" if ok else "missed"


def read_meta(outdir):
    meta = []
    path = os.path.join(outdir, "meta.txt")
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                line = line.rstrip("\n")
                if "=" in line:
                    k, v = line.split("=", 1)
                    meta.append((k, v))
    return meta


def table(header, rows):
    out = ["| " + " | ".join(header) + " |",
           "|" + "|".join(" --- " for _ in header) + "|"]
    for r in rows:
        out.append("| " + " | ".join(r) + " |")
    return out


def anomaly_rows(runs):
    out = []
    for r in runs.rows:
        if r["status"] != "ok" or r.get("note"):
            out.append([r["scenario"], r["group"], r["contender"], r["rep"],
                        r["status"], r.get("note", "")])
    return out


def other_cpu_line(runs, scenario):
    vals = [fnum(r.get("other_cpu_pct")) for r in runs.select(scenario, ok_only=False)]
    vals = [v for v in vals if v is not None]
    if not vals:
        return []
    return ["Other processes on the machine used %.0f %% (median; max %.0f %%) of its CPU "
            "while these points ran." % (statistics.median(vals), max(vals)), ""]


def summarize(outdir):
    runs = Runs(os.path.join(outdir, "runs.csv"))
    meta = read_meta(outdir)
    md = []        # markdown lines
    flat = []      # summary.csv rows
    targets = []   # (target, measured, verdict)
    checks = []    # issue 28's checked targets (check())

    md.append("# dbgate benchmark")
    md.append("")
    for k, v in meta:
        md.append("- %s: %s" % (k, v))
    md.append("")
    md.append("Figures are medians over the repetitions; a ratio is the median of "
              "per-repetition ratios (each repetition runs every contender of the "
              "scenario, forwards in odd and backwards in even repetitions). "
              "Latencies are per statement, from pgbench's per-transaction logs. "
              "'gate:' columns come from dbgate.status (reset before each run); "
              "peak_active is the highest over the repetitions.")
    md.append("")

    def flat_row(scn, grp, con, n, col, val):
        flat.append([scn, grp, con, n, col, "" if val is None else "%.6g" % val])

    # -- 1. idle overhead -----------------------------------------------------
    if runs.contenders("overhead"):
        md.append("## 1. Idle overhead (pgbench -S, 8 clients)")
        md.append("")
        rows = []
        for grp, con, n in runs.contenders("overhead"):
            tps = runs.median("overhead", grp, con, "tps")
            ratio = runs.ratio("overhead", grp, con, "tps", "notloaded")
            rows.append([grp, con, fmt(tps), fmt(ratio, 3),
                         fmt(runs.median("overhead", grp, con, "other_cpu_pct")),
                         str(runs.reps("overhead", grp, con))])
            flat_row("overhead", grp, con, n, "tps", tps)
            flat_row("overhead", grp, con, n, "tps_ratio", ratio)
            if con != "notloaded":
                targets.append(("overhead %s/%s TPS >= 0.98 x not loaded" % (grp, con),
                                fmt(ratio, 3),
                                verdict(ratio, ratio is not None and ratio >= 0.98)))
        md += table(["protocol", "server", "TPS", "vs not loaded", "other CPU %",
                     "reps"], rows)
        md.append("")
        md.append("notloaded: no shared_preload_libraries; unassigned: dbgate loaded, "
                  "role in no budget; budget: role in a budget that never fills.")
        md.append("")
        md += other_cpu_line(runs, "overhead")

    # -- 2. bulkhead ----------------------------------------------------------
    if runs.contenders("bulkhead", ""):
        md.append("## 2. Bulkhead (interactive: pgbench -S, 4 clients; "
                  "reporting: 32 clients of a CPU-heavy query)")
        md.append("")
        rows = []
        for grp, con, n in runs.contenders("bulkhead", ""):
            tps = runs.median("bulkhead", grp, con, "tps")
            p50 = runs.median("bulkhead", grp, con, "p50_us")
            p99 = runs.median("bulkhead", grp, con, "p99_us")
            aux = runs.median("bulkhead", grp, con, "aux_tps")
            rows.append([con, fmt(tps), fmt(ms(p50), 3), fmt(ms(p99), 3),
                         fmt(aux, 1) if con != "alone" else "-",
                         fmt(runs.median("bulkhead", grp, con, "other_cpu_pct")),
                         str(runs.reps("bulkhead", grp, con))])
            for col, v in (("tps", tps), ("p50_us", p50), ("p99_us", p99),
                           ("reporting_tps", aux)):
                flat_row("bulkhead", grp, con, n, col, v)
        md += table(["case", "interactive TPS", "p50 ms", "p99 ms",
                     "reporting TPS", "other CPU %", "reps"], rows)
        md.append("")
        r_ca = runs.ratio("bulkhead", "", "flood-gated", "p99_us", "alone")
        r_bc = runs.ratio("bulkhead", "", "flood-ungated", "p99_us", "flood-gated")
        md.append("- p99 (c) / (a) = %s (target <= 4)" % fmt(r_ca, 2))
        md.append("- p99 (b) / (c) = %s (target >= 8)" % fmt(r_bc, 2))
        md.append("")
        md.append("(a) alone: ungated server, no flood; (b) flood-ungated: the flood on "
                  "the ungated server; (c) flood-gated: reporting budget max_active = 1, "
                  "interactive not gated.")
        md.append("")
        md += other_cpu_line(runs, "bulkhead")
        flat_row("bulkhead", "", "ratio", "", "p99_c_over_a", r_ca)
        flat_row("bulkhead", "", "ratio", "", "p99_b_over_c", r_bc)
        targets.append(("bulkhead p99 (c) <= 4 x p99 (a)", fmt(r_ca, 2),
                        verdict(r_ca, r_ca is not None and r_ca <= 4)))
        targets.append(("bulkhead p99 (b) / p99 (c) >= 8", fmt(r_bc, 2),
                        verdict(r_bc, r_bc is not None and r_bc >= 8)))
        with open(os.path.join(outdir, "bulkhead.dat"), "w") as f:
            f.write("# case p50_ms p99_ms\n")
            for grp, con, n in runs.contenders("bulkhead", ""):
                label = {"alone": "(a) alone", "flood-ungated": "(b) flood, ungated",
                         "flood-gated": "(c) flood, gated B=1"}.get(con, con)
                p50 = ms(runs.median("bulkhead", grp, con, "p50_us"))
                p99 = ms(runs.median("bulkhead", grp, con, "p99_us"))
                f.write('"%s" %s %s\n' % (label, fmt(p50, 4) if p50 else "NaN",
                                          fmt(p99, 4) if p99 else "NaN"))

    # -- 2b. bulkhead, parallel variant --------------------------------------
    if runs.contenders("bulkhead", "parallel"):
        g = "parallel"
        md.append("### 2b. Bulkhead with parallel query (reporting: 32 clients of "
                  "a parallel table scan; max_parallel_workers_per_gather = 2)")
        md.append("")
        rows = []
        for grp, con, n in runs.contenders("bulkhead", g):
            tps = runs.median("bulkhead", g, con, "tps")
            p50 = runs.median("bulkhead", g, con, "p50_us")
            p99 = runs.median("bulkhead", g, con, "p99_us")
            aux = runs.median("bulkhead", g, con, "aux_tps")
            rows.append([con, fmt(tps), fmt(ms(p50), 3), fmt(ms(p99), 3),
                         fmt(aux, 1) if con != "alone" else "-",
                         fmt(runs.median("bulkhead", g, con, "other_cpu_pct")),
                         str(runs.reps("bulkhead", g, con))])
            for col, v in (("tps", tps), ("p50_us", p50), ("p99_us", p99),
                           ("reporting_tps", aux)):
                flat_row("bulkhead", g, con, n, col, v)
        md += table(["case", "interactive TPS", "p50 ms", "p99 ms",
                     "reporting TPS", "other CPU %", "reps"], rows)
        md.append("")
        r_ca = runs.ratio("bulkhead", g, "flood-gated", "p99_us", "alone")
        r_da = runs.ratio("bulkhead", g, "flood-gated-pw0", "p99_us", "alone")
        r_bd = runs.ratio("bulkhead", g, "flood-ungated", "p99_us", "flood-gated-pw0")
        md.append("- p99 (c) / (a) = %s (max_active 1, parallel_workers not capped)"
                  % fmt(r_ca, 2))
        md.append("- p99 (d) / (a) = %s (target <= 4)" % fmt(r_da, 2))
        md.append("- p99 (b) / (d) = %s (target >= 8)" % fmt(r_bd, 2))
        md.append("")
        md.append("(a) alone; (b) flood-ungated; (c) flood-gated: reporting budget "
                  "max_active = 1, parallel_workers = -1, so each admitted statement "
                  "runs with up to 2 workers; (d) flood-gated-pw0: the same budget "
                  "with parallel_workers = 0.")
        md.append("")
        flat_row("bulkhead", g, "ratio", "", "p99_c_over_a", r_ca)
        flat_row("bulkhead", g, "ratio", "", "p99_d_over_a", r_da)
        flat_row("bulkhead", g, "ratio", "", "p99_b_over_d", r_bd)
        targets.append(("bulkhead parallel p99 (d) <= 4 x p99 (a)", fmt(r_da, 2),
                        verdict(r_da, r_da is not None and r_da <= 4)))
        targets.append(("bulkhead parallel p99 (b) / p99 (d) >= 8", fmt(r_bd, 2),
                        verdict(r_bd, r_bd is not None and r_bd >= 8)))

    # -- 3. saturation --------------------------------------------------------
    if runs.contenders("saturation"):
        groups = []
        for grp, _, _ in runs.contenders("saturation"):
            if grp not in groups:
                groups.append(grp)
        clients = (runs.select("saturation") or [{"clients": "?"}])[0]["clients"]
        md.append("## 3. Saturation (%s clients)" % clients)
        md.append("")
        md += other_cpu_line(runs, "saturation")
        for grp in groups:
            md.append("### %s" % {"S": "pgbench -S (one primary-key lookup)",
                                  "1ms": "~1 ms query (range sum over pgbench_accounts)"
                                  }.get(grp, grp))
            md.append("")
            rows = []
            ung_tps = runs.median("saturation", grp, "ungated", "tps")
            ung_p99 = runs.median("saturation", grp, "ungated", "p99_us")
            best = {}
            series = {}
            for g, con, n in runs.contenders("saturation", grp):
                tps = runs.median("saturation", grp, con, "tps", n)
                p50 = runs.median("saturation", grp, con, "p50_us", n)
                p99 = runs.median("saturation", grp, con, "p99_us", n)
                rt = runs.ratio("saturation", grp, con, "tps", "ungated", n)
                rp = runs.ratio("saturation", grp, con, "p99_us", "ungated", n)
                wait = waited_mean_us(runs, "saturation", grp, con, n)
                wfrac = waited_fraction(runs, "saturation", grp, con, n)
                peak = max_of(runs, "saturation", grp, con, n, "peak_active")
                wmax = max_of(runs, "saturation", grp, con, n, "wait_time_max_ms")
                other = runs.median("saturation", grp, con, "other_cpu_pct", n)
                rows.append([con, n or "-", fmt(tps), fmt(rt, 2), fmt(ms(p50), 2),
                             fmt(ms(p99), 2), fmt(rp, 2), fmt(wfrac, 2), fmt(wait),
                             fmt(wmax, 1), fmt(peak), fmt(other),
                             str(runs.reps("saturation", grp, con, n))])
                for col, v in (("tps", tps), ("p50_us", p50), ("p99_us", p99),
                               ("tps_ratio", rt), ("p99_ratio", rp),
                               ("mean_wait_us", wait)):
                    flat_row("saturation", grp, con, n, col, v)
                kind = con.split("-")[0]
                if n:
                    series.setdefault(kind, {})[int(n)] = (tps, p99)
                    if tps is not None and (kind not in best or tps > best[kind][1]):
                        best[kind] = (n, tps, p99, rt, rp, wfrac)
            md += table(["contender", "max_active / pool", "TPS", "TPS vs ungated",
                         "p50 ms", "p99 ms", "p99 vs ungated", "gate: waited fraction",
                         "gate: mean wait us", "gate: max wait ms", "gate: peak_active",
                         "other CPU %", "reps"], rows)
            md.append("")
            for kind in ("fair", "nonfair", "lifo", "lifonf", "pgbouncer"):
                if kind in best:
                    n, tps, p99, rt, rp, wfrac = best[kind]
                    idle = ("; fewer than 0.5 %% of the statements waited for a slot "
                            "at this max_active, so the gate hardly acted: the "
                            "difference from ungated is mostly noise plus the "
                            "per-statement cost" % ()
                            if kind != "pgbouncer" and wfrac is not None and wfrac < 0.005
                            else "")
                    md.append("- best %s: %s at %s (TPS x%s, p99 x%s vs ungated%s)"
                              % (kind, fmt(tps), n, fmt(rt, 2), fmt(rp, 2), idle))
                    if kind in ("fair", "nonfair"):
                        ok = (rt is not None and rp is not None and rt >= 1.0 and rp < 1.0)
                        targets.append(("saturation %s, best %s (max_active %s): "
                                        "TPS >= 1.0 x ungated and lower p99" % (grp, kind, n),
                                        "TPS x%s, p99 x%s%s" % (fmt(rt, 2), fmt(rp, 2),
                                                               " (gate hardly queued)" if idle else ""),
                                        verdict(rt, ok)))
            for kind in ("lifo", "lifonf"):
                if kind in best:
                    md += lifo_lines(runs, grp, best, targets, kind)
            if grp == "S" and "lifo" in best:
                checks += saturation_checks(runs, best, clients)
            md.append("")
            sizes = sorted({n for s in series.values() for n in s})
            with open(os.path.join(outdir, "saturation_%s.dat" % grp), "w") as f:
                f.write("# n fair_tps nonfair_tps pgbouncer_tps ungated_tps "
                        "fair_p99_ms nonfair_p99_ms pgbouncer_p99_ms ungated_p99_ms "
                        "lifo_tps lifo_p99_ms\n")
                for n in sizes:
                    cols = [str(n)]
                    for kind in ("fair", "nonfair", "pgbouncer"):
                        v = series.get(kind, {}).get(n, (None, None))[0]
                        cols.append(fmt(v, 1) if v is not None else "NaN")
                    cols.append(fmt(ung_tps, 1) if ung_tps is not None else "NaN")
                    for kind in ("fair", "nonfair", "pgbouncer"):
                        v = series.get(kind, {}).get(n, (None, None))[1]
                        cols.append(fmt(ms(v), 3) if v is not None else "NaN")
                    cols.append(fmt(ms(ung_p99), 3) if ung_p99 is not None else "NaN")
                    v = series.get("lifo", {}).get(n, (None, None))
                    cols.append(fmt(v[0], 1) if v[0] is not None else "NaN")
                    cols.append(fmt(ms(v[1]), 3) if v[1] is not None else "NaN")
                    f.write(" ".join(cols) + "\n")

    # -- 4. hand-off ----------------------------------------------------------
    if runs.contenders("handoff"):
        md.append("## 4. Hand-off (SELECT 1; gated and pooled at 1)")
        md.append("")
        base_p50 = runs.median("handoff", "", "ungated-1client", "p50_us")
        rows = []
        for grp, con, n in runs.contenders("handoff"):
            tps = runs.median("handoff", grp, con, "tps", n)
            frac = runs.ratio("handoff", grp, con, "tps", "ungated-1client", n)
            p50 = runs.median("handoff", grp, con, "p50_us", n)
            p99 = runs.median("handoff", grp, con, "p99_us", n)
            wait = waited_mean_us(runs, "handoff", grp, con, n)
            wfrac = waited_fraction(runs, "handoff", grp, con, n)
            d50 = None if p50 is None or base_p50 is None else max(0.0, p50 - base_p50)
            d99 = None if p99 is None or base_p50 is None else max(0.0, p99 - base_p50)
            clients = (runs.select("handoff", grp, con, n) or [{"clients": "?"}])[0]["clients"]
            rows.append([con, clients, fmt(tps), fmt(frac, 2), fmt(p50), fmt(p99),
                         fmt(wait), fmt(wfrac, 2), fmt(d50), fmt(d99),
                         fmt(runs.median("handoff", grp, con, "other_cpu_pct", n)),
                         str(runs.reps("handoff", grp, con, n))])
            for col, v in (("tps", tps), ("tps_vs_one_client", frac), ("p50_us", p50),
                           ("p99_us", p99), ("gate_mean_wait_us", wait),
                           ("gate_waited_fraction", wfrac), ("est_wait_p50_us", d50),
                           ("est_wait_p99_us", d99)):
                flat_row("handoff", grp, con, n, col, v)
            if con in ("fair", "nonfair", "lifo"):
                targets.append(("hand-off %s: TPS >= 0.7 x one ungated client" % con,
                                fmt(frac, 2),
                                verdict(frac, frac is not None and frac >= 0.7)))
        md += table(["contender", "clients", "TPS", "vs 1 ungated client",
                     "latency p50 us", "latency p99 us", "gate: mean wait us",
                     "gate: waited fraction", "est. wait p50 us", "est. wait p99 us",
                     "other CPU %", "reps"], rows)
        md.append("")
        if runs.select("handoff", "", "lifo", "1") and runs.select("handoff", "", "fair", "1"):
            rt = runs.ratio("handoff", "", "lifo", "tps", "fair", "1", "1")
            rp = runs.ratio("handoff", "", "lifo", "p99_us", "fair", "1", "1")
            wm = max_of(runs, "handoff", "", "lifo", "1", "wait_time_max_ms")
            md.append("- 'lifo' against 'fifo' (fair), B = 1: TPS x%s, p99 x%s; longest "
                      "'lifo' wait %s ms (overtake_limit 100 ms)"
                      % (fmt(rt, 2), fmt(rp, 2), fmt(wm, 1)))
            md.append("")
            flat_row("handoff", "", "lifo", "1", "tps_vs_fifo", rt)
            flat_row("handoff", "", "lifo", "1", "p99_vs_fifo", rp)
            checks.append(check("5, hand-off B = 1, 16 clients of SELECT 1",
                                "'lifo' TPS >= 1.0 x 'fifo'",
                                "TPS %s against %s, p99 %s us against %s us"
                                % (fmt(runs.median("handoff", "", "lifo", "tps", "1")),
                                   fmt(runs.median("handoff", "", "fair", "tps", "1")),
                                   fmt(runs.median("handoff", "", "lifo", "p99_us", "1")),
                                   fmt(runs.median("handoff", "", "fair", "p99_us", "1"))),
                                "%s x" % fmt(rt, 3), None if rt is None else rt >= 1.0))
        md.append("Wait-to-run: 'gate: mean wait' is exact and server-side "
                  "(dbgate.status wait_time_total / admitted_after_wait, counters reset "
                  "before each run; it averages only the statements that waited, "
                  "'waited fraction' = admitted_after_wait / admitted). 'est. wait p50/p99' "
                  "is an estimate: the statement's latency percentile minus the median "
                  "latency of one ungated client (the cost of running SELECT 1 without "
                  "waiting).")
        md.append("")
        md += other_cpu_line(runs, "handoff")

    # -- targets and anomalies ------------------------------------------------
    if checks:
        md.append("## Targets of issue 28")
        md.append("")
        md += table(["item", "target", "measured", "ratio", "verdict"], checks)
        md.append("")
    if targets:
        md.append("## Targets (informational, never asserted)")
        md.append("")
        md += table(["target", "measured", "verdict"], [list(t) for t in targets])
        md.append("")
    anomalies = anomaly_rows(runs)
    md.append("## Anomalies")
    md.append("")
    if anomalies:
        md += table(["scenario", "group", "contender", "rep", "status", "note"],
                    anomalies)
    else:
        md.append("none: every run finished, pgbench reported no errors, and every "
                  "gated run's counters were consistent (no rejections, "
                  "peak_active <= max_active, slots all returned, "
                  "admitted >= transactions).")
    md.append("")

    text = "\n".join(md)
    with open(os.path.join(outdir, "summary.md"), "w") as f:
        f.write(text)
    with open(os.path.join(outdir, "summary.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["scenario", "group", "contender", "n", "metric", "median"])
        w.writerows(flat)
    print(text)
    return 1 if anomalies else 0


def lifo_lines(runs, grp, best, targets, kind="lifo"):
    """'lifo' (or 'lifonf': non-fair 'lifo') at B = 2 and at its best B
    against ungated and the best pool."""
    out = []
    if runs.select("saturation", grp, kind, "2"):
        rt = runs.ratio("saturation", grp, kind, "tps", "ungated", "2")
        rp = runs.ratio("saturation", grp, kind, "p99_us", "ungated", "2")
        out.append("- %s at max_active 2: TPS x%s, p99 x%s vs ungated"
                   % (kind, fmt(rt, 2), fmt(rp, 2)))
        targets.append(("saturation %s, %s max_active 2: TPS vs ungated" % (grp, kind),
                        "TPS x%s, p99 x%s" % (fmt(rt, 2), fmt(rp, 2)), "-"))
    n = best[kind][0]
    rt, rp = best[kind][3], best[kind][4]
    line = "- best %s (max_active %s): TPS x%s, p99 x%s vs ungated" % (kind, n, fmt(rt, 2), fmt(rp, 2))
    measured = "TPS x%s, p99 x%s vs ungated" % (fmt(rt, 2), fmt(rp, 2))
    if "pgbouncer" in best:
        pn = best["pgbouncer"][0]
        rb = runs.ratio("saturation", grp, kind, "tps", "pgbouncer", n, pn)
        rbp = runs.ratio("saturation", grp, kind, "p99_us", "pgbouncer", n, pn)
        line += "; TPS x%s, p99 x%s vs the best PgBouncer pool (%s)" % (fmt(rb, 2), fmt(rbp, 2), pn)
        measured += "; TPS x%s vs pool %s" % (fmt(rb, 2), pn)
    out.append(line)
    targets.append(("saturation %s, best %s (max_active %s)" % (grp, kind, n), measured, "-"))
    return out


def check(item, target, measured, ratio, ok):
    """One checked target of issue 28: a table row that starts with '#N' (lifo.sh
    collects these rows from every summary into its own)."""
    return ["#" + item, target, measured, ratio,
            "n/a" if ok is None else ("PASS" if ok else "MISS")]


def saturation_checks(runs, best, clients):
    """Item 3 of issue 28: pgbench -S, fair 'lifo' at B = 2 and at its best B."""
    out = []
    cell = "pgbench -S, %s clients" % clients
    if runs.select("saturation", "S", "lifo", "2"):
        rt = runs.ratio("saturation", "S", "lifo", "tps", "ungated", "2")
        out.append(check("3, " + cell, "'lifo' B = 2 TPS >= 0.85 x ungated",
                         "TPS %s against %s"
                         % (fmt(runs.median("saturation", "S", "lifo", "tps", "2")),
                            fmt(runs.median("saturation", "S", "ungated", "tps"))),
                         "%s x" % fmt(rt, 3), None if rt is None else rt >= 0.85))
    # the best B for each comparison: the highest ratio within repetitions
    sizes = [n for _, con, n in runs.contenders("saturation", "S") if con == "lifo" and n]
    ung = runs.median("saturation", "S", "ungated", "tps")
    rts = [(runs.ratio("saturation", "S", "lifo", "tps", "ungated", n), n) for n in sizes]
    rts = [x for x in rts if x[0] is not None]
    if rts:
        rt, n = max(rts)
        out.append(check("3, " + cell, "best 'lifo' TPS >= 1.0 x ungated",
                         "lifo B = %s: TPS %s against %s"
                         % (n, fmt(runs.median("saturation", "S", "lifo", "tps", n)), fmt(ung)),
                         "%s x" % fmt(rt, 3), rt >= 1.0))
    if "pgbouncer" in best:
        pn = best["pgbouncer"][0]
        rbs = [(runs.ratio("saturation", "S", "lifo", "tps", "pgbouncer", n, pn), n) for n in sizes]
        rbs = [x for x in rbs if x[0] is not None]
        if rbs:
            rb, n = max(rbs)
            out.append(check("3, " + cell, "best 'lifo' TPS >= 1.2 x the best pool's",
                             "lifo B = %s: TPS %s against pool %s: %s"
                             % (n, fmt(runs.median("saturation", "S", "lifo", "tps", n)), pn,
                                fmt(best["pgbouncer"][1])),
                             "%s x" % fmt(rb, 3), rb >= 1.2))
    return out


def waited_mean_us(runs, scn, grp, con, n):
    """Mean wait of the statements that waited (0 when none did)."""
    vals = []
    for r in runs.select(scn, grp, con, n):
        aw = fnum(r["admitted_after_wait"])
        tot = fnum(r["wait_time_total_ms"])
        if aw is not None and tot is not None:
            vals.append(tot * 1000.0 / aw if aw else 0.0)
    return med(vals)


def max_of(runs, scn, grp, con, n, col):
    vals = [fnum(r[col]) for r in runs.select(scn, grp, con, n)]
    vals = [v for v in vals if v is not None]
    return max(vals) if vals else None


def waited_fraction(runs, scn, grp, con, n):
    vals = []
    for r in runs.select(scn, grp, con, n):
        a = fnum(r["admitted"])
        aw = fnum(r["admitted_after_wait"])
        if a and aw is not None:
            vals.append(aw / a)
    return med(vals)


def main(argv):
    if len(argv) >= 2 and argv[1] == "lat":
        cmd_lat(argv[2:])
        return 0
    if len(argv) >= 4 and argv[1] == "cpu":
        cmd_cpu(argv[2:])
        return 0
    if len(argv) == 3 and argv[1] == "ticks":
        cmd_ticks(argv[2:])
        return 0
    if len(argv) == 3 and argv[1] == "server":
        cmd_server(argv[2:])
        return 0
    if len(argv) == 3 and argv[1] == "summary":
        return summarize(argv[2])
    sys.stderr.write(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
