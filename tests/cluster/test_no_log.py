"""Every playbook task that sees a credential is ``no_log``: Ansible's output (the console,
ansible-runner's stdout and job events in the run) never carries one.

The variables that carry credentials: the launches' plan (their environment), the weights
staging's environment (``HF_TOKEN`` from ``model.hf_token``, object-store keys) and
Ansible's own password variables. A task that names one in its arguments or its
``environment`` must set ``no_log``."""

from __future__ import annotations

from pathlib import Path

import yaml

PLAYBOOKS = Path(__file__).resolve().parents[2] / "playbooks"
CARRIERS = (
    "workload_plans",
    "model_staging_env",
    "ansible_password",
    "ansible_become_password",
    "ansible_ssh_pass",
)
# Tasks that name a carrier but output nothing of it: they stay readable (a no_log assert
# would hide its own failure message).
ONLY_ITS_SIZE = {
    "Check that the controller planned this workload": "asserts the plans are not empty",
    "Note whether this node has launches": "keeps a boolean: whether this node has any",
}
# Keywords that say how a task runs, not what it passes on.
PLAIN = {"name", "when", "register", "changed_when", "failed_when", "tags", "loop", "no_log"}


def tasks(node):
    if isinstance(node, list):
        for item in node:
            yield from tasks(item)
    elif isinstance(node, dict):
        nested = [
            node[k]
            for k in ("block", "rescue", "always", "tasks", "pre_tasks", "post_tasks", "handlers")
            if k in node
        ]
        if nested:
            for inner in nested:
                yield from tasks(inner)
        else:
            yield node


def task_files() -> list[Path]:
    return sorted(
        p for p in PLAYBOOKS.rglob("*.yml") if "tasks" in p.parts or p.parent == PLAYBOOKS
    )


def test_every_task_that_sees_a_credential_is_no_log():
    exposed = []
    seen = 0
    for file in task_files():
        for task in tasks(yaml.safe_load(file.read_text()) or []):
            passed = {k: v for k, v in task.items() if k not in PLAIN}
            text = yaml.safe_dump(passed)
            named = [c for c in CARRIERS if c in text]
            if named and task.get("name") not in ONLY_ITS_SIZE:
                seen += 1
                if not task.get("no_log"):
                    exposed.append(
                        f"{file.relative_to(PLAYBOOKS)}: {task.get('name')!r} ({', '.join(named)})"
                    )
    assert seen >= 3  # the launches' plan and both weight downloads, at least
    assert not exposed, "tasks that see a credential without no_log:\n" + "\n".join(exposed)


def test_a_gated_models_token_goes_to_the_download_task_only(tmp_path):
    from pocforge.cluster.inventory import _bringup_vars
    from pocforge.spec import load_spec

    folder = tmp_path / "gated"
    folder.mkdir()
    (folder / "poc.yaml").write_text(
        "poc: {name: gated, customer: t, owner: t}\n"
        "model: {id: meta-llama/Llama-3.1-8B, hf_token: '${POCFORGE_TEST_HF}', weights: {source: 'hf://meta-llama/Llama-3.1-8B'}}\n"
        "cluster: {gpu: MI300X, nodes: 1, gpus_per_node: 8}\n"
        "acceptance: {criteria: []}\n"
    )
    import os

    os.environ["POCFORGE_TEST_HF"] = "hf_canaryCANARY0123456789"
    try:
        spec = load_spec(folder / "poc.yaml")
    finally:
        del os.environ["POCFORGE_TEST_HF"]
    out = _bringup_vars(spec)
    assert out["model_staging_env"] == {"HF_TOKEN": "hf_canaryCANARY0123456789"}
    assert out["model_staging_source"] == "hf://meta-llama/Llama-3.1-8B"
