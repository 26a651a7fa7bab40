"""The language a person reads: English, or Spanish from the package's gettext catalog.

Only what a person reads is translated. Record fields, ledger kinds, diagnosis codes and error
codes are the contract and stay English, and so does every text stored in a ledger or a
record, so a ledger reads the same on every machine. A message that is shown later (an error,
a verify finding) is a `Message`: the English text as a `str`, which also remembers its
English template and parameters, so a surface can show it in the reader's language with
`localize(message)`.

The language is, first to last: `language("es")` around the code (a context manager), the
module setting `set_language("es")`, JupyterLab's interface language when the kernel runs under
JupyterLab (its front end tells the kernel: `follow_interface`), then the locale environment as gettext reads it
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
_interface: list[str | None] = [None]


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


def follow_interface(name: str | None) -> None:
    """The language of the interface this kernel serves (JupyterLab tells a kernel it starts,
    see the front end's kernelLanguage.ts); it comes before the locale environment, after
    `set_language`. A language we do not have is English, as the interface would show."""
    _interface[0] = None if name is None else (normalize(name) or "en")


def active_language() -> str:
    """The language messages are shown in now."""
    return _chosen.get() or _setting[0] or _interface[0] or environment_language()


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


# --- English text that arrives as text (a worker's answer, a stored record) -----------------
#: A template whose words (outside its fields) are fewer letters than this is too general to
#: recognise a text by (`{name}: {value}` would match anything).
MIN_TEMPLATE_LETTERS = 8


@cache
def _patterns(lang: str) -> tuple:
    """(regex, template) for every message of `lang`'s catalog, the most specific first."""
    import re
    import string

    catalog = getattr(translations(lang), "_catalog", {})
    found = []
    for msgid in catalog:
        if not isinstance(msgid, str) or not msgid:
            continue
        try:
            parts = list(string.Formatter().parse(msgid))
        except ValueError:
            continue
        letters = sum(ch.isalpha() for literal, *_rest in parts for ch in literal)
        if letters < MIN_TEMPLATE_LETTERS:
            continue
        pattern, seen = "", set()
        for literal, field, _spec, _conversion in parts:
            pattern += "".join(r"\s+" if chunk.isspace() else re.escape(chunk) for chunk in re.split(r"(\s+)", literal))
            if field is None:
                continue
            if not field.isidentifier():
                pattern = None
                break
            pattern += f"(?P={field})" if field in seen else f"(?P<{field}>.*?)"
            seen.add(field)
        if pattern is not None:
            found.append((letters, re.compile(pattern, re.DOTALL), msgid))
    found.sort(key=lambda item: -item[0])
    return tuple((regex, msgid) for _letters, regex, msgid in found)


@cache
def translate_text(text: str, lang: str) -> str:
    """English `text` that some message of the catalog wrote, in `lang`; itself when no
    message of the catalog wrote it (a name, a number, an English-only text).

    A message that crossed a process or a file as plain text (a worker's error, a diagnosis
    kept in a record) has lost its template: it is recognised by matching the catalog's
    templates, and its values are translated in turn when they are messages themselves.
    """
    if lang == "en" or not isinstance(text, str) or not any(ch.isalpha() for ch in text):
        return text
    folded = " ".join(text.split())
    for regex, template in _patterns(lang):
        match = regex.fullmatch(folded) or regex.fullmatch(text)
        if match is None:
            continue
        values = {name: translate_text(value, lang) for name, value in match.groupdict().items()}
        return _fill_text(_(template, lang), values)
    where, colon, rest = folded.partition(": ")
    if colon and rest and where.replace(".", "").replace("_", "").replace("[", "").replace("]", "").isalnum():
        shown = translate_text(rest, lang)  # `field: message`, the form a field's refusal takes
        if shown != rest:
            return f"{where}: {shown}"
    return text


def _fill_text(template: str, values: dict) -> str:
    """`template` with each field replaced by its value as text (format specs already applied)."""
    import string

    out = []
    for literal, field, _spec, _conversion in string.Formatter().parse(template):
        out.append(literal)
        if field is not None:
            out.append(values.get(field, "{" + field + "}"))
    return "".join(out)


def translate_tree(value, lang: str):
    """Every sentence (a string with a space) of a JSON value through `translate_text`; keys
    and codes (`passed`, `probable_bug`: no space) are kept, as the contract they are."""
    if lang == "en":
        return value
    if isinstance(value, str):
        return translate_text(value, lang) if " " in value else value
    if isinstance(value, list):
        return [translate_tree(item, lang) for item in value]
    if isinstance(value, dict):
        return {key: translate_tree(item, lang) for key, item in value.items()}
    return value


def accepted_language(header: str | None) -> str:
    """The language of an HTTP `Accept-Language` header (`es-ES,es;q=0.9,en;q=0.8` -> `es`):
    the most preferred one we have, English when it names none."""
    choices = []
    for position, part in enumerate((header or "").split(",")):
        name, _semi, params = part.strip().partition(";")
        quality = 1.0
        for param in params.split(";"):
            key, _eq, number = param.strip().partition("=")
            if key == "q":
                try:
                    quality = float(number)
                except ValueError:
                    quality = 0.0
        found = normalize(name)
        if found is not None and quality > 0:
            choices.append((-quality, position, found))
    return min(choices)[2] if choices else "en"
