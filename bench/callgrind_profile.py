"""Per-call instructions by function between two callgrind profiles of one loop run 0 and N times
(used by callgrind_import.sh and callgrind_casters.sh): the top 25, costliest first.
    python3 callgrind_profile.py PROFILE_0 PROFILE_N N"""

import re
import subprocess
import sys


def profile(path: str, inclusive: bool = False) -> dict[str, int]:
    out = subprocess.run(
        ["callgrind_annotate", "--threshold=100", f"--inclusive={'yes' if inclusive else 'no'}", "--auto=no", path],
        capture_output=True,
        text=True,
    ).stdout
    d: dict[str, int] = {}
    for line in out.splitlines():
        m = re.match(r"\s*([\d,]+) \([^)]*\)\s+(.*)$", line)
        # "=> callee" lines are calls inside annotated source, not functions: skipped.
        if m and "PROGRAM TOTALS" not in line and not m.group(2).startswith("=>"):
            name = re.sub(r"^\S*?:", "", m.group(2).split(" [")[0])
            d[name] = d.get(name, 0) + int(m.group(1).replace(",", ""))
    return d


def main() -> None:
    a, b, n = profile(sys.argv[1]), profile(sys.argv[2]), int(sys.argv[3])
    rows = sorted(((b.get(k, 0) - a.get(k, 0)) / n, k) for k in set(a) | set(b))
    for per_call, name in reversed(rows[-25:]):
        print(f"  {per_call:7.1f}  {name[:120]}")
    # Inside nanobind's dispatch of the bound function (when the module has symbols: a
    # RelWithDebInfo build): what the call itself costs, without the loop and without what other
    # threads did meanwhile (JAX's own threads blur the total by hundreds of instructions a call).
    a, b = profile(sys.argv[1], inclusive=True), profile(sys.argv[2], inclusive=True)
    dispatch = [(b.get(k, 0) - a.get(k, 0)) / n for k in set(a) | set(b) if "nanobind::detail::nb_func_vectorcall" in k]
    if dispatch:
        print(f"  in the call: {max(dispatch):.0f} instructions")


if __name__ == "__main__":
    main()
