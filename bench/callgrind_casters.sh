#!/usr/bin/env bash
# Instructions per call of the no-op functions of bench/bench_casters.py taking a NumPy float32
# vector: the stridex caster through the wheel's caster API, the same caster on the Python path
# (caster API switched off) and nb::ndarray with the same constraints, counted by callgrind (a
# count is not blurred by other processes on a shared machine). Each candidate runs N calls and 0
# calls; the difference per call is reported, total and per function (top 25), and, where the
# module has symbols (CASTERS_BUILD below), "in the call": inside the bound function's dispatch, which
# the loop and other threads (JAX's) do not blur.
#   PYTHONPATH=$(tools/dev-python build/py) bash bench/callgrind_casters.sh [N]
# (bench/bench_casters.py builds the modules into build/bench-casters on first use.) CANDIDATES
# picks some of "stridex/nb python/nb ndarray/nb"; CASTERS_BUILD names another build of
# bench/casters, e.g. one configured with RelWithDebInfo, whose functions callgrind can name
# (nanobind strips Release modules). INPUT=jax takes a JAX CPU array instead of a NumPy one.
# OPENBLAS_NUM_THREADS=1: NumPy's BLAS threads spin while idle, and callgrind would count them.
set -euo pipefail
n=${1:-20000}
here=$(cd "$(dirname "$0")" && pwd)
modules="${CASTERS_BUILD:-$here/../build/bench-casters}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# The interpreter itself, not a wrapper script (pyenv shims would hide it from valgrind).
python=$(python3 -c 'import sys; print(sys.executable)')
cat > "$work/loop.py" <<PY
import sys
import numpy as np
sys.path.insert(0, "$modules")
import casters_nb
candidate = sys.argv[1]
f = {"stridex/nb": casters_nb.stridex_cpu, "python/nb": casters_nb.stridex_cpu,
     "ndarray/nb": casters_nb.ndarray_cpu}[candidate]
casters_nb.python_path(candidate == "python/nb")
a = np.arange(1000, dtype=np.float32)
if "${INPUT:-numpy}" == "jax":
    import jax
    a = jax.device_put(a, jax.devices("cpu")[0])
f(a)  # the first call fills caches
for _ in range(int(sys.argv[2])):
    f(a)
PY
count() {  # candidate calls -> total instructions, profile in $work/<candidate>.<calls>
  OPENBLAS_NUM_THREADS=1 valgrind --tool=callgrind --callgrind-out-file="$work/${1//\//_}.$2" "$python" \
    "$work/loop.py" "$1" "$2" 2>&1 | sed -n 's/.*Collected : \([0-9]*\).*/\1/p'
}
for candidate in ${CANDIDATES:-stridex/nb python/nb ndarray/nb}; do
  base=$(count "$candidate" 0)
  full=$(count "$candidate" "$n")
  echo "$candidate: $(( (full - base) / n )) instructions per call (loop included)"
  python3 "$here/callgrind_profile.py" "$work/${candidate//\//_}.0" "$work/${candidate//\//_}.$n" "$n"
done
