"""Pairs that fail: deliberately broken producers and consumers must show ✗ with their reason, in
text and JSON, and set the exit status exactly when stridex claims the pair.

In-process tests use a stand-in for stridex.view (a faithful pass-through over NumPy) so that they
test the doctor, not the state of stridex; the CLI tests use the real stridex. The adapter classes
here double as `--adapter test_doctor_failures:CLASS` plugins for the CLI.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from types import SimpleNamespace

import numpy as np
import pytest

from stridex.doctor import checks
from stridex.doctor.cases import CASES_BY_NAME
from stridex.doctor.checks import FAIL, NA, PASS, Context, run_all, run_cell, summarize
from stridex.doctor.discovery import DeviceReport, FrameworkInfo
from stridex.doctor.adapters import NumpyAdapter
from stridex.doctor.report import render_json, render_text

CONTIGUOUS = CASES_BY_NAME["contiguous"]
HERE = os.path.dirname(os.path.abspath(__file__))


# ---- a stand-in for stridex.view ---------------------------------------------------------------


class _Name:
    def __init__(self, name: str) -> None:
        self.name = name


class FakeView:
    """What a correct stridex.View looks like to the doctor, built on a NumPy alias."""

    def __init__(self, a: np.ndarray) -> None:
        self._a = a
        self.ptr = a.__array_interface__["data"][0]
        self.shape = a.shape
        self.strides = tuple(s // a.itemsize for s in a.strides)
        self.dtype = _Name(a.dtype.name)
        self.device = "cpu"
        self.readonly = not a.flags.writeable

    def __dlpack__(self, **kwargs):
        return self._a.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return (1, 0)


def _handle(stream) -> int | None:
    if stream is None:
        return None
    return stream if isinstance(stream, int) else stream.__cuda_stream__()[1]


def fake_view(obj, *, stream=None):
    if isinstance(obj, np.ndarray):
        return FakeView(obj)
    kwargs = {"max_version": (1, 0)}
    if stream is not None:
        kwargs["stream"] = _handle(stream)
    capsule = obj.__dlpack__(**kwargs)
    return FakeView(np.from_dlpack(_Capsule(capsule)))


class _Capsule:
    def __init__(self, capsule) -> None:
        self.capsule = capsule

    def __dlpack__(self, **kwargs):
        return self.capsule

    def __dlpack_device__(self):
        return (1, 0)


FAKE_STRIDEX = SimpleNamespace(view=fake_view, __version__="fake")


def info(name: str) -> FrameworkInfo:
    return FrameworkInfo(name, "numpy", "ok", version=np.__version__, module=np)


# ---- deliberately broken frameworks (also --adapter plugins) -----------------------------------


class _NumpyBased(NumpyAdapter):
    def __init__(self, framework_info: FrameworkInfo) -> None:
        super().__init__(framework_info)
        self.m = np  # as a plugin, the info's module is this test module


class LiarArray:
    """Host memory whose __dlpack__ describes it with the wrong strides (columns for rows)."""

    def __init__(self, a: np.ndarray) -> None:
        self.a = a

    def __dlpack__(self, **kwargs):
        lie = np.lib.stride_tricks.as_strided(
            self.a, self.a.shape, (self.a.itemsize, self.a.itemsize * self.a.shape[0])
        )
        return lie.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return (1, 0)


class LiarAdapter(_NumpyBased):
    name = "liar"
    consumer = False
    version_string = "0.0-liar"

    def make(self, case, device):
        return LiarArray(super().make(case, device))

    def meta(self, arr):
        return super().meta(arr.a)  # the truth, from the framework's own side

    def to_host(self, arr):
        return super().to_host(arr.a)

    def can_write(self, arr):
        return super().can_write(arr.a)

    def write(self, arr, index, value):
        super().write(arr.a, index, value)


class RaiserArray(LiarArray):
    def __dlpack__(self, **kwargs):
        raise BufferError("deliberately broken exporter")


class RaiserAdapter(LiarAdapter):
    name = "raiser"

    def make(self, case, device):
        return RaiserArray(NumpyAdapter.make(self, case, device))


class ExperimentalLiarAdapter(LiarAdapter):
    name = "liar-exp"
    experimental = True


class CopierAdapter(_NumpyBased):
    """A consumer that copies on import while reporting everything else right."""

    name = "copier"
    producer = False

    def importer(self, obj, device):
        return (lambda o: np.from_dlpack(o).copy()), "copier.from_dlpack"


class PickyAdapter(_NumpyBased):
    """A consumer that only imports stridex Views: fails natively, passes through stridex."""

    name = "picky"
    producer = False

    def importer(self, obj, device):
        if not isinstance(obj, FakeView) and type(obj).__name__ != "View":
            raise TypeError(f"picky imports stridex Views only, not {type(obj).__name__}")
        return np.from_dlpack, "picky.from_dlpack"


class CrasherAdapter(_NumpyBased):
    """A consumer whose import kills the process, as a framework bug can (a segfault)."""

    name = "crasher"
    producer = False

    def importer(self, obj, device):
        import signal

        return (lambda o: os.kill(os.getpid(), signal.SIGSEGV)), "crasher.from_dlpack"


class HangerAdapter(_NumpyBased):
    """A consumer whose import never returns (a deadlock)."""

    name = "hanger"
    producer = False

    def importer(self, obj, device):
        return (lambda o: time.sleep(3600)), "hanger.from_dlpack"


def adapters(*classes) -> dict:
    return {cls.name: cls(info(cls.name)) for cls in classes}


def cell_for(cls_p, cls_c, case=CONTIGUOUS, sx=FAKE_STRIDEX):
    ad = adapters(cls_p, cls_c)
    return run_cell(Context(sx, ad), ad[cls_p.name], ad[cls_c.name], case, "cpu")


# ---- in-process ---------------------------------------------------------------------------------


def test_honest_pair_passes_with_written_aliasing():
    cell = cell_for(NumpyAdapter, NumpyAdapter)
    assert (cell.native.status, cell.stridex.status) == (PASS, PASS), (cell.native.reason, cell.stridex.reason)
    assert cell.native.aliasing == cell.stridex.aliasing == "write"
    assert cell.stridex.claimed is True


@pytest.mark.parametrize("case", ["strided", "negative", "0-d", "readonly", "bool"])
def test_honest_layouts_pass(case):
    cell = cell_for(NumpyAdapter, NumpyAdapter, CASES_BY_NAME[case])
    assert cell.native.status == PASS, cell.native.reason
    assert cell.stridex.status == PASS, cell.stridex.reason


def test_wrong_strides_fail_both_routes_with_reason():
    cell = cell_for(LiarAdapter, NumpyAdapter)
    assert cell.native.status == FAIL
    assert "strides (1, 3) != producer's (4, 1)" in cell.native.reason
    assert cell.stridex.status == FAIL
    assert cell.stridex.reason.startswith("stridex.view: ")  # caught at the View, before any consumer
    assert "strides (1, 3) != producer's (4, 1)" in cell.stridex.reason
    assert cell.stridex.claimed is True and cell.stridex.claimed_failure


def test_raising_exporter_fails_with_its_message():
    cell = cell_for(RaiserAdapter, NumpyAdapter)
    assert cell.native.status == FAIL
    assert cell.native.reason == "numpy import of raiser's array: BufferError: deliberately broken exporter"
    assert cell.stridex.reason == "stridex.view: BufferError: deliberately broken exporter"


def test_copying_consumer_is_not_aliasing():
    cell = cell_for(NumpyAdapter, CopierAdapter)
    assert cell.native.status == cell.stridex.status == FAIL
    assert "a copy" in cell.native.reason and "pointer" in cell.native.reason


def test_missing_stridex_view_is_a_claimed_failure():
    cell = cell_for(NumpyAdapter, NumpyAdapter, sx=SimpleNamespace())
    assert cell.native.status == PASS
    assert cell.stridex.status == FAIL and cell.stridex.reason.startswith("stridex.view missing")
    assert cell.stridex.claimed_failure


def test_not_applicable_is_na_for_both_routes_with_reason():
    cell = cell_for(NumpyAdapter, NumpyAdapter, CASES_BY_NAME["stream"])
    assert cell.native.status == cell.stridex.status == NA
    assert "numpy" in cell.native.reason and cell.native.reason == cell.stridex.reason


def _render(cells):
    summary = summarize(cells)
    status = 1 if summary["stridex"]["claimed_failures"] else 0
    infos = [info("numpy")]
    common = dict(
        cells=cells,
        cases=[CONTIGUOUS],
        frameworks=infos,
        devices=DeviceReport(["cpu"], "none", "test"),
        features={"view": True},
        header={"stridex_version": "fake", "stridex_path": "-", "python": "3", "platform": "test"},
        summary=summary,
        exit_status=status,
    )

    class Utf8:
        encoding = "utf-8"

    return status, render_text(**common, stream=Utf8()), render_json(**common, options={})


def test_exit_status_counts_only_claimed_stridex_failures():
    ad = adapters(NumpyAdapter, LiarAdapter)
    cells = run_all(Context(FAKE_STRIDEX, ad), ["cpu"], [CONTIGUOUS])
    assert {(c.producer, c.consumer) for c in cells} == {("numpy", "numpy"), ("liar", "numpy")}
    assert summarize(cells)["stridex"]["claimed_failures"] == 1
    status, text, doc = _render(cells)
    assert status == 1
    assert re.search(r"liar\s+→\s+numpy", text)
    assert "✗1 ✗2" in text  # native, then stridex, each with its footnote
    assert "strides (1, 3) != producer's (4, 1)" in text
    assert "exit status 1: 1 claimed stridex check(s) failed" in text
    (liar,) = [r for r in doc["results"] if r["producer"] == "liar"]
    assert liar["native"]["status"] == "fail" and "strides (1, 3)" in liar["native"]["reason"]
    assert liar["stridex"]["status"] == "fail" and liar["stridex"]["claimed"] is True
    assert doc["exit_status"] == 1 and doc["summary"]["stridex"]["claimed_failures"] == 1
    json.dumps(doc)  # serialisable as is


def test_native_failures_never_set_the_exit_status():
    ad = adapters(NumpyAdapter, PickyAdapter)
    cells = [c for c in run_all(Context(FAKE_STRIDEX, ad), ["cpu"], [CONTIGUOUS]) if c.consumer == "picky"]
    (cell,) = cells
    assert cell.native.status == FAIL and "picky imports stridex Views only" in cell.native.reason
    assert cell.stridex.status == PASS
    status, text, _ = _render(cells)
    assert status == 0 and "exit status 0" in text and "✗1 ✓" in text


def test_unclaimed_failures_are_marked_and_do_not_count():
    ad = adapters(ExperimentalLiarAdapter, NumpyAdapter)
    cell = run_cell(Context(FAKE_STRIDEX, ad), ad["liar-exp"], ad["numpy"], CONTIGUOUS, "cpu")
    assert cell.stridex.status == FAIL and cell.stridex.claimed is False
    assert any(n.startswith("not claimed: the liar-exp adapter is experimental") for n in cell.stridex.notes)
    status, text, _ = _render([cell])
    assert status == 0 and "✗2*" in text


def test_claims_table_exclusions(monkeypatch):
    monkeypatch.setattr(checks, "UNCLAIMED", (("liar", "*", "contiguous", "known producer bug"),))
    cell = cell_for(LiarAdapter, NumpyAdapter)
    assert cell.stridex.status == FAIL and cell.stridex.claimed is False
    assert "not claimed: known producer bug" in cell.stridex.notes


# ---- the stream case, with a simulated GPU --------------------------------------------------


class FakeStream:
    def __init__(self, handle: int) -> None:
        self.handle = handle

    def __cuda_stream__(self):
        return (0, self.handle)


class PendingArray:
    """Memory with writes queued on a stream that has not run yet (the producer's stream A)."""

    def __init__(self, a: np.ndarray, ordered: bool) -> None:
        self.a, self.ordered, self.pending = a, ordered, []

    def flush(self) -> None:
        for value in self.pending:
            self.a[...] = value
        self.pending.clear()

    def __dlpack__(self, stream=None, **kwargs):
        if self.ordered and stream is not None:
            self.flush()  # what an event wait does: the consumer's stream sees the write
        return self.a.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return (1, 0)


class GpuProducer(_NumpyBased):
    name = "fakegpu"
    kinds = ("cuda",)
    consumer = False
    stream_kind = "explicit"
    makes_stream = True
    ordered = True

    def make(self, case, device):
        self.last = PendingArray(super().make(case, "cpu"), self.ordered)
        return self.last

    def meta(self, arr):
        m = super().meta(arr.a)
        m.device = "cuda:0"
        return m

    def new_stream(self, device):
        return FakeStream(7)

    def fill_async(self, arr, value, stream):
        arr.pending.append(value)

    def synchronize(self, device):
        self.last.flush()


class UnorderedGpuProducer(GpuProducer):
    name = "fakegpu-unordered"
    ordered = False


class GpuConsumer(_NumpyBased):
    name = "fakegpu-consumer"
    kinds = ("cuda",)
    producer = False
    stream_kind = "explicit"

    def new_stream(self, device):
        return FakeStream(9)

    def consume(self, obj, device, stream=None):
        if not isinstance(obj, FakeView):  # a native consumer hands its stream B to the producer
            obj = _Capsule(obj.__dlpack__(stream=self.stream_handle(stream)))
        return np.from_dlpack(obj), "fakegpu.from_dlpack"

    def snapshot_async(self, arr, stream, out=None):
        return np.array(arr, copy=True)  # runs "at once" on stream B

    def synchronize(self, device):
        pass


def _stream_cell(producer, sx=FAKE_STRIDEX):
    ad = adapters(producer, GpuConsumer)
    return run_cell(Context(sx, ad), ad[producer.name], ad["fakegpu-consumer"], CASES_BY_NAME["stream"], "cuda:0")


@pytest.fixture
def no_sleep(monkeypatch):
    """No GPU here: the sleep kernel and the current-device reset become no-ops."""
    monkeypatch.setattr(checks, "gpu_sleep", lambda handle, device, adapters: None)
    monkeypatch.setattr(checks, "reset_current_device", lambda: None)


def test_stream_ordered_producer_passes(no_sleep):
    cell = _stream_cell(GpuProducer)
    assert cell.native.status == PASS, cell.native.reason
    assert cell.stridex.status == PASS, cell.stridex.reason
    assert cell.stridex.aliasing == "stream"


def test_stream_unordered_producer_reads_stale(no_sleep):
    cell = _stream_cell(UnorderedGpuProducer)
    assert cell.native.status == FAIL
    assert cell.native.reason.startswith("not ordered: fakegpu-consumer's copy on stream B read 4194304 of 4194304")
    assert cell.stridex.status == FAIL and cell.stridex.claimed_failure


def test_stream_host_blocking_view_fails(no_sleep):
    def blocking_view(obj, *, stream=None):
        time.sleep(checks.HOST_BLOCK_MS * 2 / 1e3)
        return fake_view(obj, stream=stream)

    cell = _stream_cell(GpuProducer, sx=SimpleNamespace(view=blocking_view))
    assert cell.native.status == PASS
    assert cell.stridex.status == FAIL and "blocked the host" in cell.stridex.reason


# ---- the CLI, with a broken framework plugged in -------------------------------------------


def _cli(*args):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([HERE, env.get("PYTHONPATH", "")])
    # The broken adapters are host arrays; pin the device so the counts below are the same on a
    # GPU machine, where the doctor would also run every pair on each CUDA device.
    return subprocess.run(
        [sys.executable, "-m", "stridex", "doctor", "--no-progress", "--device", "cpu", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=240,
        encoding="utf-8",
    )


def test_cli_broken_producer_sets_exit_status_and_shows_reason():
    args = ("--adapter", "test_doctor_failures:LiarAdapter", "--frameworks", "numpy,liar", "--cases", "contiguous")
    proc = _cli(*args, "--json")
    assert proc.returncode == 1, proc.stderr[-2000:]
    doc = json.loads(proc.stdout)
    assert doc["exit_status"] == 1
    (liar,) = [r for r in doc["results"] if r["producer"] == "liar"]
    assert liar["native"]["status"] == "fail"
    assert "strides (1, 3) != producer's (4, 1)" in liar["native"]["reason"]
    assert liar["stridex"]["status"] == "fail" and liar["stridex"]["claimed"] is True
    assert {f["name"]: f["version"] for f in doc["frameworks"]}["liar"] == "0.0-liar"

    text = _cli(*args)
    assert text.returncode == 1
    assert "strides (1, 3) != producer's (4, 1)" in text.stdout
    assert "✗" in text.stdout or " X" in text.stdout
    assert "liar 0.0-liar" in text.stdout


def test_cli_raising_producer():
    proc = _cli(
        "--adapter",
        "test_doctor_failures:RaiserAdapter",
        "--frameworks",
        "numpy,raiser",
        "--cases",
        "contiguous,bool",
        "--json",
    )
    assert proc.returncode == 1
    doc = json.loads(proc.stdout)
    raiser = [r for r in doc["results"] if r["producer"] == "raiser"]
    assert len(raiser) == 2
    for r in raiser:
        assert "deliberately broken exporter" in r["native"]["reason"]
        assert r["stridex"]["status"] == "fail"


def test_cli_survives_a_crashing_check():
    proc = _cli(
        "--adapter",
        "test_doctor_failures:CrasherAdapter",
        "--frameworks",
        "numpy,crasher",
        "--cases",
        "contiguous,bool",
        "--json",
    )
    doc = json.loads(proc.stdout)
    crashed = [r for r in doc["results"] if r["consumer"] == "crasher"]
    assert len(crashed) == 2
    for r in crashed:
        for route in ("native", "stridex"):
            assert r[route]["status"] == "fail"
            assert r[route]["reason"].startswith("crashed the process (SIGSEGV)"), r[route]["reason"]
    assert "crasher contiguous [native]: crashed the process" in proc.stderr
    # the checks after each crash still ran, in a new worker
    honest = [r for r in doc["results"] if r["consumer"] == "numpy"]
    assert len(honest) == 2 and all(r["native"]["status"] == "pass" for r in honest)
    assert proc.returncode == 1 and doc["exit_status"] == 1  # a claimed stridex cell crashed


def test_worker_marks_a_route_that_crashed_too_often_as_not_run():
    # What the supervisor asks of a new worker after CRASHES_BEFORE_SKIP crashes of one route.
    proc = _cli("--_worker", "--frameworks", "numpy", "--cases", "contiguous", "--_skip=cpu|numpy|numpy|native")
    events = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    outcomes = {e["route"]: e["outcome"] for e in events if e["type"] == "outcome"}
    assert outcomes["native"]["status"] == "fail"
    assert outcomes["native"]["reason"] == "not run: this route crashed the doctor 3 times for numpy → numpy on cpu"
    assert outcomes["stridex"]["status"] == "pass"  # only the named route is skipped


def test_cli_records_a_hung_check_and_goes_on():
    proc = _cli(
        "--adapter",
        "test_doctor_failures:HangerAdapter",
        "--frameworks",
        "numpy,hanger",
        "--cases",
        "contiguous",
        "--check-timeout",
        "3",
        "--json",
    )
    doc = json.loads(proc.stdout)
    (hung,) = [r for r in doc["results"] if r["consumer"] == "hanger"]
    assert hung["native"]["reason"].startswith("no progress for 3 s: the check hung")
    assert hung["stridex"]["reason"].startswith("no progress for 3 s")
    (honest,) = [r for r in doc["results"] if r["consumer"] == "numpy"]
    assert honest["native"]["status"] == "pass"
