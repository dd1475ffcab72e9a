"""Stand-alone scripts run by a framework's own interpreter to check launch arguments with
the framework's own parser. They import nothing from pocforge (SGLang lives in another
environment): JSON list of argv lists on stdin, JSON list of error-or-null on stdout."""

from pathlib import Path

SCRIPTS = Path(__file__).parent
