#!/usr/bin/env bash
# bench/gpu_check.sh — the device checks of expo-prof on one CUDA machine, in at most 8 minutes.
#
#   make gpu-check-wheels                # here, once: the wheels the GPU image lacks, into .whl/ (ignored)
#   make gpu-check                       # there (carry .whl): OUT=… bench/gpu_check.sh
#   GPU_CHECK_DRY_RUN=1 make gpu-check   # here: the same script on the CPU, the FAKE device module for the GPU
#
# Expected there: Python 3.12 with torch (CUDA) and pytest, no vLLM, no network. The packages the
# checks need that such an image lacks (msgspec, orjson: `expo-prof analyze` reads traces with them)
# travel as wheels in .whl/ and are installed with --target into a scratch folder (never the network).
#
# Steps, each time-bounded (`timeout`, capped by what is left of the 8 minutes); a failing step does
# not stop the later ones; exit status 1 when any failed:
#   0. wheels       .whl/*.whl into $WORK/site (the dry run lists them: they are cp312 x86-64 builds)
#   1. env.txt      torch / CUDA / GPU, and every import the steps need (a missing one fails)
#   2. lane-checks  bench/gpu_lane_check.py: tokens equal vLLM's inline draw (seeded rows too) with the
#                   draw held back, allocator reuse of q's block, a FlashInfer batch launches nothing,
#                   q memory against torch.cuda.memory_allocated; then each check with the lane
#                   sabotaged (no wait_event / no record_stream) must fail. Dry run: the FAKE device.
#   3. cuda-lane    tests/overlay/test_cuda_lane.py on the real lane (EXPO_PROF_GPU_CHECK=1; CUDA only)
#   4. bench        bench/bench_overlay_gpu.py (inline vs lane vs overlay; CUDA only)
#   5. analyze      `python -m expo_prof analyze` of the lane checks' profiler trace and of its event log
#                   (CUDA: the side-stream kernels; dry run: the CPU lane's thread)
# Results in $OUT, at most 8 files (what the device tool brings back): summary.txt, env.txt,
# lane-checks.json, bench.json, analysis.json, analysis-eventlog.json, logs.tar.gz (step logs,
# junit, event logs, traces).
set -uo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
DRY="${GPU_CHECK_DRY_RUN:-0}"
OUT="${OUT:-$REPO/gpu-check-out}"
PY="${PYTHON:-python3}"
BUDGET_S="${GPU_CHECK_BUDGET_S:-480}"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/expo-prof-gpu-check.XXXXXX")"
mkdir -p "$OUT" "$WORK/logs" "$WORK/trace"
export PYTHONPATH="$REPO${PYTHONPATH:+:$PYTHONPATH}"
export PIP_NO_INDEX=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PYTHONUNBUFFERED=1
START=$(date +%s)
SUMMARY="$OUT/summary.txt"
: >"$SUMMARY"
FAILED=0
DRY_FLAG=()
[ "$DRY" = 1 ] && DRY_FLAG=(--dry-run)

note() { printf '%s\n' "$*" | tee -a "$SUMMARY"; }

# run NAME SECONDS CMD...: time-bounded (never past the budget), output to $WORK/logs/NAME.log.
run() {
    local name=$1 secs=$2 rc=0 t0 left
    shift 2
    t0=$(date +%s)
    left=$((START + BUDGET_S - 15 - t0))
    [ "$left" -lt "$secs" ] && secs=$left
    if [ "$secs" -le 0 ]; then
        FAILED=1
        note "FAIL  $name (no time left of the ${BUDGET_S} s budget)"
        return
    fi
    timeout --kill-after=10 "$secs" "$@" >"$WORK/logs/$name.log" 2>&1 || rc=$?
    if [ "$rc" -eq 0 ]; then
        note "ok    $name ($(($(date +%s) - t0)) s)"
    else
        FAILED=1
        [ "$rc" -eq 124 ] && rc="$rc: timed out after $secs s"
        note "FAIL  $name (exit $rc; tail of its log below)"
        tail -n 15 "$WORK/logs/$name.log" | sed 's/^/      /' | tee -a "$SUMMARY"
    fi
}

note "gpu_check: $([ "$DRY" = 1 ] && echo 'DRY RUN on the CPU (FAKE device module)' || echo 'CUDA'), python $PY, budget ${BUDGET_S} s"

# 0. carried wheels (never the network)
if compgen -G ".whl/*.whl" >/dev/null; then
    if [ "$DRY" = 1 ]; then
        note "      wheels carried: $(cd .whl && ls -- *.whl | tr '\n' ' ')(not installed by the dry run: cp312 x86-64 builds)"
    else
        run wheels 60 "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
            --target "$WORK/site" .whl/*.whl
        export PYTHONPATH="$WORK/site:$PYTHONPATH"
    fi
else
    note "      no wheels in .whl/ (make gpu-check-wheels): using this Python's packages"
fi

# 1. environment, and every import the steps need
run env 60 "$PY" - "$DRY" <<'EOF'
import importlib, sys
import torch
dry = sys.argv[1] == "1"
print(f"python {sys.version.split()[0]}, torch {torch.__version__}, cuda {torch.version.cuda}, "
      f"available {torch.cuda.is_available()}, devices {torch.cuda.device_count()}")
if torch.cuda.is_available():
    print("device 0:", torch.cuda.get_device_name(0))
missing = []
for m in ("pytest", "numpy", "msgspec", "click", "rich", "overlay.lanes", "expo_prof.cli.main"):
    try:
        importlib.import_module(m)
        print(f"{m}: yes")
    except Exception as exc:  # noqa: BLE001
        print(f"{m}: MISSING ({exc})")
        missing.append(m)
for m in ("orjson", "isal", "vllm"):
    print(f"{m}: {'yes' if importlib.util.find_spec(m) else 'no'} (optional)")
if not dry and not torch.cuda.is_available():
    missing.append("a CUDA device")
sys.exit(f"missing: {', '.join(missing)}" if missing else 0)
EOF
cp "$WORK/logs/env.log" "$OUT/env.txt"
sed 's/^/      /' "$OUT/env.txt"

# 2. the lane checks (and their sabotaged runs), with a profiler trace of overlay steps for step 5
run lane-checks 120 "$PY" bench/gpu_lane_check.py "${DRY_FLAG[@]}" --json "$OUT/lane-checks.json" \
    --work "$WORK/lane" --trace "$WORK/trace"
sed 's/^/      /' "$WORK/logs/lane-checks.log" | grep -E '^      (ok|FAIL) ' | tee -a "$SUMMARY"

# 3. + 4. need CUDA
if [ "$DRY" = 1 ]; then
    note "      dry run: cuda-lane (tests/overlay/test_cuda_lane.py) and bench (bench_overlay_gpu.py) need CUDA: not run"
else
    run cuda-lane 90 env EXPO_PROF_GPU_CHECK=1 EXPO_PROF_GPU_CHECK_OUT="$WORK/trace-cuda-lane" \
        "$PY" -m pytest -q --noconftest -p no:cacheprovider -o addopts="" \
        --junitxml="$WORK/logs/cuda-lane.xml" tests/overlay/test_cuda_lane.py
    run bench 120 "$PY" bench/bench_overlay_gpu.py --sizes 4096x4,4096x16 --repeats 20 \
        --json "$OUT/bench.json" --trace-dir "$WORK/bench-traces"
fi

# 5. the offline analysis of the lane checks' trace, and separately of its event log
if [ -f "$WORK/trace/lane-check.pt.trace.json" ]; then
    run analyze 30 "$PY" -m expo_prof analyze "$WORK/trace/lane-check.pt.trace.json" --json -o "$OUT/analysis.json"
    mkdir -p "$WORK/trace-log" && cp "$WORK"/trace/expo-prof-events-*.jsonl "$WORK/trace-log/" 2>/dev/null
    run analyze-eventlog 30 "$PY" -m expo_prof analyze "$WORK/trace-log" --json -o "$OUT/analysis-eventlog.json"
else
    FAILED=1
    note "FAIL  analyze (no trace: the lane-checks step did not write $WORK/trace/lane-check.pt.trace.json)"
fi

# summary lines of the analyses and the benchmark
for f in analysis analysis-eventlog; do
    [ -f "$OUT/$f.json" ] || continue
    "$PY" - "$OUT/$f.json" <<'EOF' | tee -a "$SUMMARY"
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
    "$PY" - "$OUT/bench.json" <<'EOF' | tee -a "$SUMMARY"
import json, sys
for r in json.load(open(sys.argv[1]))["steps"]:
    hidden = "–" if r["hidden"] is None else f"{100 * r['hidden']:.0f}%"
    print(f"      bench {r['size']} {r['config']:>15}: step {r['mean_ms']:.2f} ms (x{r['ratio_mean']:.3f} of inline), q hidden {hidden}")
EOF
fi

# everything else, packed into one file (logs, junit, event logs, traces), under the 16 MB a file may have
tar -czf "$OUT/logs.tar.gz" -C "$WORK" --exclude=site logs trace $(cd "$WORK" && ls -d trace-cuda-lane bench-traces 2>/dev/null)
if [ "$(stat -c %s "$OUT/logs.tar.gz")" -gt 15000000 ]; then
    tar -czf "$OUT/logs.tar.gz" -C "$WORK" logs
    note "      logs.tar.gz: traces left out (over 15 MB)"
fi
note "gpu_check: $(($(date +%s) - START)) s, results in $OUT, $([ "$FAILED" -eq 0 ] && echo 'all steps ok' || echo 'SOME STEPS FAILED')"
rm -rf "$WORK"
exit "$FAILED"
