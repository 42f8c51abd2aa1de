"""Export speed: `consumer.from_dlpack(view)` for a stridex.View against the same consumer fed a
native array of the same memory. Goal: at most 1.1x the native producer for every consumer.

    PYTHONPATH=<staged stridex> python bench/bench_export.py [--quick] [--out results.md]

One process, under two minutes. Each cell is the median over repeats of the mean time of one call
in a timed loop; the ratio is stridex / native. On a machine without a GPU only the CPU consumers
(NumPy, JAX on CPU) run.
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import os
import platform
import statistics
import sys
import time

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import numpy as np  # noqa: E402

import stridex  # noqa: E402


def optional(name):
    try:
        return __import__(name, fromlist=["_"])
    except Exception:  # noqa: BLE001
        return None


def cuda_available() -> bool:
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return False
    n = ctypes.c_int(0)
    return cuda.cuInit(0) == 0 and cuda.cuDeviceGetCount(ctypes.byref(n)) == 0 and n.value > 0


def time_call(fn, arg, loops: int, repeats: int) -> float:
    """Median over `repeats` of the mean ns of one fn(arg) in a loop of `loops` calls."""
    for _ in range(max(loops // 10, 10)):  # warm-up: caches, export block pools, lazy imports
        fn(arg)
    samples = []
    gc.disable()
    try:
        for _ in range(repeats):
            start = time.perf_counter_ns()
            for _ in range(loops):
                fn(arg)
            samples.append((time.perf_counter_ns() - start) / loops)
    finally:
        gc.enable()
    return statistics.median(samples)


def interleaved(fn, native, view, loops, repeats):
    """Native and stridex timed in alternation, so drift (clocks, other load) hits both alike."""
    a, b = [], []
    for _ in range(repeats):
        a.append(time_call(fn, native, loops, 1))
        b.append(time_call(fn, view, loops, 1))
    return statistics.median(a), statistics.median(b)


def view_of_pointer(ptr, shape, dtype, owner):
    # Device deliberately not given: stridex takes it from the memory.
    return stridex.from_pointer(ptr, shape, dtype, owner=owner)


def cases(gpu: bool):
    """(consumer name, consume, native producer name, native array, stridex view) of one memory."""
    shape = (64, 64)
    host = np.arange(64 * 64, dtype=np.float32).reshape(shape)
    yield "np.from_dlpack", np.from_dlpack, "numpy", host, view_of_pointer(host.ctypes.data, shape, "float32", host)

    jax = optional("jax")
    if jax is not None:
        import jax.dlpack  # noqa: F401, PLC0415

        buf = np.zeros(64 * 64 + 16, np.float32)
        off = (-buf.ctypes.data % 64) // 4  # JAX aliases 64-byte aligned host memory only
        aligned = buf[off : off + 64 * 64].reshape(shape)
        yield (
            "jax.dlpack.from_dlpack (cpu)",
            jax.dlpack.from_dlpack,
            "numpy",
            aligned,
            view_of_pointer(aligned.ctypes.data, shape, "float32", aligned),
        )

    if not gpu:
        return
    torch = optional("torch")
    cp = optional("cupy")
    if torch is not None and torch.cuda.is_available():
        t = torch.arange(64 * 64, dtype=torch.float32, device="cuda").reshape(shape)
        v = view_of_pointer(t.data_ptr(), shape, "float32", t)
        yield "torch.from_dlpack", torch.from_dlpack, "torch", t, v
        if cp is not None:
            c = cp.from_dlpack(t)
            yield "torch.from_dlpack", torch.from_dlpack, "cupy", c, v
    if cp is not None:
        c = cp.arange(64 * 64, dtype=cp.float32).reshape(shape)
        v = view_of_pointer(c.data.ptr, shape, "float32", c)
        yield "cupy.from_dlpack", cp.from_dlpack, "cupy", c, v
        if torch is not None and torch.cuda.is_available():
            yield "cupy.from_dlpack", cp.from_dlpack, "torch", torch.from_dlpack(c), v
    if jax is not None:
        try:
            gpu_dev = jax.devices("gpu")[0]
        except RuntimeError:
            gpu_dev = None
        if gpu_dev is not None and cp is not None:
            c = cp.arange(64 * 64, dtype=cp.float32).reshape(shape)
            v = view_of_pointer(c.data.ptr, shape, "float32", c)
            yield "jax.dlpack.from_dlpack (gpu)", jax.dlpack.from_dlpack, "cupy", c, v


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats (a smoke run)")
    parser.add_argument("--out", help="also write the markdown table to this file")
    args = parser.parse_args()
    repeats = 5 if args.quick else 21
    gpu = cuda_available()

    rows = []
    deadline = time.monotonic() + 100  # stay under two minutes whatever the machine
    for consumer, fn, producer, native, view in cases(gpu):
        # Size the loop to about 20 ms per sample.
        per_call = time_call(fn, native, 20, 3)
        loops = max(20, min(20000, int(20e6 / max(per_call, 1.0))))
        native_ns, view_ns = interleaved(fn, native, view, loops, repeats)
        rows.append((consumer, producer, native_ns, view_ns))
        if time.monotonic() > deadline:
            break

    lines = [
        f"stridex export benchmark: {platform.node()}, Python {platform.python_version()}, NumPy {np.__version__}"
        + ("" if gpu else " (no GPU: CPU consumers only)"),
        "",
        "| consumer | native producer | native (us) | stridex.View (us) | ratio | goal <= 1.1 |",
        "|---|---|---:|---:|---:|---|",
    ]
    worst = 0.0
    for consumer, producer, native_ns, view_ns in rows:
        ratio = view_ns / native_ns
        worst = max(worst, ratio)
        lines.append(
            f"| `{consumer}` | {producer} | {native_ns / 1e3:.3f} | {view_ns / 1e3:.3f} | {ratio:.2f}x | "
            f"{'ok' if ratio <= 1.1 else 'MISSED'} |"
        )
    lines += ["", f"Medians of {repeats} interleaved samples. Worst ratio: {worst:.2f}x."]
    text = "\n".join(lines)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
