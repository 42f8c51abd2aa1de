"""Growing device memory in place (stridex.VirtualBuffer) against realloc-and-copy (torch).

Prints three markdown tables:
  1. grow step by step 1 GiB -> 8 GiB: time, bytes copied, base stable, peak device memory;
  2. the "4 GiB + 25%" case alone;
  3. per-call cost of cuMemCreate, cuMemMap, cuMemSetAccess, cuMemUnmap (and cuMemRelease) at
     chunk sizes 2, 8, 32, 128 and 512 MiB, from the buffer's own timings (buf.stats).

Needs a CUDA GPU with about 16 GiB free, torch with CUDA, and stridex. Takes well under a minute on
an H100 (the budget is 3 minutes). Usage: python bench/vmm_grow.py [--device N] [--max-gib 8]
"""

import argparse
import time

import stridex

MiB = 1 << 20
GiB = 1 << 30


def device_used(torch, device):
    free, total = torch.cuda.mem_get_info(device)
    return total - free


def gib(n):
    return f"{n / GiB:.2f}"


def vmm_growth(torch, device, steps, chunk):
    """Grow one VirtualBuffer through `steps` (bytes); one row per grow."""
    torch.cuda.synchronize(device)
    before = device_used(torch, device)
    buf = stridex.VirtualBuffer(size=steps[0], capacity=steps[-1], device=device, chunk_size=chunk)
    base = buf.base
    peak = device_used(torch, device) - before
    rows = []
    for old, new in zip(steps, steps[1:]):
        copied = buf.stats["bytes_copied"]
        start = time.perf_counter()
        buf.grow(new)  # returns when the memory is mapped and accessible: nothing is queued
        ms = (time.perf_counter() - start) * 1e3
        peak = max(peak, device_used(torch, device) - before)
        rows.append((old, new, ms, buf.stats["bytes_copied"] - copied, buf.base == base, peak, buf.num_chunks))
    buf.close()
    return rows


def torch_growth(torch, device, steps):
    """torch.empty(new) + copy_ of the old contents, the way a growing array reallocates."""
    dev = torch.device("cuda", device)
    torch.cuda.synchronize(device)
    torch.cuda.empty_cache()
    before = device_used(torch, device)
    old = torch.empty(steps[0], dtype=torch.uint8, device=dev)
    old.fill_(1)
    rows = []
    for old_size, new in zip(steps, steps[1:]):
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        start = time.perf_counter()
        grown = torch.empty(new, dtype=torch.uint8, device=dev)
        grown[:old_size].copy_(old)
        torch.cuda.synchronize(device)
        ms = (time.perf_counter() - start) * 1e3
        moved = grown.data_ptr() != old.data_ptr()
        peak = torch.cuda.max_memory_allocated(device)  # old and new alive during the copy
        peak_device = device_used(torch, device) - before
        del old
        old = grown
        torch.cuda.empty_cache()  # give the old block back, as a real realloc would
        rows.append((old_size, new, ms, old_size, not moved, max(peak, peak_device)))
    del old
    torch.cuda.empty_cache()
    return rows


def growth_table(title, vmm_rows_by_chunk, torch_rows):
    print(f"\n### {title}\n")
    chunks = list(vmm_rows_by_chunk)
    head = "| grow (GiB) |" + "".join(
        f" VMM {c // MiB} MiB chunks: ms | copied | base stable | peak GiB |" for c in chunks
    )
    head += " torch realloc+copy: ms | copied GiB | base stable | peak GiB |"
    print(head)
    print("|---" * (1 + 4 * len(chunks) + 4) + "|")
    for i, t in enumerate(torch_rows):
        line = f"| {gib(t[0])} -> {gib(t[1])} |"
        for c in chunks:
            r = vmm_rows_by_chunk[c][i]
            line += f" {r[2]:.2f} | {r[3]} | {'yes' if r[4] else 'NO'} | {gib(r[5])} |"
        line += f" {t[2]:.2f} | {gib(t[3])} | {'yes' if t[4] else 'no'} | {gib(t[5])} |"
        print(line)


def call_costs(device, chunk_sizes, budget):
    print("\n### Per-call cost (µs, mean / max), chunks mapped one grow at a time\n")
    print(
        "| chunk | chunks | cuMemCreate | cuMemMap | cuMemSetAccess (1 chunk) | cuMemUnmap | cuMemRelease |"
        " cuMemSetAccess (all chunks, 1 call) | grow µs per GiB |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for chunk in chunk_sizes:
        n = max(4, min(64, budget // chunk))
        # One chunk per grow: every call is timed at this chunk size, SetAccess included.
        buf = stridex.VirtualBuffer(size=0, capacity=n * chunk, device=device, chunk_size=chunk)
        for i in range(1, n + 1):
            buf.grow(i * chunk)
        buf.shrink(0)
        calls = buf.stats["calls"]
        buf.close()
        # All chunks in one grow: SetAccess once for the whole range (what VirtualBuffer does).
        batch = stridex.VirtualBuffer(size=0, capacity=n * chunk, device=device, chunk_size=chunk)
        start = time.perf_counter()
        batch.grow(n * chunk)
        per_gib = (time.perf_counter() - start) * 1e6 / (n * chunk / GiB)
        batched = batch.stats["calls"]["cuMemSetAccess"]
        batch.close()

        def cell(name):
            c = calls[name]
            return f"{c['mean_us']:.1f} / {c['max_us']:.1f}"

        print(
            f"| {chunk // MiB} MiB | {n} | {cell('cuMemCreate')} | {cell('cuMemMap')} | {cell('cuMemSetAccess')} |"
            f" {cell('cuMemUnmap')} | {cell('cuMemRelease')} | {batched['mean_us']:.1f} | {per_gib:.0f} |"
        )


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", type=int, default=0)
    parser.add_argument("--max-gib", type=int, default=8, help="grow 1 GiB -> this many GiB")
    args = parser.parse_args()

    import torch

    if not stridex.cuda_available() or not torch.cuda.is_available():
        raise SystemExit("needs a CUDA device (stridex.cuda_available() and torch.cuda.is_available())")
    torch.cuda.init()
    dev = args.device
    print(f"## VirtualBuffer growth on {torch.cuda.get_device_name(dev)} (torch {torch.__version__})")
    started = time.perf_counter()

    # Warm up both paths (context creation, first cudaMalloc) outside the measurements.
    stridex.VirtualBuffer(size=64 * MiB, capacity=64 * MiB, device=dev).close()
    torch.empty(64 * MiB, dtype=torch.uint8, device=f"cuda:{dev}").fill_(0)
    torch.cuda.synchronize(dev)

    steps = [k * GiB for k in range(1, args.max_gib + 1)]
    growth_table(
        f"Grow 1 -> {args.max_gib} GiB, 1 GiB per step",
        {c: vmm_growth(torch, dev, steps, c) for c in (2 * MiB, 128 * MiB)},
        torch_growth(torch, dev, steps),
    )
    quarter = [4 * GiB, 5 * GiB]
    growth_table(
        "4 GiB + 25%",
        {c: vmm_growth(torch, dev, quarter, c) for c in (2 * MiB, 128 * MiB)},
        torch_growth(torch, dev, quarter),
    )
    call_costs(dev, [2 * MiB, 8 * MiB, 32 * MiB, 128 * MiB, 512 * MiB], budget=4 * GiB)
    print(f"\n(total {time.perf_counter() - started:.1f} s)")


if __name__ == "__main__":
    main()
