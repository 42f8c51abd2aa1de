"""docs/layout.md names every source file of the library, the extension and the package, one short
row a file, in the table of its folder; and the extension's rooms there are the build's, in the
build's order (src/extension/CMakeLists.txt). Read from the tree, no build needed."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LAYOUT = (ROOT / "docs/layout.md").read_text()

# Each folder with a per-file table: its heading in layout.md, and the files it must name.
FOLDERS = {
    "src/extension/": "## The extension, room by room",
    "src/core/": "### `src/core/`",
    "src/cuda/": "### `src/cuda/`",
    "src/c_api/": "### `src/c_api/`",
    "include/stridex/": "### `include/stridex/`",
    "python/stridex/": "### `python/stridex/`",
    "python/stridex/ipc/": "### `python/stridex/ipc/`",
    "python/stridex/refit/": "### `python/stridex/refit/`",
    "python/stridex/doctor/": "### `python/stridex/doctor/`",
}
SOURCES = (".cpp", ".hpp", ".h", ".cu", ".py", ".map", ".pattern")


def section(heading: str) -> str:
    start = LAYOUT.index(heading)
    end = LAYOUT.find("\n#", start + len(heading))
    return LAYOUT[start : end if end >= 0 else len(LAYOUT)]


def named(text: str) -> set[str]:
    """The paths the first column of each table row names, braces expanded."""
    out = set()
    for row in text.splitlines():
        if not row.startswith("| `"):
            continue
        for name in re.findall(r"`([^`]+)`", row.split(" | ")[0]):
            brace = re.fullmatch(r"(.*)\.\{(.*)\}", name)
            out.update(f"{brace[1]}.{ext}" for ext in brace[2].split(",")) if brace else out.add(name)
    return out


def files_of(folder: str) -> set[str]:
    base = ROOT / folder
    # python/stridex/ lists its own files; its subpackages have their own tables. The doctor's
    # adapters/ is one row, as a folder.
    deep = folder not in ("python/stridex/", "python/stridex/doctor/")
    found = base.rglob("*") if deep else base.glob("*")
    return {
        p.relative_to(base).as_posix()
        for p in found
        if p.is_file() and (p.suffix in SOURCES or p.name == "CMakeLists.txt") and "__pycache__" not in p.parts
    }


def test_every_file_has_a_row_in_its_folders_table():
    missing = []
    for folder, heading in FOLDERS.items():
        rows = named(section(heading))
        for f in sorted(files_of(folder)):
            # a row may name the file from a folder above ("stridex/python/errors.hpp"), or its folder
            if not any(r == f or r.endswith("/" + f) or (r.endswith("/") and f.startswith(r)) for r in rows):
                missing.append(folder + f)
    assert missing == []


def test_rows_are_short_and_name_no_issue_numbers():
    long_rows = [row[:60] for row in LAYOUT.splitlines() if row.startswith("|") and len(row) > 160]
    assert long_rows == []
    assert re.findall(r"[Ii]ssue \d+|#\d+", LAYOUT) == []


def test_the_extensions_rooms_are_the_builds_in_its_order():
    cmake = (ROOT / "src/extension/CMakeLists.txt").read_text()
    built = re.search(r"set\(\s*STRIDEX_EXTENSION_ROOMS\s+([\w\s]+?)\s*\)", cmake)[1].split()
    table = section("## The extension, room by room").split("| file | what |")[0]
    documented = re.findall(r"^\| `(\w+)/` \|", table, flags=re.M)
    assert documented == built
    on_disk = sorted(p.name for p in (ROOT / "src/extension").iterdir() if p.is_dir() and p.name != "__pycache__")
    assert sorted(built) == on_disk
