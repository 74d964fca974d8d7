"""The core's rules, made mechanical in every wing (issue 68): each test scans the package's code and fails on a
violation, so a new wing cannot skip a rule that review would have to catch.

- Every file a user names is read through the checked readers (`firmware_bridge.safe_read.read_regular` /
  `check_regular`, `tinynas.data.signal_files.check_readable`): a FIFO, a device or a file of gigabytes is refused
  in one line, never opened. A raw read (`open`, `read_text`, `np.load`, ...) is allowed only in a function that
  calls a check first, in a function whose every caller in its module checks first, or in `OWN_FILES` with why.
- Every structured file (card, board, grid, sweep.json, config, firmware manifest, session manifest, state,
  status, requests, ...) is parsed by its one typed reader: `json.load(s)` / `tomllib.load(s)` appear only in
  `PARSERS`' functions.
- Every name that reaches generated C or a linker script goes through `tinynas.c_names`: an f-string that builds C
  text interpolates a name only through `c_comment`, `c_string`, `check_plain_name` or a value those made.
- Every folder a command writes into is claimed by reading it: `--out` options reach `check_out_dir` or a manifest
  reader.
- Every number a board sends is parsed at its protocol: `int(` / `float(` of a board's line only in
  `tinynas/hil/protocol.py`, which range-checks it (the sensor links' numbers are checked in firmware_bridge's
  readers, tests/firmware_bridge).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCES = sorted([*(ROOT / "tinynas").rglob("*.py"), *(ROOT / "firmware_bridge").rglob("*.py")])

CHECKS = {"check_readable", "check_regular", "read_regular", "read_regular_text", "_regular_if_there",
          "read_model_file", "check_out_dir"}
"""Calls that look at a path before anything opens it (the checked readers)."""

RAW = {"read_text", "read_bytes"}
RAW_CALLS = {"np.load", "numpy.load", "loadmat", "scipy.io.loadmat", "tarfile.open", "wave.open", "zipfile.ZipFile"}

OWN_FILES = {
    # The kernel's files: never a user's name.
    "tinynas/atomic.py:process_alive": "/proc/<pid>/stat",
    "tinynas/machine.py:_meminfo_available": "/proc/meminfo",
    "tinynas/machine.py:_cgroup_room": "the cgroup's memory files",
    "tinynas/process_memory.py:memory_bytes": "/proc/<pid>/status",
    "firmware_bridge/durable.py:current_umask": "/proc/self/status",
    # The package's own resources (shipped with it, read-only).
    "tinynas/cost/targets.py:_shipped_boards": "the built-in target files",
    "tinynas/service/status_server.py:_page_assets": "the status page's own HTML/JS/CSS",
    "tinynas/training/diagnose.py:shipped_diagnoser": "the diagnoser model shipped in the package",
    # Checked by every caller, through a dispatch the scan does not follow.
    "tinynas/data/npz.py:_headers": "load_npz calls check_readable before _check_planned reaches it",
    "tinynas/data/signal_files.py:_loadmat": "read_mat's callers (read_signal, the CWRU loader) call check_readable",
    # Files tinynas itself wrote in a folder it owns (a study's, a service's data_dir, a sweep's), opened by a path
    # it made, never by a name a user typed.
    "tinynas/adaptation/rewear_job.py:RewearOutcome.read": "the re-wear child's outcome file",
    "tinynas/atomic.py:publish_folder": "the files of a folder it staged itself (fsync before publishing)",
    "tinynas/deploy/evaluate.py:drew_it": "reads 4 KiB of a file it drew (a PNG's text chunk); a non-file is not",
    "tinynas/folders.py:load_split": "a study's split.npz, written by save_split in the study's folder",
    "tinynas/service/paths.py:running_pid": "the service's pid file",
    "tinynas/service/paths.py:pending_requests": "the request files the CLI leaves in data_dir/requests",
    "tinynas/service/rewear.py:_show_progress": "the re-wear child's progress file",
    "tinynas/service/rewear_child.py:answer": "the re-wear child's log",
    "tinynas/service/rewear_child.py:_child_main": "the job file the service wrote for its child",
    "tinynas/service/rewear_recording.py:record_unlabelled": "the re-wear session's windows.jsonl it records",
    "tinynas/service/runner.py:Service._run": "the service's pid file",
    "tinynas/service/state.py:_read": "the service's state.json (and its last good copy) in its data_dir",
    "tinynas/sweep/run.py:last_error": "a cell's search log the sweep wrote",
    "tinynas/sweep/ray_engine.py:Keeper.begin": "a cell's folder the sweep's keeper made",
    "tinynas/sweep/ray_engine.py:_Sender.changed": "a cell's folder the worker's search writes",
    "tinynas/sweep/ray_engine.py:_pack": "packs bytes in memory",
    "tinynas/sweep/ray_engine.py:_unpack": "unpacks the keeper's own bytes (names checked in the function)",
    "tinynas/sweep/ray_engine.py:_search_task.send": "a cell's search log the worker writes",
    "tinynas/training/job.py:_live_incumbent.read": "the study's incumbents.json, written by the study",
    "firmware_bridge/guide.py:GuidedCollection.done_counts": "the session folder this guide is recording",
    "firmware_bridge/guide.py:GuidedCollection.donning": "the session folder this guide is recording",
    "firmware_bridge/guide.py:GuidedCollection._last_window": "the session folder this guide is recording",
}

PARSERS = {
    # module: the files its functions parse (the one typed reader of each).
    "tinynas/card.py": "card.json",
    "tinynas/folders.py": "a running study's best.json",
    "tinynas/sweep/state.py": "sweep.json",
    "tinynas/sweep/grid.py": "a sweep grid",
    "tinynas/hil/board.py": "board files",
    "tinynas/hil/build.py": "firmware.json",
    "tinynas/cost/targets.py": "target files",
    "tinynas/service/config.py": "the service config",
    "tinynas/service/state.py": "state.json",
    "tinynas/service/paths.py": "status.json and the request files",
    "tinynas/service/models.py": "a served model folder's card (through the card's owner rules)",
    "tinynas/service/follower.py": "status.json over HTTP (the simulator following the page)",
    "tinynas/service/status_server.py": "a POST's JSON body",
    "tinynas/data/session.py": "a session's manifest, events and window records",
    "tinynas/data/isl.py": "ISL recordings",
    "tinynas/data/windows.py": "a windows file's metadata",
    "tinynas/adaptation/rewear_job.py": "the re-wear job and outcome",
    "tinynas/service/rewear_child.py": "the re-wear job (through RewearJob.from_dict)",
    "tinynas/study/journal.py": "the journal's rows",
    "tinynas/trial.py": "a journal row's columns",
    "tinynas/training/job.py": "a training job's files",
    "tinynas/training/diagnose.py": "the shipped diagnoser",
    "tinynas/space.py": "a search space",
    "firmware_bridge/plan.py": "plan files",
    "firmware_bridge/recorder.py": "a session manifest being resumed (the bridge stands alone)",
    "firmware_bridge/guide.py": "the guide's own session files",
}


def _functions(tree: ast.AST):
    """(qualified name, node) of every function, methods as Class.method, nested as outer.inner."""
    found = []

    def visit(node: ast.AST, where: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = f"{where}.{child.name}" if where else child.name
                if not isinstance(child, ast.ClassDef):
                    found.append((name, child))
                visit(child, name)
            else:
                visit(child, where)

    visit(tree, "")
    return found


def _own_calls(function: ast.AST) -> list[ast.Call]:
    """The calls in `function`'s own body (not in functions nested in it)."""
    calls: list[ast.Call] = []

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
                continue
            if isinstance(child, ast.Call):
                calls.append(child)
            visit(child)

    visit(function)
    return calls


def _called(call: ast.Call) -> str:
    return call.func.attr if isinstance(call.func, ast.Attribute) else ast.unparse(call.func)


def _is_raw_read(call: ast.Call) -> bool:
    name = ast.unparse(call.func)
    if isinstance(call.func, ast.Attribute) and call.func.attr in RAW or name in RAW_CALLS:
        return True
    if name == "open":
        mode = call.args[1] if len(call.args) > 1 else next((k.value for k in call.keywords if k.arg == "mode"), None)
        text = ast.unparse(mode) if mode is not None else "'r'"
        return not any(letter in text for letter in "wax+")
    return False


def unchecked_reads(path: Path, text: str) -> list[str]:
    """`module:function` of every raw read in `text` not preceded by a check in its function or in every caller
    of that function within the module."""
    relative = path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else path.name
    functions = _functions(ast.parse(text))
    checking = {name.split(".")[-1] for name, node in functions
                if any(_called(call) in CHECKS for call in _own_calls(node))}
    callers: dict[str, set[str]] = {}  # a function named in another's body (a call or a dispatch table)
    for name, node in functions:
        for used in [_called(call) for call in _own_calls(node)] + [
                inner.id for inner in ast.walk(node) if isinstance(inner, ast.Name)]:
            callers.setdefault(used, set()).add(name.split(".")[-1])
    found = []
    for name, node in functions:
        reads = [call for call in _own_calls(node) if _is_raw_read(call)]
        if not reads or name.split(".")[-1] in checking:
            continue
        mine = callers.get(name.split(".")[-1], set())
        if mine and mine <= checking:
            continue
        found.append(f"{relative}:{name}")
    return found


def test_every_file_read_goes_through_a_check_or_is_ours():
    found = [where for path in SOURCES if path.name != "safe_read.py"
             for where in unchecked_reads(path, path.read_text()) if where not in OWN_FILES]
    assert not found, ("files read with no checked reader before (check_readable / read_regular), and not listed in "
                       f"OWN_FILES with why: {found}")


def test_the_allowances_are_not_stale():
    """Every OWN_FILES entry still names a function that reads a file: the list cannot grow a heap of excuses."""
    present = {where for path in SOURCES for where in unchecked_reads(path, path.read_text())}
    assert not set(OWN_FILES) - present, sorted(set(OWN_FILES) - present)


def test_the_read_rule_catches_a_planted_raw_read():
    planted = ("def load_user_file(path):\n    return open(path).read()\n\n"
               "def checked(path):\n    check_readable(path, 'x')\n    return open(path).read()\n\n"
               "def helper(path):\n    return np.load(path)\n\n"
               "def caller(path):\n    check_regular(path)\n    return helper(path)\n")
    assert unchecked_reads(ROOT / "planted.py", planted) == ["planted.py:load_user_file"]


def structured_parses(path: Path, text: str) -> list[str]:
    relative = path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else path.name
    return [f"{relative}:{node.lineno}" for node in ast.walk(ast.parse(text)) if isinstance(node, ast.Call)
            and ast.unparse(node.func) in ("json.load", "json.loads", "tomllib.load", "tomllib.loads")]


def test_every_structured_file_is_parsed_by_its_one_reader():
    found = [where for path in SOURCES if path.relative_to(ROOT).as_posix() not in PARSERS
             for where in structured_parses(path, path.read_text())]
    assert not found, f"JSON/TOML parsed outside the typed readers (PARSERS): {found}"


def test_the_parse_rule_catches_a_planted_parse():
    assert structured_parses(ROOT / "x.py", "import json\ncard = json.loads(text)\n") == ["x.py:2"]


C_MARKERS = ("#include", "#define", "#ifndef", "/*", "MEMORY", "static const", "ORIGIN")
C_OWNER = {"c_comment", "c_string", "check_plain_name", "include_guard", "check_prefix"}
C_IDENTIFIERS = {
    # Names of C objects the code generator makes itself from the checked prefix and a number, never a user's text.
    "tinynas/deploy/c_codegen.py": {"name", "header_name"},
    "tinynas/deploy/c_prepare.py": {"header_name"},
    "tinynas/anomaly/classical_c.py": {"name", "header_name"},
}
"""Per module, the expressions an f-string of C may hold unchanged: `header_name` is `<prefix>_compiled.h`
(tinynas.deploy.export) and `name` an array's identifier (`<prefix>_stage2_weights`)."""


def _holds_owner_call(node: ast.AST) -> bool:
    return any(isinstance(inner, ast.Call) and _called(inner) in C_OWNER for inner in ast.walk(node))


def c_names_unowned(path: Path, text: str) -> list[str]:
    """f-strings that build C or a linker script and interpolate a name (an expression that mentions `name`,
    `label`, `condition` or `title`) not made by the C-names owner."""
    relative = path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else path.name
    tree = ast.parse(text)
    owned: set[str] = set()  # variables assigned from an expression made by the owner's functions
    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None and _holds_owner_call(node.value):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            owned |= {ast.unparse(target) for target in targets}
    allowed = C_IDENTIFIERS.get(relative, set())
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.JoinedStr):
            continue
        literal = "".join(part.value for part in node.values if isinstance(part, ast.Constant))
        if not any(marker in literal for marker in C_MARKERS):
            continue
        for part in node.values:
            if not isinstance(part, ast.FormattedValue):
                continue
            shown = ast.unparse(part.value)
            if not any(word in shown.lower() for word in ("name", "label", "condition", "title")):
                continue
            if _holds_owner_call(part.value) or shown in owned or shown in allowed:
                continue
            found.append(f"{relative}:{node.lineno} {shown}")
    return found


def test_every_name_in_generated_c_goes_through_the_c_names_owner():
    found = [where for path in SOURCES for where in c_names_unowned(path, path.read_text())]
    assert not found, f"names put into C / linker text without tinynas.c_names: {found}"


def test_the_c_names_rule_catches_a_planted_name():
    planted = ('def header(board):\n    return f"#include \\"{board.name}.h\\"\\n"\n\n'
               'def fine(board):\n    return f"/* {c_comment(board.name)} */"\n')
    assert c_names_unowned(ROOT / "c.py", planted) == ["c.py:2 board.name"]


OUT_CLAIMS = {"check_out_dir", "check_new_folder", "write_firmware", "Recorder"}
"""What claims an --out folder by reading it: `check_out_dir` (new, empty, or a folder whose own files say it is
ours), `check_new_folder` (that, and not the model's own), `write_firmware` (its manifest read and checked) and the
bridge's `Recorder` (a session folder resumed only from its manifest)."""


def unclaimed_outs(path: Path, text: str) -> list[str]:
    relative = path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else path.name
    return [f"{relative}:{name}" for name, node in _functions(ast.parse(text))
            if "args.out)" in ast.unparse(node) or "args.out," in ast.unparse(node)
            if not any(_called(call) in OUT_CLAIMS for call in ast.walk(node) if isinstance(call, ast.Call))]


def test_every_out_option_claims_its_folder_by_reading_it():
    """A command given an `--out` folder claims it by reading what is there: a folder is ours because a file we
    wrote says so, not because a file of some name is there."""
    found = [where for path in sorted((ROOT / "tinynas" / "cli").glob("*.py"))
             for where in unclaimed_outs(path, path.read_text())]
    assert not found, f"--out folders written without an ownership check (OUT_CLAIMS): {found}"


def test_the_out_rule_catches_a_planted_writer():
    planted = ("def _cmd_x(args):\n    write_everything(args.out)\n\n"
               "def _cmd_y(args):\n    check_out_dir(args.out)\n    write_everything(args.out)\n")
    assert unclaimed_outs(ROOT / "cli.py", planted) == ["cli.py:_cmd_x"]


def test_a_boards_numbers_are_parsed_only_by_its_protocol():
    """In the HIL wing, a board's lines are parsed (int/float of what it sent) only in `tinynas/hil/protocol.py`,
    which range-checks each number: the other HIL modules receive typed, checked values."""
    found = []
    for path in sorted((ROOT / "tinynas" / "hil").glob("*.py")):
        if path.name in ("protocol.py", "build.py"):  # build.py reads the cross-toolchain's output, not a board's
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and ast.unparse(node.func) in ("int", "float") and node.args and any(
                    word in ast.unparse(node.args[0]) for word in ("line", "reply", "answer", "fields", "parts")):
                found.append(f"{path.name}:{node.lineno} {ast.unparse(node)[:60]}")
    assert not found, f"numbers from a board's lines parsed outside hil/protocol.py: {found}"
