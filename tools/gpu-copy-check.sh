#!/usr/bin/env bash
# The copy engine on a GPU machine, in one go: C++ tests, the Python copy tests (then the whole
# Python suite unless --quick), the doctor's copy column and the copy benchmark. Logs go to $OUT (or ./gpu-out). Usage, from the repository root:
#   GTEST_SOURCE_DIR=/path/to/googletest tools/gpu-copy-check.sh [--quick]
set -uo pipefail
out=${OUT:-$PWD/gpu-out}
mkdir -p "$out"
export CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-16} PYTHONUNBUFFERED=1
{
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
  nvcc --version | tail -1
  python3 -c 'import torch, numpy; print("torch", torch.__version__, "numpy", numpy.__version__)'
} 2>&1 | tee "$out/env.txt"
gtest=${GTEST_SOURCE_DIR:+-DGTEST_SOURCE_DIR=$GTEST_SOURCE_DIR}
(cmake -S . -B build/gpu -G Ninja -DSTRIDEX_BUILD_TESTS=ON -DSTRIDEX_WERROR=ON $gtest >/dev/null &&
 cmake --build build/gpu --target stridex_tests 2>&1 | tail -5 &&
 ./build/gpu/tests/cpp/stridex_tests 2>&1 | tail -15) 2>&1 | tee "$out/cpp.txt"
rm -rf /tmp/sx && python3 -m pip install -q --no-build-isolation --no-deps --target /tmp/sx . 2>&1 | tail -5 | tee "$out/pip.txt"
export PYTHONPATH=/tmp/sx
python3 -m pytest -q -x tests/python/test_copy.py 2>&1 | tail -25 | tee "$out/pytest_copy.txt"
if [ "${1:-}" != "--quick" ]; then
  python3 -m pytest -q tests/python 2>&1 | tail -25 | tee "$out/pytest_all.txt"
fi
python3 -m stridex doctor --cases strided,copy 2>&1 | tail -40 | tee "$out/doctor_copy.txt"
python3 bench/bench_copy.py --mib 512 --repeat 11 --json "$out/bench.json" 2>&1 | tee "$out/bench.txt"
