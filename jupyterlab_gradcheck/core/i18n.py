"""The language a person reads: English, or Spanish from the package's gettext catalog.

Only what a person reads is translated. Record fields, ledger kinds, diagnosis codes and error
codes are the contract and stay English, and so does every text stored in a ledger or a
record, so a ledger reads the same on every machine. A message that is shown later (an error,
a verify finding) is a `Message`: the English text as a `str`, which also remembers its
English template and parameters, so a surface can show it in the reader's language with
`localize(message)`.

The language is, first to last: `language("es")` around the code (a context manager), the
module setting `set_language("es")`, then the locale environment as gettext reads it
(`LANGUAGE`, `LC_ALL`, `LC_MESSAGES`, `LANG`); English when none names a language we have.
The catalog is `locale/<lang>/LC_MESSAGES/jupyterlab_gradcheck.mo` inside the package.
"""

from __future__ import annotations

import contextlib
import contextvars
import gettext
import os
from collections.abc import Iterator
from functools import cache
from pathlib import Path

DOMAIN = "jupyterlab_gradcheck"
LOCALE_DIR = Path(__file__).resolve().parent.parent / "locale"
#: The languages a reader can choose; English is the source language and the fallback.
LANGUAGES = ("en", "es")
#: The environment variables gettext reads, in its order: the first one set decides.
LOCALE_VARIABLES = ("LANGUAGE", "LC_ALL", "LC_MESSAGES", "LANG")

_chosen: contextvars.ContextVar[str | None] = contextvars.ContextVar("gradcheck_language", default=None)
_setting: list[str | None] = [None]


def normalize(name: str | None) -> str | None:
    """`es`, `es_ES`, `es-MX`, `es_ES.UTF-8` -> `es`; `C`, `POSIX`, `en_GB` -> `en`; else None."""
    if not isinstance(name, str) or not name.strip():
        return None
    base = name.strip().split(".")[0].split("@")[0].replace("-", "_").split("_")[0].lower()
    if base in ("c", "posix"):
        return "en"
    return base if base in LANGUAGES else None


def checked(name: str) -> str:
    """The language `name` names, or ValueError naming the choices."""
    found = normalize(name)
    if found is None:
        raise ValueError(f"language {name!r} is not one of {', '.join(LANGUAGES)}")
    return found


def environment_language(environ=None) -> str:
    """The language of the locale environment, read as gettext reads it; English by default."""
    environ = os.environ if environ is None else environ
    for variable in LOCALE_VARIABLES:
        value = environ.get(variable)
        if not value:
            continue
        for candidate in value.split(":"):  # LANGUAGE is a list of preferences
            found = normalize(candidate)
            if found is not None:
                return found
        return "en"
    return "en"


def set_language(name: str | None) -> None:
    """The language of this process from now on (`None`: back to the locale environment)."""
    _setting[0] = None if name is None else checked(name)


def active_language() -> str:
    """The language messages are shown in now."""
    return _chosen.get() or _setting[0] or environment_language()


@contextlib.contextmanager
def language(name: str | None) -> Iterator[str]:
    """Show messages in `name` inside the block (`None`: whatever is active, unchanged)."""
    if name is None:
        yield active_language()
        return
    token = _chosen.set(checked(name))
    try:
        yield active_language()
    finally:
        _chosen.reset(token)


@cache
def translations(name: str) -> gettext.NullTranslations:
    """The catalog of one language (English has none: its messages are the source)."""
    return gettext.translation(DOMAIN, str(LOCALE_DIR), languages=[name], fallback=True)


def _(message: str, lang: str | None = None) -> str:
    """`message` in the active language (or `lang`); itself when the catalog lacks it."""
    return translations(lang or active_language()).gettext(message)


def ngettext(singular: str, plural: str, count: int, lang: str | None = None) -> str:
    """The singular or plural form for `count`, in the active language."""
    return translations(lang or active_language()).ngettext(singular, plural, count)


def N_(message: str) -> str:
    """Mark `message` for the catalog without translating it here (it is translated when shown)."""
    return message


class Message(str):
    """English text that remembers its template and parameters.

    Everywhere it goes (JSON, a ledger line, a comparison with a string) it is the English
    text; `localized()` gives it in the reader's language. A parameter that is itself a
    Message is localized with it. `Message.one_line` also folds every run of white space into
    one space, in each language (the form of an error message).
    """

    folded = False

    def __new__(cls, template: str, /, **params):
        text = _fill(template, params, None, cls.folded)
        self = super().__new__(cls, text)
        self.template = template
        self.params = params
        return self

    @staticmethod
    def one_line(template: str, /, **params) -> Message:
        return _OneLine(template, **params)

    def localized(self, lang: str | None = None) -> str:
        lang = lang or active_language()
        if lang == "en":
            return str.__str__(self)
        return _fill(_(self.template, lang), self.params, lang, self.folded)


class _OneLine(Message):
    folded = True


def _fill(template: str, params: dict, lang: str | None, fold: bool) -> str:
    """The template with its parameters; the English text when `lang` is None."""
    if params:
        shown = {
            key: (value.localized(lang) if lang and isinstance(value, Message) else value)
            for key, value in params.items()
        }
        template = template.format(**shown)
    return " ".join(template.split()) if fold else template


def localize(text, lang: str | None = None) -> str:
    """A Message in the active language (or `lang`); a plain string through the catalog."""
    lang = lang or active_language()
    if isinstance(text, Message):
        return text.localized(lang)
    if isinstance(text, str):
        return _(text, lang) if text else text
    return str(text)
