#!/usr/bin/env bash
# Installs what the tests need, then runs every test: the C++ suite (warnings as errors), the same
# suite under ASan+UBSan, the example consumer both ways, and the Python suite against an
# installed stridex. GPU tests skip with a reason on machines without a CUDA device.
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
if [ ${#need[@]} -gt 0 ]; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}"
fi

step "python packages"
python3 -m pip install -q --disable-pip-version-check -r tests/requirements.txt

step "C++ build (-Wall -Wextra -Werror) and tests"
cmake -S . -B build/ci -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSTRIDEX_WERROR=ON \
  -DSTRIDEX_BUILD_TESTS=ON -DSTRIDEX_BUILD_BENCH=ON >/dev/null
cmake --build build/ci -j "$jobs"
ctest --test-dir build/ci --output-on-failure -j "$jobs"
# The installed package the extension examples (tests/python/test_extension_*.py) build against.
cmake --install build/ci --prefix build/ci-prefix >/dev/null

step "C++ tests under AddressSanitizer + UndefinedBehaviorSanitizer"
cmake -S . -B build/asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DSTRIDEX_WERROR=ON \
  -DSTRIDEX_SANITIZE=address,undefined >/dev/null
cmake --build build/asan -j "$jobs" --target stridex_tests
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --test-dir build/asan --output-on-failure -j "$jobs" -E '^consumer_'

step "Python package and tests"
python3 -m pip install -q --disable-pip-version-check --no-build-isolation .
STRIDEX_PREFIX="$root/build/ci-prefix" python3 -m pytest -q -rs tests/python
