"""Command line: ``python -m stridex doctor`` (the interop matrix of this machine) and
``python -m stridex bench`` (import/export cost against the peers present). ``--help`` on each."""

from __future__ import annotations

import argparse
import sys

DESCRIPTION = """\
stridex moves CPU and GPU arrays between frameworks zero-copy, with the right pointer, shape,
strides, dtype, device, read-only flag, lifetime and stream order.

commands:
  doctor   check every producer -> consumer pair of the frameworks installed here, natively and
           through stridex, on every device; exit status 1 if a pair stridex claims fails
  bench    nanoseconds per import/export, stridex vs the frameworks' own from_dlpack and cuda.core;
           copy bandwidth on GPUs (Markdown tables)

examples:
  python -m stridex doctor
  python -m stridex doctor --frameworks numpy,jax --cases contiguous,strided
  python -m stridex doctor --device cuda --json > doctor.json
  python -m stridex bench --quick
"""


def _version() -> str:
    from . import __version__

    try:
        from . import _stridex

        where = _stridex.__file__
    except Exception as exc:  # noqa: BLE001
        where = f"native core not loaded: {exc}"
    return f"stridex {__version__} ({where}; Python {sys.version.split()[0]})"


def build_parser() -> argparse.ArgumentParser:
    from . import doctor
    from .doctor import bench

    parser = argparse.ArgumentParser(prog="python -m stridex", description=DESCRIPTION,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=_version())
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    doctor.add_arguments(sub.add_parser(
        "doctor", help="the interop matrix of this machine", description=doctor.CLI_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter))
    bench.add_arguments(sub.add_parser(
        "bench", help="import/export cost and copy bandwidth", description=bench.__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter))
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
