"""PyTorch all_reduce and all_gather on GPU tensors, results checked, times
recorded: run under `ranks N` from .device/gpu-env.sh (RANK, WORLD_SIZE,
MASTER_* set; every rank on GPU LOCAL_RANK) with the plugin's variables in
the environment (tests/device/gdr.sh sets them, GPUDirect on; mid.sh runs it
over Socket and over the plugin on tcp for the 256 MiB all_reduce).

Prints one line per collective and size from rank 0, then RESULT ok|FAIL;
exits 1 on a wrong element or an error."""
import os
import sys

import torch
import torch.distributed as dist

SIZES = [8, 1 << 10, 128 << 10, 2 << 20, 32 << 20, 256 << 20]  # bytes per rank
ITERS = int(os.environ.get("GDR_TORCH_ITERS", "10"))


def timed(fn, iters):
    """Median time of fn in microseconds, measured with CUDA events."""
    times = []
    for _ in range(iters):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1000.0)
    times.sort()
    return times[len(times) // 2]


def main():
    rank = int(os.environ["RANK"])
    world = int(os.environ["WORLD_SIZE"])
    device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
    torch.cuda.set_device(device)
    dist.init_process_group("nccl", device_id=device)
    wrong = 0
    for size in SIZES:
        n = max(size // 4, 1)
        # all_reduce: rank r contributes r + 1 + i % 7 at element i.
        pattern = torch.arange(n, device=device, dtype=torch.float32).remainder_(7)
        x = pattern + (rank + 1)
        dist.all_reduce(x)
        expect = pattern * world + world * (world + 1) / 2
        bad = int((x != expect).sum().item())
        wrong += bad

        def ar():
            dist.all_reduce(x)

        t = timed(ar, ITERS)
        if rank == 0:
            print(f"all_reduce {n * 4} B: {t:.1f} us, {n * 4 / t / 1e3:.3f} GB/s algbw, wrong {bad}", flush=True)

        # all_gather: rank r's chunk holds r * 1000 + i % 1000.
        mine = torch.arange(n, device=device, dtype=torch.float32).remainder_(1000) + rank * 1000
        out = torch.empty(n * world, device=device, dtype=torch.float32)
        dist.all_gather_into_tensor(out, mine)
        base = torch.arange(n, device=device, dtype=torch.float32).remainder_(1000)
        expect = torch.cat([base + r * 1000 for r in range(world)])
        bad = int((out != expect).sum().item())
        wrong += bad

        def ag():
            dist.all_gather_into_tensor(out, mine)

        t = timed(ag, ITERS)
        if rank == 0:
            print(f"all_gather {n * 4} B per rank: {t:.1f} us, {n * 4 * world / t / 1e3:.3f} GB/s algbw, wrong {bad}",
                  flush=True)
    total = torch.tensor([wrong], device=device)
    dist.all_reduce(total)
    dist.destroy_process_group()
    if rank == 0:
        print(f"RESULT {'ok' if total.item() == 0 else 'FAIL'} ({int(total.item())} wrong elements, {world} ranks)",
              flush=True)
    return 0 if total.item() == 0 else 1


if __name__ == "__main__":
    try:
        rc = main()
    except Exception as e:  # an error is a failed check, with its reason
        print(f"RESULT FAIL rank {os.environ.get('RANK')}: {e!r}", flush=True)
        rc = 1
    sys.exit(rc)
