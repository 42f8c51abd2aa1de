"""Every call into the CUDA driver names the entry point it calls (include/stridex/cuda/driver.hpp):
`Driver::call` and `Driver::require` report a function the driver lacks, or a failed call, by the
name written at the call site, so that name must be the base name the one list gives the member.
Read from the sources, no GPU needed."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TABLE = re.compile(r'X\((\w+),\s*"(cu\w+)"')
# d.call("cuEventCreate", d.api().event_create, ...), d.call("cuMemMap", api.mem_map, ...): the
# member is the last name of the second argument.
CALL = re.compile(r'\b(?:call|require)\(\s*"(cu\w+)",\s*[\w.()>\-]*?(?:\.|->)(\w+)\s*[,)]')


def test_every_call_site_names_the_entry_point_it_calls():
    header = (ROOT / "include/stridex/cuda/driver.hpp").read_text()
    names = dict(TABLE.findall(header))
    assert len(names) >= 78
    sources = [*(ROOT / "src").rglob("*.cpp"), *(ROOT / "src").rglob("*.hpp"), *(ROOT / "include").rglob("*.hpp")]
    calls = [(path, name, member) for path in sources for name, member in CALL.findall(path.read_text())]
    assert len(calls) >= 80  # the pattern still finds the call sites
    wrong = [
        f"{path.relative_to(ROOT)}: {name} for {member} ({names.get(member, 'no such member')})"
        for path, name, member in calls
        if names.get(member) != name
    ]
    assert wrong == []
