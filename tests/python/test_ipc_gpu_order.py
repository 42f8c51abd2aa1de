"""Stream order across processes, at the point of use (docs/distributed.md, "Ordering"): a View
unpickled in another process carries its producer's event, no stream waits for it at unpickle, and
the consumer's stream waits when it takes the View. The producer keeps a kernel running (a sleeping
kernel holds the window open) while the child reads; bench/bench_ipc_order.py measures the same
hand-over (its rows are these tests' measurements, and torch.multiprocessing's). Skips without a
CUDA device or torch. Set STRIDEX_IPC_ORDER_LOG to a file to append each measurement to it."""

import functools
import importlib.util
import json
import os
import pathlib
import sys

import pytest

from conftest import cuda_device_count

pytestmark = pytest.mark.skipif(cuda_device_count() == 0, reason="no CUDA device (stridex.cuda_available() is False)")

SECONDS = 2.0
_BENCH = pathlib.Path(__file__).resolve().parents[2] / "bench"


@pytest.fixture(scope="module")
def measure(torch_with_cuda):
    # The child is spawned: it imports the bench module by name, so bench/ goes on the path it inherits.
    sys.path.insert(0, str(_BENCH))
    spec = importlib.util.spec_from_file_location("bench_ipc_order", _BENCH / "bench_ipc_order.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_ipc_order"] = module
    spec.loader.exec_module(module)

    @functools.cache  # one child per configuration: the tests below read different columns of it
    def run(mode, loading, warm):
        r = module.measure(mode, loading, warm, SECONDS)
        if log := os.environ.get("STRIDEX_IPC_ORDER_LOG"):
            with open(log, "a") as f:
                f.write(json.dumps(r) + "\n")
        return r

    yield run
    sys.path.remove(str(_BENCH))


def test_the_consumers_host_goes_on_while_the_producers_kernel_runs_and_reads_the_right_data(measure):
    # Lazy loading (CUDA's default), the read's kernel loaded: the child's host enqueues at once.
    r = measure("stridex", "lazy", warm=True)
    assert r["correct"], r
    assert r["enqueue_s"] < SECONDS / 4, r  # no host wait for the producer's kernel
    assert r["done_s"] > SECONDS * 0.9, r  # the read waited for it on the GPU


def test_unpickling_parks_no_wait_on_the_legacy_stream(measure):
    # Before the wait moved to the point of use, the child's legacy default stream waited for the
    # producer's event at unpickle: unrelated legacy-stream work took the whole kernel's time.
    r = measure("stridex", "lazy", warm=True)
    assert r["legacy_s"] < SECONDS / 4, r
    assert r["correct"], r


def test_eager_module_loading_never_waits_on_the_host(measure):
    r = measure("stridex", "eager", warm=False)
    assert r["correct"], r
    assert r["enqueue_s"] < SECONDS / 4, r


def test_a_cold_child_under_lazy_loading_reads_the_right_data(measure):
    # Its first kernel's lazy load may wait for the context (CUDA's own, docs/distributed.md): the
    # data is right whatever the host waited.
    r = measure("stridex", "lazy", warm=False)
    assert r["correct"], r
    assert r["done_s"] > SECONDS * 0.9, r
