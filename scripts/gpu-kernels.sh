#!/usr/bin/env bash
# The kernel benchmark on a GPU machine, in one call: every op timed at model shapes against
# its roofline, the torch reference and (where installed) vLLM's kernel.
#
#   bash scripts/gpu-kernels.sh            # from the repository root, on the GPU machine
#
# Made for a short, bare loan of a GPU: needs only python3 with a GPU build of torch and
# triton (and pyyaml, rich), installs nothing, and uses the checkout in place through a
# throw-away package folder, since pocforge_kernels never imports the rest of the kit.
# Each op runs in its own process under a timeout, and the loop under BUDGET_S (480 s by
# default), so a crash or a hang costs that op's rows only; results are merged at the end,
# and whatever finished is kept if the run is cut.
#
# Writes into $OUT (default results/gpu-<host>): env.txt, kernels-bench.json (merged),
# kernels-bench.log.  Exit status: 0 when every row is correct, 1 otherwise, 2 for bad input.
#
# PROFILER=nsys or PROFILER=rocprofv3 runs each op's process under that GPU profiler and
# keeps its kernel summary in $OUT/profiles/<op>/, the files the dashboard's kernel table
# reads: nsys stats' <op>_cuda_gpu_kern_sum.csv beside the .nsys-rep, rocprofv3 --stats'
# <op>_kernel_stats.csv (COUNTERS="SQ_WAVES ..." adds --pmc). The ops' timings are then
# taken under the profiler (kernels-bench.json says which). The flags are those of the kit's
# serving wrappers (common/pocforge/frameworks/gpu_profiler.py), written out here because
# this script runs without the kit installed; no capture range: the whole op is profiled.
# Rehearse on a CPU: PYTHON=.venv/bin/python bash scripts/gpu-kernels.sh (correctness only).
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
PY=${PYTHON:-python3}
OUT=${OUT:-$ROOT/results/gpu-$(hostname)}
PER_OP_TIMEOUT=${PER_OP_TIMEOUT:-180}
# The whole loop's budget: a lent machine allows 10 minutes a call. Ops that find less
# than 20 s left are skipped and show as "no result" rows. The issue's targets come first.
BUDGET_S=${BUDGET_S:-480}
OPS=${OPS:-fused_moe flash_attention_prefill paged_attention_decode rms_norm silu_and_mul rotary_embedding fp8_quant fp8_gemm mla_decode gelu_and_mul}
PROFILER=${PROFILER:-}
COUNTERS=${COUNTERS:-}
case "$PROFILER" in
  "" | nsys | rocprofv3) ;;
  *) echo "PROFILER=$PROFILER: the profilers are nsys (NVIDIA) and rocprofv3 (AMD); unset it to profile nothing" >&2
     exit 2 ;;
esac
if [ -n "$COUNTERS" ] && [ "$PROFILER" != rocprofv3 ]; then
  echo "COUNTERS=$COUNTERS: hardware counters are read by rocprofv3 (--pmc); set PROFILER=rocprofv3 or unset COUNTERS" >&2
  exit 2
fi
if [ -n "$PROFILER" ] && ! command -v "$PROFILER" >/dev/null 2>&1; then
  install=$([ "$PROFILER" = nsys ] && echo "NVIDIA Nsight Systems (nsight-systems-cli)" || echo "ROCm's rocprofiler-sdk")
  echo "PROFILER=$PROFILER: $PROFILER is not on PATH; install $install, or unset PROFILER" >&2
  exit 2
fi

# The profiler's command line before an op's own, in the array `wrap` (empty without PROFILER).
set_wrap() {
  local op=$1 dir="$OUT/profiles/$1"
  wrap=()
  case "$PROFILER" in
    nsys) wrap=(nsys profile --trace cuda,nvtx,osrt --cuda-graph-trace node --force-overwrite true
                --output "$dir/$op") ;;
    rocprofv3) wrap=(rocprofv3 --kernel-trace --stats --output-format csv --output-directory "$dir"
                     --output-file "$op")
               # shellcheck disable=SC2206  # the counters' names, one word each
               [ -n "$COUNTERS" ] && wrap+=(--pmc $COUNTERS)
               wrap+=(--) ;;
  esac
}

# nsys writes its report; its kernel summary is another step (rocprofv3 --stats wrote its own).
summarize() {
  local op=$1 dir="$OUT/profiles/$1"
  [ "$PROFILER" = nsys ] || return 0
  if [ ! -f "$dir/$op.nsys-rep" ]; then
    echo "!! $op: nsys wrote no report ($dir/$op.nsys-rep)"
    return 0
  fi
  nsys stats --report cuda_gpu_kern_sum --format csv --force-export true \
    --output "$dir/$op" "$dir/$op.nsys-rep" >"$dir/stats.log" 2>&1 ||
    echo "!! $op: nsys stats failed: $(tail -n 3 "$dir/stats.log")"
}

mkdir -p "$OUT"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# pocforge_kernels from this checkout (it never imports the kit), ahead of any installed copy.
mkdir -p "$work/site"
ln -s "$ROOT/kernels/pocforge_kernels" "$work/site/pocforge_kernels"
export PYTHONPATH="$work/site${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1 TRITON_DEFAULT_FP_FUSION=1

{
  date -u +%FT%TZ
  git -C "$ROOT" rev-parse HEAD 2>/dev/null || true
  (nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv 2>/dev/null ||
    rocm-smi --showproductname 2>/dev/null || echo "no GPU tool found")
  "$PY" - <<'EOF'
import platform, sys, torch, triton
import pocforge_kernels as k
print("python", platform.python_version(), "torch", torch.__version__, "triton", triton.__version__)
print("cuda", torch.version.cuda, "hip", torch.version.hip, "gpu", torch.cuda.is_available())
if torch.cuda.is_available():
    p = torch.cuda.get_device_properties(0)
    print("device", p.name, "units", p.multi_processor_count, "memory_gib", round(p.total_memory / 2**30))
print("pocforge_kernels from", k.__file__)
EOF
} 2>&1 | tee "$OUT/env.txt"

deadline=$((SECONDS + BUDGET_S))
for op in $OPS; do
  left=$((deadline - SECONDS))
  if [ "$left" -lt 20 ]; then
    echo "!! $op skipped: the ${BUDGET_S} s budget is spent"
    continue
  fi
  limit=$((left < PER_OP_TIMEOUT ? left : PER_OP_TIMEOUT))
  set_wrap "$op"
  echo "== $op (at most ${limit} s)${PROFILER:+ under ${wrap[*]}}"
  [ -n "$PROFILER" ] && mkdir -p "$OUT/profiles/$op"
  timeout -k 10 "$limit" "${wrap[@]}" "$PY" -m pocforge_kernels.bench --op "$op" \
    --json "$work/$op.json" >"$work/$op.log" 2>&1
  code=$?
  tail -n 40 "$work/$op.log"
  [ "$code" -ne 0 ] && echo "!! $op exited with $code"
  summarize "$op"
done 2>&1 | tee "$OUT/kernels-bench.log"  # a failed op shows in the merged rows below

# One document: every op's rows, the first run's metadata, and the ops that left no result.
PROFILER="$PROFILER" "$PY" - "$work" "$OUT/kernels-bench.json" $OPS <<'EOF'
import json, os, sys
from pathlib import Path

work, out, ops = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3:]
merged, missing = None, []
for op in ops:
    path = work / f"{op}.json"
    if not path.exists():
        missing.append(op)
        continue
    doc = json.loads(path.read_text())
    if merged is None:
        merged = doc
    else:
        merged["rows"] += doc["rows"]
if merged is None:
    sys.exit("no op left a result; see kernels-bench.log")
for op in missing:
    merged["rows"].append({"op": op, "correct": False, "error": "no result: crashed or timed out"})
if os.environ.get("PROFILER"):  # timed under it: its summaries are in profiles/<op>/
    merged["profiler"] = os.environ["PROFILER"]
out.write_text(json.dumps(merged, indent=2) + "\n")
from pocforge_kernels.bench import print_report
print_report(merged)
print(f"wrote {out}")
EOF
[ $? -eq 0 ] || exit 1
if grep -q '"correct": false' "$OUT/kernels-bench.json"; then exit 1; fi
