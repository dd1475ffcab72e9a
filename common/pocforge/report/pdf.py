"""Print the dashboard to PDF with headless Chromium (Debian's ``chromium``).

``chromium --headless --print-to-pdf`` loads the self-contained HTML from disk (no
network), lets plotly draw (``--virtual-time-budget``) and prints with the template's
``@media print`` rules: one section per page, A4 landscape.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--run-all-compositor-stages-before-draw",
    "--no-pdf-header-footer",
)


class PdfError(RuntimeError):
    """Chromium missing or failing; one clear line."""


def chromium() -> str:
    """Path of a Chromium binary (``POCFORGE_CHROMIUM`` overrides)."""
    env = os.environ.get("POCFORGE_CHROMIUM")
    if env:
        return env
    for name in CANDIDATES:
        found = shutil.which(name)
        if found:
            return found
    raise PdfError(
        "no Chromium found for --pdf (install Debian's `chromium` or set POCFORGE_CHROMIUM)"
    )


def print_pdf(html_file: str | Path, pdf_file: str | Path, timeout_s: float = 120) -> Path:
    html_file, pdf_file = Path(html_file).resolve(), Path(pdf_file).resolve()
    with tempfile.TemporaryDirectory(prefix="pocforge-chromium-") as profile:
        cmd = [
            chromium(),
            *FLAGS,
            f"--user-data-dir={profile}",
            "--virtual-time-budget=20000",
            f"--print-to-pdf={pdf_file}",
            html_file.as_uri(),
        ]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            raise PdfError(f"chromium did not finish printing within {timeout_s:g} s") from None
    if proc.returncode != 0 or not pdf_file.is_file() or pdf_file.stat().st_size == 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
        raise PdfError(f"chromium failed to print {html_file.name}: {tail[0]}")
    return pdf_file
