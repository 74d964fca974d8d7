"""A results file written by more than one benchmark: each writes its own block of it and keeps the others'.

A block is the text between `<!-- begin NAME -->` and `<!-- end NAME -->` (NAME: the benchmark's file name); the
file's owner (the benchmark named after the file) rewrites everything outside the blocks.
"""

from __future__ import annotations

import re
from pathlib import Path


def _pattern(name: str) -> re.Pattern:
    return re.compile(rf"<!-- begin {re.escape(name)} -->\n.*?<!-- end {re.escape(name)} -->\n", re.S)


def blocks(path: Path) -> list[str]:
    """Every block in `path` (none when the file is not there), markers included, in file order."""
    text = path.read_text() if path.exists() else ""
    return [m.group(0) for m in re.finditer(r"<!-- begin (\S+) -->\n.*?<!-- end \1 -->\n", text, re.S)]


def write_owned(path: Path, text: str) -> None:
    """The owner's `text`, then the blocks other benchmarks wrote in `path` before."""
    kept = blocks(path)
    path.write_text(text.rstrip("\n") + "\n" + ("\n" + "\n".join(kept) if kept else ""))


def write_block(path: Path, name: str, text: str) -> None:
    """`text` as block `name` of `path`: in place of the block's last version, else at the end."""
    block = f"<!-- begin {name} -->\n{text.rstrip()}\n<!-- end {name} -->\n"
    old = path.read_text() if path.exists() else ""
    if _pattern(name).search(old):
        path.write_text(_pattern(name).sub(lambda _: block, old, count=1))
    else:
        path.write_text(old.rstrip("\n") + ("\n\n" if old else "") + block)
