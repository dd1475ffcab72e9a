"""A node's serving port already taken (another server, or one left running): the kit's
process manager refuses to start the launch, at once and in one line, instead of letting
the framework find out after loading its weights. (A run on this machine picks a free
port itself; the fixed ``serving.port`` is a cluster's.)"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

import pocforge.frameworks.node_launcher as launcher_module

from .conftest import FaultRow

pytestmark = pytest.mark.integration


def test_a_taken_port_is_refused_before_the_start(tmp_path, fault_table):
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        launch = {
            "deployment": "serving",
            "framework": "vllm",
            "node_rank": 0,
            "host": "127.0.0.1",
            "role": "server",
            "argv": [sys.executable, "-c", "import time; time.sleep(120)"],
            "health_url": f"http://127.0.0.1:{port}/health",
        }
        plan = tmp_path / "serve.launches.json"
        plan.write_text(
            json.dumps({"poc": "taken", "node_rank": 0, "timeout_s": 60, "launches": [launch]})
        )
        began = time.monotonic()
        done = subprocess.run(
            [sys.executable, launcher_module.__file__, "serve", str(plan)],
            capture_output=True,
            text=True,
            timeout=60,
        )
        took = time.monotonic() - began
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    assert f"port {port} on 127.0.0.1 is already in use" in done.stderr
    assert "set serving.port" in done.stderr
    assert took < 10  # refused before a start, not after a health timeout
    assert not list(Path(tmp_path / "logs").glob("*.log.pid"))  # nothing was started
    fault_table.add(
        FaultRow(
            "serving port already taken on the node",
            tried=1,
            readable=1,
            lost=0,
            resumed=None,
            note=f"refused in {took:.1f} s, before the start, in one line",
        )
    )
