#!/usr/bin/env python3
"""A deterministic simulation of the adaptive limit's step (src/adapt.c) in
trees of budgets, for the rule that says when a period was 'held' (held
back by something else than the budget's own limit L: SPEC 1.3, "Periods
in which the budget waited for tokens or for an ancestor's slots leave L
unchanged").  python3 standard library only; the same seed gives the same
figures.

  adapt_sim.py            every case, with the rule of adapt.c now ('new')
                          and the one before it ('old'), at three wake-up
                          delays: the steps, the share of held periods, L at
                          the end and when it first moved, the verdict;
                          exits 1 if the 'new' rule gets a case wrong
  adapt_sim.py -v CASE    the same for one case, with every step

The rules for 'held' (besides a period that waited for tokens, which is
not modelled):
  old   at the step, the budget has waiters in its subtree and fewer than L
        active.  A parent's waiters include those of a child at its own
        limit, so the parent's L never moves; and the step runs just after
        a release, when the freed slot of a non-fair budget (or a fair
        'lifo' one with nobody overdue) waits for the waiter the grant step
        woke: the budget looks held at almost every step.
  new   during the period, a grant step passed over a waiter that had room
        at every level from its own budget up to this one, because a level
        above was full (trees.c counts it in 'held_above').  A top-level
        budget is never held so; a waiter at its own budget's limit (or
        at a level between) does not hold back the budgets above it.

The model (what it keeps of the server):
  - budgets with max_active, adapt, parent, fair and queue_order; a
    statement takes a slot at every level of its chain or waits in its own
    budget's queue, counted in 'queued' at every level (trees.c);
  - the grant step (queue.c): the child with room and a waiter that could
    take every level below, smallest active first; a fair 'fifo' budget's
    waiter is handed the slot under the lock; a non-fair budget's, and a
    fair 'lifo' one's while nobody is overdue, is only woken, and takes the
    slot itself WAKE_S later if it is still free (a newcomer may take it
    first), then goes on granting;
  - clients in a closed loop: 'lock' statements wait for a lock of the test
    and never end, 'cpu' and 'sleep' statements end after their time
    (exponential, seeded), then the client thinks THINK_S and comes again;
  - the step at a release, at most once per period of 250 ms, with
    decide() as in adapt.c; the sample counts the active 'cpu' statements
    as runnable (R, C) and the active 'lock' ones as waiting for a lock (K).
It does not model tokens, reservations, 'lifo' children, shadow mode,
memory or the clock of a real server: it is for the rule, not for
figures of throughput.
"""
import heapq
import math
import random
import sys

PERIOD_S = 0.25
WAKE_S = 0.0004			# a woken backend takes its slot this much later
THINK_S = 0.0002
NCPU = 2
CPU_OVERCOMMIT = 8.0
HOLD_PERIODS = 10
GUARD_SIGMAS = 3.0
GUARD_MIN_PERIODS = 4


class Budget:
    def __init__(self, name, max_active, parent=None, adapt=False, fair=True,
                 lifo=False, adapt_min=1):
        self.name, self.max, self.parent, self.adapt = name, max_active, parent, adapt
        self.fair, self.lifo, self.adapt_min = fair, lifo, adapt_min
        self.children = []
        self.active = 0
        self.queued = 0			# the waiters of the subtree
        self.queue = []			# own waiters, in arrival order
        self.L = max_active if adapt else 0
        self.c = Ctl()
        self.done = 0
        self.busy = 0.0
        self.waits = 0			# admissions after a wait
        self.above = 0			# waiters passed over for a full ancestor
        self.due = 0.0
        self.trace = []			# (t, L, held)

    def lim(self):
        return self.L if self.adapt else self.max


class Ctl:
    """DbgateAdaptState"""
    def __init__(self):
        self.period_start = None
        self.done0 = self.busy0 = self.waits0 = self.above0 = 0
        self.runnable = self.own_cpu = self.own_lock = 0.0
        self.x_avg = self.x_before = 0.0
        self.x_periods = self.l_before = self.hold = 0
        self.sampled = False


class Stmt:
    def __init__(self, client, since):
        self.client, self.since = client, since
        self.woken = False


class Sim:
    def __init__(self, budgets, clients, rule, seed=1, verbose=False):
        self.b = {x.name: x for x in budgets}
        for x in budgets:
            if x.parent:
                self.b[x.parent].children.append(x)
        self.clients = clients		# (leaf, kind, mean seconds)
        self.rule = rule
        self.rng = random.Random(seed)
        self.ev = []
        self.seq = 0
        self.t = 0.0
        self.running = []			# (stmt, kind)
        self.verbose = verbose

    # -- helpers
    def chain(self, leaf):
        out, x = [], self.b[leaf]
        while x:
            out.append(x)
            x = self.b[x.parent] if x.parent else None
        return out

    def root(self, leaf):
        return self.chain(leaf)[-1]

    def at(self, t, kind, data):
        self.seq += 1
        heapq.heappush(self.ev, (t, self.seq, kind, data))

    def overdue(self, b):
        return b.lifo and b.queue and self.t - b.queue[0].since >= 0.1

    # -- admission
    def room(self, leaf):
        return all(x.active < x.lim() for x in self.chain(leaf))

    def arrive(self, ci):
        leaf = self.clients[ci][0]
        lb = self.b[leaf]
        s = Stmt(ci, self.t)
        newcomer_waits = lb.fair and lb.queue and (not lb.lifo or self.overdue(lb))
        if self.room(leaf) and not newcomer_waits:
            self.start(s)
            return
        lb.queue.append(s)
        for x in self.chain(leaf):
            x.queued += 1
        self.grant(self.root(leaf))

    def start(self, s, waited=False):
        leaf, kind, mean = self.clients[s.client]
        for x in self.chain(leaf):
            x.active += 1
        if waited:
            for x in self.chain(leaf):
                x.waits += 1
        self.running.append((s, kind))
        s.admitted = self.t
        if kind != "lock":
            self.at(self.t + self.rng.expovariate(1.0 / mean), "end", s)

    def select(self, b, blocked_above=False):
        """trees.c select_in(): a waiter of b's subtree with room at every
        level from b down, or None; and whether a waiter with room up to b
        was passed over for a full level above b (counted in 'above' of
        every adapting budget from its own up to the full level)."""
        if not b.children:
            if not b.queue or b.active >= b.lim():
                return None, False
            if blocked_above:
                b.above += 1
                return None, True
            if b.lifo and not self.overdue(b):
                return b.queue[-1], False
            return b.queue[0], False
        full = b.active >= b.lim()
        best, passed = None, False
        for c in b.children:
            if c.queued == 0:
                continue
            p, pc = self.select(c, blocked_above or full)
            passed |= pc
            if p and (best is None or c.active < best[0]):
                best = (c.active, p)
        passed = passed and blocked_above and not full
        if passed:
            b.above += 1
        return (best[1] if best else None), passed

    def pick_walk(self, root):
        return self.select(root)[0]

    def promote(self, s):
        leaf = self.clients[s.client][0]
        self.b[leaf].queue.remove(s)
        for x in self.chain(leaf):
            x.queued -= 1
        self.start(s, waited=True)

    def grant(self, root, me=None):
        while True:
            p = self.pick_walk(root)
            if p is None:
                return
            lb = self.b[self.clients[p.client][0]]
            hands_off = lb.fair and (not lb.lifo or self.overdue(lb))
            if p is not me and not hands_off:
                if not p.woken:
                    p.woken = True
                    self.at(self.t + WAKE_S, "wake", p)
                return
            self.promote(p)

    def wake(self, s):
        s.woken = False
        leaf = self.clients[s.client][0]
        if s not in self.b[leaf].queue:
            return
        self.grant(self.root(leaf), me=s)

    def end(self, s):
        leaf, kind, _ = self.clients[s.client]
        self.running.remove((s, kind))
        ch = self.chain(leaf)
        for x in ch:
            x.active -= 1
        if any(x.queued for x in ch):
            self.grant(ch[-1])
        # adapt.c dbgate_adapt_released()
        for x in ch:
            if not x.adapt:
                continue
            x.done += 1
            x.busy += self.t - s.admitted
            if self.t < x.due:
                continue
            x.due = self.t + PERIOD_S
            self.step(x)
        self.at(self.t + THINK_S, "arrive", s.client)

    # -- the step
    def subtree_has(self, b, s):
        leaf = self.b[self.clients[s.client][0]]
        while leaf:
            if leaf is b:
                return True
            leaf = self.b[leaf.parent] if leaf.parent else None
        return False

    def sample(self, b):
        r = c = k = 0
        for s, kind in self.running:
            mine = self.subtree_has(b, s)
            if kind == "cpu":
                r += 1
                c += mine
            elif kind == "lock":
                k += mine
        return r, c, k

    def held(self, b):
        if self.rule == "old":
            return b.queued > 0 and b.active < b.lim()
        # new: a waiter with room up to b was passed over for a full level
        # above b during the period (the grant steps count it)
        return b.above != b.c.above0

    def step(self, b):
        s = b.c
        now = self.t
        if s.period_start is None:
            s.period_start = now
            s.done0, s.busy0, s.waits0, s.above0 = b.done, b.busy, b.waits, b.above
            return
        dt = now - s.period_start
        r, c, k = self.sample(b)
        if not s.sampled:
            s.runnable, s.own_cpu, s.own_lock = r, c, k
        else:
            s.runnable = (s.runnable + r) / 2
            s.own_cpu = (s.own_cpu + c) / 2
            s.own_lock = (s.own_lock + k) / 2
        s.sampled = True
        done = b.done - s.done0
        x = done / dt
        n = (b.busy - s.busy0) / dt
        waited = b.queued > 0 or b.waits != s.waits0
        held = self.held(b)
        l = b.L
        if waited or n >= l / 2:
            s.x_avg = (s.x_avg + x) / 2 if s.x_avg > 0 else x
            s.x_periods = min(s.x_periods + 1, GUARD_MIN_PERIODS)
        nxt = decide(s, l, held, waited, n, done, dt)
        nxt = max(min(nxt, b.max), min(b.adapt_min, b.max))
        if nxt != l:
            s.sampled = False
            b.L = nxt
            if nxt > l:
                self.grant(self.root(b.name))
        b.trace.append((now, b.L, held))
        if self.verbose:
            print("%7.3f %-4s L %2d -> %2d  held %-5s waited %-5s active %2d queued %2d  R %.1f C %.1f K %.1f"
                  % (now, b.name, l, nxt, held, waited, b.active, b.queued,
                     s.runnable, s.own_cpu, s.own_lock))
        s.period_start = now
        s.done0, s.busy0, s.waits0, s.above0 = b.done, b.busy, b.waits, b.above

    def run(self, seconds):
        for i in range(len(self.clients)):
            self.at(i * 1e-5, "arrive", i)
        while self.ev:
            t, _, kind, data = heapq.heappop(self.ev)
            if t > seconds:
                break
            self.t = t
            getattr(self, kind)(data)


def decide(s, l, held, waited, n, done, secs):
    """adapt.c decide()"""
    down, up = max(1, l // 4), max(1, l // 8)
    lockers, few = max(1.5, l / 2.0), max(0.5, l / 4.0)
    knee = CPU_OVERCOMMIT * NCPU
    busy_cpu = max(1.0, l / 4.0)
    if held or (not waited and n < l / 2.0):
        return l
    if s.l_before > 0:
        before, expect = s.l_before, s.x_before * secs
        s.l_before = 0
        if waited and expect > 0 and done < 0.85 * expect and \
                expect - done > GUARD_SIGMAS * math.sqrt(expect):
            s.hold = HOLD_PERIODS
            return min(before, l + up)
    if s.hold > 0:
        s.hold -= 1
        cut = 0
    elif s.runnable > knee and s.own_cpu >= busy_cpu:
        excess = (s.runnable - knee) * s.own_cpu / s.runnable
        cut = min(down, max(1, math.ceil(excess)))
    elif s.own_lock >= lockers:
        cut = down
    else:
        cut = 0
    if cut > 0:
        s.l_before = l
        s.x_before = s.x_avg if s.x_periods >= GUARD_MIN_PERIODS else 0
        return l - cut
    if waited and s.own_lock < few and (s.runnable < NCPU or s.own_cpu < busy_cpu):
        return l + up
    return l


# ----------------------------------------------------------------------------
# The cases: each returns (budgets, clients, the budget watched, what must
# happen: 'falls' (L ends below its max) or 'stays' (L ends at its max))

def case_parent(fair=True):
    """Issue 46 #5: a parent of 10 over a child of 8 saturated by statements
    that wait for a lock (4 more queued at the child's own limit), and a
    sibling with one client whose short statements end (the parent has
    room): the lock rule must lower the parent's L."""
    b = [Budget("P", 10, adapt=True), Budget("C", 8, parent="P", fair=fair),
         Budget("D", 10, parent="P", fair=fair)]
    cl = [("C", "lock", 0)] * 12 + [("D", "sleep", 0.002)]
    return b, cl, "P", "falls"


def case_leaf(fair, lifo):
    """A top-level leaf of 10 with 8 lock waiters and 6 clients of short
    statements: the lock rule must lower L (nothing above it can hold it)."""
    b = [Budget("B", 10, adapt=True, fair=fair, lifo=lifo)]
    cl = [("B", "lock", 0)] * 8 + [("B", "sleep", 0.002)] * 6
    return b, cl, "B", "falls"


def case_held_child(fair):
    """A child of 16 under a parent of 6 that binds, CPU-bound beside a
    busy top-level budget (R over 8 x the CPUs): its periods wait for the
    parent's slots and must leave its L at 16."""
    b = [Budget("P", 6), Budget("C", 16, parent="P", adapt=True, fair=fair),
         Budget("X", 30)]
    cl = [("C", "cpu", 0.003)] * 12 + [("X", "cpu", 0.003)] * 24
    return b, cl, "C", "stays"


def case_free_child(fair):
    """A child of 16 under a parent of 16 (the parent does not bind), CPU
    bound beside the same busy budget: the CPU rule lowers its L."""
    b = [Budget("P", 16), Budget("C", 16, parent="P", adapt=True, fair=fair),
         Budget("X", 30)]
    cl = [("C", "cpu", 0.003)] * 20 + [("X", "cpu", 0.003)] * 24
    return b, cl, "C", "falls"


def case_middle(gmax, cmax):
    """A middle level M of 16 (adapting) between a top-level G and a leaf C,
    CPU-bound beside the same busy budget: held when G binds (G of 6),
    not when only C's own limit does (G of 16, C of 4)."""
    b = [Budget("G", gmax), Budget("M", 16, parent="G", adapt=True),
         Budget("C", cmax, parent="M"), Budget("X", 30)]
    cl = [("C", "cpu", 0.003)] * 12 + [("X", "cpu", 0.003)] * 24
    return b, cl, "M", "stays" if gmax < cmax else "falls"


CASES = {
    "parent-fair": lambda: case_parent(True),
    "parent-nonfair": lambda: case_parent(False),
    "leaf-fair-fifo": lambda: case_leaf(True, False),
    "leaf-fair-lifo": lambda: case_leaf(True, True),
    "leaf-nonfair": lambda: case_leaf(False, False),
    "held-child-fair": lambda: case_held_child(True),
    "held-child-nonfair": lambda: case_held_child(False),
    "free-child-fair": lambda: case_free_child(True),
    "free-child-nonfair": lambda: case_free_child(False),
    "held-middle": lambda: case_middle(6, 16),
    "free-middle": lambda: case_middle(16, 4),
}


WAKES_S = (0.0001, 0.001, 0.01)		# the wake-up delays every case runs with


def run_case(name, rule, seconds=10.0, verbose=False):
    budgets, clients, watch, want = CASES[name]()
    sim = Sim(budgets, clients, rule, verbose=verbose)
    sim.run(seconds)
    b = sim.b[watch]
    tr = b.trace
    held = sum(1 for _, _, h in tr if h)
    ls = [l for _, l, _ in tr] or [b.L]
    first_move = next((t for t, l, _ in tr if l != b.max), None)
    ok = (b.L < b.max) if want == "falls" else (max(ls) == b.max and min(ls) == b.max)
    return b, tr, held, first_move, want, ok


def main(argv):
    global WAKE_S
    verbose = len(argv) == 3 and argv[1] == "-v"
    names = [argv[2]] if verbose else list(CASES)
    bad = 0
    print("%-20s %-4s %-7s %5s %5s %9s %10s %6s  %s" % ("case", "rule", "wake", "steps", "held",
                                                        "L end", "first move", "want", "verdict"))
    for name in names:
        for wake in WAKES_S:
            WAKE_S = wake
            for rule in ("old", "new"):
                b, tr, held, first, want, ok = run_case(name, rule, verbose=verbose)
                print("%-20s %-4s %4.1f ms %5d %4.0f%% %4d of %2d %10s %6s  %s"
                      % (name, rule, wake * 1000, len(tr), 100.0 * held / max(1, len(tr)),
                         b.L, b.max, "never" if first is None else "%.2f s" % first, want,
                         "ok" if ok else "WRONG"))
                if rule == "new" and not ok:
                    bad += 1
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
