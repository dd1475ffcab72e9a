#!/usr/bin/env bash
# make demo: the deepest real path the kit has today, and it grows with the kit.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=.venv/bin
[ -x $BIN/pocforge ] || { echo "run 'make setup' first" >&2; exit 2; }

echo "== 1. validate every POC spec (strict schema, cross-field rules)"
$BIN/pocforge validate
echo
echo "== 2. the POCs and their newest runs"
$BIN/pocforge ls
echo
echo "== 3. the resolved demo spec (includes merged, defaults filled, secrets masked)"
$BIN/pocforge show demo | head -30
echo "   …"
echo
echo "demo: validated $(ls pocs/*/poc.yaml | wc -l) specs. Serving, training and the dashboard join this demo as they land."
