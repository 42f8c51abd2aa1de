"""``python -m stridex doctor --transports``: Views across processes on this machine.

Each transport that can run here moves a View to another process and back, writes through both
sides, and says which mechanism carried it:

* multiprocessing (cpu): host shared memory, its fd passed over a Unix socket;
* multiprocessing (cuda:N): VMM chunks as fds (VirtualBuffer(shareable=True)), and legacy CUDA
  IPC handles for torch's or CuPy's allocations when either is installed;
* Dask over TCP: a LocalCluster of two worker processes, Views as ``dask`` frames (device Views
  staged through host memory);
* Dask over UCX (distributed-ucxx installed, a GPU here): device Views as ``cuda`` device frames.

Writes and reads of device memory go through stridex's copy engine, so no framework is needed.
"""

from __future__ import annotations

import multiprocessing as mp
import time
from dataclasses import asdict, dataclass

PASS, FAIL, SKIP = "pass", "fail", "skip"


@dataclass
class Transport:
    name: str
    status: str
    carried_by: str  # the mechanism that moved the View (or why it was skipped)
    seconds: float = 0.0
    detail: str = ""


# ---- helpers that run in the child processes (module-level: spawn pickles them by name) ----------
def _child_write(payload, value, replies):
    import stridex
    import stridex.ipc

    try:
        v = stridex.ipc._rebuild(payload)
        _fill(v, value)
        replies.put(("ok", _read(v)))
    except Exception as e:  # noqa: BLE001 - reported by the parent
        replies.put(("error", f"{type(e).__name__}: {e}"))


def _bytes(v):
    import stridex

    return stridex.from_pointer(v.ptr, (v.nbytes,), "uint8", owner=v)


def _fill(v, value: int) -> None:
    import stridex

    host = bytearray([value]) * v.nbytes
    if v.device.type == "cuda":
        stridex.copy(_bytes(v), host, stream=stridex.NO_SYNC)  # complete before the other process looks
    else:
        memoryview(_bytes(v))[:] = host


def _read(v) -> bytes:
    import stridex

    if v.device.type == "cuda":
        host = bytearray(v.nbytes)
        stridex.copy(host, _bytes(v), stream=stridex.NO_SYNC)
        return bytes(host)
    return bytes(memoryview(_bytes(v)))


_MECHANISM = {
    "host": "shared memory fd over a Unix socket (SCM_RIGHTS)",
    "cuda_ipc": "CUDA IPC memory handle + IPC event",
    "cuda_vmm": "VMM chunk fds over a Unix socket + IPC event",
    "cuda_pool": "pool fd over a Unix socket + pool export data + IPC event",
}


def _through_process(name: str, view) -> Transport:
    import stridex.ipc

    start = time.perf_counter()
    try:
        _fill(view, 1)
        _, (payload,) = stridex.ipc._reduce(view, in_flight=True)
        ctx = mp.get_context("spawn")
        replies = ctx.Queue()
        p = ctx.Process(target=_child_write, args=(payload, 7, replies), daemon=True)
        p.start()
        status, seen = replies.get(timeout=120)
        p.join(timeout=60)
        if status != "ok":
            return Transport(name, FAIL, _MECHANISM[payload["kind"]], time.perf_counter() - start, seen)
        ok = seen == bytes([7]) * view.nbytes and _read(view) == bytes([7]) * view.nbytes
        return Transport(
            name,
            PASS if ok else FAIL,
            _MECHANISM[payload["kind"]],
            time.perf_counter() - start,
            "" if ok else "the write in the other process is not visible here",
        )
    except Exception as e:  # noqa: BLE001 - a failed transport is a result
        return Transport(name, FAIL, "-", time.perf_counter() - start, f"{type(e).__name__}: {e}")


def _framework_tensor(nbytes: int):
    """A cudaMalloc-style allocation from torch or CuPy, or None when neither is installed."""
    try:
        import torch

        if torch.cuda.is_available():
            return torch.zeros(nbytes, dtype=torch.uint8, device="cuda")
    except ImportError:
        pass
    try:
        import cupy

        return cupy.zeros(nbytes, dtype=cupy.uint8)
    except ImportError:
        return None


def _multiprocessing(devices: list[str]) -> list[Transport]:
    import stridex
    import stridex.ipc

    out = [_through_process("multiprocessing (cpu)", stridex.ipc.shared_empty((4096,), "uint8"))]
    for dev in devices:
        if not dev.startswith("cuda:"):
            continue
        ordinal = int(dev[5:])
        buf = stridex.VirtualBuffer(1 << 21, device=ordinal, shareable=True)
        out.append(_through_process(f"multiprocessing ({dev}, VirtualBuffer)", buf.view("uint8", (4096,))))
        if ordinal == 0:
            t = _framework_tensor(4096)
            if t is None:
                out.append(Transport(f"multiprocessing ({dev}, cudaMalloc)", SKIP, "needs torch or cupy"))
            else:
                out.append(
                    _through_process(f"multiprocessing ({dev}, {type(t).__module__.split('.')[0]})", stridex.view(t))
                )
    return out


def _dask_make(kind):
    import numpy as np

    import stridex

    if kind == "cuda":
        buf = stridex.VirtualBuffer(1 << 21)
        v = buf.view("uint8", (4096,))
        _fill(v, 5)
        return v
    return stridex.view(np.full(4096, 5, dtype=np.uint8))


def _dask_check(v):
    return str(v.device), _read(v) == bytes([5]) * 4096


def _dask(protocol: str, devices: list[str]) -> list[Transport]:
    label = "ucxx" if protocol == "ucxx" else "tcp"
    try:
        from distributed import Client, LocalCluster
        from distributed.protocol import serialize
    except ImportError:
        return [Transport(f"dask over {label}", SKIP, "distributed is not installed")]
    if protocol == "ucxx":
        try:
            import distributed_ucxx  # noqa: F401
        except ImportError:
            return [Transport("dask over ucxx", SKIP, "distributed-ucxx is not installed")]
        if not any(d.startswith("cuda") for d in devices):
            return [Transport("dask over ucxx", SKIP, "no CUDA device")]
    kinds = (["cpu"] if protocol == "tcp" else []) + (["cuda"] if any(d.startswith("cuda") for d in devices) else [])
    families = ("cuda", "dask", "pickle") if protocol == "ucxx" else ("dask", "pickle")
    out = []
    start = time.perf_counter()
    try:
        import dask

        # UCX finds its CUDA transports only with a context made before it starts (as dask-cuda
        # does); the workers get this configuration from the cluster.
        with (
            dask.config.set({"distributed-ucxx.create-cuda-context": protocol == "ucxx" or None}),
            LocalCluster(
                n_workers=2, threads_per_worker=1, processes=True, protocol=protocol, dashboard_address=None
            ) as cluster,
            Client(cluster) as client,
        ):
            a, b = list(client.scheduler_info()["workers"])
            for kind in kinds:
                t0 = time.perf_counter()
                name = f"dask over {label} ({kind} View)"
                try:
                    family = serialize(_dask_make(kind), serializers=families)[0]["serializer"]
                    made = client.submit(_dask_make, kind, workers=[a], pure=False)
                    device, ok = client.submit(_dask_check, made, workers=[b]).result(timeout=120)
                    carried = {
                        "dask": "dask frames (host buffers)" + (", staged through host" if kind == "cuda" else ""),
                        "cuda": "cuda device frames (GPU to GPU)",
                    }.get(family, family)
                    out.append(
                        Transport(
                            name,
                            PASS if ok else FAIL,
                            f"{carried} over {label}",
                            time.perf_counter() - t0,
                            "" if ok else "wrong bytes on arrival",
                        )
                    )
                except Exception as e:  # noqa: BLE001
                    out.append(Transport(name, FAIL, "-", time.perf_counter() - t0, f"{type(e).__name__}: {e}"))
    except Exception as e:  # noqa: BLE001 - the cluster itself did not start
        out.append(
            Transport(
                f"dask over {label}",
                FAIL,
                "-",
                time.perf_counter() - start,
                f"cluster did not start: {type(e).__name__}: {e}",
            )
        )
    return out


def run(devices: list[str]) -> list[Transport]:
    return _multiprocessing(devices) + _dask("tcp", devices) + _dask("ucxx", devices)


def render_text(results: list[Transport]) -> str:
    lines = ["", "transports: a View moved to another process, written there, read here"]
    width = max(len(r.name) for r in results)
    mark = {PASS: "✓", FAIL: "✗", SKIP: "—"}
    for r in results:
        took = f"{r.seconds:5.2f} s" if r.status != SKIP else ""
        lines.append(
            f"  {mark[r.status]} {r.name:<{width}}  {took:>7}  {r.carried_by}" + (f"  ({r.detail})" if r.detail else "")
        )
    return "\n".join(lines) + "\n"


def to_json(results: list[Transport]) -> list[dict]:
    return [asdict(r) for r in results]


def failed_names(results: list[Transport]) -> list[str]:
    """The transports that failed, by name (the doctor's exit line names them)."""
    return [r.name for r in results if r.status == FAIL]
