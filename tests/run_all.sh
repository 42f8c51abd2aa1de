#!/usr/bin/env bash
# Installs what the tests need, then runs every test: lint (ruff, shellcheck, the repository paths
# and the version the tree names) and the formatting check, the C++ suite (warnings as errors) and
# clang-tidy's clean subset, the same suite under ASan+UBSan, the example consumer both ways, the
# release artifacts of tools/build-wheels built with the CUDA toolkit hidden (each wheel's tag and
# glibc floor checked, each installed in a fresh venv that runs the doctor, one consumed from CMake),
# the docs site, and the Python suite (typing included) against this interpreter's wheel. GPU tests
# skip with a reason without a CUDA device.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
jobs=$(nproc)

step() { printf '\n== %s\n' "$*"; }

step "system packages"
need=()
command -v cmake >/dev/null || need+=(cmake)
command -v ninja >/dev/null || need+=(ninja-build)
command -v g++ >/dev/null || need+=(g++)
[ -d /usr/include/gtest ] || need+=(libgtest-dev libgmock-dev)
[ -d /usr/include/benchmark ] || need+=(libbenchmark-dev)
command -v clang-format >/dev/null || need+=(clang-format)
command -v clang-tidy >/dev/null || need+=(clang-tidy)
command -v shellcheck >/dev/null || need+=(shellcheck)
if [ ${#need[@]} -gt 0 ]; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}"
fi

step "python packages"
python3 -m pip install -q --disable-pip-version-check -r tests/requirements.txt

step "lint: ruff, shellcheck, every repository path named, one version (CONTRIBUTING.md)"
python3 -m ruff check .
shellcheck --severity=warning tests/run_all.sh tools/dev-python tools/gpu-check tools/gpu-check-ipc tools/build-wheels \
  bench/*.sh
python3 tools/check_paths.py
python3 tools/check_version.py

step "formatting: clang-format, ruff format, gersemi (CONTRIBUTING.md, 'Formatting and lint')"
# clang-format 14, the version .clang-format was written for: Debian 12's, else the PyPI wheel's.
clang_format=clang-format
if ! clang-format --version 2>/dev/null | grep -q 'version 14\.'; then
  python3 -m pip install -q --disable-pip-version-check clang-format==14.0.6
  clang_format=$(python3 -c 'import sysconfig; print(sysconfig.get_path("scripts"))')/clang-format
fi
git ls-files -z -- 'src/*' 'include/*' 'tests/*' 'bench/*' 'examples/*' |
  grep -zE '\.(cpp|hpp|h|cu|cuh)$' | xargs -0 "$clang_format" --dry-run --Werror
python3 -m ruff format --check .
git ls-files -z -- 'CMakeLists.txt' '*/CMakeLists.txt' '*.cmake' | xargs -0 python3 -m gersemi --check

step "C++ build (-Wall -Wextra -Werror) and tests"
cmake -S . -B build/ci -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSTRIDEX_WERROR=ON \
  -DSTRIDEX_BUILD_TESTS=ON -DSTRIDEX_BUILD_BENCH=ON -DCMAKE_EXPORT_COMPILE_COMMANDS=ON >/dev/null
cmake --build build/ci -j "$jobs"
ctest --test-dir build/ci --output-on-failure -j "$jobs"
# The installed package the extension examples (tests/python/test_extension_*.py) build against.
cmake --install build/ci --prefix build/ci-prefix >/dev/null

step "clang-tidy over the library (src/core, src/cuda): .clang-tidy's errors fail the run"
# Clean except the findings .clang-tidy's WarningsAsErrors leaves out (printed, not fatal). Its checks
# were chosen with clang-tidy 14; another version's checks differ, so there it only reports.
if clang-tidy --version | grep -q 'version 14\.'; then
  git ls-files -z -- 'src/core/*.cpp' 'src/cuda/*.cpp' | xargs -0 -P "$jobs" -n 1 clang-tidy -p build/ci --quiet
else
  echo "clang-tidy is not version 14: reporting only"
  git ls-files -z -- 'src/core/*.cpp' 'src/cuda/*.cpp' |
    xargs -0 -P "$jobs" -n 1 clang-tidy -p build/ci --quiet --warnings-as-errors='-*' || true
fi

step "C++ tests under AddressSanitizer + UndefinedBehaviorSanitizer"
cmake -S . -B build/asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DSTRIDEX_WERROR=ON \
  -DSTRIDEX_SANITIZE=address,undefined >/dev/null
cmake --build build/asan -j "$jobs" --target stridex_tests stridex_core_tests stridex_emulated_kernels_tests test_c_api
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --test-dir build/asan --output-on-failure -j "$jobs" -E '^consumer_'

step "fuzzers: libFuzzer + ASan/UBSan over the C++ parsers, 20000 inputs each (docs/testing.md)"
probe=$(mktemp -d)
if command -v clang++ >/dev/null &&
   echo 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }' |
   clang++ -x c++ -fsanitize=fuzzer - -o "$probe/probe" 2>/dev/null; then
  cmake -S . -B build/fuzz -G Ninja -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DSTRIDEX_BUILD_TESTS=OFF -DSTRIDEX_BUILD_FUZZERS=ON -DSTRIDEX_WERROR=ON >/dev/null
  cmake --build build/fuzz -j "$jobs" --target fuzz_dlpack fuzz_dtype fuzz_layout
  for target in dlpack dtype layout; do
    mkdir -p "$probe/$target"  # new inputs go here; the checked-in seeds stay as they are
    if ! "build/fuzz/tests/fuzz/fuzz_$target" -runs=20000 -artifact_prefix="$probe/" "$probe/$target" \
        "tests/fuzz/corpus/$target" >"$probe/$target.log" 2>&1; then
      tail -n 40 "$probe/$target.log"
      echo "fuzz_$target failed: the input is in $probe (kept)"
      exit 1
    fi
    echo "fuzz_$target: $(grep '^Done' "$probe/$target.log")"
  done
else
  echo "skipped: clang++ with libFuzzer (-fsanitize=fuzzer) not found"
fi
rm -rf "$probe"

step "release artifacts (tools/build-wheels), built where no CUDA toolkit can be seen"
# The sdist and the wheels built from it must carry the copy kernels on a machine without a CUDA
# toolkit (nvcc comes from PyPI): tmpfs over every /usr/local/cuda* folder hides this machine's.
unshare -m bash -c '
  for d in /usr/local/cuda*; do if [ -d "$d" ] && [ ! -L "$d" ]; then mount -t tmpfs tmpfs "$d"; fi; done
  if nvcc --version >/dev/null 2>&1; then echo "nvcc still runs: $(command -v nvcc)"; exit 1; fi
  exec tools/build-wheels'
tools=$root/build/wheel-tools/bin/python

step "release artifacts: a manylinux_2_28 wheel per interpreter and a cp312-abi3 one, the glibc floor, the sdist"
ls dist/stridex-*.tar.gz
ls dist/stridex-*-cp312-abi3-*manylinux_2_28_x86_64.whl
for wheel in dist/stridex-*.whl; do
  # stridex-X.Y.Z-cpXY-cpXY-... for one version, stridex-X.Y.Z-cp312-abi3-... for 3.12 and newer.
  case "$(basename "$wheel" | cut -d- -f3-4)" in cp3*-abi3 | cp3*-cp3*) ;; *) echo "$wheel: neither cpXY-cpXY nor cp312-abi3"; exit 1;; esac
  case "$wheel" in
    *manylinux_2_28_x86_64.whl) arch=x86_64 ;;
    *manylinux_2_28_aarch64.whl) arch=aarch64 ;;  # tools/build-wheels --aarch64
    *) echo "$wheel: not tagged manylinux_2_28_x86_64 or _aarch64"; exit 1;;
  esac
  # The tag in the name is what pip reads; the glibc floor is what the ELF's symbol versions need,
  # read by auditwheel: the oldest manylinux it is consistent with must be 2.28 or older.
  floor=$("$tools" -m auditwheel show "$wheel" | tr '\n' ' ' | sed -n "s/.*consistent with the following platform tag: *\"manylinux_2_\([0-9]*\)_$arch\".*/\1/p")
  if [ -z "$floor" ] || [ "$floor" -gt 28 ]; then "$tools" -m auditwheel show "$wheel"; exit 1; fi
  echo "$wheel: glibc floor 2.$floor, $(du -k "$wheel" | cut -f1) KiB"
done
py_tag=$(python3 -c 'import sys; print(f"cp{sys.version_info.major}{sys.version_info.minor}")')
wheel=$(ls dist/stridex-*-"$py_tag"-"$py_tag"-*manylinux_2_28_x86_64.whl)

step "each other interpreter's wheel in a fresh venv, the abi3 one in each CPython 3.12+: its kernels, the doctor"
# "name cpXY interpreter" per fresh venv: a version's own wheel in its interpreter, the abi3 wheel
# in every interpreter from 3.12 on (pip takes it there with --force-reinstall; on 3.14+ it is the
# one wheel that installs).
abi3=$(ls dist/stridex-*-cp312-abi3-*manylinux_2_28_x86_64.whl)
while read -r tag interpreter; do
  case "$tag" in cp310 | cp311) ;; *) echo "abi3-$tag $abi3 $interpreter" ;; esac
  other=$(ls dist/stridex-*-"$tag"-"$tag"-*manylinux_2_28_x86_64.whl)
  [ "$other" = "$wheel" ] || echo "$tag $other $interpreter"
done < build/wheel-tools/interpreters > build/fresh-venvs
while read -r name other interpreter; do
  rm -rf "build/fresh-$name"
  "$interpreter" -m venv "build/fresh-$name"
  "build/fresh-$name/bin/python" -m pip install -q --disable-pip-version-check "$other" pytest
  # The module pip installed is the wheel's own: abi3 where it is the abi3 wheel.
  "build/fresh-$name/bin/python" -c 'import sys, stridex._stridex as m; print(sys.version.split()[0], m.__file__)' |
    { read -r version file; echo "$name: $version $file"; case "$name:$file" in abi3-*:*.abi3.so | cp*:*cpython-*.so) ;; *) exit 1;; esac; }
  (cd build && "fresh-$name/bin/python" -m stridex doctor --no-progress > "fresh-$name-doctor.txt")
  grep '^copy kernels: embedded' "build/fresh-$name-doctor.txt"
  # --noconftest: the suite's conftest builds the test-only extensions, for the whole suite's sake
  "build/fresh-$name/bin/python" -m pytest -q --noconftest -p no:cacheprovider tests/python/test_kernel_image.py
done < build/fresh-venvs

step "this interpreter's wheel in a venv over the system packages: the Python suite runs there"
rm -rf build/wheel-venv
python3 -m venv --system-site-packages build/wheel-venv
build/wheel-venv/bin/python -m pip install -q --disable-pip-version-check --no-deps "$wheel"

step "fresh venv (no system packages): the wheel, then the README's doctor"
rm -rf build/fresh-venv
python3 -m venv build/fresh-venv
fresh=$root/build/fresh-venv/bin/python
"$fresh" -m pip install -q --disable-pip-version-check "$wheel"
(cd build && "$fresh" -m stridex --version && "$fresh" -m stridex doctor --json --no-progress > fresh-doctor.json)
"$fresh" - build/fresh-doctor.json <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
assert doc["schema"] == 2 and doc["exit_status"] == 0, doc["exit_status"]
assert doc["summary"]["stridex"]["pass"] > 0 and doc["summary"]["stridex"]["claimed_failures"] == 0
assert doc["kernels"]["source"] == "embedded" and doc["kernels"]["sass"], doc["kernels"]
print(f"fresh venv doctor: {doc['summary']['stridex']['pass']} stridex checks passed; kernels for {doc['kernels']['sass']}")
PY

step "C++ consumer built against the installed wheel's CMake package"
cmake -S examples/cpp-consumer -B build/wheel-consumer -G Ninja \
  -Dstridex_DIR="$("$fresh" -m stridex --cmake-dir)" >/dev/null
cmake --build build/wheel-consumer
build/wheel-consumer/cpp-consumer

step "docs site (warnings are errors)"
build/wheel-venv/bin/python -m sphinx -W --keep-going -q -b html docs build/docs

step "Python tests"
STRIDEX_PREFIX="$root/build/ci-prefix" build/wheel-venv/bin/python -m pytest -q -rs tests/python
