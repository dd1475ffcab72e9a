"""Scripted vendor tools for the namespaced nodes' private /opt (measurement instruments)."""

from __future__ import annotations

import stat
import textwrap


def fake_amd_smi(opt, gpus: int) -> None:
    """A scripted amd-smi in this host's private /opt that reports ``gpus`` MI300X."""
    tool = opt / "rocm" / "bin" / "amd-smi"
    tool.parent.mkdir(parents=True, exist_ok=True)
    (opt / "rocm" / ".info").mkdir(parents=True, exist_ok=True)
    (opt / "rocm" / ".info" / "version").write_text("6.4.2-120\n")
    tool.write_text(
        textwrap.dedent(f"""\
        #!/usr/bin/env python3
        import json, sys
        n = {gpus}
        if sys.argv[1:2] == ["static"]:
            json.dump([{{"gpu": i, "asic": {{"market_name": "AMD Instinct MI300X"}},
                         "bus": {{"bdf": "0000:%02x:00.0" % (5 + 32 * i)}},
                         "driver": {{"name": "amdgpu", "version": "6.10.5"}},
                         "vbios": {{"version": "022.040.003.043.000001"}}}} for i in range(n)],
                      sys.stdout)
        elif sys.argv[1:2] == ["metric"]:
            json.dump([{{"gpu": i, "ecc": {{"total_correctable_count": 0,
                                            "total_uncorrectable_count": 0}}}} for i in range(n)],
                      sys.stdout)
        else:
            print("AMDSMI Tool: 24.7.1 | ROCm version: 6.4.2")
        """)
    )
    tool.chmod(tool.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
