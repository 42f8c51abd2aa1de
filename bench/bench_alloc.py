"""Allocating calls against stridex.copy into a preallocated destination, and allocation round trips
against torch, on one GPU, in one process.

    python bench/bench_alloc.py [--repeat 15] [--json out.json] [--host-only]
    STRIDEX_BENCH_HOST_VARIANTS="base=streaming=0;nt=streaming=1" python bench/bench_alloc.py --host-only

Candidates are timed interleaved and reported as the median with the spread (min-max). Bandwidth
cases time, with the host clock around a synchronized call, one call and the release of its result
(the allocating call) or one copy into a destination made beforehand (stridex.copy); GB/s counts
bytes read plus bytes written on the device, the bytes moved for device -> host. Round trips are
the host time of N allocate-and-release iterations (device work synchronized once at the end).
The release case drops a 64 MiB result while another stream runs a ~0.5 s sleeping kernel.

Host rows (256 MiB, bytes moved): device -> host into existing pinned and pageable memory, into a
fresh result (View.to('cpu'): the pageable pool; 'cuda_host': the pinned pool), host -> device from
pinned and pageable memory, and strided pageable <-> device both ways (a column block [:, :8192]
and every other row [::2] of a 8192 x 16384 float32 host array, to and from a contiguous GPU
array), each as "% of pinned": against the contiguous pinned transfer of the same direction and
bytes in the same run (the same layout in pinned memory is shown too). STRIDEX_BENCH_HOST_VARIANTS
("name=setting;name=setting", each setting a STRIDEX_HOST_COPY value, docs/memory.md) times the
pageable rows once per setting, interleaved in one process; the first-use rows time View.to('cpu')
of a fresh pool block (emptied cache) and its first two reuses, per registration policy.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--json", help="write the rows here too")
    parser.add_argument("--host-only", action="store_true", help="only the host <-> device rows")
    args = parser.parse_args()

    import torch

    import stridex

    if not torch.cuda.is_available() or not stridex.cuda_available():
        print("bench_alloc: needs a CUDA GPU (torch and stridex)", file=sys.stderr)
        return 2
    dev = torch.device("cuda:0")
    rows: list[dict] = []

    def sync() -> None:
        torch.cuda.synchronize()

    def timed(fn) -> float:
        sync()
        t = time.perf_counter()
        fn()
        sync()
        return time.perf_counter() - t

    def interleaved(cands: dict, timer, repeat: int) -> dict[str, list[float]]:
        for fn in cands.values():  # warm-up: modules, pools, staging buffers
            timer(fn)
        out: dict[str, list[float]] = {k: [] for k in cands}
        for _ in range(repeat):
            for k, fn in cands.items():
                out[k].append(timer(fn))
        return out

    def ratio_case(label: str, src_t, alloc_fn, moved: int) -> None:
        sv = stridex.view(src_t)
        dst = stridex.view(torch.empty(src_t.shape, dtype=src_t.dtype, device=src_t.device))

        def copy_into():
            stridex.copy(dst, sv)

        def allocating():  # the release is stream-ordered: timed()'s synchronize covers it
            r = alloc_fn(sv)
            del r

        t = interleaved({"copy": copy_into, "alloc": allocating}, timed, args.repeat)
        gb = {k: [moved / s / 1e9 for s in v] for k, v in t.items()}
        c, a = statistics.median(gb["copy"]), statistics.median(gb["alloc"])
        rows.append(
            {
                "case": label,
                "copy_GBps": round(c, 1),
                "alloc_GBps": round(a, 1),
                "ratio": round(a / c, 3),
                "alloc_spread": [round(min(gb["alloc"]), 1), round(max(gb["alloc"]), 1)],
            }
        )
        print(f"{label:48s} copy {c:8.1f}  alloc {a:8.1f} GB/s  ratio {a / c:6.1%}", flush=True)

    def device_rows() -> None:
        big = torch.empty(1 << 28, dtype=f32, device=dev)  # 1 GiB
        ratio_case("contiguous fp32 1 GiB View.copy()", big, lambda v: v.copy(), 2 * big.nbytes)
        del big
        sq = torch.empty(8192, 8192, dtype=f32, device=dev)
        ratio_case("transpose fp32 8192^2 .T.contiguous()", sq.T, lambda v: v.contiguous(), 2 * sq.nbytes)
        sqb = torch.empty(8192, 8192, dtype=bf16, device=dev)
        ratio_case("transpose bf16 8192^2 .T.contiguous()", sqb.T, lambda v: v.contiguous(), 2 * sqb.nbytes)
        del sq, sqb
        z = torch.empty(256, 1024, 256, dtype=f32, device=dev)
        ratio_case("permute(2,0,1) fp32 256x1024x256", z.permute(2, 0, 1), lambda v: v.contiguous(), 2 * z.nbytes)
        del z
        nchw = torch.empty(32, 256, 128, 128, dtype=bf16, device=dev)
        ratio_case(
            "permute(0,2,3,1) bf16 32x256x128x128", nchw.permute(0, 2, 3, 1), lambda v: v.contiguous(), 2 * nchw.nbytes
        )
        del nchw
        blk = torch.empty(16384, 16384, dtype=f32, device=dev)
        col = blk[:, :8192]
        ratio_case("column block [:, :8192] of 16384^2 fp32", col, lambda v: v.contiguous(), 2 * col.numel() * 4)
        del blk, col

    def host_rows() -> None:
        import os

        variants = [v.split("=", 1) for v in os.environ.get("STRIDEX_BENCH_HOST_VARIANTS", "").split(";") if v]
        variants = variants or [["default", os.environ.get("STRIDEX_HOST_COPY", "")]]

        def under(setting: str, fn):
            def run():
                os.environ["STRIDEX_HOST_COPY"] = setting
                fn()

            return run

        def report(group: str, t: dict[str, list[float]], nbytes: int, ref: str) -> None:
            gb = {k: [nbytes / s / 1e9 for s in v] for k, v in t.items()}
            med = {k: statistics.median(v) for k, v in gb.items()}
            for k, v in med.items():
                print(
                    f"{group} {k:36s} {v:8.1f} GB/s  ({v / med[ref]:6.1%} of pinned)  [{min(gb[k]):.1f}-{max(gb[k]):.1f}]",
                    flush=True,
                )
                rows.append(
                    {
                        "case": f"{group} {k}",
                        "GBps": round(v, 1),
                        "of_pinned": round(v / med[ref], 3),
                        "spread": [round(min(gb[k]), 1), round(max(gb[k]), 1)],
                    }
                )

        n = 1 << 26  # 256 MiB of float32
        d2h = torch.empty(n, dtype=f32, device=dev)
        dv = stridex.view(d2h)
        pinned = stridex.view(torch.empty(n, dtype=f32, pin_memory=True))
        pageable = stridex.view(torch.ones(n, dtype=f32))

        def to_cpu():
            r = dv.to("cpu")
            del r

        def to_host_pool():
            r = dv.to("cuda_host")
            sync()
            del r

        cands = {"pinned": lambda: stridex.copy(pinned, dv)}
        for name, setting in variants:
            cands[f"pageable [{name}]"] = under(setting, lambda: stridex.copy(pageable, dv))
        cands["to_cpu"] = under(variants[0][1], to_cpu)  # a reused pool block
        cands["to_cuda_host"] = to_host_pool
        report("D2H 256 MiB", interleaved(cands, timed, args.repeat), d2h.nbytes, "pinned")
        # Host -> device from pageable memory, into a fresh result (View.to('cuda:0')) and into existing.
        pin_src = stridex.view(torch.ones(n, dtype=f32, pin_memory=True))
        cands = {"pinned": lambda: stridex.copy(dv, pin_src)}
        for name, setting in variants:
            cands[f"pageable [{name}]"] = under(setting, lambda: stridex.copy(dv, pageable))
        cands["to_cuda"] = under(variants[0][1], lambda: pageable.to("cuda:0"))
        report("H2D 256 MiB", interleaved(cands, timed, args.repeat), d2h.nbytes, "pinned")

        # Strided pageable <-> device: 256 MiB of a 512 MiB host array, to and from a contiguous GPU array.
        big_pageable = torch.ones(8192, 16384, dtype=f32)
        big_pinned = torch.ones(8192, 16384, dtype=f32, pin_memory=True)
        for label, pick in (
            ("column block [:, :8192]", lambda a: a[:, :8192]),
            ("every other row [::2]", lambda a: a[::2]),
        ):
            hp, hq = stridex.view(pick(big_pageable)), stridex.view(pick(big_pinned))
            g = stridex.view(torch.empty(hp.shape, dtype=f32, device=dev))
            for way in ("H2D", "D2H"):
                if way == "H2D":
                    cands = {
                        "pinned": lambda: stridex.copy(dv, pin_src),
                        "pinned strided": lambda g=g, hq=hq: stridex.copy(g, hq),
                    }
                    for name, setting in variants:
                        cands[f"pageable [{name}]"] = under(setting, lambda g=g, hp=hp: stridex.copy(g, hp))
                else:
                    cands = {
                        "pinned": lambda: stridex.copy(pinned, dv),
                        "pinned strided": lambda g=g, hq=hq: stridex.copy(hq, g),
                    }
                    for name, setting in variants:
                        cands[f"pageable [{name}]"] = under(setting, lambda g=g, hp=hp: stridex.copy(hp, g))
                report(f"{way} strided {label}", interleaved(cands, timed, args.repeat), d2h.nbytes, "pinned")

        # First use of a pool block: View.to('cpu') into a fresh block (cache emptied), then its
        # first and second reuse, per registration policy (ms per call).
        first: dict[str, list[list[float]]] = {}
        policies = ("never", "first", "reuse")
        for _ in range(max(3, args.repeat // 2)):
            for policy in policies:
                os.environ["STRIDEX_HOST_COPY"] = f"register={policy}"
                stridex.empty_cache("cpu")
                first.setdefault(policy, []).append([timed(to_cpu) * 1e3 for _ in range(3)])
        for policy in policies:
            calls = list(zip(*first[policy]))
            cells = "  ".join(
                f"{what} {statistics.median(c):7.2f} ms ({d2h.nbytes / statistics.median(c) / 1e6:5.1f} GB/s)"
                for what, c in zip(("fresh", "reuse 1", "reuse 2"), calls)
            )
            print(f"D2H 256 MiB to_cpu, register={policy:6s} {cells}", flush=True)
            rows.append(
                {"case": f"to_cpu first use register={policy}", "ms": [round(statistics.median(c), 2) for c in calls]}
            )
        os.environ.pop("STRIDEX_HOST_COPY", None)
        print("cpu pool:", stridex.memory_stats("cpu"), flush=True)

    def finish() -> None:
        print("pool:", stridex.memory_stats(0), flush=True)
        print("pinned pool:", stridex.memory_stats("cuda_host"), flush=True)
        if args.json:
            with open(args.json, "w") as f:
                json.dump(rows, f, indent=1)

    f32, bf16 = torch.float32, torch.bfloat16
    if not args.host_only:
        device_rows()
    host_rows()
    if args.host_only:
        finish()
        return 0

    # Round trips, in µs per iteration.
    def per_iter(fn, n: int) -> float:
        sync()
        t = time.perf_counter()
        for _ in range(n):
            fn()
        sync()
        return (time.perf_counter() - t) / n * 1e6

    def rt_case(label: str, cands: dict, n: int) -> None:
        t = interleaved({k: (lambda f=f: per_iter(f, n)) for k, f in cands.items()}, lambda f: f(), args.repeat)
        med = {k: statistics.median(v) for k, v in t.items()}
        for k, v in med.items():
            print(f"{label:40s} {k:8s} {v:8.2f} us  [{min(t[k]):.2f}-{max(t[k]):.2f}]", flush=True)
        rows.append({"case": label, **{f"{k}_us": round(v, 2) for k, v in med.items()}})

    def sx_empty():
        v = stridex.empty((1 << 20,), "uint8", device="cuda:0")
        del v

    def th_empty():
        t = torch.empty(1 << 20, dtype=torch.uint8, device=dev)
        del t

    rt_case("1 MiB allocate + release", {"stridex": sx_empty, "torch": th_empty}, 2000)
    small = torch.randn(512, 512, device=dev)
    sv_small = stridex.view(small)
    svT = sv_small.T

    def sx_t():
        r = svT.contiguous()
        del r

    def th_t():
        r = small.T.contiguous()
        del r

    rt_case("512x512 fp32 .T.contiguous() + release", {"stridex": sx_t, "torch": th_t}, 2000)

    # Releasing a result while another stream sleeps.
    x = stridex.view(torch.empty(4096, 4096, dtype=f32, device=dev))
    other = torch.cuda.Stream()
    rel: list[float] = []
    busy_after: list[bool] = []
    for _ in range(args.repeat):
        r = x.T.contiguous()
        sync()
        with torch.cuda.stream(other):
            torch.cuda._sleep(1_000_000_000)
        t0 = time.perf_counter()
        del r
        rel.append((time.perf_counter() - t0) * 1e6)
        busy_after.append(not other.query())
        other.synchronize()
    print(
        f"release of a 64 MiB result while another stream sleeps: median {statistics.median(rel):.1f} us "
        f"[{min(rel):.1f}-{max(rel):.1f}], other stream still busy afterwards: {sum(busy_after)}/{len(busy_after)}",
        flush=True,
    )
    rows.append({"case": "release while another stream sleeps", "median_us": round(statistics.median(rel), 1)})

    # Releasing a result handed to K consumer streams (View.__dlpack__(stream=s), as torch.from_dlpack
    # asks): the release records an event on each and the free waits for them; none may block.
    for k in (1, 8):
        consumers = [torch.cuda.Stream() for _ in range(k)]
        rel_k: list[float] = []
        busy_k: list[bool] = []
        for _ in range(args.repeat):
            r = x.T.contiguous()
            sync()
            for s in consumers:
                with torch.cuda.stream(s):
                    torch.cuda._sleep(1_000_000_000)
                    torch.from_dlpack(r).sum()  # the consumer reads it behind the sleep
            t0 = time.perf_counter()
            del r
            rel_k.append((time.perf_counter() - t0) * 1e6)
            busy_k.append(all(not s.query() for s in consumers))
            for s in consumers:
                s.synchronize()
        label = f"release of a 64 MiB result read on {k} consumer stream{'s' if k > 1 else ''}"
        print(
            f"{label}: median {statistics.median(rel_k):.1f} us [{min(rel_k):.1f}-{max(rel_k):.1f}], "
            f"consumers still busy afterwards: {sum(busy_k)}/{len(busy_k)}",
            flush=True,
        )
        rows.append({"case": label, "median_us": round(statistics.median(rel_k), 1)})
    finish()
    return 0


if __name__ == "__main__":
    sys.exit(main())
