#!/usr/bin/env python3
"""Summaries of the 1.2 benchmark scripts (python3 standard library only).

  report.py tpcb OUT OVERTAKE_MS   tpcb.sh:    OUT/runs.csv -> OUT/summary.md
  report.py shares OUT             shares.sh:  OUT/runs.csv, OUT/samples-*.txt
  report.py rate OUT               rate.sh:    OUT/runs.csv
  report.py monitor-data OUT O     monitor.sh: OUT/raw/samples-O.txt ->
                                   OUT/queue-O.dat, OUT/hist-O.dat
  report.py monitor OUT            monitor.sh: OUT/summary.md
  report.py tavg FILE BUDGET T0 T1 time-averaged active and queued of BUDGET
                                   between two epochs of a sample file
  report.py firsts TXLOG...        the first transaction of every client of a
                                   pgbench per-transaction log

Every summary is printed and written to OUT/summary.md.  A figure is the
median over the repetitions, with the smallest and largest value beside it
("spread"); a ratio is the median of the ratios taken within each
repetition, whose contenders ran back to back.

Sample files (lib.sh sampler_start) have one line per budget every ~100 ms:
epoch|budget|active|queued|oldest_wait|admitted|admitted_after_wait|
rate_limited|active_time_total|cumulative histogram counts for le_ms 0.1 0.5
1 5 10 50 100 500 1000 5000 10000 Infinity.
"""
import csv
import math
import os
import statistics
import sys

LE_MS = [0.1, 0.5, 1, 5, 10, 50, 100, 500, 1000, 5000, 10000, math.inf]


# ----------------------------------------------------------------------------
# helpers

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
    return "%.*f" % (nd, v)


def spread(vals, nd=0):
    """'median (min–max)' of the values that are not None."""
    vals = [v for v in vals if v is not None]
    if not vals:
        return "n/a"
    m = statistics.median(vals)
    if len(vals) == 1:
        return fmt(m, nd)
    return "%s (%s–%s)" % (fmt(m, nd), fmt(min(vals), nd), fmt(max(vals), nd))


def table(header, rows):
    out = ["| " + " | ".join(header) + " |",
           "|" + "|".join(" --- " for _ in header) + "|"]
    for r in rows:
        out.append("| " + " | ".join(r) + " |")
    return out


def read_rows(path):
    with open(path) as f:
        return list(csv.DictReader(f))


def read_meta(outdir):
    meta = []
    path = os.path.join(outdir, "meta.txt")
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                line = line.rstrip("\n")
                if "=" in line:
                    meta.append(tuple(line.split("=", 1)))
    return meta


def header(md, title, outdir, note=None):
    md.append("# " + title)
    md.append("")
    for k, v in read_meta(outdir):
        md.append("- %s: %s" % (k, v))
    md.append("")
    if note:
        md.append(note)
        md.append("")


def finish(md, outdir):
    text = "\n".join(md) + "\n"
    with open(os.path.join(outdir, "summary.md"), "w") as f:
        f.write(text)
    sys.stdout.write(text)


def anomalies(md, rows, key):
    bad = [r for r in rows if r.get("status", "ok") != "ok" or r.get("note")]
    md.append("## Anomalies")
    md.append("")
    if not bad:
        md.append("none: every run finished without errors and the gate's counters "
                  "were consistent.")
    else:
        md += table(["run", "rep", "status", "note"],
                    [[key(r), r.get("rep", ""), r.get("status", ""), r.get("note", "")]
                     for r in bad])
    md.append("")
    return 1 if bad else 0


def check(item, target, measured, ratio, ok):
    """One checked target of issue 28: a table row that starts with '#N' (lifo.sh
    collects these rows from every summary into its own)."""
    return ["#" + item, target, measured, ratio,
            "n/a" if ok is None else ("PASS" if ok else "MISS")]


def checks_section(md, checks):
    if checks:
        md.append("## Targets of issue 28")
        md.append("")
        md += table(["item", "target", "measured", "ratio", "verdict"], checks)
        md.append("")


def hist_quantile(counts, q):
    """Upper bound (le_ms) of the bucket holding quantile q of a cumulative
    histogram; None when it is empty."""
    if not counts or counts[-1] <= 0:
        return None
    need = q * counts[-1]
    for le, c in zip(LE_MS, counts):
        if c >= need:
            return le
    return math.inf


def fmt_le(le):
    if le is None:
        return "n/a"
    if le == math.inf:
        return "> 10000"
    return "<= %g" % le


# ----------------------------------------------------------------------------
# samples

T, ACTIVE, QUEUED, OLDEST, ADMITTED, AFTER_WAIT, RATE_LIMITED, ACTIVE_MS, HIST = range(9)


class Samples:
    """Samples of dbgate.status per budget: lists of (t, active, queued,
    oldest_wait, admitted, admitted_after_wait, rate_limited,
    active_time_total, hist); the indexes are named above."""

    def __init__(self, path):
        self.by = {}
        with open(path) as f:
            for line in f:
                p = line.rstrip("\n").split("|")
                if len(p) < 10:
                    continue
                try:
                    t = float(p[0])
                    vals = (t, int(p[2]), int(p[3]), float(p[4]), int(p[5]),
                            int(p[6]), int(p[7]), float(p[8]),
                            [int(x) for x in p[9].split()] if p[9] else [])
                except ValueError:
                    continue
                self.by.setdefault(p[1], []).append(vals)

    def window(self, budget, t0, t1):
        return [s for s in self.by.get(budget, []) if t0 <= s[0] <= t1]

    def tavg(self, budget, t0, t1, col):
        """Time-weighted average of a column (1 = active, 2 = queued)
        between t0 and t1: each sample holds until the next one."""
        s = self.window(budget, t0, t1)
        if len(s) < 2:
            return None
        tot = 0.0
        for a, b in zip(s, s[1:]):
            tot += a[col] * (b[0] - a[0])
        return tot / (s[-1][0] - s[0][0])

    def count(self, budget, t0, t1):
        return len(self.window(budget, t0, t1))

    def rate(self, budget, t0, t1, col):
        """Growth of a counter per second between the first and the last
        sample in [t0, t1]: admissions per second (ADMITTED), or the
        time-averaged number of slots held (ACTIVE_MS: slot-milliseconds
        per millisecond, exact up to the statements running at the edges)."""
        s = self.window(budget, t0, t1)
        if len(s) < 2 or s[-1][0] <= s[0][0]:
            return None
        d = s[-1][col] - s[0][col]
        secs = s[-1][0] - s[0][0]
        return d / secs / (1000.0 if col == ACTIVE_MS else 1.0)

    def first(self, budget, t0, pred):
        """The first sample at or after t0 that satisfies pred."""
        for s in self.by.get(budget, []):
            if s[0] >= t0 and pred(s):
                return s
        return None


# ----------------------------------------------------------------------------
# pgbench per-transaction logs

def read_txlog(paths):
    """(client, transaction_no, latency_us, end_epoch_s) of every logged
    transaction; pgbench's line: client_id transaction_no time script_no
    time_epoch time_us [...], time = latency in microseconds."""
    out = []
    for p in paths:
        with open(p) as f:
            for line in f:
                w = line.split()
                if len(w) < 6:
                    continue
                try:
                    out.append((int(w[0]), int(w[1]), int(w[2]),
                                int(w[4]) + int(w[5]) / 1e6))
                except ValueError:
                    continue
    return out


def cmd_firsts(paths):
    """First transaction of every client: "first_ms p50_ms max_ms n start end"
    (first_ms: latency of the first transaction to finish; start: when the
    earliest of them began, end: when the last of them finished, epochs)."""
    tx = read_txlog(paths)
    first = {}
    for c, n, lat, end in tx:
        if c not in first or n < first[c][0]:
            first[c] = (n, lat, end)
    if not first:
        print("nan nan nan 0 nan nan")
        return 0
    lats = sorted(v[1] / 1000.0 for v in first.values())
    by_end = min(first.values(), key=lambda v: v[2])
    start = min(v[2] - v[1] / 1e6 for v in first.values())
    end = max(v[2] for v in first.values())
    print("%.3f %.3f %.3f %d %.6f %.6f" % (by_end[1] / 1000.0, statistics.median(lats),
                                           lats[-1], len(lats), start, end))
    return 0


# ----------------------------------------------------------------------------
# tpcb.sh

def cmd_tpcb(outdir, overtake_ms):
    rows = read_rows(os.path.join(outdir, "runs.csv"))
    limit = float(overtake_ms) + 100.0
    md = []
    header(md, "TPC-B-like through dbgate ('fifo' and 'lifo') and PgBouncer", outdir,
           "Figures are medians over the repetitions, with their range; ratios are "
           "medians of the ratios within each repetition (every contender of a "
           "repetition runs back to back).  p99 is per transaction.")
    points = sorted({(int(r["scale"]), int(r["clients"])) for r in rows})
    checks = []
    for scale, clients in points:
        rs = [r for r in rows if int(r["scale"]) == scale and int(r["clients"]) == clients
              and r.get("status", "ok") == "ok"]
        order = []
        for r in rs:
            if r["contender"] not in order:
                order.append(r["contender"])
        reps = sorted({r["rep"] for r in rs}, key=int)
        by = {(r["contender"], r["rep"]): r for r in rs}

        def ratio(c, base, col):
            v = []
            for k in reps:
                if (c, k) in by and (base, k) in by:
                    a, b = fnum(by[(c, k)][col]), fnum(by[(base, k)][col])
                    if a is not None and b:
                        v.append(a / b)
            return med(v)

        def col(c, name):
            return [fnum(r[name]) for r in rs if r["contender"] == c]

        md.append("## scale %d, %d clients (%d repetitions)" % (scale, clients, len(reps)))
        md.append("")
        trows = []
        for c in order:
            wm = col(c, "wait_max_ms")
            trows.append([c, spread(col(c, "tps")), fmt(ratio(c, "ungated", "tps"), 2),
                          spread(col(c, "p99_ms"), 1), fmt(ratio(c, "ungated", "p99_ms"), 2),
                          "/".join(r["admitted_lock_holder"] for r in rs
                                   if r["contender"] == c and r["admitted_lock_holder"]) or "-",
                          "/".join(fmt(v, 1) for v in wm if v is not None) or "-",
                          "/".join(r["admitted_overdue"] for r in rs
                                   if r["contender"] == c and r["admitted_overdue"]) or "-",
                          fmt(med(col(c, "other_cpu_pct")))])
        md += table(["contender", "TPS (range)", "× ungated", "p99 ms (range)", "× ungated",
                     "lock-holder admissions", "longest wait ms", "overdue admissions",
                     "other CPU %"], trows)
        md.append("")

        def best(prefixes):
            cs = [c for c in order if c.startswith(prefixes)]
            cs = [c for c in cs if ratio(c, "ungated", "tps") is not None]
            return max(cs, key=lambda c: ratio(c, "ungated", "tps")) if cs else None

        pb = best(("bouncer-",))
        for label, prefixes in (("fifo", ("stmt-", "tx-")), ("lifo", ("lifo-",))):
            b = best(prefixes)
            if b is None:
                continue
            rt, rp = ratio(b, "ungated", "tps"), ratio(b, "ungated", "p99_ms")
            line = ("- best '%s' point %s: TPS %s × ungated, p99 %s × ungated"
                    % (label, b, fmt(rt, 2), fmt(rp, 2)))
            if pb:
                line += ("; TPS %s ×, p99 %s × the best PgBouncer pool (%s)"
                         % (fmt(ratio(b, pb, "tps"), 2), fmt(ratio(b, pb, "p99_ms"), 2), pb))
            md.append(line)
            if label == "fifo":
                floor = [ratio(c, "ungated", "tps") for c in order if c.startswith(prefixes)
                         and int(c.rsplit("-", 1)[1]) >= 4]
                floor = [v for v in floor if v is not None]
                if floor:
                    md.append("- every 'fifo' point with B >= 4 at >= 0.8 × ungated TPS: %s "
                              "(lowest %s)" % ("met" if min(floor) >= 0.8 else "missed",
                                               fmt(min(floor), 2)))
        lifo = [c for c in order if c.startswith("lifo-")]
        if lifo:
            over = [(c, r["rep"], fnum(r["wait_max_ms"])) for c in lifo for r in rs
                    if r["contender"] == c and fnum(r["wait_max_ms"]) is not None]
            worst = max(over, key=lambda x: x[2]) if over else None
            n_over = sum(1 for x in over if x[2] > limit)
            md.append("- 'lifo' longest waits against overtake_limit + 100 ms = %g ms: "
                      "%d of %d runs above%s"
                      % (limit, n_over, len(over),
                         "; the longest %s ms (%s, rep %s)" % (fmt(worst[2], 1), worst[0], worst[1])
                         if worst else ""))
            pairs = []
            for c in lifo:
                f = c[len("lifo-"):]
                if f in order:
                    pairs.append("%s %s/%s" % (f, fmt(ratio(c, f, "tps"), 2),
                                               fmt(ratio(c, f, "p99_ms"), 2)))
            if pairs:
                md.append("- 'lifo' against 'fifo' at the same B and scope (TPS / p99 ratio): "
                          + ", ".join(pairs))
        md.append("")
        checks += tpcb_checks(order, ratio, col, pb, "scale %d, %d clients" % (scale, clients),
                              float(overtake_ms))
    checks_section(md, checks)
    rc = anomalies(md, rows, lambda r: "s%s-c%s-%s" % (r["scale"], r["clients"], r["contender"]))
    finish(md, outdir)
    return rc


def tpcb_checks(order, ratio, col, pb, cell, overtake):
    """Items 1 and 2 of issue 28 for one cell (scale, clients)."""
    out = []
    fifo = [c for c in order if c.startswith(("stmt-", "tx-"))]
    lifo = [c for c in order if c.startswith("lifo-")]
    if pb and fifo:
        # the lowest p99 among the 'fifo' points at >= 1.0 x the best pool's
        # TPS; if none gets there, the one closest in TPS
        cand = [c for c in fifo if (ratio(c, pb, "tps") or 0) >= 1.0
                and ratio(c, pb, "p99_ms") is not None]
        if cand:
            b = min(cand, key=lambda c: ratio(c, pb, "p99_ms"))
        else:
            b = max(fifo, key=lambda c: ratio(c, pb, "tps") or 0)
        rt, rp = ratio(b, pb, "tps"), ratio(b, pb, "p99_ms")
        ok = None if rt is None or rp is None else (rt >= 1.0 and rp <= 1.0)
        out.append(check("1 fifo, " + cell,
                         "best 'fifo' p99 <= best pool's (%s) at TPS >= 1.0 x" % pb,
                         "%s: TPS %s x the pool's, p99 %s ms against %s ms"
                         % (b, fmt(rt, 2), fmt(med(col(b, "p99_ms")), 1),
                            fmt(med(col(pb, "p99_ms")), 1)),
                         "p99 %s x" % fmt(rp, 3), ok))
    if pb and lifo:
        b = max(lifo, key=lambda c: ratio(c, pb, "tps") or 0)
        rt = ratio(b, pb, "tps")
        out.append(check("1 lifo, " + cell,
                         "best 'lifo' TPS >= 1.05 x the best pool's (%s)" % pb,
                         "%s: TPS %s against %s, p99 %s ms"
                         % (b, fmt(med(col(b, "tps"))), fmt(med(col(pb, "tps"))),
                            fmt(med(col(b, "p99_ms")), 1)),
                         "%s x" % fmt(rt, 3), None if rt is None else rt >= 1.05))
    worst = None
    for c in lifo:
        f = c[len("lifo-"):]
        lw, fw = med(col(c, "wait_max_ms")), med(col(f, "wait_max_ms"))
        if f not in order or lw is None or fw is None:
            continue
        r = lw / (fw + overtake)
        if worst is None or r > worst[0]:
            worst = (r, c, lw, f, fw)
    if worst:
        r, c, lw, f, fw = worst
        out.append(check("2, " + cell,
                         "'lifo' wait_time_max <= 'fifo' one's + overtake_limit, every B and scope",
                         "worst %s: %s ms against %s %s ms + %g ms"
                         % (c, fmt(lw, 1), f, fmt(fw, 1), overtake),
                         "%s x" % fmt(r, 3), r <= 1.0))
    return out


# ----------------------------------------------------------------------------
# shares.sh

def per_rep(rows, scenario, contender, group=""):
    return {r["rep"]: r for r in rows if r["scenario"] == scenario
            and r.get("group", "") == group and r["contender"] == contender
            and r["status"] == "ok"}


def samples_of(outdir, scenario, contender, rep, group=""):
    path = os.path.join(outdir, "raw", "samples-%s-%s%s-r%s.txt"
                        % (scenario, group + "-" if group else "", contender, rep))
    return Samples(path) if os.path.exists(path) else None


def verdict(v, ok):
    return "n/a" if v is None else ("met" if ok else "missed")


def cmd_shares(outdir):
    rows = read_rows(os.path.join(outdir, "runs.csv"))
    md = []
    header(md, "Parent budgets: shares, work conservation, bulkhead with borrowing", outdir,
           "Every figure: median over the repetitions (smallest–largest).  "
           "'sampled' averages come from dbgate.status sampled every ~100 ms, each "
           "sample weighted by the time until the next; 'exact' ones from the growth "
           "of active_time_total (slot-milliseconds of the statements that ended) "
           "over the same window.  Ratios are taken within each repetition.")
    targets = []
    groups = []
    for r in rows:
        if r["scenario"] == "shares" and r["group"] not in groups:
            groups.append(r["group"])
    for g in groups:
        shares_section(md, targets, outdir, rows, g)
    bulkhead_section(md, targets, outdir, rows)
    checks = reserve_section(md, outdir, rows)
    checks_section(md, checks)
    if targets:
        md.append("## Targets (informational)")
        md.append("")
        md += table(["figure", "measured", "verdict"], [list(t) for t in targets])
        md.append("")
    rc = anomalies(md, rows, lambda r: "%s %s %s" % (r["scenario"], r["group"], r["contender"]))
    finish(md, outdir)
    return rc


STATEMENT_NAMES = {"cpu": "the ~1 ms range sum (CPU)",
                   "sleep": "SELECT pg_sleep(0.001) (holds its slot without a CPU)"}


def shares_section(md, targets, outdir, rows, g):
    tree = per_rep(rows, "shares", "tree", g)
    flat = per_rep(rows, "shares", "flat", g)
    a8 = per_rep(rows, "shares", "a8", g)
    if tree:
        alone_s, alone_x, a_s, b_s, sum_s, a_x, b_x, thr = [], [], [], [], [], [], [], {}
        hist_p99, first, first_p50, first_max = [], [], [], []
        for rep, r in tree.items():
            sm = samples_of(outdir, "shares", "tree", rep, g)
            if sm is None:
                continue
            t0, t1, t2 = float(r["t0"]), float(r["t1"]), float(r["t2"])
            alone_s.append(sm.tavg("a", t0 + 1, t1, ACTIVE))
            alone_x.append(sm.rate("a", t0 + 1, t1, ACTIVE_MS))
            w0, w1 = t1 + 1, t2 - 0.5
            a, b = sm.tavg("a", w0, w1, ACTIVE), sm.tavg("b", w0, w1, ACTIVE)
            a_s.append(a)
            b_s.append(b)
            sum_s.append(sm.tavg("shares", w0, w1, ACTIVE))
            a_x.append(sm.rate("a", w0, w1, ACTIVE_MS))
            b_x.append(sm.rate("b", w0, w1, ACTIVE_MS))
            ra, rb = sm.rate("a", w0, w1, ADMITTED), sm.rate("b", w0, w1, ADMITTED)
            if ra is not None and rb is not None:
                thr[rep] = ra + rb
            fs = sm.first("b", t1, lambda x: x[ADMITTED] > 0)
            if fs is not None:
                hist_p99.append(hist_quantile(fs[HIST], 0.99))
            first.append(fnum(r["first_b_ms"]))
            first_p50.append(fnum(r["first_b_p50_ms"]))
            first_max.append(fnum(r["first_b_max_ms"]))
        ncli = next(iter(tree.values()))["first_b_n"]
        md.append("## Shares: A (weight 3) and B (weight 1), each max_active 8, under a "
                  "parent of 8; statement: %s" % STATEMENT_NAMES.get(g, g))
        md.append("")
        sum_x = [x + y for x, y in zip(a_x, b_x) if x is not None and y is not None]
        md += table(["time-averaged active", "sampled", "exact", "target"], [
            ["A alone (before B starts)", spread(alone_s, 2), spread(alone_x, 2), "8 (work-conserving)"],
            ["A while both run", spread(a_s, 2), spread(a_x, 2), "6 ± 0.5"],
            ["B while both run", spread(b_s, 2), spread(b_x, 2), "2 ± 0.5"],
            ["sum (parent's active)", spread(sum_s, 2), spread(sum_x, 2), ">= 7.6"],
        ])
        md.append("")
        for how, (ma, mb, msum) in (("sampled", (med(a_s), med(b_s), med(sum_s))),
                                    ("exact", (med(a_x), med(b_x), med(sum_x)))):
            targets.append(("%s: A's time-averaged active 6 ± 0.5 (%s)" % (g, how), fmt(ma, 2),
                            verdict(ma, ma is not None and abs(ma - 6) <= 0.5)))
            targets.append(("%s: B's time-averaged active 2 ± 0.5 (%s)" % (g, how), fmt(mb, 2),
                            verdict(mb, mb is not None and abs(mb - 2) <= 0.5)))
            targets.append(("%s: sum of A and B >= 7.6 (%s)" % (g, how), fmt(msum, 2),
                            verdict(msum, msum is not None and msum >= 7.6)))
        a8p99 = [fnum(r["p99_a_ms"]) for r in a8.values()]
        a8p50 = [fnum(r["p50_a_ms"]) for r in a8.values()]
        md.append("### Work-conserving: B starts while A floods")
        md.append("")
        md += table(["figure", "ms"], [
            ["A's statement time with 8 clients through the tree (no queue in A): p50",
             spread(a8p50, 2)],
            ["the same, p99", spread(a8p99, 2)],
            ["A's latency over the whole tree run, queue waits included: p99",
             spread([fnum(r["p99_a_ms"]) for r in tree.values()], 2)],
            ["B's first admission: latency of the first B transaction to finish "
             "(wait + run)", spread(first, 2)],
            ["first transaction of each of B's %s clients: median" % ncli, spread(first_p50, 2)],
            ["the same, the last of them", spread(first_max, 2)],
            ["B's wait_histogram at its first sample with an admission (~100 ms "
             "after B started): p99 bucket", " / ".join(fmt_le(h) for h in hist_p99) or "n/a"],
        ])
        md.append("")
        mf, ma8 = med(first), med(a8p99)
        targets.append(("%s: B's first admission within A's p99 statement time" % g, "%s ms vs %s ms"
                        % (fmt(mf, 2), fmt(ma8, 2)),
                        verdict(mf, mf is not None and ma8 is not None and mf <= ma8)))
        md.append("B's %s clients start at once and share B's weight: after its first "
                  "admissions B holds about 2 of the 8 slots, so its later clients wait "
                  "in B's own queue (the 'last of them' row)." % ncli)
        md.append("")
        if flat:
            ratios, fthr = [], []
            for rep, r in flat.items():
                sm = samples_of(outdir, "shares", "flat", rep, g)
                if sm is None:
                    continue
                t1, t2 = float(r["t1"]), float(r["t2"])
                f = sm.rate("flat", t1 + 1, t2 - 0.5, ADMITTED)
                fthr.append(f)
                if f and rep in thr:
                    ratios.append(thr[rep] / f)
            md.append("### Throughput: A + B through the parent against one budget of 8")
            md.append("")
            md += table(["contender", "admissions per second while both run"], [
                ["tree (a, b under shares)", spread(list(thr.values()))],
                ["flat (one budget of 8)", spread(fthr)],
                ["tree / flat (within each repetition)", spread(ratios, 3)],
            ])
            md.append("")
            targets.append(("%s: throughput tree / flat" % g, fmt(med(ratios), 3), "-"))


def reserve_section(md, outdir, rows):
    """Scenario reserve (1.3): item 4 of issue 28.  Returns its checks."""
    skipped = os.path.join(outdir, "reserve-skipped.txt")
    if os.path.exists(skipped):
        with open(skipped) as f:
            why = f.read().strip()
        md.append("## Reservation: interactive (reserved 1) beside reporting")
        md.append("")
        md.append("Skipped: %s." % why)
        md.append("")
        return [check("4, reservation", "interactive wait_time_max <= 1 ms; reporting "
                      ">= 0.95 x its throughput with 3 slots", "not run: " + why, "-", None)]
    pts = {c: per_rep(rows, "reserve", c) for c in ("reserve", "noreserve", "cap3")}
    if not any(pts.values()):
        return []
    md.append("## Reservation: interactive (reserved 1) beside reporting")
    md.append("")
    md.append("rpool (max_active 4) parent of rinter (max_active 1; role interactive, 4 "
              "clients of SELECT pg_sleep(0.001), paced) and rrep (max_active 4; role "
              "reporting, 16 clients of SELECT pg_sleep(0.03)).  'wait_time_max' is "
              "rinter's, from dbgate.status after the run (reset before).")
    md.append("")
    trows = []
    for c, label in (("reserve", "reserved 1"), ("noreserve", "no reservation"),
                     ("cap3", "no reservation, reporting max_active 3")):
        rs = list(pts[c].values())
        if not rs:
            continue
        trows.append([c, label, spread([fnum(r["tps_a"]) for r in rs], 1),
                      spread([fnum(r["p99_a_ms"]) for r in rs], 2),
                      spread([fnum(r.get("wait_max_a_ms")) for r in rs], 3),
                      spread([100.0 * fnum(r.get("over1_a")) / fnum(r.get("admitted_a"))
                              if fnum(r.get("over1_a")) is not None and fnum(r.get("admitted_a"))
                              else None for r in rs], 2),
                      spread([fnum(r["tps_b"]) for r in rs], 1),
                      fmt(med([fnum(r["other_cpu_pct"]) for r in rs]))])
    md += table(["point", "budgets", "interactive TPS", "interactive p99 ms",
                 "interactive wait_time_max ms", "interactive waits over 1 ms, % of admissions",
                 "reporting TPS", "other CPU %"], trows)
    md.append("")
    out = []
    wres = med([fnum(r.get("wait_max_a_ms")) for r in pts["reserve"].values()])
    wno = med([fnum(r.get("wait_max_a_ms")) for r in pts["noreserve"].values()])
    # cap3 leaves a parent slot free for interactive all the time: what is
    # left there is interactive's own queue (its max_active 1), the floor
    # that a reservation of 1 can reach
    wc3 = med([fnum(r.get("wait_max_a_ms")) for r in pts["cap3"].values()])
    if wres is not None:
        out.append(check("4, reservation", "interactive wait_time_max <= 1 ms with "
                         "reserved 1 (against the same run without)",
                         "%s ms (without: %s ms; with a parent slot always free, cap3: %s ms)"
                         % (fmt(wres, 3), fmt(wno, 3), fmt(wc3, 3)),
                         "%s x 1 ms" % fmt(wres, 3), wres <= 1.0))
    rr = []
    for k, r in pts["reserve"].items():
        c3 = pts["cap3"].get(k)
        if c3 and fnum(r["tps_b"]) is not None and fnum(c3["tps_b"]):
            rr.append(fnum(r["tps_b"]) / fnum(c3["tps_b"]))
    if rr:
        m = med(rr)
        # more than 3 slots' worth: reporting used the reserved slot, so the
        # reservation did not act (the other check shows it too)
        note = (" (more than with 3 slots: the reservation did not keep a slot)"
                if m > 1.05 else "")
        out.append(check("4, reservation", "reporting TPS with the reservation >= 0.95 x "
                         "with 3 slots of its own",
                         "%s against %s%s" % (fmt(med([fnum(r["tps_b"]) for r in pts["reserve"].values()]), 1),
                                            fmt(med([fnum(r["tps_b"]) for r in pts["cap3"].values()]), 1),
                                            note),
                         "%s x" % fmt(m, 3), m >= 0.95))
    return out


def bulkhead_section(md, targets, outdir, rows):
    alone = per_rep(rows, "bulkhead", "alone")
    flood = per_rep(rows, "bulkhead", "flood")
    cap3 = per_rep(rows, "bulkhead", "flood-cap3")
    ung = per_rep(rows, "bulkhead", "flood-ungated")
    if alone or flood:
        md.append("## Bulkhead with borrowing: interactive (weight 10, max_active 4) and "
                  "reporting (weight 1, max_active 4) under a parent of 4")
        md.append("")

        def ratio(a, b, col):
            v = [fnum(a[k][col]) / fnum(b[k][col]) for k in a
                 if k in b and fnum(a[k][col]) and fnum(b[k][col])]
            return v

        trows = []
        for label, d in (("interactive alone", alone), ("reporting floods, both gated", flood),
                         ("the same, reporting's max_active 3", cap3),
                         ("reporting floods, both ungated", ung)):
            if not d:
                continue
            trows.append([label, spread([fnum(r["tps_a"]) for r in d.values()]),
                          spread([fnum(r["p50_a_ms"]) for r in d.values()], 3),
                          spread([fnum(r["p99_a_ms"]) for r in d.values()], 3),
                          spread([fnum(r["tps_b"]) for r in d.values()], 1) if d is not alone else "-",
                          spread([fnum(r["other_cpu_pct"]) for r in d.values()])])
        md += table(["case", "interactive TPS", "p50 ms", "p99 ms", "reporting TPS",
                     "other CPU %"], trows)
        md.append("")
        rf = ratio(flood, alone, "p99_a_ms")
        rc3 = ratio(cap3, alone, "p99_a_ms")
        ru = ratio(ung, alone, "p99_a_ms")
        md.append("- interactive p99, reporting flooding, against interactive alone: x%s "
                  "(gated), x%s (reporting's max_active 3), x%s (ungated)"
                  % (spread(rf, 2), spread(rc3, 2), spread(ru, 2)))
        idle, busy, ibusy = [], [], []
        for rep, r in flood.items():
            sm = samples_of(outdir, "bulkhead", "flood", rep)
            if sm is None:
                continue
            t0, t1, t2 = float(r["t0"]), float(r["t1"]), float(r["t2"])
            idle.append(sm.tavg("rep", t0 + 1, t1, ACTIVE))
            busy.append(sm.tavg("rep", t1 + 0.5, t2, ACTIVE))
            ibusy.append(sm.tavg("inter", t1 + 0.5, t2, ACTIVE))
        md.append("- reporting's time-averaged active while interactive is idle: %s "
                  "(of the parent's 4: it borrows interactive's share)" % spread(idle, 2))
        md.append("- while interactive runs: reporting %s, interactive %s"
                  % (spread(busy, 2), spread(ibusy, 2)))
        md.append("")
        md.append("A slot that reporting borrowed returns only when its statement "
                  "ends: an interactive statement that finds all 4 parent slots held "
                  "waits for the next reporting statement to finish (the weight decides "
                  "who gets that slot, it does not take one back).  With reporting's "
                  "max_active 3 one slot is always left to interactive.")
        md.append("")
        targets.append(("interactive p99 with reporting flooding / alone", fmt(med(rf), 2), "-"))
        targets.append(("the same with reporting's max_active 3", fmt(med(rc3), 2), "-"))
        targets.append(("reporting's active while interactive is idle (of 4)",
                        fmt(med(idle), 2), "-"))


# ----------------------------------------------------------------------------
# rate.sh

def cmd_rate(outdir):
    rows = read_rows(os.path.join(outdir, "runs.csv"))
    ok = [r for r in rows if r["status"] == "ok"]
    md = []
    header(md, "Rate: max_rate and rate_burst", outdir,
           "Every figure: median over the repetitions (smallest–largest).  Windows "
           "are read from dbgate.status by the server's clock.")
    targets = []

    acc = [r for r in ok if r["scenario"] == "accuracy"]
    if acc:
        md.append("## Accuracy: 32 clients of SELECT 1")
        md.append("")
        trows = []

        def key(c):
            rate, burst = c.split("-b")
            return (int(burst), float(rate))
        for con in sorted({r["contender"] for r in acc}, key=key):
            burst, rate = key(con)
            rs = [r for r in acc if r["contender"] == con]
            dev, qmean, qmin, within, late = [], [], [], [], []
            for r in rs:
                exp = rate * float(r["window_s"])
                adm = float(r["admitted"])
                dev.append(100.0 * (adm - exp) / exp)
                within.append(abs(adm - exp) <= 0.02 * exp + burst)
                if fnum(r["admitted_per_s"]):
                    late.append(1e6 / fnum(r["admitted_per_s"]) - 1e6 / rate)
                sm = samples_of(outdir, "accuracy", con, r["rep"])
                if sm is not None:
                    w = sm.window("r", float(r["t0"]), float(r["t1"]))
                    if w:
                        qmin.append(min(x[QUEUED] for x in w))
                        qmean.append(sm.tavg("r", float(r["t0"]), float(r["t1"]), QUEUED))
            trows.append(["%g" % rate, str(burst),
                          spread([fnum(r["admitted_per_s"]) for r in rs], 1),
                          spread(dev, 2), "%d of %d" % (sum(within), len(within)),
                          spread(late, 0),
                          spread([fnum(r["rate_limited"]) / fnum(r["admitted"])
                                  if fnum(r["admitted"]) else None for r in rs], 2),
                          spread(qmean, 1), spread(qmin)])
            d = med(dev)
            targets.append(("max_rate %g, rate_burst %d: admitted within 2 %% + burst of "
                            "max_rate x time" % (rate, burst),
                            "%s %%" % fmt(d, 2), verdict(d, all(within))))
        md += table(["max_rate", "rate_burst", "admitted per s",
                     "deviation from max_rate x time %", "runs within 2 % + burst",
                     "time lost per admission us", "rate_limited / admitted",
                     "queued (time average)", "queued (lowest sample)"], trows)
        md.append("")
        md.append("'time lost per admission' = 1 / measured rate - 1 / max_rate: how "
                  "late, on average, each admission came after its token was due.  A "
                  "queued statement takes its token as of the time it fell due (the "
                  "token waiter however late it woke, the others granted with it up to "
                  "2 ms back: src/rate.c), so a late wake-up is made up for; a delay "
                  "longer than that is lost when rate_burst is 1 (the bucket holds no "
                  "token in reserve) and banked by a larger rate_burst.  A window where "
                  "the queue ran empty (lowest sample 0) was limited by the clients, "
                  "not by the budget.")
        md.append("")

    bur = [r for r in ok if r["scenario"] == "burst"]
    if bur:
        md.append("## Burst: max_rate 10, rate_burst 50, 51 statements at once after an idle period")
        md.append("")
        md += table(["figure", "value"], [
            ["time from the first start until the first 50 had all finished, ms",
             spread([fnum(r["first50_ms"]) for r in bur], 1)],
            ["the 51st statement's latency, ms (1 / max_rate = 100 ms)",
             spread([fnum(r["last_ms"]) for r in bur], 1)],
            ["server: longest wait (wait_time_max), ms",
             spread([fnum(r["wait_time_max_ms"]) for r in bur], 1)],
            ["server: admissions after a wait / rate_limited",
             " ".join("%s/%s" % (r["admitted_after_wait"], r["rate_limited"]) for r in bur)],
            ["spread of the 51 clients' start times, ms",
             spread([fnum(r["start_spread_ms"]) for r in bur], 1)],
        ])
        md.append("")
        last = med([fnum(r["last_ms"]) for r in bur])
        targets.append(("burst: the 51st waits about 1 / max_rate (100 ms)", "%s ms" % fmt(last, 1), "-"))
        targets.append(("burst: the first 50 admitted at once", "%s ms" % fmt(
            med([fnum(r["first50_ms"]) for r in bur]), 1), "-"))

    wt = [r for r in ok if r["scenario"] == "waiting"]
    if wt:
        md.append("## Waiting is free: max_rate 10, CPU of the cluster's processes")
        md.append("")
        by = {}
        for r in wt:
            by.setdefault(r["contender"], {})[r["rep"]] = r
        trows = []
        for con, label in (("idle", "idle server (no clients)"), ("one", "1 client"),
                           ("many", "64 clients (63 waiting)")):
            d = by.get(con, {})
            trows.append([label, spread([fnum(r["admitted_per_s"]) for r in d.values()], 1),
                          spread([fnum(r["server_cpu_pct"]) for r in d.values()], 2)])
        md += table(["case", "admitted per s", "server CPU, % of one core"], trows)
        md.append("")
        extra = [fnum(by["many"][k]["server_cpu_pct"]) - fnum(by["one"][k]["server_cpu_pct"])
                 for k in by.get("many", {}) if k in by.get("one", {})]
        md.append("- 64 clients against 1 client at the same admitted rate: %s percentage "
                  "points of one core (within each repetition)" % spread(extra, 2))
        md.append("")
        targets.append(("waiting: server CPU of 64 clients minus 1 client at max_rate 10",
                        "%s %% of a core" % fmt(med(extra), 2), "-"))

    gov = [r for r in ok if r["scenario"] == "governs"]
    if gov:
        md.append("## Which limit governs: 32 clients of SELECT pg_sleep(0.01)")
        md.append("")
        trows = []
        for con, label in (("rate", "max_active 8, max_rate 100"),
                           ("slot", "max_active 1, max_rate 1000")):
            rs = [r for r in gov if r["contender"] == con]
            if not rs:
                continue
            cap = [fnum(r["max_active"]) * 1000.0 / fnum(r["mean_hold_ms"])
                   if fnum(r["mean_hold_ms"]) else None for r in rs]
            lim = [min(c, fnum(r["max_rate"])) if c is not None else None
                   for c, r in zip(cap, rs)]
            frac = [fnum(r["admitted_per_s"]) / l if l else None
                    for r, l in zip(rs, lim)]
            gv = ["rate" if c is not None and fnum(r["max_rate"]) < c else "slots"
                  for c, r in zip(cap, rs)]
            trows.append([label, spread([fnum(r["admitted_per_s"]) for r in rs], 1),
                          spread([fnum(r["mean_hold_ms"]) for r in rs], 2), spread(cap, 1),
                          "/".join(sorted(set(gv))), spread(frac, 3),
                          spread([fnum(r["rate_limited"]) / fnum(r["admitted"])
                                  if fnum(r["admitted"]) else None for r in rs], 2)])
            targets.append(("governs (%s): admitted / tighter limit" % label, fmt(med(frac), 3), "-"))
        md += table(["budget", "admitted per s", "slot hold ms (mean)",
                     "slot capacity per s (max_active / hold)", "tighter limit",
                     "admitted / tighter limit", "rate_limited / admitted"], trows)
        md.append("")

    if targets:
        md.append("## Targets (informational)")
        md.append("")
        md += table(["figure", "measured", "verdict"], [list(t) for t in targets])
        md.append("")
    rc = anomalies(md, rows, lambda r: "%s %s" % (r["scenario"], r["contender"]))
    finish(md, outdir)
    return rc


# ----------------------------------------------------------------------------
# monitor.sh

BANDS = [1, 10, 50, 100, 500, 1000]      # upper bounds (ms) of the bands plotted


def read_phases(outdir, order):
    """phases-O.dat: order, epochs of the start, of the burst's start, of its
    last statement's return and of the end, max_active, statement ms, burst
    seconds, note (blanks as underscores)."""
    with open(os.path.join(outdir, "phases-%s.dat" % order)) as f:
        w = f.read().split()
    return {"t0": float(w[1]), "t1": float(w[2]), "t2": float(w[3]), "t3": float(w[4]),
            "B": int(w[5]), "sleep_ms": int(w[6]), "burst": float(w[7]),
            "note": w[8].replace("_", " ") if len(w) > 8 else ""}


def cmd_monitor_data(outdir, order):
    """queue-O.dat and hist-O.dat from raw/samples-O.txt."""
    ph = read_phases(outdir, order)
    sm = Samples(os.path.join(outdir, "raw", "samples-%s.txt" % order)).by.get("mon", [])
    t0 = ph["t0"]
    with open(os.path.join(outdir, "queue-%s.dat" % order), "w") as q, \
            open(os.path.join(outdir, "hist-%s.dat" % order), "w") as h:
        q.write("# t_s active queued oldest_wait_ms admitted_per_s\n")
        h.write("# t_s admitted_in_interval then the share of them that waited "
                + " ".join("<=%gms" % b for b in BANDS) + " (cumulative), 1\n")
        for a, b in zip(sm, sm[1:]):
            dt = b[T] - a[T]
            if dt <= 0:
                continue
            q.write("%.3f %d %d %.3f %.1f\n" % (b[T] - t0, b[ACTIVE], b[QUEUED], b[OLDEST],
                                               (b[ADMITTED] - a[ADMITTED]) / dt))
            if len(a[HIST]) != len(LE_MS) or len(b[HIST]) != len(LE_MS):
                continue
            d = [y - x for x, y in zip(a[HIST], b[HIST])]
            n = d[-1]
            cols = []
            for bound in BANDS:
                i = LE_MS.index(bound)
                cols.append("%.4f" % (d[i] / n) if n > 0 else "NaN")
            h.write("%.3f %d %s %s\n" % ((a[T] + b[T]) / 2 - t0, n, " ".join(cols),
                                          "1" if n > 0 else "NaN"))
    return 0


def cmd_monitor(outdir):
    orders = sorted(f[len("phases-"):-len(".dat")] for f in os.listdir(outdir)
                    if f.startswith("phases-") and f.endswith(".dat"))
    md = []
    header(md, "Monitoring: a standing queue builds and drains", outdir,
           "dbgate.status and dbgate.wait_histogram sampled every ~100 ms; times in "
           "seconds from the start of the run.  Waits come from the histogram: "
           "'p99 <= x' is the upper bound of the bucket that holds the 99th percentile.")
    trows = []
    bad = []
    for o in orders:
        ph = read_phases(outdir, o)
        if ph["note"]:
            bad.append([o, ph["note"]])
        sm = Samples(os.path.join(outdir, "raw", "samples-%s.txt" % o))
        s = sm.by.get("mon", [])
        if not s:
            continue
        t0 = ph["t0"]
        b_start = ph["t1"]
        b_end = ph["t1"] + ph["burst"]
        peak = max(s, key=lambda x: x[QUEUED])
        drained = next((x for x in s if x[T] >= b_end and x[QUEUED] == 0), None)
        oldest = max(x[OLDEST] for x in s)

        def phase_hist(a, b):
            sa = next((x for x in s if x[T] >= a), None)
            sb = next((x for x in reversed(s) if x[T] <= b), None)
            if sa is None or sb is None or len(sa[HIST]) != len(sb[HIST]):
                return None, 0
            d = [y - x for x, y in zip(sa[HIST], sb[HIST])]
            return hist_quantile(d, 0.99), d[-1] if d else 0
        calm99, ncalm = phase_hist(t0, b_start)
        burst99, nburst = phase_hist(b_start + 1, b_end)
        end = s[-1]
        trows.append([o, "%d at %.1f s" % (peak[QUEUED], peak[T] - t0),
                      "%.0f ms" % oldest,
                      "%.1f s" % (drained[T] - b_end) if drained else "not within the run",
                      "%s (%d)" % (fmt_le(calm99), ncalm), "%s (%d)" % (fmt_le(burst99), nburst),
                      "%s (%d)" % (fmt_le(hist_quantile(end[HIST], 0.99)), end[ADMITTED]),
                      "monitor-%s.png" % o])
    md += table(["queue order", "longest queue", "longest oldest_wait",
                 "drained after the burst stopped", "wait p99 before the burst (admissions)",
                 "wait p99 during the burst, after its first second", "wait p99 of the whole run",
                 "picture"], trows)
    md.append("")
    md.append("The burst offers 190 % of what the budget can serve: the queue grows "
              "until every burst client waits, stays there, and drains at 30 % of the "
              "capacity once the burst stops sending.")
    md.append("")
    for o in orders:
        md.append("![%s](monitor-%s.png)" % (o, o))
        md.append("")
    md.append("## Anomalies")
    md.append("")
    if bad:
        md += table(["queue order", "note"], bad)
    else:
        md.append("none: every pgbench finished without errors.")
    md.append("")
    finish(md, outdir)
    return 1 if bad else 0


# ----------------------------------------------------------------------------

def main(argv):
    if len(argv) == 4 and argv[1] == "tpcb":
        return cmd_tpcb(argv[2], argv[3])
    if len(argv) == 3 and argv[1] == "shares":
        return cmd_shares(argv[2])
    if len(argv) == 3 and argv[1] == "rate":
        return cmd_rate(argv[2])
    if len(argv) == 3 and argv[1] == "monitor":
        return cmd_monitor(argv[2])
    if len(argv) == 4 and argv[1] == "monitor-data":
        return cmd_monitor_data(argv[2], argv[3])
    if len(argv) >= 3 and argv[1] == "firsts":
        return cmd_firsts(argv[2:])
    if len(argv) == 6 and argv[1] == "tavg":
        s = Samples(argv[2])
        t0, t1 = float(argv[4]), float(argv[5])
        print("%s %s %d" % (fmt(s.tavg(argv[3], t0, t1, 1), 3),
                            fmt(s.tavg(argv[3], t0, t1, 2), 3), s.count(argv[3], t0, t1)))
        return 0
    sys.stderr.write(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
