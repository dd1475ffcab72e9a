"""The dashboard's languages: English (the messages themselves) and Simplified Chinese.

Messages are marked with ``_()`` in the templates and in the Python that builds the
dashboard's text (jinja2's i18n extension, newstyle gettext); ``pybabel extract``
collects them (``babel.cfg``, ``make i18n``) into ``locale/messages.pot``, translations
live in ``locale/<locale>/LC_MESSAGES/messages.po`` and are compiled to ``.mo`` by ``make
setup`` / ``make i18n``. A missing ``.mo`` (a fresh checkout before setup) is compiled
from its ``.po`` in memory, so a dashboard never silently falls back to English.

Numbers and dates are formatted for the language with Babel; English keeps the kit's
own formatting, so an English dashboard is what it was before translations existed.
"""

from __future__ import annotations

import gettext
import io
from datetime import datetime
from functools import cache
from pathlib import Path
from typing import Any

from babel import Locale
from babel.dates import format_datetime
from babel.numbers import format_decimal, format_percent
from babel.support import Translations

LANGUAGES = ("en", "zh-CN")
LOCALES = Path(__file__).with_name("locale")
DOMAIN = "messages"
# how each language names itself, for the page's language switch
NATIVE = {"en": "English", "zh-CN": "简体中文"}


class LanguageError(ValueError):
    """A language the dashboard has no translation for (names the known ones)."""


def check_language(lang: str) -> str:
    if lang not in LANGUAGES:
        raise LanguageError(f"unknown language {lang!r} (known: {', '.join(LANGUAGES)})")
    return lang


def babel_locale(lang: str) -> Locale:
    return Locale.parse(check_language(lang), sep="-")


def catalog_folder(lang: str) -> Path:
    """``locale/<language>_<TERRITORY>/LC_MESSAGES`` (zh_CN, as gettext names it; Babel's
    own string for zh-CN is zh_Hans_CN)."""
    locale = babel_locale(lang)
    name = f"{locale.language}_{locale.territory}" if locale.territory else locale.language
    return LOCALES / name / "LC_MESSAGES"


@cache
def translations(lang: str) -> gettext.NullTranslations:
    """The message catalog of ``lang`` (English: the messages as written)."""
    if check_language(lang) == "en":
        return gettext.NullTranslations()
    folder = catalog_folder(lang)
    compiled = folder / f"{DOMAIN}.mo"
    if compiled.is_file():
        with compiled.open("rb") as fp:
            return Translations(fp, domain=DOMAIN)
    from babel.messages.mofile import write_mo
    from babel.messages.pofile import read_po

    with (folder / f"{DOMAIN}.po").open("rb") as fp:
        catalog = read_po(fp, locale=babel_locale(lang))
    buffer = io.BytesIO()
    write_mo(buffer, catalog)
    buffer.seek(0)
    return Translations(buffer, domain=DOMAIN)


def gettext_for(lang: str):
    """``_`` for the Python that builds the dashboard's text in ``lang``."""
    return translations(lang).gettext


class Formats:
    """Numbers, percentages and dates in one language."""

    def __init__(self, lang: str):
        self.lang = check_language(lang)
        self.locale = babel_locale(lang)

    def num(self, x: Any, digits: int = 3) -> str:
        if x is None:
            return "—"
        if isinstance(x, bool):
            return _yes_no(self.lang, x)
        if self.lang == "en":
            return _num_en(x, digits)
        if isinstance(x, int):
            return format_decimal(x, locale=self.locale)
        if abs(x) >= 1000:
            return format_decimal(round(x), locale=self.locale)
        return format_decimal(float(f"{x:.{digits}g}"), format="#,##0.######", locale=self.locale)

    def pct(self, x: float | None) -> str:
        """A signed change in percent (``x`` is already in percent)."""
        if x is None:
            return "—"
        if self.lang == "en":
            return f"{x:+.1f}%"
        return format_percent(x / 100, format="+#,##0.0%;-#,##0.0%", locale=self.locale)

    def share(self, x: float | None) -> str:
        """A fraction (0–1) as a percentage: 0.995 -> "99.5%"."""
        if x is None:
            return "—"
        if self.lang == "en":
            return f"{x:.1%}"
        return format_percent(x, format="#,##0.0%", locale=self.locale)

    def when(self, iso: str) -> str:
        """A timestamp of the manifest (ISO 8601, UTC) as the page shows it."""
        if self.lang == "en":
            return iso[:19].replace("T", " ")
        moment = datetime.fromisoformat(iso.replace("Z", "+00:00"))
        return format_datetime(moment, "medium", locale=self.locale)


# --------------------------------------------------------------------------- catalogs
REPORT = Path(__file__).parent
BABEL_CFG = REPORT / "babel.cfg"
# Notes other packages hand the dashboard, marked with pocforge.messages.N_
NOTE_SOURCES = (
    REPORT.parent / "results" / "verdict_schema.py",
    REPORT.parent / "results" / "serving_verdicts.py",
    REPORT.parent / "results" / "stage_verdicts.py",
    REPORT.parent / "results" / "verdicts.py",
    REPORT.parent / "bench" / "verdicts.py",
)
KEYWORDS = {"_": None, "gettext": None, "N_": None}


def extracted() -> list[str]:
    """Every message the dashboard can show, as ``pybabel extract -F babel.cfg`` finds
    them in the report's templates and Python."""
    from babel.messages.extract import extract_from_dir, extract_from_file
    from babel.messages.frontend import parse_mapping_cfg

    with BABEL_CFG.open() as fp:
        method_map, options_map = parse_mapping_cfg(fp, BABEL_CFG)
    found = [m[2] for m in extract_from_dir(str(REPORT), method_map, options_map)]
    for source in NOTE_SOURCES:
        found += [m[1] for m in extract_from_file("python", str(source), keywords=KEYWORDS)]
    return sorted({m if isinstance(m, str) else m[0] for m in found})


def untranslated(lang: str, messages: list[str] | None = None) -> list[str]:
    """The dashboard's messages ``lang``'s catalog lacks (or leaves empty or fuzzy)."""
    from babel.messages.pofile import read_po

    with (catalog_folder(lang) / f"{DOMAIN}.po").open("rb") as fp:
        catalog = read_po(fp, locale=babel_locale(lang))
    missing = []
    for message in extracted() if messages is None else messages:
        entry = catalog.get(message)
        if entry is None or not entry.string or entry.fuzzy:
            missing.append(message)
    return missing


def main(argv: list[str] | None = None) -> int:
    """``make i18n``'s check: exit 1 listing untranslated messages."""
    import argparse

    parser = argparse.ArgumentParser(description="The dashboard's translations.")
    parser.add_argument("--check", action="store_true", help="Fail on untranslated messages.")
    args = parser.parse_args(argv)
    bad = 0
    messages = extracted()  # one pass over the sources for every language
    for lang in LANGUAGES[1:]:
        missing = untranslated(lang, messages)
        print(f"{lang}: {len(messages) - len(missing)} of {len(messages)} messages translated")
        for message in missing:
            print(f"  untranslated: {message!r}")
        bad += len(missing)
    return 1 if args.check and bad else 0


def _yes_no(lang: str, value: bool) -> str:
    _ = gettext_for(lang)
    return _("yes") if value else _("no")


def _num_en(x: float | int, digits: int) -> str:
    if isinstance(x, int):
        return f"{x:,}"
    if abs(x) >= 1000:
        return f"{x:,.0f}"
    return f"{x:.{digits}g}"
