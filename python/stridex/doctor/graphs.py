"""The doctor's ``graph`` table (GPU machines): each producer -> consumer hand-over captured into a
CUDA graph and replayed, through stridex and natively for comparison (docs/graphs.md).

For each pair of the GPU frameworks installed and chosen (torch, CuPy), on the first chosen GPU:
the consumer imports the producer's array inside ``torch.cuda.graph`` on a side stream (CuPy works on
the same stream through ``cupy.cuda.ExternalStream``) and writes ``2 * x + 1`` into a preallocated
array of its own; the graph is then replayed REPLAYS times with the producer's array changed in
place between replays, and every result is compared.

- native:  the consumer's own ``from_dlpack`` applied to the producer's array;
- stridex: ``stridex.view(x)`` with the default request (the capturing stream, docs/graphs.md),
           then the consumer's ``from_dlpack`` applied to the View.

A stridex failure makes the exit status non-zero, as a claimed cell of the matrix does; native
failures never do (showing them is the point).
"""

from __future__ import annotations

import importlib
from dataclasses import asdict, dataclass

import numpy as np

PASS, FAIL, SKIP = "pass", "fail", "skip"
REPLAYS = 20
N = 1 << 12
FRAMEWORKS = ("torch", "cupy")


@dataclass
class GraphCheck:
    producer: str
    consumer: str
    route: str  # "native" or "stridex"
    status: str
    detail: str = ""


def _module(name: str):
    try:
        return importlib.import_module(name)
    except Exception:  # noqa: BLE001 - any failure to import means "not here"
        return None


def _make(fw, name: str, ordinal: int):
    if name == "torch":
        return fw.zeros(N, device=f"cuda:{ordinal}")
    with fw.cuda.Device(ordinal):
        return fw.zeros(N, dtype=fw.float32)


def _set(fw, name: str, array, values: np.ndarray, stream) -> None:
    if name == "torch":
        with fw.cuda.stream(stream):
            array.copy_(fw.from_numpy(values))
    else:
        array.set(values, stream=fw.cuda.ExternalStream(stream.cuda_stream))


def _get(name: str, array) -> np.ndarray:
    return array.cpu().numpy() if name == "torch" else array.get()


def _one(torch, modules, producer: str, consumer: str, route: str, ordinal: int) -> GraphCheck:
    import stridex

    pf, cf = modules[producer], modules[consumer]
    x = _make(pf, producer, ordinal)
    y = _make(cf, consumer, ordinal)
    stream = torch.cuda.Stream(device=ordinal)
    graph = torch.cuda.CUDAGraph()
    cupy = modules.get("cupy")
    rng = np.random.default_rng(26)
    try:
        torch.cuda.synchronize(ordinal)
        with torch.cuda.device(ordinal), torch.cuda.graph(graph, stream=stream):
            source = stridex.view(x) if route == "stridex" else x
            if consumer == "torch":
                t = torch.from_dlpack(source)
                torch.add(t * 2, 1, out=y)
            else:
                with cupy.cuda.ExternalStream(stream.cuda_stream):
                    c = cupy.from_dlpack(source)
                    cupy.multiply(c, 2, out=y)
                    cupy.add(y, 1, out=y)
        for _ in range(REPLAYS):
            h = rng.standard_normal(N).astype(np.float32)
            _set(pf, producer, x, h, stream)
            with torch.cuda.stream(stream):
                graph.replay()
            torch.cuda.synchronize(ordinal)
            if not np.allclose(_get(consumer, y), h * 2 + 1, rtol=1e-6):
                return GraphCheck(producer, consumer, route, FAIL, "a replay computed wrong values")
    except Exception as e:  # noqa: BLE001 - the cell's failure, reported
        return GraphCheck(producer, consumer, route, FAIL, f"{type(e).__name__}: {str(e).splitlines()[0][:200]}")
    return GraphCheck(producer, consumer, route, PASS, f"captured, replayed {REPLAYS} times")


def run(devices: list[str], frameworks: list[str] | None = None) -> list[GraphCheck]:
    """The table, or one skipped row saying why it does not apply here."""
    gpus = [d for d in devices if d.startswith("cuda:")]
    if not gpus:
        return [GraphCheck("-", "-", "-", SKIP, "no GPU among the chosen devices")]
    torch = _module("torch")
    if torch is None or not torch.cuda.is_available():
        return [GraphCheck("-", "-", "-", SKIP, "CUDA graphs are captured with torch.cuda.graph: torch with CUDA")]
    modules = {"torch": torch}
    cupy = _module("cupy")
    if cupy is not None:
        modules["cupy"] = cupy
    names = [n for n in FRAMEWORKS if n in modules and (frameworks is None or n in frameworks)]
    if not names:
        return [GraphCheck("-", "-", "-", SKIP, "neither torch nor CuPy is among --frameworks")]
    ordinal = int(gpus[0].split(":")[1])
    return [_one(torch, modules, p, c, route, ordinal) for p in names for c in names for route in ("native", "stridex")]


def render_text(results: list[GraphCheck]) -> str:
    lines = ["", "graph: each hand-over captured into a CUDA graph and replayed (docs/graphs.md)"]
    mark = {PASS: "✓", FAIL: "✗", SKIP: "—"}
    for r in results:
        if r.status == SKIP:
            lines.append(f"  {mark[SKIP]} skipped: {r.detail}")
            continue
        lines.append(f"  {mark[r.status]} {r.producer + ' -> ' + r.consumer:<16} {r.route:<8} {r.detail}")
    return "\n".join(lines) + "\n"


def to_json(results: list[GraphCheck]) -> list[dict]:
    return [asdict(r) for r in results]


def failed_names(results: list[GraphCheck]) -> list[str]:
    """The stridex hand-overs that failed under capture (native failures are shown, never counted)."""
    return [f"{r.producer}->{r.consumer}" for r in results if r.status == FAIL and r.route == "stridex"]
