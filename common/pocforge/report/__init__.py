"""The customer dashboard: jinja2 templates + plotly (inlined) -> one HTML file; PDF via Chromium."""

from pocforge.report.render import ReportError, build, render, render_html

__all__ = ["ReportError", "build", "render", "render_html"]
