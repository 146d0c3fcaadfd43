#!/usr/bin/env python3
"""The planted-bug check (see run.sh): every mutation in tests/mutation/mutations
must make one of its tests fail."""
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

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
    jobs = os.environ.get("SRD_MUTATION_JOBS", str(os.cpu_count() or 1))
    scratch = os.environ.get("SRD_MUTATION_DIR") or tempfile.mkdtemp(prefix="srd-mutation.")
    src, build = os.path.join(scratch, "src"), os.path.join(scratch, "build")
    logpath = os.path.join(scratch, "mutation.log")
    t0 = time.time()
    print(f"scratch copy and build in {scratch}; log {logpath}", flush=True)

    # A scratch copy of the tree as it is (tracked and untracked files, not
    # ignored ones): the mutations never touch the working tree.
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=top, check=True,
                           stdout=subprocess.PIPE).stdout.decode().split("\0")
    shutil.rmtree(src, ignore_errors=True)
    for f in filter(None, files):
        if not os.path.isfile(os.path.join(top, f)):
            continue
        os.makedirs(os.path.join(src, os.path.dirname(f)), exist_ok=True)
        shutil.copy2(os.path.join(top, f), os.path.join(src, f))
    os.makedirs(build, exist_ok=True)
    with open(logpath, "w") as logf:
        quoted = " ".join("'" + a.replace("'", "'\\''") + "'" for a in configure_args)
        env = dict(os.environ, top_builddir=".", top_srcdir=src)
        make = f"nice -n 10 make -j{jobs} {os.environ.get('SRD_MUTATION_MAKE_ARGS', '')}"
        # check_PROGRAMS too (make check with no tests runs nothing).
        build_cmd = f"{make} >/dev/null && {make} check TESTS= >/dev/null"
        if (run("autoreconf -fi", src, logf) or run(f"'{src}/configure' {quoted}", build, logf)
                or run(build_cmd, build, logf)):
            sys.exit(f"mutation: the unmutated tree does not build (see {logpath})")
        # Every test must pass unmutated, or catching proves nothing.
        tests = sorted({t for m in muts for t in m["tests"]})
        broken = [t for t in tests if run(t, build, logf, env, TEST_TIMEOUT_S)]
        if broken:
            sys.exit("mutation: these tests fail without a mutation: " + "; ".join(broken) + f" (see {logpath})")
        print(f"baseline: {len(tests)} test command(s) pass unmutated ({time.time() - t0:.0f} s)", flush=True)

        rows = []
        for m in muts:
            t1 = time.time()
            log(logf, f"==== mutation {m['name']}: {m['why']}")
            originals, why = apply(src, m)
            if originals is None:
                rows.append((m["name"], why, "NOT APPLIED"))
            else:
                try:
                    progs = programs(m)
                    cmd = f"{make} >/dev/null && {make} {' '.join(progs)} >/dev/null" if progs else build_cmd
                    if run(cmd, build, logf):
                        rows.append((m["name"], "(does not build)", "NOT APPLIED"))
                    else:
                        # A test that skips (77) under the mutation did not catch it.
                        caught = [t for t in m["tests"] if run(t, build, logf, env, TEST_TIMEOUT_S) not in (0, 77)]
                        rows.append((m["name"], "; ".join(caught) if caught else "nothing",
                                     "caught" if caught else "SURVIVED"))
                finally:
                    restore(originals)
            print(f"{m['name']}: {rows[-1][2]} ({time.time() - t1:.0f} s)", flush=True)
        run(build_cmd, build, logf)

    w = max(len(r[0]) for r in rows)
    print()
    print(f"| {'mutation':<{w}} | caught by | result |")
    print(f"|{'-' * (w + 2)}|---|---|")
    for name, by, result in rows:
        print(f"| {name:<{w}} | {by} | {result} |")
    bad = sum(r[2] != "caught" for r in rows)
    print(f"\n{len(rows) - bad} of {len(rows)} mutations caught in {time.time() - t0:.0f} s")
    if bad:
        print(f"kept {scratch} (log: {logpath})")
    elif not os.environ.get("SRD_MUTATION_DIR"):
        shutil.rmtree(scratch, ignore_errors=True)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
