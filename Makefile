# pocforge — the verbs a newcomer guesses. `make help` lists them.
# Overrides: POC=<name> RUN=<run-id> PYTEST_ARGS="-k spec" WORKERS=1 (make test in one process)
SHELL := /bin/bash
VENV  ?= .venv
BIN   := $(VENV)/bin
POC   ?= demo
RUN   ?=
PYTEST_ARGS ?=

.DEFAULT_GOAL := help
.PHONY: help setup test test-unit test-fast rehearse rehearsal-image test-kernels faults lint fmt demo poc validate i18n spec-docs bench bench-plan planner-accuracy bench-client bench-kernels kernels-compile bench-report bench-telemetry bench-profiler report patch-check patch unpatch cluster-up cluster-check cluster-collectives cluster-serve cluster-train cluster-down clean

# A target that works on one POC stops at once, in one line, without one.
need_poc = $(if $(strip $(POC)),,$(error make $@ needs POC=<name>, one of: $(sort $(patsubst pocs/%/poc.yaml,%,$(wildcard pocs/*/poc.yaml)))))

help: ## List every target with one line each
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  \033[1m%-16s\033[0m %s\n", $$1, $$2}' $(MAKEFILE_LIST)

setup: ## Install everything on a fresh machine (.venv, .venv-sglang, Debian packages as root); idempotent
	@scripts/setup.sh

# Two pytest-xdist workers, one per core: the tests that share a module fixture in one worker,
# and those that read a shared server or the namespaced cluster in the worker that holds it
# (tests/workers.py).
WORKERS ?= 2
XDIST = -n $(WORKERS) --dist loadgroup --no-loadscope-reorder

test: ## The whole test suite: unit, kernels (Triton interpreter), real vLLM/SGLang/DeepSpeed/Ansible/Chromium; prints its 40 slowest and the time per file
	$(BIN)/pytest $(XDIST) --durations=40 $(PYTEST_ARGS)

test-unit: ## Unit tests only: no subprocess, no network, under a minute (a guard fails any that try)
	POCFORGE_UNIT_GUARD=1 $(BIN)/pytest -m "not integration and not process and not kernels" $(PYTEST_ARGS)

test-fast: ## Everything but the integration tests (adds quick subprocess/socket tests and a one-op compile check): under 3 minutes
	$(BIN)/pytest $(XDIST) -m "not integration" $(PYTEST_ARGS)

faults: ## The fault suite: SIGKILLs at 20 seeded instants, a dead rank, a full disk, a taken port, a faulty server; prints its table
	POCFORGE_FAULT_INSTANTS=$${INSTANTS:-20} $(BIN)/pytest tests/faults $(PYTEST_ARGS)

lint: ## ruff on the Python code, the import contracts (import-linter), ansible-lint (production profile) on the playbooks
	$(BIN)/ruff check common kernels benchmarks tests
	$(BIN)/ruff format --check common kernels benchmarks tests
	$(BIN)/lint-imports
	PATH=$(BIN):$$PATH ANSIBLE_CONFIG=playbooks/ansible.cfg $(BIN)/ansible-lint --offline --profile production playbooks/

fmt: ## Format the Python code with ruff
	$(BIN)/ruff format common kernels benchmarks tests
	$(BIN)/ruff check --fix common kernels benchmarks tests

validate: ## Validate every POC spec
	$(BIN)/pocforge validate

I18N := common/pocforge/report
i18n: ## The dashboard's translations: extract messages, merge into each .po, fail on untranslated, compile
	$(BIN)/pybabel --quiet extract -F $(I18N)/babel.cfg -k N_ --no-location --sort-output --omit-header -o $(I18N)/locale/messages.pot $(I18N) $$($(BIN)/python -c 'from pocforge.report.i18n import NOTE_SOURCES; print(*NOTE_SOURCES)')
	$(BIN)/pybabel --quiet update -i $(I18N)/locale/messages.pot -d $(I18N)/locale -D messages --no-fuzzy-matching
	$(BIN)/python -c 'from pocforge.report.i18n import main; raise SystemExit(main(["--check"]))'
	$(BIN)/pybabel --quiet compile -d $(I18N)/locale -D messages

spec-docs: ## Regenerate pocs/SPEC.md from the spec models
	$(BIN)/pocforge schema --markdown --out pocs/SPEC.md

demo: ## The main job on this machine: validate every POC, run pocs/demo end to end, print the verdict
	@scripts/demo.sh

poc: ## Run a POC end to end (on its nodes when it has hosts or an inventory, else here): make poc POC=<name> [RUN=<id> to resume]
	$(need_poc)
	$(BIN)/pocforge run $(POC) $(if $(RUN),--resume $(RUN))

rehearse: ## Run a cluster POC against namespaced nodes made on this machine (root): make rehearse POC=tiny-llama-2node-fp32-cpu-vllm [RUNTIME=container] [SCHEDULER=slurm]
	$(need_poc)
	$(BIN)/pocforge rehearse $(POC) --runtime $(or $(RUNTIME),venv) $(if $(SCHEDULER),--scheduler $(SCHEDULER))

rehearsal-image: ## The CPU nodes' environment (a venv archive) and image a rehearsal's nodes run, built here once per machine from Debian's and PyPI's packages
	$(BIN)/python -m pocforge.rehearse.image

bench: bench-client bench-kernels bench-report bench-plan bench-telemetry bench-profiler ## Every benchmark (printed tables, ratios against peers in the same run)

bench-client: ## Our load generator vs vLLM's client on a scripted server with known timings
	$(BIN)/python -m benchmarks.client_bench

bench-plan: ## The planner's layout search: 512 GPUs, a 671B MoE model (target < 2 s each)
	$(BIN)/python -m benchmarks.plan_search

planner-accuracy: ## Replay the published points through the planner: docs/planner-accuracy.md
	$(BIN)/python -m pocforge.plan.accuracy --write docs/planner-accuracy.md

bench-telemetry: ## The telemetry recorder's cost: % of one core at 1 s (target <= 1 %), parse cost per tool, event-loop lag
	$(BIN)/python -m benchmarks.telemetry_cost

bench-profiler: ## vLLM's profiler on an idle data-parallel engine: worker memory and stop time, the kit's window vs max_iterations alone
	$(BIN)/python -m benchmarks.profiler_idle

bench-report: ## Dashboard of a 1,000,000-request run: render time and size (targets < 10 s, < 10 MiB)
	$(BIN)/python -m benchmarks.report_large

report: ## Dashboard of a run (newest of POC unless RUN=…); REPORT_ARGS="--pdf --compare demo/<id>"
	$(need_poc)
	$(BIN)/pocforge report $(POC)$(if $(RUN),/$(RUN)) $(REPORT_ARGS)

bench-kernels: ## Kernel roofline table (on a CPU: correctness only, no meaningful timing)
	$(BIN)/python -m pocforge_kernels.bench --json results/kernels-bench.json

kernels-compile: ## Compile every kernel for gfx942/gfx950/sm90/sm100 with Triton's own backends (no GPU needed)
	$(BIN)/pocforge kernels compile --json results/kernels-compile.json

test-kernels: ## Only the kernel suite (Triton interpreter on a CPU)
	TRITON_INTERPRET=1 $(BIN)/pytest tests/kernels

patch-check: ## Dry-run the POC's framework patches against the installed framework: make patch-check POC=<name>
	$(need_poc)
	$(BIN)/pocforge patch check $(POC)

patch: ## Apply the POC's framework patches (all or nothing; backups kept for a byte-exact revert)
	$(need_poc)
	$(BIN)/pocforge patch apply $(POC)

unpatch: ## Revert the POC's framework patches byte for byte
	$(need_poc)
	$(BIN)/pocforge patch revert $(POC)

cluster-up: ## Bring the POC's cluster up (facts, GPU stack, NICs, env, weights): make cluster-up POC=<name>
	$(need_poc)
	$(BIN)/pocforge cluster up $(POC)

cluster-check: ## Preflight acceptance checks per host: make cluster-check POC=<name>
	$(need_poc)
	$(BIN)/pocforge cluster check $(POC)

cluster-collectives: ## rccl-tests / nccl-tests bus bandwidth against the platform reference
	$(need_poc)
	$(BIN)/pocforge cluster collectives $(POC)

cluster-serve: ## Start the POC's serving deployment on its nodes and run the serving benchmark there
	$(need_poc)
	$(BIN)/pocforge cluster serve $(POC)

cluster-train: ## Run the POC's training benchmark on its nodes
	$(need_poc)
	$(BIN)/pocforge cluster train $(POC)

cluster-down: ## Tear the POC's deployment down on its nodes
	$(need_poc)
	$(BIN)/pocforge cluster down $(POC)

clean: ## Remove caches and build outputs (keeps .venv and results/)
	rm -rf .pytest_cache .ruff_cache .hypothesis build *.egg-info
	find . -name __pycache__ -not -path './.venv*' -prune -exec rm -rf {} +
