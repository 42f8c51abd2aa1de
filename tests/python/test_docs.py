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
    pages = [p for p in PAGES if p.name not in ("testing.md", "layout.md")]
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
