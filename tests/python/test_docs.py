"""Every code block of README.md and docs/*.md is accounted for: Python blocks run, each on its own
in a fresh interpreter (imports included); a block shown as a Python block's output is compared with
what it printed; every other block says why it is not run. Markers are HTML comments on the line
before a block (invisible on GitHub and in the built site):

    <!-- test: gpu -->                 run only where CUDA is usable (GPU machines), else skipped
    <!-- test: gpu needs torch cupy --> ... and where these modules import
    <!-- test: output -->              this block is the output of the Python block above it
                                       ('...' matches any text on its line: addresses, timings)
    <!-- test: not run: REASON -->     not run, for the reason given (a C++ fragment, an install)

A Python block without a marker runs on every machine, CI's CPU one included.
On a GPU machine: python3 -m pytest -q tests/python/test_docs.py runs the GPU blocks too."""

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

import stridex

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
MARKER = re.compile(r"^<!-- test: (.*) -->$")
FENCE = re.compile(r"^(`{3,})(.*)$")
DIRECTIVES = ("{eval-rst}", "{toctree}")  # MyST directives: Sphinx runs these


@dataclass
class Block:
    page: str
    line: int
    language: str
    marker: str
    text: str

    @property
    def id(self):
        return f"{self.page}:{self.line}"


def blocks():
    out = []
    for page in PAGES:
        lines = page.read_text().splitlines()
        i = 0
        while i < len(lines):
            m = FENCE.match(lines[i])
            if not m:
                i += 1
                continue
            end = next(j for j in range(i + 1, len(lines)) if lines[j].strip() == m.group(1))
            language = m.group(2).strip()
            previous = next((lines[k].strip() for k in range(i - 1, -1, -1) if lines[k].strip()), "")
            marker = MARKER.match(previous)
            if language not in DIRECTIVES:
                text = "\n".join(lines[i + 1 : end]) + "\n"
                rel = str(page.relative_to(ROOT))
                out.append(Block(rel, i + 1, language, marker.group(1).strip() if marker else "", text))
            i = end + 1
    return out


BLOCKS = blocks()


def environment():
    env = dict(os.environ)
    package = str(Path(stridex.__file__).resolve().parent.parent)  # the stridex under test
    env["PYTHONPATH"] = os.pathsep.join([package, *filter(None, [env.get("PYTHONPATH")])])
    return env


def run(block):
    result = subprocess.run(
        [sys.executable, "-c", block.text], capture_output=True, text=True, env=environment(), cwd=ROOT, timeout=300
    )
    assert result.returncode == 0, f"{block.id} failed:\n{result.stderr}"
    return result.stdout


def gpu_skip(marker):
    """A skip reason for a GPU block here, or None when it runs."""
    if not stridex.cuda_available():
        return "a GPU block (<!-- test: gpu -->): no CUDA device here"
    for name in marker.split("needs", 1)[1].split() if "needs" in marker else []:
        try:
            __import__(name)
        except ImportError:
            return f"a GPU block that needs {name}, which is not installed"
    return None


def test_every_block_is_run_or_says_why_not():
    unaccounted = [
        b.id
        for b in BLOCKS
        if not (
            (b.language == "python" and (b.marker == "" or b.marker.startswith("gpu")))
            or b.marker == "output"
            or re.match(r"not run: \S", b.marker)
        )
    ]
    assert unaccounted == [], f"blocks with no test marker (see this file's docstring): {unaccounted}"


def output_of(block):
    """The Python block whose output `block` shows: the previous block of its page."""
    index = BLOCKS.index(block)
    previous = BLOCKS[index - 1]
    assert previous.page == block.page and previous.language == "python", f"{block.id}: output of what?"
    return previous


@pytest.mark.parametrize("block", [b for b in BLOCKS if b.language == "python"], ids=lambda b: b.id)
def test_python_block_runs(block):
    if block.marker.startswith("not run"):
        pytest.skip(block.marker)
    if block.marker.startswith("gpu") and (reason := gpu_skip(block.marker)):
        pytest.skip(reason)
    stdout = run(block)
    shown = [b for b in BLOCKS if b.marker == "output" and output_of(b) is block]
    for output in shown:
        pattern = "\n".join(re.escape(line).replace(r"\.\.\.", ".*?") for line in output.text.rstrip().splitlines())
        assert re.fullmatch(pattern, stdout.rstrip()), (
            f"{output.id} shows:\n{output.text}\nthe block printed:\n{stdout}"
        )


def test_user_docs_name_no_issue_numbers():
    pages = PAGES
    found = [f"{p.relative_to(ROOT)}: {m}" for p in pages for m in re.findall(r"[Ii]ssue \d+", p.read_text())]
    assert found == []


def _raised(call):
    try:
        call()
    except Exception as e:  # noqa: BLE001 - the message is what is compared
        return f"{type(e).__name__}: {e}"
    raise AssertionError("nothing raised")


def _read_only_legacy_export():
    import numpy as np

    a = np.ones(3)
    a.flags.writeable = False
    return stridex.view(a).__dlpack__(max_version=None)


def _doctor_without_the_device():
    run = subprocess.run(
        [sys.executable, "-m", "stridex", "doctor", "--frameworks", "numpy", "--device", "cuda"],
        capture_output=True,
        text=True,
        env=environment(),
        timeout=300,
    )
    assert run.returncode == 3, run.stderr
    return run.stderr.strip().splitlines()[-1]


# What docs/troubleshooting.md quotes from stridex ('...' stands for any text), and how to produce it.
QUOTED = [
    (
        "BufferError: a read-only view cannot be exported as a legacy DLPack capsule, which has no read-only "
        "flag (its producer said read-only, and refuses the same); ask for a versioned capsule (max_version >= "
        "(1, 0))",
        lambda: _raised(_read_only_legacy_export),
    ),
    (
        "stream 0 is forbidden by DLPack and the CUDA array interface (ambiguous: the legacy or the per-thread "
        "default stream?); ...",
        lambda: _raised(lambda: stridex.view(b"", stream=0)).split(": ", 1)[1],
    ),
    (
        "ValueError: device cuda:0 was given for pointer 0x..., but no CUDA GPU is usable here ...",
        lambda: _raised(lambda: stridex.from_pointer(4096, (3,), "float32", device="cuda:0")),
    ),
    (
        "stridex.View cannot be created directly: call stridex.view(obj) ...",
        lambda: _raised(stridex.View).split(": ", 1)[1],
    ),
    (
        "stridex doctor: --device cuda: no such device here (no CUDA device found); found: cpu; nothing was checked",
        _doctor_without_the_device,
    ),
]


@pytest.mark.skipif(stridex.cuda_available(), reason="the quoted messages are those of a machine without CUDA")
@pytest.mark.parametrize("quote, produce", QUOTED, ids=[q[:40] for q, _ in QUOTED])
def test_troubleshooting_quotes_real_messages(quote, produce):
    page = " ".join((ROOT / "docs" / "troubleshooting.md").read_text().split())
    assert quote in page  # quoted there, word for word (line breaks aside)
    pattern = ".*?".join(re.escape(part) for part in quote.split("..."))
    message = produce()
    assert re.fullmatch(pattern, message, re.S), message


def test_a_misspelt_sanitizer_switch_fails_the_import():
    """docs/sanitizer.md: any other value of STRIDEX_SANITIZE fails the import with an ImportError."""
    run = subprocess.run(
        [sys.executable, "-c", "import stridex"],
        capture_output=True,
        text=True,
        env={**environment(), "STRIDEX_SANITIZE": "stream"},
        timeout=120,
    )
    assert run.stderr.strip().splitlines()[-1] == (
        "ImportError: STRIDEX_SANITIZE must be 'streams' or 'streams,raise' (or empty/0: off), found 'stream'"
    )


# What docs/troubleshooting.md quotes from the frameworks themselves, produced by the framework the
# quote names where it is installed here (each skips without it, or without a GPU where it needs
# one). A quote with alternatives lists them: versions of a framework word the same refusal
# differently.
def _numpy_legacy_read_only():
    import numpy as np

    a = np.zeros(3)
    a.setflags(write=False)
    return _raised(lambda: a.__dlpack__())


def _numpy_reads_a_jax_array_read_only():
    import numpy as np

    jax = pytest.importorskip("jax")
    a = np.from_dlpack(jax.device_put(np.arange(3.0), jax.devices("cpu")[0]))  # GPU machines default to the GPU
    return _raised(lambda: a.__setitem__(0, 1.0))


def _numpy_stream():
    import numpy as np

    return _raised(lambda: np.zeros(3).__dlpack__(stream=1))


def _numpy_unsupported_dtype():
    import numpy as np

    ml_dtypes = pytest.importorskip("ml_dtypes")
    v = stridex.view(np.zeros(3, ml_dtypes.bfloat16))
    try:
        np.from_dlpack(v)
    except Exception as e:  # noqa: BLE001 - the message is what is compared
        return f"{type(e).__name__}: {e}"
    pytest.skip("this NumPy imports bfloat16 through ml_dtypes (NumPy 2.5 and later): nothing is refused")


def _jax_negative_strides():
    import numpy as np

    jax = pytest.importorskip("jax")
    return _raised(lambda: jax.dlpack.from_dlpack(stridex.view(np.arange(4.0)[::-1])))


def _torch_negative_strides():
    import numpy as np

    torch = pytest.importorskip("torch")
    return _raised(lambda: torch.from_numpy(np.arange(4.0)[::-1]))


def _jax_gpu_stream_minus_one(jax_gpu):
    jax, gpu = jax_gpu
    import numpy as np

    x = jax.device_put(np.arange(4.0, dtype=np.float32), gpu)
    return _raised(lambda: x.__dlpack__(stream=-1))


def _cuda_core_stream_none():
    import numpy as np

    utils = pytest.importorskip("cuda.core.utils")
    return _raised(lambda: utils.StridedMemoryView(np.zeros(3)))


def _cpu_claimed_for_gpu_memory():
    torch = pytest.importorskip("torch")
    if not stridex.cuda_available() or not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU and torch")
    t = torch.zeros(3, device="cuda")
    return _raised(lambda: stridex.from_pointer(t.data_ptr(), (3,), "float32", device="cpu", owner=t))


FRAMEWORK_QUOTED = [
    (
        ["BufferError: Cannot export readonly array since signalling readonly is unsupported by DLPack"],
        _numpy_legacy_read_only,
    ),
    (["ValueError: assignment destination is read-only"], _numpy_reads_a_jax_array_read_only),
    (["NumPy only supports stream=None"], lambda: _numpy_stream().split(": ", 1)[1]),
    (["RuntimeError: Unsupported dtype in DLTensor.", "BufferError: Unsupported dtype"], _numpy_unsupported_dtype),
    (["UNIMPLEMENTED: Only DLPack tensors with trivial (compact) striding are supported"], _jax_negative_strides),
    (
        [
            "ValueError: At least one stride in the given numpy array is negative, and tensors with negative strides "
            "are not currently supported"
        ],
        _torch_negative_strides,
    ),
    (
        ["ValueError: device cpu was given for pointer 0x..., but the CUDA driver says it is ..."],
        _cpu_claimed_for_gpu_memory,
    ),
    (["stream=None is ambiguous with view()"], _cuda_core_stream_none),
]


@pytest.mark.parametrize("quotes, produce", FRAMEWORK_QUOTED, ids=[q[0][:40] for q, _ in FRAMEWORK_QUOTED])
def test_troubleshooting_quotes_the_frameworks_own_words(quotes, produce):
    page = " ".join((ROOT / "docs" / "troubleshooting.md").read_text().split())
    for quote in quotes:
        assert quote in page  # quoted there, word for word (line breaks aside)
    message = produce()
    patterns = [".*?".join(re.escape(part) for part in quote.split("...")) for quote in quotes]
    # The quote is the message, or (a framework's words inside its exception) the part that names it.
    assert any(re.search(p, message, re.S) for p in patterns), message


def test_troubleshooting_quotes_jaxs_invalid_handle(jax_gpu):
    page = " ".join((ROOT / "docs" / "troubleshooting.md").read_text().split())
    assert "JaxRuntimeError: ... CUDA_ERROR_INVALID_HANDLE" in page
    message = _jax_gpu_stream_minus_one(jax_gpu)
    assert re.fullmatch(r"JaxRuntimeError: .*CUDA_ERROR_INVALID_HANDLE.*", message, re.S), message
