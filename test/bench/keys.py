#!/usr/bin/env python3
"""The churn client, the rate window and the summary of test/bench/keys.sh
(python3 standard library only; medians from stats.py).

  keys.py churn ...        CLIENTS psql sessions, KEYS distinct keys paced
                           evenly over SECONDS (SET app.tenant, SELECT 1 per
                           key); samples of the live keys every 200 ms and of
                           the memory of the postmaster's children every 1 s;
                           the errors by SQLSTATE; the drain.  One row of
                           churn.csv.
  keys.py rate ... -- R0 R1
                           two readings of rate_read (keys.sh) -> one row per
                           key and one for the budget in rate.csv
  keys.py summary OUTDIR   the CSV files -> summary.md (printed); exit 1 when
                           a run is an anomaly

A figure is the median over repetitions with its smallest and largest
value (the spread); a ratio is the median of the ratios taken within each
repetition, whose contenders ran back to back.
"""
import argparse
import csv
import os
import re
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from stats import fnum, med  # noqa: E402

# ----------------------------------------------------------------------------
# churn

CHURN_COLS = ["rep", "keys_sent", "seconds", "keys_per_s", "lag_s", "admitted", "keys_overflowed",
              "rejected_full", "err_53300_key", "err_53300_other", "err_other", "max_live_keys",
              "max_view_keys", "samples", "rss_first_mb", "rss_last_mb", "rss_max_mb",
              "priv_first_mb", "priv_last_mb", "priv_max_mb", "children", "drain_s",
              "keys_after_drain", "status", "note"]


def children_memory(pm):
    """(count, RSS kB, private kB) of the postmaster's children."""
    n = rss = priv = 0
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % d) as f:
                st = f.read()
            if int(st[st.rindex(")") + 2:].split()[1]) != pm:
                continue
            with open("/proc/%s/status" % d) as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        rss += int(line.split()[1])
            with open("/proc/%s/smaps_rollup" % d) as f:
                for line in f:
                    if line.startswith(("Private_Clean:", "Private_Dirty:")):
                        priv += int(line.split()[1])
            n += 1
        except (OSError, ValueError):
            continue
    return n, rss, priv


def psql_cmd(a, user):
    return [a.psql, "-X", "-q", "-At", "-h", a.host, "-p", str(a.port), "-U", user, "-d", a.db]


def churn(a):
    raw = a.raw
    with open(a.pidfile) as f:
        pm = int(f.readline())
    # samples of the live keys (the superuser's queries are not gated)
    sql = ("SELECT extract(epoch FROM clock_timestamp()), "
           "(SELECT coalesce(sum(keys), 0) FROM dbgate.status), "
           "(SELECT count(*) FROM dbgate.keys WHERE key IS NOT NULL), "
           "(SELECT keys_overflowed FROM dbgate.status WHERE budget = '%s')\n\\watch 0.2\n" % a.budget)
    with open(raw + "-sampler.sql", "w") as f:
        f.write(sql)
    samp_out = open(raw + "-keys.txt", "w")
    sampler = subprocess.Popen(psql_cmd(a, "postgres") + ["-F", " ", "-f", raw + "-sampler.sql"],
                               stdout=samp_out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    mem = []
    stop = threading.Event()

    def mem_loop():
        while not stop.is_set():
            mem.append((time.time(),) + children_memory(pm))
            stop.wait(1.0)
    mt = threading.Thread(target=mem_loop)
    mt.start()

    clients, errs = [], []
    for c in range(a.clients):
        ef = open("%s-client%d.err" % (raw, c), "w")
        errs.append(ef)
        p = subprocess.Popen(psql_cmd(a, a.user), stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                             stderr=ef, text=True)
        p.stdin.write("\\set VERBOSITY verbose\n")
        p.stdin.flush()
        clients.append(p)
    step = a.seconds / a.keys
    t0 = time.time() + 0.5
    last = [0.0] * a.clients

    def feed(c):
        p = clients[c]
        i = c
        try:
            while i < a.keys:
                d = t0 + i * step - time.time()
                if d > 0:
                    time.sleep(d)
                p.stdin.write("SET app.tenant = '%s%d';\nSELECT 1;\n" % (a.prefix, i))
                p.stdin.flush()
                i += a.clients
            last[c] = time.time()
            p.stdin.close()
        except BrokenPipeError:
            last[c] = time.time()
    feeders = [threading.Thread(target=feed, args=(c,)) for c in range(a.clients)]
    for t in feeders:
        t.start()
    for t in feeders:
        t.join()
    notes = []
    for p in clients:
        try:
            rc = p.wait(timeout=120)
        except subprocess.TimeoutExpired:
            p.kill()
            rc = "killed"
            notes.append("a client was still running 120 s after its last key")
        if rc not in (0, 1):
            notes.append("psql exit %s" % rc)
    t_end = time.time()
    for ef in errs:
        ef.close()
    # the drain: until no key of any budget is live
    drain = None
    left = None
    q = "SELECT coalesce(sum(keys), 0) FROM dbgate.status"
    for _ in range(300):
        left = int(subprocess.run(psql_cmd(a, "postgres") + ["-c", q], capture_output=True,
                                  text=True, check=True).stdout.strip())
        if left == 0:
            drain = time.time() - t_end
            break
        time.sleep(0.1)
    stop.set()
    mt.join()
    sampler.send_signal(2)
    sampler.wait()
    samp_out.close()
    mem.append((time.time(),) + children_memory(pm))

    # errors: "psql:<stdin>:N: ERROR:  53300: budget ..." then "DETAIL:  ..."
    e_key = e_full = e_other = 0
    first_other = None
    for c in range(a.clients):
        lines = open("%s-client%d.err" % (raw, c)).read().splitlines()
        for k, line in enumerate(lines):
            m = re.search(r"ERROR:  ([0-9A-Z]{5}): ", line)
            if not m:
                continue
            detail = lines[k + 1] if k + 1 < len(lines) else ""
            if m.group(1) != "53300":
                e_other += 1
                first_other = first_other or line
            elif re.match(r"DETAIL:  (Key \"|The budget's overflow key)", detail):
                e_key += 1
            else:
                e_full += 1
                first_other = first_other or line + " / " + detail
    st = subprocess.run(psql_cmd(a, "postgres") + ["-F", " ", "-c",
                        "SELECT admitted, keys_overflowed, rejected_full FROM dbgate.status "
                        "WHERE budget = '%s'" % a.budget], capture_output=True, text=True,
                        check=True).stdout.split()
    live = view = 0
    ns = 0
    with open(raw + "-keys.txt") as f:
        for line in f:
            w = line.split()
            if len(w) == 4 and fnum(w[1]) is not None:
                ns += 1
                live = max(live, int(w[1]))
                view = max(view, int(w[2]))
    if e_other or e_full:
        notes.append("%d errors other than a key's 53300 (first: %s)" % (e_other + e_full, first_other))
    if live > a.max_keys or view > a.max_keys:
        notes.append("more live keys than dbgate.max_keys: %d (status) / %d (dbgate.keys)" % (live, view))
    if left != 0:
        notes.append("%s keys still live 30 s after the run" % left)
    # memory: the first and the last quarter of the samples while the keys came
    run = [m for m in mem if t0 <= m[0] <= max(last)] or mem
    qn = max(1, len(run) // 4)

    def mb(vals):
        return "%.1f" % (med(vals) / 1024.0)
    rss = [m[2] for m in run]
    priv = [m[3] for m in run]
    secs = max(last) - t0
    row = dict(rep=a.rep, keys_sent=a.keys, seconds="%.1f" % secs, keys_per_s="%.0f" % (a.keys / secs),
               lag_s="%.1f" % (secs - a.seconds), admitted=st[0], keys_overflowed=st[1],
               rejected_full=st[2], err_53300_key=e_key, err_53300_other=e_full, err_other=e_other,
               max_live_keys=live, max_view_keys=view, samples=ns,
               rss_first_mb=mb(rss[:qn]), rss_last_mb=mb(rss[-qn:]), rss_max_mb="%.1f" % (max(rss) / 1024.0),
               priv_first_mb=mb(priv[:qn]), priv_last_mb=mb(priv[-qn:]),
               priv_max_mb="%.1f" % (max(priv) / 1024.0), children=med([m[1] for m in run]),
               drain_s="" if drain is None else "%.1f" % drain, keys_after_drain=left,
               status="anomaly" if notes else "ok", note="; ".join(notes).replace(",", ";"))
    new = not os.path.exists(a.csv)
    with open(a.csv, "a") as f:
        w = csv.DictWriter(f, CHURN_COLS)
        if new:
            w.writeheader()
        w.writerow(row)
    print("%s churn rep %s: %s keys in %s s (%s/s), admitted %s, keys_overflowed %s, key 53300 %d, "
          "other errors %d, live keys at most %d (max_keys %d), private memory %s -> %s MB, RSS %s -> %s MB, "
          "drained in %s s%s" % (time.strftime("%H:%M:%S"), a.rep, a.keys, row["seconds"], row["keys_per_s"],
                                 st[0], st[1], e_key, e_other + e_full, live, a.max_keys,
                                 row["priv_first_mb"], row["priv_last_mb"], row["rss_first_mb"],
                                 row["rss_last_mb"], row["drain_s"] or "-",
                                 (" — " + row["note"]) if notes else ""))
    return 0


# ----------------------------------------------------------------------------
# rate

RATE_COLS = ["rep", "key", "seconds", "admitted", "per_s", "target", "dev_pct", "other_cpu_pct",
             "status", "note"]


def rate(a):
    def parse(s):
        w = s.split()
        return float(w[0]), int(w[1]), dict((k, int(v)) for k, v in (x.rsplit("=", 1) for x in w[2:]))
    t0, b0, k0 = parse(a.readings[0])
    t1, b1, k1 = parse(a.readings[1])
    secs = t1 - t0
    notes = [a.note] if a.note else []
    rows = []
    for i in range(1, a.keys + 1):
        k = "k%d" % i
        if k not in k0 or k not in k1:
            notes.append("key %s not in dbgate.keys at both ends of the window" % k)
            continue
        rows.append((k, k1[k] - k0[k], a.rate))
    rows.append(("(budget)", b1 - b0, a.rate * a.keys))
    status = "anomaly" if notes else "ok"
    new = not os.path.exists(a.csv)
    with open(a.csv, "a") as f:
        w = csv.writer(f)
        if new:
            w.writerow(RATE_COLS)
        for k, n, target in rows:
            per = n / secs
            w.writerow([a.rep, k, "%.3f" % secs, n, "%.2f" % per, target,
                        "%.2f" % (100.0 * (per - target) / target), a.other, status,
                        "; ".join(notes).replace(",", ";")])
    per_key = [n / secs for k, n, _ in rows if k != "(budget)"]
    print("%s rate rep %s: %.2f s window; keys %.1f..%.1f/s (target %s), budget %.1f/s (target %s)%s"
          % (time.strftime("%H:%M:%S"), a.rep, secs, min(per_key or [0]), max(per_key or [0]), a.rate,
             rows[-1][1] / secs, a.rate * a.keys, (" — " + "; ".join(notes)) if notes else ""))
    return 0


# ----------------------------------------------------------------------------
# summary

def read_csv(path):
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return list(csv.DictReader(f))


def spread(vals, nd=1, scale=1.0):
    vals = [v * scale for v in vals if v is not None]
    if not vals:
        return "n/a"
    m = med(vals)
    if len(vals) == 1:
        return "%.*f" % (nd, m)
    return "%.*f (%.*f–%.*f)" % (nd, m, nd, min(vals), nd, max(vals))


def table(header, rows):
    out = ["| " + " | ".join(header) + " |", "|" + "|".join(" --- " for _ in header) + "|"]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return out


def check(item, target, measured, ok):
    return [item, target, measured, "n/a" if ok is None else ("met" if ok else "missed")]


def summary(outdir):
    meta = []
    if os.path.exists(os.path.join(outdir, "meta.txt")):
        meta = [l.rstrip("\n").split("=", 1) for l in open(os.path.join(outdir, "meta.txt")) if "=" in l]
    flood = read_csv(os.path.join(outdir, "flood.csv"))
    churn_rows = read_csv(os.path.join(outdir, "churn.csv"))
    rate_rows = read_csv(os.path.join(outdir, "rate.csv"))
    other = {}
    if os.path.exists(os.path.join(outdir, "other.csv")):
        for line in open(os.path.join(outdir, "other.csv")):
            w = line.strip().split(",")
            other[(w[0], w[1])] = fnum(w[3])
    anomalies = []
    if os.path.exists(os.path.join(outdir, "anomalies.csv")):
        for line in open(os.path.join(outdir, "anomalies.csv")):
            w = line.strip().split(",", 3)
            anomalies.append([w[0], "", w[1], w[3]])
    out = ["# Keys (1.3, issue 29): test/bench/keys.sh", ""]
    out += ["- %s: %s" % (k, v) for k, v in meta] + [""]
    checks = []

    # ---- flood
    if flood:
        by = {}
        for r in flood:
            by.setdefault(r["contender"], {})[r["rep"]] = r
            if r["status"] != "ok":
                anomalies.append(["flood", r["contender"], r["rep"], r["note"]])

        def col(con, c, rep=None):
            rs = by.get(con, {})
            return [fnum(r[c]) for k, r in sorted(rs.items()) if rep is None or k == rep]

        def aps(r):
            t = fnum(r["t1"]) - fnum(r["t0"])
            return (fnum(r["admitted1"]) - fnum(r["admitted0"])) / t if t > 0 else None

        def ratio(con, base, f):
            vals = []
            for rep, r in by.get(con, {}).items():
                b = by.get(base, {}).get(rep)
                if b is not None and f(r) and f(b):
                    vals.append(f(r) / f(b))
            return vals
        p99 = lambda r: fnum(r["b_p99_us"])  # noqa: E731
        out += ["## 1-2. Flood and trickle: B = 4, Q = 64, tenant A floods, tenant B trickles", ""]
        rows = []
        for con in ("alone", "floor", "keyed", "plain", "keyq"):
            if con not in by:
                continue
            rs = list(by[con].values())
            rows.append([con, len(rs), spread(col(con, "b_p50_us"), 1, 1e-3), spread(col(con, "b_p99_us"), 1, 1e-3),
                         spread(ratio(con, "alone", p99), 2) if con != "alone" else "1",
                         spread([aps(r) for r in rs], 0),
                         spread(ratio(con, "plain", aps), 3) if con != "plain" else "1",
                         "%d / %d / %d" % (sum(int(r["rejected_full"]) for r in rs),
                                           sum(int(r["key_a_rejected"]) for r in rs),
                                           sum(int(r["key_b_rejected"]) for r in rs)),
                         "%d / %d" % (sum(int(r["a_aborted"]) for r in rs), sum(int(r["b_aborted"]) for r in rs)),
                         spread(col(con, "other_cpu_pct"), 0)])
        for row in rows:
            con = row[0]
            row.insert(5, spread(ratio(con, "floor", p99), 2) if con not in ("alone", "floor") and "floor" in by else "")
        out += table(["contender", "reps", "B p50 ms", "B p99 ms", "B p99 / alone", "B p99 / floor", "admitted/s",
                      "admitted/s vs plain", "rejected: budget / key A / key B (sum)",
                      "clients aborted A / B (sum)", "other CPU %"], rows)
        out += ["", "alone: tenant B alone in the keyed budget; floor: A with 2 clients, so the 4 slots are "
                "full and nothing waits (on fewer than 4 CPUs B's statements share them: no gate of "
                "B = 4 gives B better); keyed: beside A's flood, key_by "
                "'setting:app.tenant'; plain: the same budget without key_by; keyq: keyed with "
                "key_max_queued 32. B starts once A's statements fill the budget (or A's key) "
                "and 2 s later; A is stopped when B is done. admitted/s: the budget's admissions per second while B ran "
                "(dbgate.status, the server's clock). Medians over repetitions (smallest–largest).", ""]
        r_k = ratio("keyed", "alone", p99)
        r_p = ratio("plain", "alone", p99)
        r_t = ratio("keyed", "plain", aps)
        checks.append(check("1. B's p99 beside A, with key_by", "≤ 2 × alone",
                            spread(r_k, 2) + " ×", None if not r_k else med(r_k) <= 2))
        r_f = ratio("keyed", "floor", p99)
        r_fa = ratio("floor", "alone", p99)
        if r_f:
            checks.append(check("1. B's p99 beside A, with key_by, against the floor (4 slots full, nothing waits)",
                                "≤ 2 × floor (the gate's own part)",
                                spread(r_f, 2) + " × (floor / alone " + spread(r_fa, 2) + " ×)", med(r_f) <= 2))
        checks.append(check("1. B's p99 beside A, without key_by", "≥ 10 × alone (expected)",
                            spread(r_p, 2) + " ×", None if not r_p else med(r_p) >= 10))
        kq = list(by.get("keyq", {}).values())
        if kq:
            b_rej = sum(int(r["key_b_rejected"]) + int(r["b_aborted"]) for r in kq)
            a_ok = all(int(r["rejected_full"]) == int(r["key_a_rejected"]) for r in kq)
            a_rej = sum(int(r["key_a_rejected"]) for r in kq)
            checks.append(check("1. key_max_queued 32: B never rejected, A's excess at A's key",
                                "B 0; budget's rejected_full = key A's rejected > 0",
                                "B %d; A %d (%s)" % (b_rej, a_rej, "equal in every rep" if a_ok else "not equal"),
                                b_rej == 0 and a_ok and a_rej > 0))
        checks.append(check("2. throughput with key_by", "≥ 0.95 × without",
                            spread(r_t, 3) + " ×", None if not r_t else med(r_t) >= 0.95))

    # ---- churn
    if churn_rows:
        out += ["## 3. Key churn", ""]
        rows = []
        for r in churn_rows:
            if r["status"] != "ok":
                anomalies.append(["churn", "", r["rep"], r["note"]])
            rows.append([r["rep"], r["keys_sent"], r["seconds"], r["keys_per_s"], r["admitted"],
                         r["keys_overflowed"], r["err_53300_key"],
                         int(r["err_53300_other"]) + int(r["err_other"]),
                         "%s / %s" % (r["max_live_keys"], r["max_view_keys"]),
                         "%s → %s (max %s)" % (r["priv_first_mb"], r["priv_last_mb"], r["priv_max_mb"]),
                         "%s → %s (max %s)" % (r["rss_first_mb"], r["rss_last_mb"], r["rss_max_mb"]),
                         r["children"], r["drain_s"] or "-", r["keys_after_drain"],
                         fnum(other.get(("churn", r["rep"]))) if other.get(("churn", r["rep"])) is not None else "n/a"])
        out += table(["rep", "keys", "s", "keys/s", "admitted", "keys_overflowed", "key 53300",
                      "other errors", "live keys max: status / view", "children private MB: first → last quarter",
                      "children RSS MB: first → last quarter", "children", "drain s", "keys after drain",
                      "other CPU %"], rows)
        out += ["", "Every key's statement is SET app.tenant then SELECT 1 in a budget of max_active 8 "
                "with key_max_rate 1 (an entry lives until its bucket is full again, 1 s) and "
                "key_max_queued 1. key 53300: refusals whose DETAIL names a key or the overflow key. "
                "Live keys: the largest sample of sum(status.keys) and of dbgate.keys' rows but the "
                "overflow keys (every 200 ms). Memory: the sum over the postmaster's children, the "
                "median of the first and of the last quarter of the 1 s samples while keys came.", ""]
        mk = int(dict(meta).get("server", "max_keys 0").split("max_keys ")[1].split(";")[0]) if meta else 0
        live = max(max(int(r["max_live_keys"]), int(r["max_view_keys"])) for r in churn_rows)
        errs = sum(int(r["err_53300_other"]) + int(r["err_other"]) for r in churn_rows)
        ovf = [int(r["keys_overflowed"]) for r in churn_rows]
        left = [r["keys_after_drain"] for r in churn_rows]
        growth = [fnum(r["priv_last_mb"]) - fnum(r["priv_first_mb"]) for r in churn_rows]
        checks.append(check("3. errors other than a key's 53300", "0", str(errs), errs == 0))
        checks.append(check("3. the table never over max_keys", "≤ %d" % mk, str(live), live <= mk))
        checks.append(check("3. keys_overflowed counts the rest", "> 0", spread(ovf, 0), min(ovf) > 0))
        checks.append(check("3. server memory flat", "children's private memory, last − first quarter",
                            spread(growth, 1) + " MB", None))
        checks.append(check("3. keys = 0 after the drain", "0", " ".join(left),
                            all(x == "0" for x in left)))

    # ---- rate
    if rate_rows:
        out += ["## 4. Per-key rate", ""]
        reps = sorted(set(r["rep"] for r in rate_rows))
        keys = [r["key"] for r in rate_rows if r["rep"] == reps[0]]
        rows = []
        for k in keys:
            rs = [r for r in rate_rows if r["key"] == k]
            rows.append([k, rs[0]["target"], spread([fnum(r["per_s"]) for r in rs], 2),
                         spread([fnum(r["dev_pct"]) for r in rs], 2)])
        out += table(["key", "target /s", "admitted /s", "deviation %"], rows)
        for r in rate_rows:
            if r["status"] != "ok" and r["key"] == "(budget)":
                anomalies.append(["rate", "", r["rep"], r["note"]])
        oc = [fnum(r["other_cpu_pct"]) for r in rate_rows if r["key"] == "(budget)"]
        out += ["", "Admissions of each key (dbgate.keys) and of the budget (dbgate.status) over the "
                "window, read by the server's clock; 3 clients of SELECT 1 per key. Other CPU %%: %s." % spread(oc, 0), ""]
        kd = [abs(fnum(r["dev_pct"])) for r in rate_rows if r["key"] != "(budget)"]
        bd = [fnum(r["dev_pct"]) for r in rate_rows if r["key"] == "(budget)"]
        checks.append(check("4. each key within ±2 % of key_max_rate", "deviation within ±2 %",
                            "largest %.2f %% over %d key windows" % (max(kd), len(kd)) if kd else "n/a",
                            None if not kd else max(kd) <= 2))
        checks.append(check("4. the budget's sum within ±2 %", "deviation within ±2 %", spread(bd, 2) + " %",
                            None if not bd else max(abs(x) for x in bd) <= 2))

    checks.append(["5. instructions in hooks with key_by", "≤ budget + 250",
                   "test/bench/instructions.sh 1000 budget keys", "not run here"])
    out += ["## Targets", ""] + table(["item", "target", "measured", "verdict"], checks) + [""]
    out += ["## Anomalies", ""]
    out += table(["measure", "contender", "rep", "note"], anomalies) if anomalies else ["none"]
    text = "\n".join(out) + "\n"
    with open(os.path.join(outdir, "summary.md"), "w") as f:
        f.write(text)
    sys.stdout.write(text)
    return 1 if anomalies else 0


def main(argv):
    ap = argparse.ArgumentParser(prog="keys.py")
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("churn")
    for o in ("psql", "host", "db", "user", "budget", "prefix", "pidfile", "raw", "csv", "rep"):
        c.add_argument("--" + o, required=True)
    for o in ("port", "clients", "keys", "max-keys"):
        c.add_argument("--" + o, type=int, required=True)
    c.add_argument("--seconds", type=float, required=True)
    r = sub.add_parser("rate")
    r.add_argument("--rep", required=True)
    r.add_argument("--rate", type=float, required=True)
    r.add_argument("--keys", type=int, required=True)
    r.add_argument("--other", default="")
    r.add_argument("--note", default="")
    r.add_argument("--csv", required=True)
    r.add_argument("readings", nargs=2)
    s = sub.add_parser("summary")
    s.add_argument("outdir")
    a = ap.parse_args(argv)
    if a.cmd == "churn":
        return churn(a)
    if a.cmd == "rate":
        a.rate = int(a.rate) if a.rate == int(a.rate) else a.rate
        return rate(a)
    return summary(a.outdir)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
