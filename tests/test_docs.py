"""The README and the pages of docs/ hold together: the README stays a five-minute read, every relative link
and image resolves (anchors included), every command of the README's table has a page, and the Quick start's
test line is what CI runs. Pure file reading: no TensorFlow, no subprocess."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"

# [text](target) and ![alt](target); the target ends at the first space (an optional "title" follows it).
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
FENCE = re.compile(r"^(```|~~~)")


def _markdown_files() -> list[Path]:
    return [README, *sorted(DOCS.rglob("*.md"))]


def _prose(text: str) -> str:
    """The text outside fenced code blocks and inline code spans: a link written inside code is not a link."""
    kept, fenced = [], False
    for line in text.splitlines():
        if FENCE.match(line.lstrip()):
            fenced = not fenced
            continue
        if not fenced:
            kept.append(re.sub(r"`[^`]*`", "", line))
    return "\n".join(kept)


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lowercase, punctuation other than '-' and '_' dropped, spaces to '-'."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    """Every anchor GitHub gives the headings of a Markdown file (a repeated heading gets -1, -2, ...)."""
    seen: dict[str, int] = {}
    anchors = set()
    fenced = False
    for line in path.read_text().splitlines():
        if FENCE.match(line.lstrip()):
            fenced = not fenced
            continue
        heading = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if heading and not fenced:
            slug = _slug(heading.group(1))
            anchors.add(slug if slug not in seen else f"{slug}-{seen[slug]}")
            seen[slug] = seen.get(slug, 0) + 1
    return anchors


def _section(text: str, title: str) -> str:
    """The lines of a `## title` section of the README, up to the next `## ` heading."""
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", text, flags=re.MULTILINE | re.DOTALL)
    assert match, f"README.md has no '## {title}' section"
    return match.group(1)


def test_the_readme_is_a_five_minute_read():
    # Everything beyond a newcomer's first read lives in docs/; the README points there.
    lines = README.read_text().splitlines()
    assert len(lines) <= 200, f"README.md has {len(lines)} lines: move the detail into a page of docs/"


def test_every_relative_link_and_image_resolves():
    # Pages moved out of the README carry their links with them; a path written for the repository root breaks
    # silently inside docs/, and so does an anchor whose heading was renamed.
    broken = []
    for page in _markdown_files():
        for target in LINK.findall(_prose(page.read_text())):
            if re.match(r"^(https?|mailto):", target):
                continue
            path_part, _, anchor = target.partition("#")
            resolved = (page.parent / path_part).resolve() if path_part else page
            where = f"{page.relative_to(ROOT)}: ({target})"
            if not resolved.exists():
                broken.append(f"{where}: no such file or folder")
            elif anchor and resolved.suffix == ".md" and anchor not in _anchors(resolved):
                broken.append(f"{where}: no heading with that anchor in {resolved.relative_to(ROOT)}")
    assert not broken, "\n".join(broken)


def test_every_command_of_the_readmes_table_has_a_docs_page():
    # The README's table is the index of commands; the detail of each is in docs/. The command is its words
    # before the first option or placeholder (`tinynas data inspect SPEC` -> "tinynas data inspect").
    table = _section(README.read_text(), "What is here")
    commands = set()
    for row in table.splitlines():
        if not row.startswith("| `tinynas"):
            continue
        first_cell = row.split(" | ")[0]
        for code in re.findall(r"`(tinynas [^`]*)`", first_cell):
            words = []
            for token in code.split():
                if not re.fullmatch(r"[a-z][a-z-]*", token):
                    break
                words.append(token)
            commands.add(" ".join(words))
    assert len(commands) >= 10, f"the table's rows were not read: {sorted(commands)}"
    # docs/README.md is the index of pages, not a page about a command.
    pages = "\n".join(page.read_text() for page in sorted(DOCS.glob("*.md")) if page.name != "README.md")
    undocumented = sorted(command for command in commands if not re.search(rf"{re.escape(command)}\b", pages))
    assert not undocumented, f"no page in docs/ documents {undocumented}"


def test_the_quick_start_test_line_is_what_ci_runs():
    # CI runs the Quick start's second line verbatim (.ci/run), so a newcomer runs exactly what CI does; the
    # block holds the install-and-demo line and that one, nothing else.
    quick_start = _section(README.read_text(), "Quick start")
    block = re.search(r"^```[^\n]*\n(.*?)^```", quick_start, flags=re.MULTILINE | re.DOTALL)
    assert block, "the Quick start has no fenced block"
    lines = [line for line in block.group(1).splitlines() if line.strip()]
    assert len(lines) == 2, f"the Quick start's block holds {len(lines)} lines, not 2: {lines}"
    assert lines[1] in (ROOT / ".ci" / "run").read_text(), ".ci/run does not run the Quick start's second line"


def test_every_docs_page_has_a_title_and_is_in_the_index():
    # A page is found from docs/README.md, and says what it is on its first line.
    index = (DOCS / "README.md").read_text()
    linked = {(DOCS / target.partition("#")[0]).resolve() for target in LINK.findall(_prose(index))}
    for page in sorted(DOCS.glob("*.md")):
        assert page.read_text().startswith("# "), f"{page.relative_to(ROOT)} does not start with a '# ' title"
        if page.name != "README.md":
            assert page.resolve() in linked, f"docs/README.md does not list {page.name}"


REPO_PATH = re.compile(r"`((?:tinynas|tests|benchmarks|docs|devtools|firmware_bridge|\.ci)/[\w./-]*)`")


def test_every_backticked_path_of_the_repository_exists():
    """A path the docs spell in code (`tinynas/...`, `tests/...`, `benchmarks/...`, ...) names a file or folder
    that is there: a page cannot keep sending a newcomer to a file that moved."""
    missing = [f"{path.relative_to(ROOT)}: {found}" for path in _markdown_files()
               for found in REPO_PATH.findall(path.read_text())
               if "*" not in found and not (ROOT / found.rstrip("/.")).exists()]
    assert not missing, missing


def test_no_page_holds_an_unbroken_block_of_over_40_lines():
    """A reader scans: a list item, a paragraph or a code block longer than a screen is split (blank lines between
    a long list's items)."""
    long = []
    for path in _markdown_files():
        run = 0
        for number, line in enumerate(path.read_text().splitlines() + [""], start=1):
            run = run + 1 if line.strip() else 0
            if run == 41:
                long.append(f"{path.relative_to(ROOT)}:{number - 40}")
    assert not long, f"blocks of more than 40 lines without a blank one: {long}"


MAX_CELL = 240  # two lines of 120 columns


def _long_cells(text: str) -> list[tuple[int, int]]:
    """(line, length) of every table cell of a Markdown text longer than MAX_CELL characters. Cells are split on
    unescaped pipes only (`a\\|b` in a code span is one cell, as GitHub renders it); rows in fenced blocks are code."""
    long, fenced = [], False
    for number, line in enumerate(text.splitlines(), start=1):
        if FENCE.match(line.lstrip()):
            fenced = not fenced
            continue
        row = line.strip()
        if fenced or not row.startswith("|"):
            continue
        for cell in re.split(r"(?<!\\)\|", row.strip("|")):
            if len(cell.strip()) > MAX_CELL:
                long.append((number, len(cell.strip())))
    return long


def test_no_table_cell_is_over_two_lines():
    """A table is scanned, not read: a cell holds its key fact in at most two lines of 120 columns, and the rest of
    the detail goes into a bullet or paragraph after the table, starting with the row's name (issue 69)."""
    long = [f"{path.relative_to(ROOT)}:{number}: a cell of {length} characters (at most {MAX_CELL})"
            for path in _markdown_files() for number, length in _long_cells(path.read_text())]
    assert not long, "\n".join(long)


def test_the_cell_check_catches_a_long_cell():
    # The check above passes on today's pages; it must also fail when a cell grows past the limit, and only then.
    planted = "\n".join([
        "| what | result |",
        "|---|---|",
        f"| short | {'x' * MAX_CELL} |",
        f"| long | {'x' * (MAX_CELL + 1)} |",
        f"| piped | `{'y' * 200}\\|{'y' * 100}` |",
        "```",
        f"| fenced | {'z' * 300} |",
        "```",
    ])
    assert _long_cells(planted) == [(4, MAX_CELL + 1), (5, 304)]
    assert _long_cells(planted.replace("\\|", "|")) == [(4, MAX_CELL + 1)]
