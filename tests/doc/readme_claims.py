"""README.md and the user pages in doc/ say what is true of this tree: README
stays short; each page names its reader first; relative links resolve; every
NCCL_SRD_* variable they name is in the parameter table's page
(doc/variables.md); every srd-info/srd-perf option they use is in the tool's
--help; the ncclNet/tuner/RMA versions README names are the ones the library
exports; srd-info's first line after its version is the libfabric in use;
the status table's numbers are BENCHMARKS.md's.
Usage: readme_claims.py SRCDIR BUILDDIR"""
import os
import re
import subprocess
import sys

src, build = sys.argv[1], sys.argv[2]
pages = ["README.md", "BENCHMARKS.md", "doc/tools.md", "doc/operations.md", "doc/aws.md", "doc/variables.md"]
text = {p: open(os.path.join(src, p)).read() for p in pages}
bad = []

readme = text["README.md"]
n = readme.count("\n")
if n > 160:
    bad.append("README.md has %d lines (at most 160)" % n)
for p in pages + ["DESIGN.md", "CONTRIBUTING.md", "CHANGELOG.md"]:
    head = " ".join(open(os.path.join(src, p)).read().splitlines()[1:6])
    if not re.search(r"\bFor (users|operators|developers|evaluators)\b", head):
        bad.append(p + " does not name its reader in its first lines")

# BENCHMARKS: short, with plots drawn from committed data by a committed
# script (doc/bench/plot.py reads the CSVs it names).
bench_text = text["BENCHMARKS.md"]
if bench_text.count("\n") > 300:
    bad.append("BENCHMARKS.md has %d lines (at most 300)" % bench_text.count("\n"))
plots = re.findall(r"!\[[^]]*\]\((doc/bench/[\w.-]+\.png)\)", bench_text)
if len(plots) < 2:
    bad.append("BENCHMARKS.md shows %d plots (at least 2)" % len(plots))
plot_py = open(os.path.join(src, "doc/bench/plot.py")).read()
for png in plots:
    name = os.path.basename(png)
    if '"%s"' % name not in plot_py:
        bad.append("%s is not drawn by doc/bench/plot.py" % png)
for data in sorted(set(re.findall(r'rows\("([\w.-]+\.csv)"\)', plot_py))):
    path = os.path.join(src, "doc/bench", data)
    if not os.path.exists(path) or sum(1 for _ in open(path)) < 2:
        bad.append("doc/bench/%s, which doc/bench/plot.py reads, is missing or empty" % data)

# Links: [text](path) relative to the page, and bare mentions of doc/*.md.
for p in pages:
    base = os.path.dirname(os.path.join(src, p))
    for target in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", text[p]):
        if not os.path.exists(os.path.join(base, target)):
            bad.append("%s links to %s, which does not exist" % (p, target))
    for target in re.findall(r"\b((?:doc|tests|pkg|src)/[\w./-]+\.(?:md|sh|py|c|conf)|doc/Dockerfile)\b", text[p]):
        if not os.path.exists(os.path.join(src, target)):
            bad.append("%s names %s, which does not exist" % (p, target))

known = set(re.findall(r"^\| `(NCCL_SRD_\w+)`", text["doc/variables.md"], re.M))
for p in pages:
    # The Dockerfile's build arguments are its own names, not the plugin's.
    prose = re.sub(r"```dockerfile\n.*?```", "", text[p], flags=re.S)
    for v in set(re.findall(r"\bNCCL_SRD_[A-Z0-9_]*[A-Z0-9]\b", prose)):
        if v not in known and not v.startswith("NCCL_SRD_TEST_"):
            bad.append("%s names %s, which the plugin does not read" % (p, v))

# Options: every "srd-info --x" / "srd-perf ... --x" on one line of a page.
for tool in ("srd-info", "srd-perf"):
    helptext = subprocess.run([os.path.join(build, tool), "--help"], capture_output=True, text=True).stdout
    for p in pages:
        for line in text[p].splitlines():
            if tool not in line:
                continue
            rest = line[line.index(tool):].split("#")[0]
            for opt in re.findall(r"(?<![\w-])(--[a-z][a-z-]*)", rest):
                if opt not in helptext:
                    bad.append("%s: %s has no option %s" % (p, tool, opt))

# The versions README names against the library's exports.
lib = os.path.join(build, ".libs", "libnccl-net-srd.so")
syms = subprocess.run(["nm", "-D", "--defined-only", lib], capture_output=True, text=True).stdout
for family in ("ncclNetPlugin", "ncclTunerPlugin", "ncclRmaPlugin"):
    m = re.search(r"`%s_v(\d+)` (?:to|and) `_v(\d+)`" % family, readme)
    if not m:
        bad.append("README names no %s range" % family)
        continue
    lo, hi = int(m.group(1)), int(m.group(2))
    have = sorted(int(v) for v in re.findall(r"\b%s_v(\d+)\b" % family, syms))
    if not have or have[0] != lo or have[-1] != hi:
        bad.append("README says %s_v%d..v%d; the library exports %s" % (family, lo, hi, have))

# srd-info: its version line, then the libfabric in use.
out = subprocess.run([os.path.join(build, "srd-info")], capture_output=True, text=True).stdout
lines = [l for l in out.splitlines() if l.strip()]
if len(lines) < 2 or not lines[0].startswith("srd-info ") or not lines[1].startswith("libfabric "):
    bad.append("srd-info does not print its version line, then libfabric: %r" % lines[:2])
if "after its version line, the\nlibfabric in use" not in readme:
    bad.append("README no longer says where srd-info shows the libfabric (update this check with it)")

# The status table's measured numbers all appear in BENCHMARKS.md.
bench = open(os.path.join(src, "BENCHMARKS.md")).read()
status = readme[readme.index("## Status"):readme.index("## Quick start")]
for row in re.findall(r"^\| (large messages|small \(8 B\)|mid \(128-512 KiB\)) \|(.*)$", status, re.M):
    for num in re.findall(r"(?<![\w.])(\d+\.\d\d)(?=x|\b)", row[1]):
        if not re.search(r"(?<![\d.])" + re.escape(num) + r"(?!\d)", bench):
            bad.append("README's status row '%s' says %s, which BENCHMARKS.md does not" % (row[0], num))

# The quick start: two commands, the first building in build/ and running srd-perf.
qs = re.search(r"## Quick start.*?```\n(.*?)```", readme, re.S).group(1).splitlines()
if len(qs) != 2 or "mkdir -p build" not in qs[0] or "./srd-perf" not in qs[0]:
    bad.append("the quick start is not two commands, the first building in build/ and running srd-perf")

for b in bad:
    print("FAIL:", b)
if bad:
    sys.exit(1)
print("PASS: README.md and doc/ agree with the tree (%d pages, %d variables known)" % (len(pages), len(known)))
