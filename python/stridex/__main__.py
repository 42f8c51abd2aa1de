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
  cmake -Dstridex_DIR="$(python -m stridex --cmake-dir)" ...   (C++ against the installed wheel)

exit status of doctor: 0 every claimed check passed, 1 a claimed check failed, 2 usage error,
3 nothing was checked, or a framework or device named in --frameworks/--device is absent.
"""


def _version() -> str:
    from . import __version__

    try:
        from . import _stridex

        where = _stridex.__file__
    except Exception as exc:  # noqa: BLE001
        where = f"native core not loaded: {exc}"
    return f"stridex {__version__} ({where}; Python {sys.version.split()[0]})"


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser; only `command`'s module is imported (its options need it), so that --help and
    --version import nothing beyond stridex itself."""
    parser = argparse.ArgumentParser(
        prog="python -m stridex", description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--version", action="version", version=_version())
    parser.add_argument(
        "--cmake-dir",
        action="store_true",
        help="print the directory of stridex's CMake package (stridexConfig.cmake) and exit",
    )
    parser.add_argument("--include-dir", action="store_true", help="print the C++ include directory and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    doctor = sub.add_parser(
        "doctor", help="the interop matrix of this machine", formatter_class=argparse.RawDescriptionHelpFormatter
    )
    bench = sub.add_parser(
        "bench", help="import/export cost and copy bandwidth", formatter_class=argparse.RawDescriptionHelpFormatter
    )
    if command == "doctor":
        from . import doctor as doctor_mod

        doctor.description = doctor_mod.CLI_DESCRIPTION
        doctor_mod.add_arguments(doctor)
    elif command == "bench":
        from .doctor import bench as bench_mod

        bench.description = bench_mod.__doc__
        bench_mod.add_arguments(bench)
    return parser


def _command(argv: list[str]) -> str | None:
    """The subcommand named in argv (the first argument that is not an option), if any."""
    return next((a for a in argv if not a.startswith("-")), None)


def _package_dir(*parts: str) -> str:
    """A directory the wheel installs next to the package (C++ headers, CMake package)."""
    import os

    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), *parts)
    if not os.path.isdir(path):
        raise SystemExit(
            f"stridex: {path} does not exist: this stridex was not installed from a wheel "
            "(with CMake, use `cmake --install` of the source tree instead)"
        )
    return path


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser(_command(argv))
    args = parser.parse_args(argv)
    if args.cmake_dir or args.include_dir:
        print(_package_dir("lib", "cmake", "stridex") if args.cmake_dir else _package_dir("include"))
        return 0
    if args.command is None:
        parser.print_help()
        return 2
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
