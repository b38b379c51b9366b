#!/usr/bin/env python3
"""cputime.py FILE CMD...: run CMD and write the CPU seconds of it and of
every process it started to FILE ("USER SYS", seconds), then exit with
CMD's status.

CMD's process tree includes the servers it starts: pg_ctl's postmaster
leaves its parent and would be reaped by init, so its CPU (and that of its
backends) never reaches a shell's `times` or /usr/bin/time.  This process
makes itself the child subreaper (Linux prctl PR_SET_CHILD_SUBREAPER), so
every orphan of the tree is reaped here and counted.  When CMD has ended,
it waits up to 3 s for the orphans that are still going (a server that a
test stopped a moment before); one still running then is left alone and
not counted.  Used by test/check.sh for each command it runs.
"""
import ctypes
import os
import resource
import subprocess
import sys
import time

PR_SET_CHILD_SUBREAPER = 36


def main():
    if len(sys.argv) < 3:
        sys.stderr.write("usage: cputime.py FILE CMD...\n")
        return 2
    out, cmd = sys.argv[1], sys.argv[2:]
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    try:
        child = subprocess.Popen(cmd)
    except OSError as e:
        sys.stderr.write("cputime.py: %s: %s\n" % (cmd[0], e))
        return 127
    rc = None
    deadline = None
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG if rc is not None else 0)
        except ChildProcessError:
            break
        except InterruptedError:
            continue
        if pid == child.pid:
            rc = os.waitstatus_to_exitcode(status)
            deadline = time.monotonic() + 3
        elif pid == 0:
            if time.monotonic() > deadline:
                break
            time.sleep(0.05)
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    try:
        with open(out, "w") as f:
            f.write("%.2f %.2f\n" % (ru.ru_utime, ru.ru_stime))
    except OSError as e:
        sys.stderr.write("cputime.py: %s: %s\n" % (out, e))
    if rc is None:
        rc = 1
    return 128 - rc if rc < 0 else rc


if __name__ == "__main__":
    sys.exit(main())
