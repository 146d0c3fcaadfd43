#!/usr/bin/env python3
"""Where a run's CPU time goes: over a window in the middle of a benchmark,
the whole machine's busy share and every thread of the matching processes
(user and system time, summed by thread name). Answers "is this run bound by
cores, and by which threads" for issue 13's rows on the device.

  cpu_share.py --match all_reduce_perf --log RUN.log --after 'out-of-place' \
               --delay 2 --window 5

It waits until RUN.log contains the --after text (nccl-tests prints its
header once the ranks are up), then --delay seconds (warm-up), then measures
--window seconds. Prints one table; exits 1 if no process matched or the run
ended before the window closed (the numbers would describe no steady state).
"""
import argparse
import os
import sys
import time

TICK = os.sysconf("SC_CLK_TCK")


def machine():
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    idle = v[3] + v[4]  # idle + iowait
    return sum(v[:8]), idle


def threads(match):
    """{(pid, tid): (name, utime, stime)} of every thread of every process
    whose command name contains match."""
    out = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/comm") as f:
                if match not in f.read():
                    continue
            for tid in os.listdir(f"/proc/{pid}/task"):
                with open(f"/proc/{pid}/task/{tid}/stat") as f:
                    s = f.read()
                name = s[s.index("(") + 1:s.rindex(")")]
                rest = s[s.rindex(")") + 2:].split()
                out[(pid, tid)] = (name, int(rest[11]), int(rest[12]))
        except (FileNotFoundError, ProcessLookupError, ValueError):
            continue
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--match", required=True)
    ap.add_argument("--log", required=True)
    ap.add_argument("--after", default="out-of-place")
    ap.add_argument("--delay", type=float, default=2.0)
    ap.add_argument("--window", type=float, default=5.0)
    ap.add_argument("--timeout", type=float, default=120.0)
    a = ap.parse_args()
    t0 = time.time()
    while True:
        try:
            with open(a.log, errors="replace") as f:
                if a.after in f.read():
                    break
        except FileNotFoundError:
            pass
        if time.time() - t0 > a.timeout:
            print(f"cpu_share: '{a.after}' never appeared in {a.log}")
            return 1
        time.sleep(0.2)
    time.sleep(a.delay)
    m0, th0 = machine(), threads(a.match)
    time.sleep(a.window)
    m1, th1 = machine(), threads(a.match)
    if not th0 or not th1:
        print(f"cpu_share: no process named like '{a.match}'")
        return 1
    gone = [k for k in th0 if k not in th1]
    pids = {p for p, _ in th0}
    if len({p for p, _ in th1} & pids) < len(pids):
        print("cpu_share: a process ended inside the window; numbers not kept")
        return 1
    total, idle = m1[0] - m0[0], m1[1] - m0[1]
    ncpu = os.cpu_count()
    print(f"window {a.window:.1f} s, {ncpu} CPUs, machine busy {100.0 * (total - idle) / total:.0f}% "
          f"({(total - idle) / TICK / a.window:.1f} cores), {len(pids)} processes")
    by = {}
    for k, (name, u, s) in th1.items():
        if k not in th0:
            continue
        _, u0, s0 = th0[k]
        e = by.setdefault(name, [0, 0, 0])
        e[0] += 1
        e[1] += u - u0
        e[2] += s - s0
    print("| thread name | threads | cores (user) | cores (system) | cores per thread |")
    print("|---|---|---|---|---|")
    for name, (n, u, s) in sorted(by.items(), key=lambda kv: -(kv[1][1] + kv[1][2])):
        cu, cs = u / TICK / a.window, s / TICK / a.window
        if cu + cs < 0.01:
            continue
        print(f"| {name} | {n} | {cu:.2f} | {cs:.2f} | {(cu + cs) / n:.2f} |")
    if gone:
        print(f"({len(gone)} threads ended inside the window)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
