"""Draws BENCHMARKS.md's plots from the measured results beside this script
(doc/bench/*.csv, rows taken from the runs BENCHMARKS.md names); a rerun
that rewrites a CSV redraws its plot. Needs matplotlib
(apt-get install -y python3-matplotlib). Usage: python3 doc/bench/plot.py"""
import csv
import os
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

here = os.path.dirname(os.path.abspath(__file__))


def rows(name):
    with open(os.path.join(here, name)) as f:
        return list(csv.DictReader(f))


def size_label(b):
    for unit, n in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= n:
            return "%d %s" % (b // n, unit)
    return "%d B" % b


def log_sizes(ax, sizes):
    ax.set_xscale("log", base=2)
    ax.set_xticks(sizes)
    ax.set_xticklabels([size_label(s) for s in sizes], rotation=45)
    ax.grid(True, which="major", alpha=0.3)


def one_hop():
    """Time of one hop against size: NCCL's Socket and ours inside NCCL, with
    the floors under them (raw TCP, raw libfabric, the plugin alone)."""
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.5), sharey=True)
    data = rows("one-hop.csv")
    for ax, lf in zip(axes, ("2.6 tcp", "1.17 tcp;ofi_rxm")):
        series = defaultdict(lambda: defaultdict(list))
        for r in data:
            if r["gpu"] == "H100" and r["libfabric"] == lf:
                series[r["measure"]][int(r["size_bytes"])].append(float(r["p50_or_time_us"]))
        for measure, style in (("NCCL Socket hop", "o-"), ("our hop in NCCL", "s-"), ("raw TCP", ":"),
                               ("raw libfabric", "--"), ("our plugin", "-.")):
            pts = sorted(series[measure].items())
            xs = [s for s, _ in pts]
            ax.plot(xs, [min(v) for _, v in pts], style, label=measure + " (faster of 2 runs)")
        log_sizes(ax, xs)
        ax.set_yscale("log")
        ax.set_title("one hop, libfabric " + lf + " (H100, loopback)")
        ax.set_xlabel("message size")
    axes[0].set_ylabel("time, us (lower is better)")
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(here, "one-hop.png"), dpi=110)


def busbw():
    """nccl-tests busbw against size: sendrecv at 2 ranks, alltoall at 4."""
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.5))
    data = rows("sendrecv-alltoall.csv")
    for ax, test in zip(axes, ("sendrecv, 2 ranks", "alltoall, 4 ranks")):
        for tr, style in (("NCCL Socket", "o-"), ("nccl-srd", "s-")):
            pts = sorted((int(r["size_bytes"]), float(r["busbw_GBps"])) for r in data
                         if r["test"] == test and r["transport"] == tr)
            ax.plot([p[0] for p in pts], [p[1] for p in pts], style, label=tr)
        log_sizes(ax, sorted({int(r["size_bytes"]) for r in data if r["test"] == test}))
        ax.set_title(test + "\n(GPU machine, tcp loopback; a build with a 128 KiB stripe threshold)", fontsize=9)
        ax.set_xlabel("message size")
        ax.set_ylabel("busbw, GB/s (higher is better)")
        ax.set_ylim(bottom=0)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(here, "busbw.png"), dpi=110)


def ratios():
    """Our time over Socket's, median of the rounds with their range."""
    fig, axes = plt.subplots(1, 3, figsize=(13, 4.2), sharey=True)
    data = rows("mid-ratios.csv")
    for ax, lf in zip(axes, ("2.6 tcp", "1.17 tcp;ofi_rxm", "1.17, FI_OFI_RXM_BUFFER_SIZE=32808")):
        tests = sorted({r["test_ranks"] for r in data if r["libfabric"] == lf})
        for t in tests:
            pts = sorted((int(r["size_bytes"]), float(r["median_ratio_to_socket"]), float(r["min"]), float(r["max"]))
                         for r in data if r["libfabric"] == lf and r["test_ranks"] == t)
            xs = [p[0] for p in pts]
            ax.errorbar(xs, [p[1] for p in pts], yerr=[[p[1] - p[2] for p in pts], [p[3] - p[1] for p in pts]],
                        fmt="o-", capsize=3, label=t)
        log_sizes(ax, xs)
        ax.axhline(1.0, color="gray", lw=1)
        ax.set_title("libfabric " + lf, fontsize=9)
        ax.set_xlabel("message size")
    axes[0].set_ylabel("our time / Socket's (below 1: faster)")
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(here, "ratio-to-socket.png"), dpi=110)


if __name__ == "__main__":
    one_hop()
    busbw()
    ratios()
    print("wrote", ", ".join(sorted(f for f in os.listdir(here) if f.endswith(".png"))))
