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

step "C++ tests under AddressSanitizer + UndefinedBehaviorSanitizer"
cmake -S . -B build/asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DSTRIDEX_WERROR=ON \
  -DSTRIDEX_SANITIZE=address,undefined >/dev/null
cmake --build build/asan -j "$jobs" --target stridex_tests
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

step "Python package and tests"
python3 -m pip install -q --disable-pip-version-check --no-build-isolation .
python3 -m pytest -q -rs tests/python
