#!/usr/bin/env python3
"""The planted-bug check (see run.sh): every mutation in tests/mutation/mutations
must make one of its tests fail."""
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor

TEST_TIMEOUT_S = 600


def parse(path):
    muts, cur, file = [], None, None
    for n, raw in enumerate(open(path), 1):
        line = raw.rstrip("\n")
        if not line.strip() or line.startswith("#"):
            continue
        key, sep, val = line.partition(": ")
        if not sep:
            sys.exit(f"{path}:{n}: expected 'key: value', got {line!r}")
        if key == "mutation":
            cur = {"name": val, "why": "", "edits": [], "tests": []}
            muts.append(cur)
            file = None
        elif cur is None:
            sys.exit(f"{path}:{n}: {key} before the first mutation")
        elif key == "why":
            cur["why"] = val
        elif key == "file":
            file = val
        elif key == "replace":
            if not file:
                sys.exit(f"{path}:{n}: replace without a file")
            cur["edits"].append([file, val, None])
        elif key == "with":
            if not cur["edits"] or cur["edits"][-1][2] is not None:
                sys.exit(f"{path}:{n}: with without a replace")
            cur["edits"][-1][2] = val
        elif key == "test":
            cur["tests"].append(val)
        else:
            sys.exit(f"{path}:{n}: unknown key {key!r}")
    for m in muts:
        if not m["edits"] or not m["tests"] or any(e[2] is None for e in m["edits"]):
            sys.exit(f"{path}: mutation {m['name']} needs replace/with pairs and at least one test")
    return muts


def programs(m):
    """The check programs m's tests run, or None when a test is a script (which
    may run any of them): only those are relinked after the mutation, since
    relinking every test program takes most of a mutation's build."""
    progs = set()
    for t in m["tests"]:
        words = [w for w in t.split() if not re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", w)]
        if not words or not re.match(r"^tests/[\w/-]+$", words[0]):
            return None
        progs.add(words[0])
    return sorted(progs)


def needs_emulator(m):
    """Does m's test run on the emulated EFA device (a build configured
    --with-efa-emulator)?"""
    return any("EFA_EMU_PREFIX" in t for t in m["tests"])


def log(logf, *parts):
    logf.write(" ".join(parts) + "\n")
    logf.flush()


def run(cmd, cwd, logf, env=None, timeout=None):
    log(logf, f"$ (cd {cwd} && {cmd})")
    try:
        p = subprocess.run(cmd, shell=True, cwd=cwd, env=env, stdout=logf, stderr=subprocess.STDOUT,
                           timeout=timeout)
        return p.returncode
    except subprocess.TimeoutExpired:
        log(logf, f"timed out after {timeout} s")
        return 124


def apply(src, m):
    """Apply every edit of m; returns (originals to restore, None) or (None, why)."""
    originals = {}
    for file, old, new in m["edits"]:
        path = os.path.join(src, file)
        if not os.path.exists(path):
            restore(originals)
            return None, f"{file} does not exist"
        text = open(path).read()
        count = text.count(old)
        if count != 1:
            restore(originals)
            return None, f"{file}: the text to replace occurs {count} times"
        originals.setdefault(path, text)
        open(path, "w").write(text.replace(old, new))
    return originals, None


def stale(top, muts):
    """The mutations whose edits no longer apply to the tree at top, with why."""
    out = []
    for m in muts:
        texts = {}
        for file, old, new in m["edits"]:
            path = os.path.join(top, file)
            if path not in texts:
                if not os.path.exists(path):
                    out.append((m["name"], f"{file} does not exist"))
                    break
                texts[path] = open(path).read()
            count = texts[path].count(old)
            if count != 1:
                out.append((m["name"], f"{file}: the text to replace occurs {count} times"))
                break
            texts[path] = texts[path].replace(old, new)
    return out


def restore(originals):
    for path, text in originals.items():
        open(path, "w").write(text)
    return None


class Worker:
    """One scratch copy of the tree and its build: workers apply mutations side
    by side, each to its own copy (tests wait on peers more than they compute)."""

    def __init__(self, scratch, i, files, top, emulator):
        self.emulator = emulator  # configured --with-efa-emulator: takes only the emulator's mutations
        self.dir = os.path.join(scratch, f"w{i}")
        self.src, self.build = os.path.join(self.dir, "src"), os.path.join(self.dir, "build")
        self.logpath = os.path.join(self.dir, "mutation.log")
        self.files, self.top = files, top

    def prepare(self, configure_args, make):
        """Copy the tree, configure and build it with every check program."""
        shutil.rmtree(self.src, ignore_errors=True)
        for f in self.files:
            os.makedirs(os.path.join(self.src, os.path.dirname(f)), exist_ok=True)
            shutil.copy2(os.path.join(self.top, f), os.path.join(self.src, f))
        os.makedirs(self.build, exist_ok=True)
        self.logf = open(self.logpath, "w")
        self.env = dict(os.environ, top_builddir=".", top_srcdir=self.src)
        quoted = " ".join("'" + a.replace("'", "'\\''") + "'" for a in configure_args)
        self.make = make
        # check_PROGRAMS too (make check with no tests runs nothing).
        self.build_cmd = f"{make} >/dev/null && {make} check TESTS= >/dev/null"
        return not (run("autoreconf -fi", self.src, self.logf) or
                    run(f"'{self.src}/configure' {quoted}", self.build, self.logf) or
                    run(self.build_cmd, self.build, self.logf))

    def test(self, t):
        return run(t, self.build, self.logf, self.env, TEST_TIMEOUT_S)

    def mutate(self, m):
        """(caught by, result) of one mutation; the copy is restored after it."""
        log(self.logf, f"==== mutation {m['name']}: {m['why']}")
        originals, why = apply(self.src, m)
        if originals is None:
            return why, "NOT APPLIED"
        try:
            progs = programs(m)
            cmd = f"{self.make} >/dev/null && {self.make} {' '.join(progs)} >/dev/null" if progs else self.build_cmd
            if run(cmd, self.build, self.logf):
                return "(does not build)", "NOT APPLIED"
            # One failing test is the catch: the rest need not run. A test
            # that skips (77) under the mutation did not catch it.
            for t in m["tests"]:
                if self.test(t) not in (0, 77):
                    return t, "caught"
            return "nothing", "SURVIVED"
        finally:
            restore(originals)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    top = os.path.dirname(os.path.dirname(here))
    configure_args = sys.argv[1:]
    only = set(filter(None, os.environ.get("SRD_MUTATIONS", "").split(",")))
    muts = [m for m in parse(os.path.join(here, "mutations")) if not only or m["name"] in only]
    if configure_args == ["--applies"]:
        # Cheap enough for make check: an edit to the code that a planted bug
        # names is caught the day it is made, not at the next full run.
        bad = stale(top, muts)
        for name, why in bad:
            print(f"mutation {name} no longer applies: {why}")
        print(f"{len(muts) - len(bad)} of {len(muts)} planted bugs apply")
        sys.exit(1 if bad else 0)
    if not muts:
        sys.exit(f"mutation: no planted bug is named {','.join(sorted(only))}")
    # The emulator's planted bugs need a build against its libfabric; the
    # others, against the one configure finds (1.17 here), in their own copies.
    emu_prefix = os.environ.get("SRD_EFA_EMU_PREFIX", "")
    emu_muts = [m for m in muts if needs_emulator(m)]
    if emu_muts and not emu_prefix:
        sys.exit(f"mutation: {len(emu_muts)} planted bug(s) ({', '.join(m['name'] for m in emu_muts)}) run on the "
                 "emulated EFA device: SRD_EFA_EMU_PREFIX=PREFIX (what tests/efa/build-libfabric.sh built), or "
                 "SRD_MUTATIONS naming the others")
    cpus = os.cpu_count() or 1
    nplain = len(muts) - len(emu_muts)
    nworkers = max(1, min(int(os.environ.get("SRD_MUTATION_WORKERS", str(cpus))), nplain)) if nplain else 0
    jobs = os.environ.get("SRD_MUTATION_JOBS", str(cpus))
    scratch = os.environ.get("SRD_MUTATION_DIR") or tempfile.mkdtemp(prefix="srd-mutation.")
    t0 = time.time()
    print(f"{len(muts)} planted bug(s), {nworkers} worker(s)" + (f" and one on the emulated EFA device ({emu_prefix})"
          if emu_muts else "") + f", scratch copies and builds in {scratch}", flush=True)

    # Scratch copies of the tree as it is (tracked and untracked files, not
    # ignored ones): the mutations never touch the working tree.
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=top, check=True,
                           stdout=subprocess.PIPE).stdout.decode().split("\0")
    files = [f for f in files if f and os.path.isfile(os.path.join(top, f))]
    make = f"nice -n 10 make -j{jobs} {os.environ.get('SRD_MUTATION_MAKE_ARGS', '')}"
    workers = [Worker(scratch, i, files, top, False) for i in range(nworkers)]
    if emu_muts:
        workers.append(Worker(scratch, nworkers, files, top, True))
    emu_args = [f"--with-efa-emulator={emu_prefix}"]
    with ThreadPoolExecutor(len(workers)) as pool:
        built = list(pool.map(lambda w: w.prepare(configure_args + (emu_args if w.emulator else []), make), workers))
    if not all(built):
        sys.exit("mutation: the unmutated tree does not build (see " +
                 "; ".join(w.logpath for w, ok in zip(workers, built) if not ok) + ")")

    # Every test must pass unmutated, or catching proves nothing.
    queue = sorted({(needs_emulator(m), t) for m in muts for t in m["tests"]})
    ntests = len(queue)
    lock = threading.Lock()
    broken = []

    def take(w, items, emulator_of):
        """The next item of items for w (one of its kind), removed; else None."""
        with lock:
            for k, item in enumerate(items):
                if emulator_of(item) == w.emulator:
                    return items.pop(k)
        return None

    def baseline(w):
        while (item := take(w, queue, lambda i: i[0])) is not None:
            if w.test(item[1]):
                with lock:
                    broken.append(item[1])

    with ThreadPoolExecutor(len(workers)) as pool:
        list(pool.map(baseline, workers))
    if broken:
        sys.exit("mutation: these tests fail without a mutation: " + "; ".join(sorted(broken)) +
                 " (see " + "; ".join(w.logpath for w in workers) + ")")
    print(f"baseline: {ntests} test command(s) pass unmutated ({time.time() - t0:.0f} s)", flush=True)

    rows = [None] * len(muts)
    todo = list(range(len(muts)))

    def drain(w):
        while (i := take(w, todo, lambda i: needs_emulator(muts[i]))) is not None:
            t1 = time.time()
            rows[i] = (muts[i]["name"], *w.mutate(muts[i]))
            with lock:
                print(f"{rows[i][0]}: {rows[i][2]} ({time.time() - t1:.0f} s)", flush=True)

    with ThreadPoolExecutor(len(workers)) as pool:
        list(pool.map(drain, workers))
    for w in workers:
        w.logf.close()

    width = max(len(r[0]) for r in rows)
    print()
    print(f"| {'mutation':<{width}} | caught by | result |")
    print(f"|{'-' * (width + 2)}|---|---|")
    for name, by, result in rows:
        print(f"| {name:<{width}} | {by} | {result} |")
    bad = sum(r[2] != "caught" for r in rows)
    print(f"\n{len(rows) - bad} of {len(rows)} mutations caught in {time.time() - t0:.0f} s")
    if bad:
        print(f"kept {scratch} (logs: " + "; ".join(w.logpath for w in workers) + ")")
    elif not os.environ.get("SRD_MUTATION_DIR"):
        shutil.rmtree(scratch, ignore_errors=True)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
