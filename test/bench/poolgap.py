#!/usr/bin/env python3
"""Helpers of test/bench/poolgap.sh (python3 standard library only).

  poolgap.py window SECS PID...   /proc of the backends PID... before and after
                                  SECS seconds, and /proc/stat's procs_running
                                  every 10 ms in between -> one JSON line
  poolgap.py txstats T0 T1 LOG... transactions of pgbench's per-transaction
                                  logs that ended in [T0, T1) (epoch seconds):
                                  their number and latency percentiles, and
                                  whether the slowest 1 % cluster in time ->
                                  one JSON line
  poolgap.py trace FILE PID...    `perf script` text of sched_switch,
                                  sched_wakeup and dbgate's uprobes (gate()'s
                                  return, dbgate_admit_slow(),
                                  dbgate_admission_return()) -> one JSON line:
                                  for the backends PID..., the time spent on
                                  a CPU, runnable (waiting for a CPU) and
                                  asleep, in each phase: 'slot' (from gate()'s
                                  return to the slot's return), 'queued' (from
                                  dbgate_admit_slow() to gate()'s return) and
                                  'outside' (the rest); the mean number of
                                  backends running and runnable in each phase
  poolgap.py steady SKIP LOG...   "N P50 P99" (us) of the transactions that
                                  ended SKIP s or more after the first one
  poolgap.py diagrow ...          one diagnosis run's figures per transaction
                                  (a row of diag.csv; see cmd_diagrow)
  poolgap.py report OUT           OUT/runs.csv, OUT/diag.csv, OUT/meta.txt ->
                                  OUT/summary.md (printed)
"""
import csv
import json
import math
import os
import re
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from stats import fnum, med, percentile  # noqa: E402


def proc_one(pid):
    """utime+stime ticks, schedstat run/wait ns, voluntary and involuntary
    context switches of one process, or None when it is gone."""
    try:
        with open("/proc/%s/stat" % pid) as f:
            st = f.read()
        with open("/proc/%s/schedstat" % pid) as f:
            ss = f.read().split()
        vol = invol = 0
        with open("/proc/%s/status" % pid) as f:
            for line in f:
                if line.startswith("voluntary_ctxt_switches:"):
                    vol = int(line.split()[1])
                elif line.startswith("nonvoluntary_ctxt_switches:"):
                    invol = int(line.split()[1])
    except (OSError, IndexError):
        return None
    fields = st[st.rindex(")") + 2:].split()
    return {"ticks": int(fields[11]) + int(fields[12]), "run_ns": int(ss[0]),
            "wait_ns": int(ss[1]), "vol": vol, "invol": invol}


def procs_running():
    with open("/proc/stat") as f:
        for line in f:
            if line.startswith("procs_running"):
                return int(line.split()[1])
    return 0


def cmd_window(args):
    secs = float(args[0])
    pids = args[1:]
    before = {p: proc_one(p) for p in pids}
    t0 = time.time()
    samples = []
    end = t0 + secs
    while True:
        now = time.time()
        if now >= end:
            break
        # this sampler is one of the running processes while it reads
        samples.append(procs_running() - 1)
        time.sleep(0.01)
    t1 = time.time()
    after = {p: proc_one(p) for p in pids}
    tot = {"ticks": 0, "run_ns": 0, "wait_ns": 0, "vol": 0, "invol": 0}
    n = 0
    for p in pids:
        a, b = before[p], after[p]
        if a is None or b is None:
            continue
        n += 1
        for k in tot:
            tot[k] += b[k] - a[k]
    samples.sort()
    out = dict(tot)
    out.update({"t0": t0, "t1": t1, "pids": n,
                "runq_mean": statistics.mean(samples) if samples else float("nan"),
                "runq_p50": samples[len(samples) // 2] if samples else float("nan"),
                "runq_p90": samples[int(len(samples) * 0.9)] if samples else float("nan"),
                "runq_max": samples[-1] if samples else float("nan"),
                "runq_n": len(samples)})
    print(json.dumps(out))


def pct(vals, q):
    """The q-quantile (0..1) of vals (nearest rank), nan when empty."""
    return percentile(sorted(vals), q)


def txlog(paths):
    """(end in epoch seconds, latency in microseconds) of every completed
    transaction of pgbench's per-transaction logs (failed and skipped ones
    have no latency)."""
    rows = []
    for p in paths:
        with open(p) as f:
            for line in f:
                parts = line.split()
                if len(parts) < 6:
                    continue
                try:
                    rows.append((int(parts[4]) + int(parts[5]) / 1e6, int(parts[2])))
                except ValueError:
                    continue
    return rows


def cmd_steady(args):
    """SKIP LOG... -> "N P50 P99" (microseconds) of the transactions of
    pgbench's per-transaction logs that ended SKIP s or more after the
    first one ended: the run without its start, when every backend runs
    its first transactions with its caches still empty (and with a gate,
    holds a slot meanwhile)."""
    skip = float(args[0])
    rows = txlog(args[1:])
    if not rows:
        print("0 nan nan")
        return
    t0 = min(t for t, _ in rows)
    lat = sorted(us for t, us in rows if t >= t0 + skip)
    if not lat:
        print("0 nan nan")
        return
    print("%d %d %d" % (len(lat), percentile(lat, 0.5), percentile(lat, 0.99)))


def cmd_txstats(args):
    """T0 T1 LOG... -> one JSON line: the transactions of pgbench's logs
    that ended in [T0, T1), their latency's p50 / p90 / p99 / max (ms), and
    how the slowest 1 % spread over the window: the number of 100 ms bins
    that hold them against the number they would fill if spread evenly
    (a tail of stalls falls into few bins)."""
    t0, t1 = float(args[0]), float(args[1])
    rows = [(t, us) for t, us in txlog(args[2:]) if t0 <= t < t1]
    ends = [t for t, _ in rows]
    lat = [us / 1000.0 for _, us in rows]
    out = {"n": len(lat), "p50": pct(lat, 0.5), "p90": pct(lat, 0.9), "p99": pct(lat, 0.99),
           "max": max(lat) if lat else float("nan")}
    if lat:
        cut = out["p99"]
        tail = [e for e, l in zip(ends, lat) if l >= cut]
        bins = {int((e - t0) * 10) for e in tail}
        out["tail_n"] = len(tail)
        out["tail_bins"] = len(bins)
        out["bins"] = max(1, int(math.ceil((t1 - t0) * 10)))
    print(json.dumps(out))


SWITCH = re.compile(r"prev_pid=(\d+) .*prev_state=(\S+) ==> .*next_pid=(\d+)")
WAKEUP = re.compile(r"comm=.* pid=(\d+) ")
LINE = re.compile(r"^\s*(\d+)/(\d+)\s+([\d.]+):\s+(\S+):\s*(.*)$")
PHASES = ("outside", "queued", "slot")
STATES = ("cpu", "runnable", "asleep")


def cmd_trace(args):
    pids = set(args[1:])
    sched = {}   # pid -> state (cpu, runnable, asleep); unknown until seen
    phase = {p: "outside" for p in pids}
    acc = {ph: {s: 0.0 for s in STATES} for ph in PHASES}
    cnt = {ph: {s: 0.0 for s in STATES} for ph in PHASES}
    last = {}
    tfirst = tlast = None
    grants = slots = waits = 0
    # time-weighted counts of backends per phase and state: integrate the
    # current counts over the time between events
    counts = {ph: {s: 0 for s in STATES} for ph in PHASES}
    # a check of the accounting: the CPU time of every task (pid 0, the
    # idle tasks, left out) from the same switches, at most CPUs x span
    oncpu = {}
    allcpu = [0.0]
    # cycles: per backend, the time of its last slot return (a cycle starts
    # there), the time it has spent since in each phase, and in the slot
    # in each state
    cyc_start = {}
    cyc = {p: {s: 0.0 for s in STATES} for p in pids}
    cyc_dur = {p: {ph: 0.0 for ph in PHASES} for p in pids}
    phase_t = {}
    cycles = []
    queued_at = {}
    overtakes = [0]

    def account(p, t):
        if p in last and p in sched:
            acc[phase[p]][sched[p]] += t - last[p]
            if phase[p] == "slot":
                cyc[p][sched[p]] += t - last[p]
        last[p] = t

    def cycle_end(p, t):
        """p's slot went back at t (after move() to 'outside')."""
        if p in cyc_start:
            c = dict(cyc_dur[p])
            c["total"] = t - cyc_start[p]
            for s in STATES:
                c["slot_" + s] = cyc[p][s]
            cycles.append(c)
        cyc_start[p] = t
        cyc[p] = {s: 0.0 for s in STATES}
        cyc_dur[p] = {ph: 0.0 for ph in PHASES}

    def move(p, t, new_sched=None, new_phase=None):
        account(p, t)
        if p in sched:
            counts[phase[p]][sched[p]] -= 1
        if new_sched is not None:
            sched[p] = new_sched
        if new_phase is not None:
            if p in phase_t:
                cyc_dur[p][phase[p]] += t - phase_t[p]
            phase_t[p] = t
            phase[p] = new_phase
        if p in sched:
            counts[phase[p]][sched[p]] += 1

    with open(args[0]) as f:
        for line in f:
            m = LINE.match(line)
            if not m:
                continue
            pid, t, ev, rest = m.group(1), float(m.group(3)), m.group(4), m.group(5)
            if tfirst is None:
                tfirst = t
            if tlast is not None and t > tlast:
                dt = t - tlast
                for ph in PHASES:
                    for s in STATES:
                        cnt[ph][s] += counts[ph][s] * dt
            tlast = t
            if ev == "sched:sched_switch":
                sm = SWITCH.search(rest)
                if not sm:
                    continue
                prev, pstate, nxt = sm.group(1), sm.group(2), sm.group(3)
                if prev in oncpu:
                    allcpu[0] += t - oncpu.pop(prev)
                if nxt != "0":
                    oncpu[nxt] = t
                if prev in pids:
                    move(prev, t, "runnable" if pstate.startswith("R") else "asleep")
                if nxt in pids:
                    move(nxt, t, "cpu")
            elif ev == "sched:sched_wakeup":
                wm = WAKEUP.search(rest)
                if wm and wm.group(1) in pids and sched.get(wm.group(1)) == "asleep":
                    move(wm.group(1), t, "runnable")
            elif ev.startswith("probe_dbgate:") and pid in pids:
                if ev.startswith("probe_dbgate:gate"):
                    grants += 1
                    q = queued_at.pop(pid, None)
                    if q is not None and any(o < q for o in queued_at.values()):
                        overtakes[0] += 1
                    move(pid, t, new_phase="slot")
                elif ev == "probe_dbgate:dbgate_admit_slow":
                    waits += 1
                    queued_at[pid] = t
                    move(pid, t, new_phase="queued")
                elif ev == "probe_dbgate:dbgate_admission_return":
                    slots += 1
                    move(pid, t, new_phase="outside")
                    cycle_end(pid, t)
    for p in pids:
        if tlast is not None:
            account(p, tlast)
    span = (tlast - tfirst) if tfirst is not None else 0.0
    for p, t0 in oncpu.items():
        allcpu[0] += tlast - t0
    keys = list(PHASES) + ["total"] + ["slot_" + s for s in STATES]
    cy = {"n": len(cycles)}
    for k in keys:
        v = [c[k] * 1000.0 for c in cycles]
        cy[k] = {"p50": pct(v, 0.5), "p90": pct(v, 0.9), "p99": pct(v, 0.99),
                 "mean": statistics.mean(v) if v else float("nan")}
    cut = cy["total"]["p99"] / 1000.0
    tail = [c for c in cycles if c["total"] >= cut]
    cy["tail"] = {k: (statistics.mean(c[k] for c in tail) * 1000.0 if tail else float("nan"))
                  for k in keys}
    cy["tail"]["n"] = len(tail)
    out = {"span": span, "all_cpu": allcpu[0], "grants": grants, "returns": slots, "waits": waits,
           "overtakes": overtakes[0], "cycles": cy, "time": acc,
           "mean": {ph: {s: (cnt[ph][s] / span if span else float("nan"))
                         for s in STATES} for ph in PHASES}}
    print(json.dumps(out))


DIAG_KEYS = (["tps", "slot_ms", "cpu_ms", "run_ms", "wait_ms", "vol", "invol", "runq_mean",
              "runq_p90", "bouncer_ms", "pgbench_ms", "waited"]
             + ["t_%s_%s" % (ph, s) for ph in PHASES for s in STATES]
             + ["n_%s_%s" % (ph, s) for ph in PHASES for s in STATES]
             + ["lat_p50", "lat_p90", "lat_p99", "lat_max", "tail_bins_pct"]
             + ["c_%s_%s" % (k, q) for k in ("total",) + PHASES for q in ("p50", "p99")]
             + ["tail_%s" % k for k in ("total",) + PHASES + tuple("slot_" + s for s in STATES)]
             + ["overtakes_pct"])


def cmd_diagrow(args):
    """WINDOW_JSON TRACE_JSON TXSTATS_JSON STATUS0 STATUS1 CONTENDER HZ
    PGBENCH_TICKS BOUNCER_TICKS -> the figures per transaction of one
    diagnosis run, one CSV row (without arguments: the header)."""
    if not args:
        print(",".join(DIAG_KEYS))
        return
    w, tr = json.loads(args[0]), json.loads(args[1])
    tx = json.loads(args[2])
    ntx, s0, s1, c, hz = int(tx["n"]), args[3], args[4], args[5], int(args[6])
    pgb, bnc = int(args[7]), int(args[8])
    secs = w["t1"] - w["t0"]
    n = max(ntx, 1)

    def ms(ticks):
        return 1000.0 * ticks / hz / n
    out = {"tps": ntx / secs, "cpu_ms": ms(w["ticks"]), "run_ms": w["run_ns"] / 1e6 / n,
           "wait_ms": w["wait_ns"] / 1e6 / n, "vol": w["vol"] / n, "invol": w["invol"] / n,
           "runq_mean": w["runq_mean"], "runq_p90": w["runq_p90"], "pgbench_ms": ms(pgb),
           "bouncer_ms": ms(bnc) if c.startswith("bouncer-") else "", "waited": "", "slot_ms": ""}
    if s0 and s1:
        a0 = [float(x) for x in s0.split("|")[:3]]
        a1 = [float(x) for x in s1.split("|")[:3]]
        adm = a1[0] - a0[0]
        if adm > 0:
            out["slot_ms"] = (a1[2] - a0[2]) / adm
            out["waited"] = (a1[1] - a0[1]) / adm
    elif c.startswith("bouncer-"):
        out["slot_ms"] = 1000.0 * int(c.split("-")[1]) * secs / n
    span = tr.get("span") or 0
    # transactions in the trace: the gate's grants (one per transaction in
    # these cells), the pool's from the window's rate
    tx_trace = tr.get("grants") or out["tps"] * span
    for ph in PHASES:
        for s in STATES:
            t = tr.get("time", {}).get(ph, {}).get(s)
            out["t_%s_%s" % (ph, s)] = 1000.0 * t / tx_trace if t is not None and tx_trace else ""
            out["n_%s_%s" % (ph, s)] = tr.get("mean", {}).get(ph, {}).get(s, "")
    for q in ("p50", "p90", "p99", "max"):
        out["lat_" + q] = tx.get(q, "")
    # the share of the window's 100 ms bins that hold its slowest 1 % of
    # transactions, against the share they would fill if spread evenly
    out["tail_bins_pct"] = (100.0 * tx["tail_bins"] / min(tx["bins"], tx["tail_n"])
                            if tx.get("tail_n") else "")
    cy = tr.get("cycles") or {}
    for k in ("total",) + PHASES:
        for q in ("p50", "p99"):
            out["c_%s_%s" % (k, q)] = cy.get(k, {}).get(q, "") if cy.get("n") else ""
    for k in ("total",) + PHASES + tuple("slot_" + s for s in STATES):
        out["tail_" + k] = cy.get("tail", {}).get(k, "") if cy.get("n") else ""
    out["overtakes_pct"] = (100.0 * tr["overtakes"] / tr["grants"]
                            if tr.get("grants") and "overtakes" in tr else "")
    print(",".join(str(out[k]) for k in DIAG_KEYS))


# ----------------------------------------------------------------------------
# report

# fnum() and med(): stats.py's (the same directory)


def spread(vals, fmt):
    vals = [v for v in vals if v is not None]
    if not vals:
        return "n/a"
    m = statistics.median(vals)
    if len(vals) == 1:
        return fmt % m
    return (fmt + " (" + fmt + "–" + fmt + ")") % (m, min(vals), max(vals))


def cells_of(rows):
    order = []
    for r in rows:
        if r["cell"] not in order:
            order.append(r["cell"])
    return order


def best(rows, cell, prefix):
    """The contender of CELL starting with PREFIX with the highest median TPS."""
    by = {}
    for r in rows:
        if r["cell"] == cell and r["contender"].startswith(prefix) and r["status"] == "ok":
            by.setdefault(r["contender"], []).append(fnum(r["tps"]))
    if not by:
        return None
    return max(by, key=lambda c: med(by[c]) or 0)


def per_rep(rows, cell, contender, key):
    return {r["rep"]: fnum(r.get(key)) for r in rows
            if r["cell"] == cell and r["contender"] == contender and r["status"] == "ok"}


def ratio_spread(a, b, fmt="%.2f"):
    """Median (min–max) over repetitions of a[rep] / b[rep]."""
    rs = [a[k] / b[k] for k in a if k in b and a[k] is not None and b[k]]
    return spread(rs, fmt), med(rs)


CELL_ROWS = [
    # (row label, cell, gate prefix)
    ("TPC-B scale 1, 32 clients, 'fifo'", "tpcb-c32", "fifo-"),
    ("TPC-B scale 1, 32 clients, 'lifo'", "tpcb-c32", "lifo-"),
    ("TPC-B scale 1, 64 clients, 'fifo'", "tpcb-c64", "fifo-"),
    ("TPC-B scale 1, 64 clients, 'lifo'", "tpcb-c64", "lifo-"),
    ("TPC-B scale 1, 32 clients, 'fifo' not fair", "tpcb-c32", "nonfair-"),
    ("TPC-B scale 1, 64 clients, 'fifo' not fair", "tpcb-c64", "nonfair-"),
    ("pgbench -S scale 10, 64 clients, 'lifo'", "select-c64", "lifo-"),
    ("pgbench -S scale 10, 64 clients, 'fifo' not fair", "select-c64", "nonfair-"),
    ("pgbench -S -M prepared scale 10, 64 clients, 'lifo'", "selectp-c64", "lifo-"),
    ("pgbench -S -M prepared scale 10, 64 clients, 'fifo' not fair", "selectp-c64", "nonfair-"),
]


def cmd_report(args):
    out = args[0]
    with open(os.path.join(out, "runs.csv")) as f:
        rows = list(csv.DictReader(f))
    diag = []
    dpath = os.path.join(out, "diag.csv")
    if os.path.exists(dpath):
        with open(dpath) as f:
            diag = list(csv.DictReader(f))
    meta = {}
    with open(os.path.join(out, "meta.txt")) as f:
        for line in f:
            if "=" in line:
                k, v = line.rstrip("\n").split("=", 1)
                meta[k] = v
    L = []
    L.append("# The gate against PgBouncer at 32 and 64 clients (test/bench/poolgap.sh)")
    L.append("")
    for k in ("date", "machine", "PostgreSQL", "PgBouncer", "dbgate", "mode", "server",
              "load average at start", "load average at end"):
        if k in meta:
            L.append("- %s: %s" % (k, meta[k]))
    L.append("")
    L.append("## Throughput and p99")
    L.append("")
    L.append("Medians over repetitions (smallest–largest); a ratio is the median of the "
             "ratios within each repetition.  `other CPU %`: what other processes used "
             "meanwhile, median over the cell's runs (smallest–largest).")
    L.append("")
    L.append("`p99 after 1 s`: the p99 of the transactions that ended 1 s or more after "
             "the run's first one (without every backend's first transactions, caches empty).")
    L.append("")
    L.append("| case | ungated TPS, p99 ms | best budget: TPS × ungated, p99 ms | best pool: TPS × ungated, p99 ms | budget / pool TPS | p99 budget / pool | p99 after 1 s: budget / pool | other CPU % |")
    L.append("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for label, cell, prefix in CELL_ROWS:
        if not any(r["cell"] == cell for r in rows):
            continue
        g = best(rows, cell, prefix)
        b = best(rows, cell, "bouncer-")
        u = per_rep(rows, cell, "ungated", "tps")
        up = per_rep(rows, cell, "ungated", "p99_ms")
        oth = [fnum(r["other_cpu_pct"]) for r in rows if r["cell"] == cell]
        cols = ["%s, %s" % (spread(list(u.values()), "%.0f"), spread(list(up.values()), "%.1f"))]
        for c in (g, b):
            if c is None:
                cols.append("n/a")
                continue
            t = per_rep(rows, cell, c, "tps")
            p = per_rep(rows, cell, c, "p99_ms")
            cols.append("%s: %s, %s" % (c, ratio_spread(t, u)[0], spread(list(p.values()), "%.1f")))
        if g and b:
            cols.append("**%s**" % ratio_spread(per_rep(rows, cell, g, "tps"), per_rep(rows, cell, b, "tps"))[0])
            cols.append(ratio_spread(per_rep(rows, cell, g, "p99_ms"), per_rep(rows, cell, b, "p99_ms"))[0])
            cols.append(ratio_spread(per_rep(rows, cell, g, "p99_steady_ms"),
                                     per_rep(rows, cell, b, "p99_steady_ms"))[0])
        else:
            cols += ["n/a", "n/a", "n/a"]
        cols.append(spread(oth, "%.0f"))
        L.append("| %s | %s |" % (label, " | ".join(cols)))
    L.append("")
    L.append("Every contender of a cell (median TPS, its ratio to the ungated server within each repetition):")
    L.append("")
    L.append("| cell | contender | TPS | × ungated | p99 ms | p50 ms | p99 after 1 s | p50 after 1 s |")
    L.append("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for cell in cells_of(rows):
        u = per_rep(rows, cell, "ungated", "tps")
        seen = []
        for r in rows:
            if r["cell"] == cell and r["contender"] not in seen:
                seen.append(r["contender"])
        for c in seen:
            t = per_rep(rows, cell, c, "tps")
            L.append("| %s | %s | %s | %s | %s | %s | %s | %s |" % (
                cell, c, spread(list(t.values()), "%.0f"), ratio_spread(t, u)[0],
                spread(list(per_rep(rows, cell, c, "p99_ms").values()), "%.1f"),
                spread(list(per_rep(rows, cell, c, "p50_ms").values()), "%.2f"),
                spread(list(per_rep(rows, cell, c, "p99_steady_ms").values()), "%.1f"),
                spread(list(per_rep(rows, cell, c, "p50_steady_ms").values()), "%.2f")))
    if diag:
        L.append("")
        L.append("## Where a slot's time goes (64 clients, the same B)")
        L.append("")
        L.append("Per transaction, medians over the diagnosis repetitions (smallest–largest). "
                 "From /proc over a window of each run: the backends' CPU (utime+stime; "
                 "`sched cpu`: schedstat's run time), their time runnable but waiting for a CPU "
                 "(schedstat), context switches (voluntary / involuntary), the run queue "
                 "(procs_running sampled every 10 ms, the sampler not counted); PgBouncer's and "
                 "pgbench's CPU.  `slot ms`: the gate's active_time_total / admitted, the pool's "
                 "B × window / transactions (a server connection's time per transaction).  From "
                 "a trace of sched_switch, sched_wakeup and dbgate's uprobes over a shorter "
                 "window: the backends' time on a CPU / runnable / asleep in the slot, queued and "
                 "outside (the pool's backends pass no gate: all their time shows as 'outside'), and the mean number of backends "
                 "running and runnable in each phase.")
        L.append("")
        cols = [("tps", "TPS", "%.0f"), ("slot_ms", "slot ms", "%.3f"),
                ("cpu_ms", "backend CPU ms", "%.3f"), ("run_ms", "sched cpu ms", "%.3f"),
                ("wait_ms", "runnable ms", "%.3f"), ("vol", "vol. cs", "%.2f"),
                ("invol", "invol. cs", "%.2f"), ("runq_mean", "run queue mean", "%.1f"),
                ("runq_p90", "run queue p90", "%.0f"), ("bouncer_ms", "PgBouncer CPU ms", "%.3f"),
                ("pgbench_ms", "pgbench CPU ms", "%.3f"), ("waited", "waited fraction", "%.2f"),
                ("other_cpu_pct", "other CPU %", "%.0f")]
        L.append("| cell | side | " + " | ".join(c[1] for c in cols) + " |")
        L.append("| --- | --- |" + " --- |" * len(cols))
        keys = []
        for r in diag:
            if (r["cell"], r["contender"]) not in keys:
                keys.append((r["cell"], r["contender"]))
        for cell, c in keys:
            rs = [r for r in diag if r["cell"] == cell and r["contender"] == c]
            L.append("| %s | %s | " % (cell, c) + " | ".join(
                spread([fnum(r.get(k)) for r in rs], fmt) for k, _, fmt in cols) + " |")
        L.append("")
        L.append("Trace: ms per transaction of the backends in each phase and state; "
                 "in brackets the mean number of backends in that phase and state.")
        L.append("")
        tcols = []
        for ph in PHASES:
            for s in STATES:
                tcols.append((ph, s))
        L.append("| cell | side | " + " | ".join("%s %s" % t for t in tcols) + " |")
        L.append("| --- | --- |" + " --- |" * len(tcols))
        for cell, c in keys:
            rs = [r for r in diag if r["cell"] == cell and r["contender"] == c]
            vals = []
            for ph, s in tcols:
                v = [fnum(r.get("t_%s_%s" % (ph, s))) for r in rs]
                n = [fnum(r.get("n_%s_%s" % (ph, s))) for r in rs]
                vals.append("%s [%s]" % (spread(v, "%.3f"), spread(n, "%.1f")))
            L.append("| %s | %s | %s |" % (cell, c, " | ".join(vals)))
        L.append("")
        L.append("The tail: the latency of the transactions that ended in the window "
                 "(pgbench's log; ms), the share of the window's 100 ms bins that hold its "
                 "slowest 1 % against an even spread (100: spread; low: stalls), and from the "
                 "trace, per cycle of a backend (one slot return to the next: one transaction) "
                 "its length and its time outside the slot, queued and in the slot (p50 / p99, "
                 "ms); what the slowest 1 % of cycles spent in each (mean ms; in the slot: on a "
                 "CPU / runnable / asleep); the share of grants that went to a backend that "
                 "queued after another still queued.")
        L.append("")
        tl = [("lat", "latency p50 / p90 / p99 / max"), ("bins", "tail bins %"),
              ("c_total", "cycle"), ("c_outside", "outside"), ("c_queued", "queued"),
              ("c_slot", "slot"), ("tail", "slowest 1 %: outside / queued / slot (cpu / runnable / asleep)"),
              ("ot", "overtakes %")]
        L.append("| cell | side | " + " | ".join(t[1] for t in tl) + " |")
        L.append("| --- | --- |" + " --- |" * len(tl))

        def sp(rs, k, fmt="%.1f"):
            return spread([fnum(r.get(k)) for r in rs], fmt)
        for cell, c in keys:
            rs = [r for r in diag if r["cell"] == cell and r["contender"] == c]
            vals = [" / ".join(sp(rs, "lat_" + q) for q in ("p50", "p90", "p99", "max")),
                    sp(rs, "tail_bins_pct", "%.0f")]
            for k in ("total",) + PHASES:
                vals.append("%s / %s" % (sp(rs, "c_%s_p50" % k, "%.2f"), sp(rs, "c_%s_p99" % k, "%.2f")))
            vals.append("%s / %s / %s (%s / %s / %s)" % tuple(
                sp(rs, "tail_" + k) for k in PHASES + tuple("slot_" + s for s in STATES)))
            vals.append(sp(rs, "overtakes_pct", "%.1f"))
            L.append("| %s | %s | %s |" % (cell, c, " | ".join(vals)))
        tops = sorted(f for f in os.listdir(os.path.join(out, "raw")) if f.startswith("perf-") and f.endswith(".top"))
        if tops:
            L.append("")
            L.append("## perf (cpu-clock, system-wide): top entries of the first repetition")
            for t in tops:
                if "-r1." not in t:
                    continue
                L.append("")
                L.append("`%s`:" % t[:-4])
                L.append("")
                L.append("```")
                with open(os.path.join(out, "raw", t)) as f:
                    L.extend(line.rstrip("\n") for line in f)
                L.append("```")
    text = "\n".join(L) + "\n"
    with open(os.path.join(out, "summary.md"), "w") as f:
        f.write(text)
    sys.stdout.write(text)


def main():
    cmd, args = sys.argv[1], sys.argv[2:]
    {"window": cmd_window, "txstats": cmd_txstats, "steady": cmd_steady, "trace": cmd_trace,
     "diagrow": cmd_diagrow, "report": cmd_report}[cmd](args)


if __name__ == "__main__":
    main()
