"""The doctor's graph table (python/stridex/doctor/graphs.py) where it cannot capture: the one
skipped row saying why, its text and JSON, and which failures count against the exit status. The
captures themselves run on GPU machines (tests/python/test_graphs_gpu.py covers the hand-overs)."""

from __future__ import annotations

import pytest

from stridex.doctor import graphs
from export_support import cuda_device_count


def test_without_a_gpu_among_the_devices_the_table_is_one_skipped_row():
    rows = graphs.run(["cpu"])
    assert [(r.status, r.detail) for r in rows] == [("skip", "no GPU among the chosen devices")]
    text = graphs.render_text(rows)
    assert "graph: each hand-over captured into a CUDA graph and replayed" in text
    assert "skipped: no GPU among the chosen devices" in text
    assert graphs.to_json(rows) == [
        {"producer": "-", "consumer": "-", "route": "-", "status": "skip", "detail": "no GPU among the chosen devices"}
    ]
    assert graphs.failed_names(rows) == []


@pytest.mark.skipif(cuda_device_count() > 0, reason="checks the reason given on a machine without a GPU")
def test_a_gpu_device_without_torch_cuda_says_what_is_missing():
    rows = graphs.run(["cuda:0"])
    assert len(rows) == 1 and rows[0].status == "skip"
    assert rows[0].detail == "CUDA graphs are captured with torch.cuda.graph: torch with CUDA"


def test_only_stridex_failures_count():
    rows = [
        graphs.GraphCheck("cupy", "torch", "native", graphs.FAIL, "AcceleratorError: ..."),
        graphs.GraphCheck("torch", "cupy", "stridex", graphs.FAIL, "RuntimeError: ..."),
        graphs.GraphCheck("torch", "torch", "stridex", graphs.PASS, "captured, replayed 20 times"),
    ]
    assert graphs.failed_names(rows) == ["torch->cupy"]
    text = graphs.render_text(rows)
    assert "  ✗ cupy -> torch    native   AcceleratorError: ..." in text
    assert "  ✓ torch -> torch   stridex  captured, replayed 20 times" in text
