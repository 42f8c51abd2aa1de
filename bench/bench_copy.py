"""Copy bandwidth of stridex.copy against torch, on one GPU, in one process.

    python bench/bench_copy.py [--mib 512] [--repeat 15] [--json out.json]
    python bench/bench_copy.py --sweep --mib 64 [--repeat 11]   # every transpose/permute class

--sweep times, instead of the main table, one transpose or permute of each class (element sizes
1, 2, 4, 8 and 16 bytes; sides that are and are not tile multiples; batched, 3-D and 4-D permutes;
a channel axis of 3) with an output of --mib MiB, each against a contiguous copy of the same size.

Every case is timed interleaved (stridex, torch, stridex, torch, ...) and reported as the median
with the spread (min-max) of --repeat runs. Device cases are timed with CUDA events on the legacy
default stream, which both libraries use here; host cases with the host clock around a call that
ends synchronized. GB/s counts bytes read plus bytes written for device copies (each output byte
once read, once written) and the bytes transferred for host <-> device copies. The reference is the
device-to-device copy bandwidth measured in the same run (a contiguous torch copy_ of the same
size), and for host cases the bandwidth from pinned memory.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

import numpy as np


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mib", type=int, default=512, help="output size of each case (MiB)")
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--json", help="write the rows here too")
    parser.add_argument("--sweep", action="store_true", help="every transpose/permute class at --mib (see above)")
    args = parser.parse_args()

    import torch

    import stridex

    if not torch.cuda.is_available() or not stridex.cuda_available():
        print("bench_copy: needs a CUDA GPU (torch and stridex)", file=sys.stderr)
        return 2
    dev = torch.device("cuda:0")
    n_bytes = args.mib << 20

    def gpu_time(fn) -> float:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / 1e3

    def host_time(fn) -> float:
        torch.cuda.synchronize()
        t = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        return time.perf_counter() - t

    def measure(pairs, timer, moved: int):
        """pairs: {label: fn}; interleaved; returns {label: (median GB/s, min, max)}."""
        for fn in pairs.values():  # warm-up: module load, staging buffers, allocator
            fn()
            fn()
        times = {k: [] for k in pairs}
        for _ in range(args.repeat):
            for k, fn in pairs.items():
                times[k].append(timer(fn))
        out = {}
        for k, ts in times.items():
            rates = [moved / t / 1e9 for t in ts]
            out[k] = (statistics.median(rates), min(rates), max(rates))
        return out

    rows = []

    def device_case(name, src, torch_label="copy_"):
        out = torch.empty(src.shape, dtype=src.dtype, device=dev)
        sv, ov = stridex.view(src), stridex.view(out)
        moved = 2 * out.numel() * out.element_size()
        # A contiguous device-to-device copy of the output's size, timed interleaved with the case:
        # medium sizes (64-256 MiB) are measured against their own size, not the --mib reference.
        same_a = torch.empty(out.numel() * out.element_size(), dtype=torch.uint8, device=dev)
        same_b = torch.empty_like(same_a)
        pairs = {
            "stridex": lambda: stridex.copy(ov, sv),
            f"torch {torch_label}": lambda: out.copy_(src),
            "torch .contiguous()": lambda: src.contiguous(),
            "same-size D2D": lambda: same_b.copy_(same_a),
        }
        r = measure(pairs, gpu_time, moved)
        expected = src.contiguous()
        stridex.copy(ov, sv)
        torch.cuda.synchronize()
        ok = torch.equal(out.view(torch.uint8) if out.dtype == torch.bool else out, expected)
        rows.append({"case": name, "bytes": moved, "kind": "device", "ok": ok, **{k: v for k, v in r.items()}})

    def host_case(name, make_src, direction):
        pairs = {}
        if direction == "h2d":
            src_np = make_src()
            out = torch.empty(src_np.shape, dtype=torch.from_numpy(np.empty(0, src_np.dtype)).dtype, device=dev)
            ov, sv = stridex.view(out), stridex.view(src_np)
            moved = out.numel() * out.element_size()
            src_t = torch.from_numpy(src_np) if src_np.base is None or True else None
            pairs["stridex"] = lambda: stridex.copy(ov, sv)
            pairs["torch copy_"] = lambda: out.copy_(src_t)
            pairs["torch .to()"] = lambda: src_t.to(dev)
            r = measure(pairs, host_time, moved)
            stridex.copy(ov, sv)
            ok = np.array_equal(out.cpu().numpy(), src_np)
        else:
            src_t, dst_np = make_src()
            dv, sv = stridex.view(dst_np), stridex.view(src_t)
            moved = src_t.numel() * src_t.element_size()
            dst_t = torch.from_numpy(dst_np)
            pairs["stridex"] = lambda: stridex.copy(dv, sv)
            pairs["torch copy_"] = lambda: dst_t.copy_(src_t)
            pairs["torch .to()"] = lambda: src_t.to("cpu")
            r = measure(pairs, host_time, moved)
            stridex.copy(dv, sv)
            ok = np.array_equal(dst_np, src_t.cpu().numpy())
        rows.append({"case": name, "bytes": moved, "kind": "host", "ok": ok, **r})

    if args.sweep:
        sweep_cases(torch, dev, n_bytes, device_case)
        for r in rows:
            s, same = r["stridex"], r["same-size D2D"]
            print(
                f"| {r['case']} | {s[0]:.0f} ({s[1]:.0f}-{s[2]:.0f}) | {100 * s[0] / same[0]:.1f}% | "
                f"{same[0]:.0f} | {r['torch copy_'][0]:.0f} | {'yes' if r['ok'] else 'WRONG'} |"
            )
        print(f"(sweep · {torch.cuda.get_device_name(0)} · {args.mib} MiB outputs · median (min-max) of {args.repeat};")
        print(" columns: case | stridex GB/s | % of same-size D2D | same-size D2D GB/s | torch copy_ GB/s | ok)")
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"device": torch.cuda.get_device_name(0), "rows": rows}, f, indent=1)
        return 0 if all(r["ok"] for r in rows) else 1

    f32 = n_bytes // 4
    side = int((n_bytes // 4) ** 0.5) // 256 * 256
    side16 = int((n_bytes // 2) ** 0.5) // 256 * 256
    # Reference: the device-to-device copy bandwidth.
    a = torch.rand(f32, device=dev)
    b = torch.empty_like(a)
    # F821: the lambda sees the `del a, b` below, but runs before it
    ref = measure({"torch copy_": lambda: b.copy_(a)}, gpu_time, 2 * n_bytes)["torch copy_"][0]  # noqa: F821
    device_case("contiguous float32", a)
    x = torch.rand(side, side, device=dev)
    device_case(f"transpose {side}x{side} float32", x.T)
    y = torch.rand(side16, side16, device=dev).to(torch.bfloat16)
    device_case(f"transpose {side16}x{side16} bfloat16", y.T)
    y8 = torch.randint(0, 255, (side16 * 2 // 2, side16), device=dev, dtype=torch.uint8)
    device_case(f"transpose {y8.shape[0]}x{y8.shape[1]} uint8", y8.T)
    d0 = 64
    z = torch.rand(d0, f32 // d0 // 2048, 2048, device=dev)
    device_case(f"permute (0,2,1) {tuple(z.shape)} float32", z.permute(0, 2, 1))
    c = round((f32) ** (1 / 3))
    w = torch.rand(c, c, c, device=dev)
    device_case(f"permute (2,1,0) {tuple(w.shape)} float32", w.permute(2, 1, 0))
    nchw = torch.rand(64, 64, (f32 // 64 // 64 // 128), 128, device=dev)
    device_case(f"permute (0,2,3,1) {tuple(nchw.shape)} float32", nchw.permute(0, 2, 3, 1))
    device_case(f"permute (0,2,1,3) {tuple(nchw.shape)} float32", nchw.permute(0, 2, 1, 3))
    big = torch.rand(2 * f32, device=dev)
    device_case("slice [::2] float32", big[::2])
    blk = torch.rand(side, 2 * side, device=dev)
    device_case(f"column block [:, :{side}] float32", blk[:, :side])
    # The permutations of bench_alloc.py's table, at its sizes.
    sq16 = torch.rand(8192, 8192, device=dev).to(torch.bfloat16)
    device_case("transpose 8192x8192 bfloat16", sq16.T)
    p3 = torch.rand(256, 1024, 256, device=dev)
    device_case(f"permute (2,0,1) {tuple(p3.shape)} float32", p3.permute(2, 0, 1))
    nchw16 = torch.rand(32, 256, 128, 128, device=dev).to(torch.bfloat16)
    device_case(f"permute (0,2,3,1) {tuple(nchw16.shape)} bfloat16", nchw16.permute(0, 2, 3, 1))
    del a, b, x, y, y8, z, w, nchw, big, blk, sq16, p3, nchw16
    torch.cuda.empty_cache()

    pinned = torch.rand(f32).pin_memory().numpy()
    pageable = np.random.default_rng(0).random(f32, dtype=np.float32)
    strided_host = np.random.default_rng(1).random((side, side), dtype=np.float32).T
    host_case("h2d pinned float32", lambda: pinned, "h2d")
    host_case("h2d pageable float32", lambda: pageable, "h2d")
    host_case(f"h2d strided pageable (transposed {side}x{side})", lambda: strided_host, "h2d")
    g = torch.rand(f32, device=dev)
    host_case("d2h to pageable float32", lambda: (g, np.empty(f32, np.float32)), "d2h")
    host_case("d2h to pinned float32", lambda: (g, torch.empty(f32).pin_memory().numpy()), "d2h")
    gt = torch.rand(side, side, device=dev)
    host_case(f"d2h transposed {side}x{side} to pageable", lambda: (gt.T, np.empty((side, side), np.float32)), "d2h")
    pinned_ref = next(r["stridex"][0] for r in rows if r["case"] == "h2d pinned float32")
    spare = np.empty_like(pageable)
    memcpy = statistics.median(pageable.nbytes / host_time(lambda: np.copyto(spare, pageable)) / 1e9 for _ in range(5))

    name = torch.cuda.get_device_name(0)
    print(
        f"\n## stridex copy bandwidth · {name} · torch {torch.__version__} · {args.mib} MiB outputs · "
        f"median (min-max) of {args.repeat}"
    )
    print(
        f"device-to-device copy bandwidth (torch copy_, read+write): {ref:.0f} GB/s; "
        f"host memcpy (NumPy copyto, one thread, bytes copied): {memcpy:.0f} GB/s\n"
    )
    head = [
        "case",
        "stridex GB/s",
        "% of ref",
        "% of same-size D2D",
        "torch copy_ GB/s",
        "torch other GB/s",
        "stridex/torch",
        "ok",
    ]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for r in rows:
        s = r["stridex"]
        ref_here = ref if r["kind"] == "device" else pinned_ref
        other = r.get("torch .contiguous()", r.get("torch .to()"))
        t = r["torch copy_"]
        same = f"{100 * s[0] / r['same-size D2D'][0]:.0f}%" if "same-size D2D" in r else "-"
        print(
            f"| {r['case']} | {s[0]:.0f} ({s[1]:.0f}-{s[2]:.0f}) | {100 * s[0] / ref_here:.0f}% | {same} | "
            f"{t[0]:.0f} | {other[0]:.0f} | {s[0] / max(t[0], other[0]):.2f} | {'yes' if r['ok'] else 'WRONG'} |"
        )
    print(
        "\n(% of ref: device cases against the D2D copy bandwidth, host cases against h2d from pinned; "
        "% of same-size D2D: against a contiguous copy of the case's output size, timed interleaved; "
        "torch other: .contiguous() for device cases, .to() for host cases)"
    )
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": name, "reference_gbps": ref, "rows": rows}, f, indent=1)
    return 0 if all(r["ok"] for r in rows) else 1


def sweep_cases(torch, dev, n_bytes, device_case) -> None:
    """One transpose or permute of each class, every output n_bytes (to a few percent)."""
    dtypes = {1: torch.uint8, 2: torch.bfloat16, 4: torch.float32, 8: torch.float64, 16: torch.complex128}

    def rand(shape, unit):
        if unit == 1:
            return torch.randint(0, 255, shape, device=dev, dtype=torch.uint8)
        return torch.rand(shape, device=dev, dtype=torch.float64 if unit >= 8 else torch.float32).to(dtypes[unit])

    for unit, dtype in dtypes.items():
        name = str(dtype).removeprefix("torch.")
        side = int((n_bytes // unit) ** 0.5) // 256 * 256
        device_case(f"transpose {side}^2 {name}", rand((side, side), unit).T)
        odd = (side - 1, side + 3)  # no side a multiple of any tile
        device_case(f"transpose {odd[0]}x{odd[1]} {name}", rand(odd, unit).T)
    for unit in (2, 4):
        name = str(dtypes[unit]).removeprefix("torch.")
        n = n_bytes // unit
        c = round(n ** (1 / 3))
        device_case(f"permute(2,1,0) {c}^3 {name}", rand((c, c, c), unit).permute(2, 1, 0))
        b = (64, n // 64 // 1024, 1024)
        device_case(f"permute(0,2,1) {b} {name}", rand(b, unit).permute(0, 2, 1))
        p3 = (n // 1024 // 256, 1024, 256)
        device_case(f"permute(2,0,1) {p3} {name}", rand(p3, unit).permute(2, 0, 1))
        device_case(f"permute(1,0,2) {p3} {name}", rand(p3, unit).permute(1, 0, 2))
        nchw = (n // 256 // 128 // 128, 256, 128, 128)
        device_case(f"permute(0,2,3,1) {nchw} {name}", rand(nchw, unit).permute(0, 2, 3, 1))
        rgb = (n // 3 // 512 // 512, 3, 512, 512)  # NCHW -> NHWC with 3 channels
        device_case(f"permute(0,2,3,1) {rgb} {name}", rand(rgb, unit).permute(0, 2, 3, 1))
        nhwc = (rgb[0], 512, 512, 3)
        device_case(f"permute(0,3,1,2) {nhwc} {name}", rand(nhwc, unit).permute(0, 3, 1, 2))
        torch.cuda.empty_cache()


if __name__ == "__main__":
    sys.exit(main())
