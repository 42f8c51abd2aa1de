"""Fixtures shared by every Python test file: kept small and generic."""

from __future__ import annotations

import gc
import sys

import pytest

import stridex
from ext_build import build_test_extensions

# The test-only modules (stridex_testing, stridex_seed_ext) are imported by test files at collection,
# so they are built before any test file is read. A failed build stops the run with its output.
build_test_extensions()


def cuda_device_count() -> int:
    """CUDA devices stridex can use; 0 without a driver or a GPU (never raises)."""
    try:
        available = getattr(stridex, "cuda_available", None)
        if available is not None and not available():
            return 0
        count = getattr(stridex, "device_count", None)
        if count is not None:
            return int(count())
        return 1 if available is not None else 0
    except Exception:  # noqa: BLE001 - a probe: any failure means "no CUDA"
        return 0


def shortcut_on(name: str) -> bool:
    """Whether stridex takes the framework shortcut `name` (stridex.shortcuts()) in this run: all are
    on unless STRIDEX_DISABLE_SHORTCUTS turned some off, as test_shortcuts.py does to run the import
    suite through the public protocols alone."""
    return {s.name: s.enabled for s in stridex.shortcuts()}[name]


def needs_shortcut(*names: str):
    """Skips a test of what the named shortcuts themselves do (their own failure modes, their stream
    semantics) in a run where any is off: there is nothing of theirs to test then."""
    off = [n for n in names if not shortcut_on(n)]
    return pytest.mark.skipif(bool(off), reason=f"shortcut {', '.join(off)} off (STRIDEX_DISABLE_SHORTCUTS)")


def pytest_report_header(config):
    off = [s.name for s in stridex.shortcuts() if not s.enabled]
    return (
        f"stridex {stridex.__version__} from {stridex.__file__}; CUDA devices: {cuda_device_count()}; "
        f"shortcuts off: {', '.join(off) or 'none'}"
    )


@pytest.fixture(scope="session")
def torch_with_cuda():
    """torch, skipping the test (with the reason) unless it is installed with CUDA."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA")
    return torch


@pytest.fixture(scope="module")
def gpu_worker(torch_with_cuda):
    """A spawned process answering ipc_gpu_worker's requests, one per test module
    (test_ipc_gpu*.py); stopped and joined after the module."""
    import ipc_gpu_worker as requests
    import ipc_harness

    w = ipc_harness.Worker(requests.serve, timeout=60)
    yield w
    w.stop()
    w.process.join(timeout=60)


@pytest.fixture(scope="session")
def jax_gpu():
    """(jax, its first GPU), skipping the test (with the reason) unless JAX has a GPU backend."""
    jax = pytest.importorskip("jax")
    try:
        gpus = jax.devices("gpu")
    except RuntimeError:
        gpus = []
    if not gpus:
        pytest.skip("JAX has no GPU backend")
    return jax, gpus[0]


@pytest.fixture
def recorded_orders():
    """Streams ordered during the test are recorded (stridex_testing), never sent to a driver;
    the record starts empty."""
    import stridex_testing

    stridex_testing.capture_orders(True)
    stridex_testing.captured_orders()
    yield
    stridex_testing.capture_orders(False)


@pytest.fixture
def cuda():
    """Skips the test, with the reason, unless stridex sees a CUDA device."""
    if cuda_device_count() == 0:
        pytest.skip("no CUDA device (stridex.cuda_available() is False)")
    return cuda_device_count()


@pytest.fixture
def collect():
    """A full garbage collection, for tests that drop the last reference to a producer."""

    def run():
        for _ in range(3):
            gc.collect()

    return run


@pytest.fixture(autouse=True)
def _current_cuda_device_unchanged():
    """Fails the test that leaves another CUDA device current on the main thread: every test after
    it would allocate on the wrong GPU (through the frameworks' "current device") and fail for a
    reason that is not its own. Checked only once torch has initialised CUDA in this process."""
    torch = sys.modules.get("torch")
    before = torch.cuda.current_device() if torch is not None and torch.cuda.is_initialized() else None
    yield
    if before is not None:
        after = torch.cuda.current_device()
        if after != before:
            torch.cuda.set_device(before)  # so that the tests after this one run where they expect
            pytest.fail(f"the test left cuda:{after} current on the main thread (it was cuda:{before})")
