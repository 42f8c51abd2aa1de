#!/usr/bin/env bash
# Instructions per call of stridex.view(numpy array) against the nanobind peer (bench/nb_peer),
# counted by callgrind: unlike wall-clock time, a count is not blurred by other processes, so it
# shows on a shared machine which instructions a change cut. Each candidate runs twice, N calls and
# 0 calls, and the difference per call is reported, total and per function (self cost, top 25).
# PYTHONHASHSEED=0: dict probes depend on the hash seed, which moved counts by +-30 a call.
#   PYTHONPATH=$(tools/dev-python build/py) bash bench/callgrind_import.sh [N]
# (bench/bench_import.py builds bench/nb_peer on first use.) OPENBLAS_NUM_THREADS=1: NumPy's BLAS
# threads spin while idle, and callgrind would count their instructions too.
set -euo pipefail
n=${1:-20000}
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# The interpreter itself, not a wrapper script (pyenv shims would hide it from valgrind).
python=$(python3 -c 'import sys; print(sys.executable)')
peer=$(dirname "$(find "$here/nb_peer/build" -name 'nb_peer*.so' | head -1)")
cat > "$work/loop.py" <<PY
import sys
import numpy as np
sys.path.insert(0, "$peer")
import nb_peer
import stridex
f = {"stridex.view": stridex.view, "nb_peer.take": nb_peer.take}[sys.argv[1]]
a = np.arange(12, dtype=np.float32).reshape(3, 4)
f(a)  # the first call fills caches
for _ in range(int(sys.argv[2])):
    f(a)
PY
count() {  # candidate calls -> total instructions, profile in $work/<candidate>.<calls>
  PYTHONHASHSEED=0 OPENBLAS_NUM_THREADS=1 valgrind --tool=callgrind --callgrind-out-file="$work/$1.$2" "$python" "$work/loop.py" "$1" "$2" 2>&1 |
    sed -n 's/.*Collected : \([0-9]*\).*/\1/p'
}
for candidate in stridex.view nb_peer.take; do
  base=$(count "$candidate" 0)
  full=$(count "$candidate" "$n")
  echo "$candidate: $(( (full - base) / n )) instructions per call (loop included)"
  python3 "$here/callgrind_profile.py" "$work/$candidate.0" "$work/$candidate.$n" "$n"
done
