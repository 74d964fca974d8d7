"""How tinynas writes names and strings into generated C: the one owner of these rules.

A C prefix (`--c-prefix`, a card's `c_runtime.prefix`) starts every name the generated runtime exports, so two
models in one firmware need two prefixes; that only works if the header's include guard comes from the prefix
too (two headers guarded by the same `MODEL_COMPILED_H_` cannot be included together). A class name is the
user's text: written into a C string it must stay one string whatever it holds, C99's trigraphs included
(`"??/"` is a backslash to a C99 compiler, which then swallows the closing quote).

No import of tinynas beyond the error type: the command line, the study's settings, the card reader and the
code generator all check against these rules.
"""

from __future__ import annotations

import re

from tinynas.errors import UsageError

DEFAULT_PREFIX = "tinynas"
MAX_PREFIX = 24
"""Characters of a prefix: portable C names stay under the 31 significant characters of C99's external names."""

_KEYWORDS = frozenset("auto break case char const continue default do double else enum extern float for goto if "
                      "inline int long register restrict return short signed sizeof static struct switch typedef "
                      "union unsigned void volatile while".split())


class CNameError(UsageError):
    """A name that cannot start the generated C's identifiers."""


def is_c_prefix(prefix: object) -> bool:
    """Whether `prefix` makes valid, portable C names (a C identifier of at most MAX_PREFIX characters, not a
    keyword, not reserved: no leading double underscore)."""
    return (isinstance(prefix, str) and re.fullmatch(rf"[A-Za-z_][A-Za-z0-9_]{{0,{MAX_PREFIX - 1}}}", prefix)
            is not None and prefix not in _KEYWORDS and not prefix.startswith("__"))


def check_prefix(prefix: object) -> str:
    """`prefix` if it makes valid C names, else CNameError in one line."""
    if not is_c_prefix(prefix):
        shown = repr(prefix) if len(repr(prefix)) <= 40 else repr(prefix)[:37] + "..."
        raise CNameError(f"C prefix {shown} is not a C name: give letters, digits and underscores, at most "
                         f"{MAX_PREFIX}, not starting with a digit (e.g. emg or motor_left)")
    assert isinstance(prefix, str)
    return prefix


def is_c_identifier(name: object) -> bool:
    """A C identifier (an entry point's name read back from a card)."""
    return isinstance(name, str) and len(name) <= 63 and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name) is not None \
        and name not in _KEYWORDS


def include_guard(prefix: str, header_name: str) -> str:
    """The include guard of a generated header: from the prefix and the file, so that the headers of two models
    with two prefixes can be included together (`TINYNAS_MODEL_COMPILED_H_`, `EMG_MODEL_COMPILED_H_`)."""
    stem = re.sub(r"[^A-Za-z0-9]", "_", header_name).upper()
    return f"{check_prefix(prefix).upper()}_{stem}_"


PLAIN_NAME = r"[A-Za-z0-9][A-Za-z0-9._-]{0,47}"
"""A name that reaches generated C, a linker script or a file name as it is (a board's name): letters, digits, dot,
dash and underscore, at most 48, not starting with punctuation. Nothing in it can close a string, a comment, or start
a directive or a linker command."""


def is_plain_name(name: object) -> bool:
    return isinstance(name, str) and re.fullmatch(PLAIN_NAME, name) is not None


def check_plain_name(name: object, what: str) -> str:
    """`name` if it is a plain name (PLAIN_NAME), else CNameError in one line naming `what`."""
    if not is_plain_name(name):
        shown = repr(name) if len(repr(name)) <= 40 else repr(name)[:37] + "..."
        raise CNameError(f"{what} {shown} is not a plain name: give letters, digits, '.', '-' and '_', at most 48, "
                         f"starting with a letter or digit (e.g. my-board_v2)")
    assert isinstance(name, str)
    return name


def c_comment(text: str) -> str:
    """`text` made safe inside a C (or linker script) block comment: printable ASCII only, no `*/` or `/*` (which
    would end the comment or, under -Wall -Werror, fail the build as a nested one), no line breaks."""
    printable = "".join(char if 32 <= ord(char) < 127 else "?" for char in text)
    while "*/" in printable or "/*" in printable:
        printable = printable.replace("*/", "* /").replace("/*", "/ *")
    return printable


def c_string(text: str) -> str:
    """`text` as one C99 string literal: printable ASCII as is, every other byte as an octal escape; quotes,
    backslashes and question marks escaped too (a `?` could start a trigraph)."""
    out = []
    for byte in text.encode("utf-8"):
        char = chr(byte)
        if char in '"\\?' or not 32 <= byte < 127:
            out.append(f"\\{byte:03o}")
        else:
            out.append(char)
    return '"' + "".join(out) + '"'

