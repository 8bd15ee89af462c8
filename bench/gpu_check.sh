#!/usr/bin/env bash
# bench/gpu_check.sh — the device checks of expo-prof on one CUDA machine, in under 10 minutes.
#
# NOT YET RUN: no GPU was lent to the task that wrote it (issue 11); its first
# run on a CUDA machine is its own test. Expected there: torch with CUDA
# (2.11 tested for), pytest, no vLLM, no network. Nothing is installed from the
# network; wheels carried in .whl/ (e.g. made on a networked machine with
#   pip download -d .whl --only-binary=:all: --python-version 3.11 pytest numpy msgspec click rich orjson isal
# ) are installed with --no-deps --no-index when present.
#
# What it does, each step time-bounded (`timeout`), results under $OUT:
#   1. env.txt        torch / CUDA / GPU, the imports each step needs
#   2. cuda-lane.*    tests/overlay/test_cuda_lane.py on the real CUDA lane
#                     (EXPO_PROF_GPU_CHECK=1; the core tests use a FAKE device)
#   3. bench.*        bench/bench_overlay_gpu.py (inline vs lane vs overlay), with traces
#   4. analysis.json  `python -m expo_prof analyze` of the lane's torch.profiler trace
#                     (trace/cuda-lane.pt.trace.json, from step 2), and of its event log
#   5. summary.txt    one line per step, printed at the end
# A failing step does not stop the later ones; the exit status is 1 when any failed.
#
#   OUT=/tmp/gpu-check bench/gpu_check.sh
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
OUT="${OUT:-$REPO/gpu-check-out}"
PY="${PYTHON:-python}"
mkdir -p "$OUT" "$OUT/trace"
export PYTHONPATH="$REPO${PYTHONPATH:+:$PYTHONPATH}"
export PIP_NO_INDEX=1 PIP_DISABLE_PIP_VERSION_CHECK=1
START=$(date +%s)
SUMMARY="$OUT/summary.txt"
: >"$SUMMARY"
FAILED=0

note() { printf '%s\n' "$*" | tee -a "$SUMMARY"; }

# run NAME SECONDS CMD...: time-bounded, output to $OUT/NAME.log, status into the summary.
run() {
    local name=$1 secs=$2 rc=0 t0
    shift 2
    t0=$(date +%s)
    timeout --kill-after=10 "$secs" "$@" >"$OUT/$name.log" 2>&1 || rc=$?
    if [ "$rc" -eq 0 ]; then
        note "ok    $name ($(( $(date +%s) - t0 )) s)"
    else
        FAILED=1
        [ "$rc" -eq 124 ] && rc="$rc: timed out after $secs s"
        note "FAIL  $name (exit $rc; tail of $OUT/$name.log below)"
        tail -n 15 "$OUT/$name.log" | sed 's/^/      /' | tee -a "$SUMMARY"
    fi
}

# 0. carried wheels (never the network)
if compgen -G ".whl/*.whl" >/dev/null; then
    run pip-install 60 "$PY" -m pip install --no-deps --no-index .whl/*.whl
fi

# 1. environment
{
    date -u
    command -v nvidia-smi >/dev/null && nvidia-smi -L || echo "no nvidia-smi"
    "$PY" - <<'EOF'
import importlib.util, sys
import torch
print(f"python {sys.version.split()[0]}, torch {torch.__version__}, cuda {torch.version.cuda}, "
      f"available {torch.cuda.is_available()}, devices {torch.cuda.device_count()}")
if torch.cuda.is_available():
    print("device 0:", torch.cuda.get_device_name(0))
for m in ("pytest", "numpy", "msgspec", "click", "rich", "orjson", "isal", "vllm"):
    print(f"{m}: {'yes' if importlib.util.find_spec(m) else 'MISSING'}")
EOF
} >"$OUT/env.txt" 2>&1 || FAILED=1
cat "$OUT/env.txt"

# 2. the real CUDA lane (device check; not collected without EXPO_PROF_GPU_CHECK=1)
run cuda-lane 180 env EXPO_PROF_GPU_CHECK=1 EXPO_PROF_GPU_CHECK_OUT="$OUT/trace" \
    "$PY" -m pytest -q --noconftest -p no:cacheprovider -o addopts="" \
    --junitxml="$OUT/cuda-lane.xml" tests/overlay/test_cuda_lane.py

# 3. the benchmark (its own traces and event logs in bench-traces/)
run bench 180 "$PY" bench/bench_overlay_gpu.py --sizes 4096x4,4096x16 --repeats 30 \
    --json "$OUT/bench.json" --trace-dir "$OUT/bench-traces"

# 4. the offline analysis of the lane's trace (and, separately, of its event log)
if [ -f "$OUT/trace/cuda-lane.pt.trace.json" ]; then
    run analyze 45 "$PY" -m expo_prof analyze "$OUT/trace/cuda-lane.pt.trace.json" --json "$OUT/analysis.json"
    mkdir -p "$OUT/trace-log" && cp "$OUT"/trace/expo-prof-events-*.jsonl "$OUT/trace-log/" 2>/dev/null || true
    run analyze-eventlog 45 "$PY" -m expo_prof analyze "$OUT/trace-log" --json "$OUT/analysis-eventlog.json"
else
    FAILED=1
    note "FAIL  analyze (no trace: the cuda-lane step did not write $OUT/trace/cuda-lane.pt.trace.json)"
fi

# 5. summary
for f in analysis analysis-eventlog; do
    [ -f "$OUT/$f.json" ] || continue
    "$PY" - "$OUT/$f.json" <<'EOF' | tee -a "$SUMMARY" || true
import json, sys
d = json.load(open(sys.argv[1]))
s = d["summary"]
rules = sorted({r["rule"] for r in d["ranks"]})
frac = s["hidden_fraction"]
print(f"      {sys.argv[1].rsplit('/', 1)[-1]}: rule {'+'.join(rules)}, {s['instances']} instance(s), "
      f"total {s['total_ns'] / 1e3:.1f} µs, hidden {s['hidden_ns'] / 1e3:.1f} µs "
      f"({'–' if frac is None else f'{100 * frac:.0f}%'}), exposed {s['exposed_ns'] / 1e3:.1f} µs")
EOF
done
if [ -f "$OUT/bench.json" ]; then
    "$PY" - "$OUT/bench.json" <<'EOF' | tee -a "$SUMMARY" || true
import json, sys
for r in json.load(open(sys.argv[1]))["steps"]:
    hidden = "–" if r["hidden"] is None else f"{100 * r['hidden']:.0f}%"
    print(f"      bench {r['size']} {r['config']:>15}: step {r['mean_ms']:.2f} ms (x{r['ratio_mean']:.3f} of inline), q hidden {hidden}")
EOF
fi
note "gpu_check: $(( $(date +%s) - START )) s, results in $OUT, $([ "$FAILED" -eq 0 ] && echo 'all steps ok' || echo 'SOME STEPS FAILED')"
exit "$FAILED"
