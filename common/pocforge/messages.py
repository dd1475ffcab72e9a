"""Notes that a customer may read in another language: an English template and its
arguments, kept apart until the dashboard renders them (``Note.text(gettext)``), so the
report translates the template and fills in the numbers. ``N_`` marks a template for
``make i18n``'s extraction (it returns it unchanged). Logs and the CLI print the English.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from pydantic import BaseModel, ConfigDict, Field

Gettext = Callable[[str], str]


def N_(template: str) -> str:  # noqa: N802 (gettext's convention)
    """Mark ``template`` as a message to translate; returns it unchanged."""
    return template


def _english(template: str) -> str:
    return template


class Note(BaseModel):
    """``template.format(**args)``, in any language."""

    model_config = ConfigDict(frozen=True)

    template: str
    args: dict[str, str | int | float] = Field(default_factory=dict)

    def text(self, gettext: Gettext = _english) -> str:
        return gettext(self.template).format(**self.args)


def join(notes: Iterable[Note], gettext: Gettext = _english) -> str | None:
    """The notes as one line (``; `` between them), None for none."""
    return "; ".join(n.text(gettext) for n in notes) or None
