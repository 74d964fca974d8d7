"""One owner for each shared thing, in every wing (issue 69): each test scans the package and fails on a violation,
and is shown to catch a planted one.

- A run folder's file names (`journal.sqlite`, `card.json`, ...) are spelled only in `tinynas/folders.py`.
- SQL on a journal only in its owner, `tinynas/study/journal.py` (a sweep asks it for a `snapshot`, the count of
  `finished_trials`, a `checkpoint`), as a storage, not its client, knows what a finished trial is.
- A card's sections read by key only by the card's reader (`tinynas/card.py`, its checks) and the report that
  prints every section (`tinynas/study/report.py`); others use the card's typed accessors.
"""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import tinynas.folders
from tinynas.card import ModelCard

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "tinynas"
RUN_FILES = {value for name, value in vars(tinynas.folders).items()
             if name.isupper() and isinstance(value, str) and "." in value}
SQL_OWNERS = {"tinynas/study/journal.py", "tinynas/errors.py"}  # errors.py names sqlite3's "disk is full" error
CARD_READERS = {"tinynas/card.py", "tinynas/card_checks.py", "tinynas/study/report.py"}
CARD_SECTIONS = {field.name for field in dataclasses.fields(ModelCard)}


def _relative(path: Path) -> str:
    return path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else path.name


def file_name_literals(path: Path, text: str) -> list[str]:
    return [f"{_relative(path)}:{node.lineno} {node.value}" for node in ast.walk(ast.parse(text))
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
            and any(node.value == name or node.value.endswith("/" + name) for name in RUN_FILES)]


def test_run_folder_file_names_are_spelled_only_by_their_owner():
    found = [hit for path in sorted(PACKAGE.rglob("*.py")) if path.name != "folders.py"
             for hit in file_name_literals(path, path.read_text())]
    assert not found, f"run-folder file names outside tinynas/folders.py: {found}"


def test_the_file_name_rule_catches_a_planted_literal():
    assert file_name_literals(ROOT / "x.py", 'path = folder / "journal.sqlite"\n') == ["x.py:1 journal.sqlite"]


def sql_users(path: Path, text: str) -> list[str]:
    return [f"{_relative(path)}:{node.lineno}" for node in ast.walk(ast.parse(text))
            if isinstance(node, ast.Import) and any(alias.name == "sqlite3" for alias in node.names)
            or isinstance(node, ast.ImportFrom) and node.module == "sqlite3"]


def test_sql_on_a_journal_only_in_its_owner():
    found = [hit for path in sorted(PACKAGE.rglob("*.py")) if _relative(path) not in SQL_OWNERS
             for hit in sql_users(path, path.read_text())]
    assert not found, f"sqlite3 outside the journal's owner: {found}"


def test_the_sql_rule_catches_a_planted_import():
    assert sql_users(ROOT / "y.py", "def f():\n    import sqlite3\n") == ["y.py:2"]


def card_key_reads(path: Path, text: str) -> list[str]:
    """`card.SECTION.get(...)`, `(card.SECTION or {}).get(...)` and `card.SECTION[...]`."""
    found = []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get":
            read = node.func.value
        elif isinstance(node, ast.Subscript):
            read = node.value
        else:
            continue
        if isinstance(read, ast.BoolOp):
            read = read.values[0]
        if isinstance(read, ast.Attribute) and read.attr in CARD_SECTIONS \
                and "card" in ast.unparse(read.value).lower():
            found.append(f"{_relative(path)}:{node.lineno} {ast.unparse(node)[:60]}")
    return found


def test_card_sections_are_read_by_key_only_by_the_cards_reader():
    found = [hit for path in sorted(PACKAGE.rglob("*.py")) if _relative(path) not in CARD_READERS
             for hit in card_key_reads(path, path.read_text())]
    assert not found, f"card sections read by key outside tinynas/card.py (use its accessors): {found}"


def test_the_card_rule_catches_a_planted_read():
    planted = "shape = (card.input or {}).get('shape')\nname = model.card.target['name']\n"
    assert [hit.split()[0] for hit in card_key_reads(ROOT / "z.py", planted)] == ["z.py:1", "z.py:2"]
