"""A node's launches checked by their framework's own argument parser, in the launch's own
runtime, before bring-up stages any weights.

``python3 launch_check.py <plan.json>``, on the node (standard library only, beside
``process.py`` and the ``argcheck`` scripts bring-up copies): the plan holds the node's
launches as the controller planned them, each with ``check: {"script", "item"}``, the
argcheck script of its framework (``pocforge.frameworks.argcheck``) and its input. A
container launch's check runs in the same image with the same mounts (``<engine> run --rm
-i … <image> <its python> <script>``); a venv's or the kit's, under the launch's own
interpreter. So what judges a launch is the framework version the node will run (the
image's vLLM, SGLang, Megatron-LM), not this machine's.

Prints one line per launch: accepted; rejected, with the framework's own message; or not
checked, with why (the argcheck script could not run there: another framework version's
module layout, an image without the framework). It exits 1 when any launch is rejected:
a launch the kit could not ask about is said, not held against the run.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

if __package__:  # the kit's
    from pocforge.frameworks.launch_plan import NodeLaunch, on_node
else:  # a script on a node, beside launch_plan.py (also under ``python3 -I``)
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from launch_plan import NodeLaunch, on_node

TIMEOUT_S = 900  # a container's first start may unpack its image's layers


def interpreter(launch: NodeLaunch) -> str:
    """The Python the launch runs under: its argv's own (``python3 -m vllm…``, a venv's),
    else its venv's, else the image's ``python3`` (``trtllm-serve`` is a console script)."""
    runtime = launch.runtime or {}
    inner = runtime.get("inner_argv") or launch.argv
    if inner and "python" in Path(inner[0]).name:
        return inner[0]
    return runtime.get("python") or "python3"


def check_command(launch: NodeLaunch, scripts: Path, script: str) -> list[str]:
    """The command that runs ``script`` (an argcheck script in ``scripts``) where the launch
    runs: for a container, the launch's own ``run`` line (devices, mounts, environment) up
    to its image, interactive, with ``scripts`` mounted read-only and a name of its own."""
    path = str(scripts / f"{script}.py")
    runtime = launch.runtime or {}
    if runtime.get("kind") != "container":
        return [interpreter(launch), path]
    argv = list(launch.argv[: launch.argv.index(runtime["image"])])
    if "--name" in argv:
        argv[argv.index("--name") + 1] = f"{runtime['name']}-check"
    mount = ["--volume", f"{scripts}:{scripts}:ro"]
    return [*argv[:2], "-i", *argv[2:], *mount, runtime["image"], interpreter(launch), path]


def verdict(output: str) -> list | None:
    """An argcheck script's answer: its last line that is a JSON list (None: no answer).
    Read here on a node and by ``argcheck.run`` on the controller."""
    lines = [line for line in output.splitlines() if line.startswith("[")]
    return json.loads(lines[-1]) if lines else None


def check(launch: NodeLaunch, scripts: Path) -> tuple[str, str]:
    """(``accepted`` | ``rejected`` | ``unchecked``, the framework's message or why it
    could not be asked). The launch's working directory is the checker's folder; the
    folders its container writes are made first, as the process manager makes them."""
    script, item = launch.check["script"], launch.check["item"]  # type: ignore[index]
    here = on_node(launch, str(scripts.parent))
    for folder in (here.runtime or {}).get("written", []):
        Path(folder).mkdir(parents=True, exist_ok=True)
    command = check_command(here, scripts, script)
    try:
        done = subprocess.run(
            command, input=json.dumps([item]), capture_output=True, text=True, timeout=TIMEOUT_S
        )
    except FileNotFoundError:
        return "unchecked", f"cannot run {command[0]} on this node"
    except subprocess.TimeoutExpired:
        return "unchecked", f"{script} did not answer in {TIMEOUT_S} s"
    found = verdict(done.stdout)
    if done.returncode != 0 or found is None:
        tail = " | ".join(done.stderr.strip().splitlines()[-3:])
        return "unchecked", f"{script} could not run there (exit {done.returncode}): {tail}"
    return ("rejected", found[0]) if found[0] else ("accepted", f"by {script}")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: launch_check.py <plan.json>", file=sys.stderr)
        return 2
    plan_file = Path(argv[0])
    scripts = plan_file.resolve().parent / "argcheck"
    failed = 0
    for one in json.loads(plan_file.read_text())["launches"]:
        launch = NodeLaunch.from_dict(one)
        if not launch.check:
            continue
        status, said = check(launch, scripts)
        failed += status == "rejected"
        print(
            f"{launch.framework} {launch.role} on node {launch.node_rank}: {status}: {said}",
            flush=True,
        )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
