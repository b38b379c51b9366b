#!/usr/bin/env python3
"""Summaries of the 1.2 benchmark scripts (python3 standard library only).

  report.py tpcb OUT OVERTAKE_MS   tpcb.sh:    OUT/runs.csv -> OUT/summary.md
  report.py shares OUT             shares.sh:  OUT/runs.csv, OUT/samples-*.txt
  report.py rate OUT               rate.sh:    OUT/runs.csv
  report.py monitor OUT            monitor.sh: OUT/samples.txt -> OUT/queue.dat,
                                   OUT/hist.dat, OUT/summary.md
  report.py tavg FILE BUDGET T0 T1 time-averaged active and queued of BUDGET
                                   between two epochs of a sample file

Every summary is printed and written to OUT/summary.md.  A figure is the
median over the repetitions, with the smallest and largest value beside it
("spread"); a ratio is the median of the ratios taken within each
repetition, whose contenders ran back to back.

Sample files (lib.sh sampler_start) have one line per budget every ~100 ms:
epoch|budget|active|queued|oldest_wait|admitted|admitted_after_wait|
rate_limited|cumulative histogram counts for le_ms 0.1 0.5 1 5 10 50 100 500
1000 5000 10000 Infinity.
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

class Samples:
    """Samples of dbgate.status per budget: lists of (t, active, queued,
    oldest_wait, admitted, admitted_after_wait, rate_limited, hist)."""

    def __init__(self, path):
        self.by = {}
        with open(path) as f:
            for line in f:
                p = line.rstrip("\n").split("|")
                if len(p) < 9:
                    continue
                try:
                    t = float(p[0])
                    vals = (t, int(p[2]), int(p[3]), float(p[4]), int(p[5]),
                            int(p[6]), int(p[7]),
                            [int(x) for x in p[8].split()] if p[8] else [])
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
    rc = anomalies(md, rows, lambda r: "s%s-c%s-%s" % (r["scale"], r["clients"], r["contender"]))
    finish(md, outdir)
    return rc


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
