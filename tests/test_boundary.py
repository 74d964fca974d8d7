"""The layout's promises, checked live: the search process never imports TensorFlow, and the package has
no import cycles (ruff's banned-import rule, TID251 in pyproject.toml, checks the same boundary statically)."""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import tinynas

PACKAGE = Path(tinynas.__file__).parent
BEHIND_THE_BOUNDARY = ("tinynas.training", "tinynas.deploy", "tinynas.adaptation")
"""Subpackages that may import TensorFlow (workers, model conversion and checks, model adaptation)."""


def _modules() -> list[str]:
    # From the files, not pkgutil.walk_packages: that one skips, silently, a package whose import fails
    # (as a real import cycle makes it do).
    names = []
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE).with_suffix("").parts
        names.append(".".join(("tinynas",) + (parts[:-1] if parts[-1] == "__init__" else parts)))
    return sorted(name for name in names if name != "tinynas")


def test_importing_every_module_in_front_of_the_boundary_leaves_tensorflow_out():
    front = [name for name in _modules() if not name.startswith(BEHIND_THE_BOUNDARY)
             and not name.endswith(".__main__")]  # importing a __main__ runs the command
    assert "tinynas.study.run" in front and "tinynas.search.fast" in front and "tinynas.cli" in front
    code = (f"import importlib, sys\nfor name in {front!r}: importlib.import_module(name)\n"
            "loaded = sorted(m for m in sys.modules if m.split('.')[0] in ('tensorflow', 'keras'))\n"
            "print(len(loaded)); assert not loaded, loaded[:5]")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]


@pytest.mark.slow
def test_a_whole_search_never_imports_tensorflow_in_the_search_process(tmp_path):
    # A real study (workers train in TensorFlow) run in a fresh interpreter, which then looks at its own modules.
    # `fast`: the loop, workers, final training and export are the same for every strategy, and the strategies' own
    # modules are imported by the test above; paper's 42 candidates took 6x as long as fast's 7. Two of those 7
    # (--candidates 2): the race (the second is raced against the first's curve), the winner exported as trained,
    # every step the search process takes once, at 2/7 of the training; a TensorFlow import on any of them fails.
    code = f"""
import sys
from tinynas.cost.targets import resolve_target
from tinynas.data.spec import load_windows
from tinynas.study import Study
from tinynas.trial import Fidelity
tiny = Fidelity(epochs=1, batch_size=16, learning_rate=3e-3)
spec = "synthetic:vibration?windows_per_class=8&length=64&windows_per_recording=2&seed=1"
result = Study({str(tmp_path / "run")!r}, load_windows(spec), resolve_target(ram="2200", flash="64k", macs="1M"),
               strategy="fast", budget_seconds=300, fidelity=tiny, final_fidelity=tiny, augment="none",
               max_candidates=2).run()
assert sum(t.attempts > 0 for t in result.trials) == 2, [t.architecture.name() for t in result.trials]
assert result.card.int8_test_accuracy is not None
loaded = sorted(m for m in sys.modules if m.split('.')[0] in ('tensorflow', 'keras'))
assert not loaded, loaded[:5]
print("ok", result.winner.architecture.name())
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0 and "ok A(" in done.stdout, done.stderr[-3000:]
    assert (tmp_path / "run" / "model.tflite").stat().st_size > 0  # the workers did train and export


def _imported(nodes, path: Path, name: str) -> set[str]:
    """The tinynas modules the import statements among `nodes` name (relative imports resolved from `name`)."""
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1]
                                + ([node.module] if node.module else []))
            found.add(base)
            found |= {f"{base}.{alias.name}" for alias in node.names}
    return {module for module in found if module.startswith("tinynas")}


def _module_level_imports(path: Path, name: str) -> set[str]:
    """tinynas modules `name` imports when it is imported (function-level imports run later: no cycle)."""
    nodes = []
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            continue
        nodes += ast.walk(node) if isinstance(node, (ast.If, ast.Try)) else [node]
    return _imported(nodes, path, name)


def test_no_import_cycles():
    modules = {}
    for name in _modules():
        path = PACKAGE.joinpath(*name.split(".")[1:])
        path = path / "__init__.py" if path.is_dir() else path.with_suffix(".py")
        modules[name] = path
    graph = {name: {m for m in _module_level_imports(path, name) if m in modules and m != name}
             for name, path in modules.items()}
    # A submodule import also runs its packages' __init__ files.
    for name in modules:
        graph[name] |= {parent for parent in (name.rsplit(".", i)[0] for i in range(1, name.count(".")))
                        if parent in modules and parent != "tinynas"} - {name}
    cycles, state = [], {}

    def visit(node, stack):
        state[node] = "open"
        for successor in sorted(graph[node]):
            if state.get(successor) == "open":
                cycles.append(stack[stack.index(successor):] + [successor])
            elif successor not in state:
                visit(successor, stack + [successor])
        state[node] = "done"

    for name in sorted(graph):
        if name not in state:
            visit(name, [name])
    # A package's __init__ importing its own submodules is how packages re-export; not a cycle.
    real = [c for c in cycles if not all(m == c[0] or m.startswith(c[0] + ".") for m in c)
            and not all(m == c[-1] or m.startswith(c[-1] + ".") for m in c)]
    assert not real, "\n".join(" -> ".join(c) for c in real[:10])


def _all_imports(path: Path, name: str) -> set[str]:
    """tinynas modules `name` imports anywhere: at module level and inside functions (run later, but a circle
    all the same: neither module can be understood, tested or moved without the other)."""
    return _imported(ast.walk(ast.parse(path.read_text())), path, name)


def _circles(graph: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    circles = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, successors = work[-1]
            successor = next(successors, None)
            if successor is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    members = set()
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        members.add(member)
                        if member == node:
                            break
                    if len(members) > 1:
                        circles.append(members)
            elif successor not in index:
                index[successor] = low[successor] = len(index)
                stack.append(successor)
                on_stack.add(successor)
                work.append((successor, iter(sorted(graph[successor]))))
            elif successor in on_stack:
                low[node] = min(low[node], index[successor])
    return circles


def test_no_import_circle_counting_function_level_imports():
    modules = {}
    for name in _modules():
        path = PACKAGE.joinpath(*name.split(".")[1:])
        modules[name] = path / "__init__.py" if path.is_dir() else path.with_suffix(".py")
    graph = {name: {m for m in _all_imports(path, name) if m in modules and m != name}
             for name, path in modules.items()}
    # A package's __init__ re-exporting its submodules, which import the package back, is how packages work: a
    # circle within one package's own modules is not counted. (Its edges stay: a circle through a re-export is one.)
    circles = [circle for circle in _circles(graph)
               if not any(all(m == top or m.startswith(top + ".") for m in circle) for top in circle)]
    # Issue 34 broke the last ones: the run and model folders' names and files have one owner (tinynas.folders),
    # the runtimes a board may list live with the targets, --strategy is checked by the strategies' package, and an
    # anomaly score report is a metric. A new circle fails here, naming its modules.
    assert not circles, [sorted(circle) for circle in circles]


def test_every_benchmark_script_is_in_the_index():
    """benchmarks/README.md names every script (its question, command and results file), and no file it names
    as a result is missing, so the shelf cannot grow a heap at one end again."""
    import re

    root = Path(__file__).resolve().parents[1] / "benchmarks"
    index = (root / "README.md").read_text()
    # tflm_arm/ is one tool with its own README: its two entry points are what the index names.
    scripts = sorted([path.relative_to(root).as_posix() for folder in (root, root / "pi") for path in folder.iterdir()
                      if path.suffix in (".py", ".sh")] + ["tflm_arm/run.sh", "tflm_arm/footprint.sh"])
    missing = [script for script in scripts if f"`{script}`" not in index and f"runner `{script}`" not in index]
    assert not missing, f"benchmarks/README.md does not list {missing}"
    named = set(re.findall(r"`([\w.-]+\.md)`", index)) - {"README.md"}
    absent = sorted(name for name in named if not (root / "results" / name).exists())
    assert not absent, f"benchmarks/README.md names results that are not in benchmarks/results: {absent}"


def test_no_module_reaches_into_anothers_private_members():
    """`x._name` only on self or cls, and no `from m import _name` across modules: what a module shares is public
    (namedtuple's `_replace` and `os._exit` are public APIs that happen to start with an underscore)."""
    public_anyway = {"_replace", "_exit", "_asdict", "_fields", "_make"}
    found = []
    for root in (PACKAGE, PACKAGE.parent / "firmware_bridge"):
        for path in sorted(root.rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in ("tinynas",
                                                                                           "firmware_bridge"):
                    found += [f"{path.name}:{node.lineno} from {node.module} import {alias.name}"
                              for alias in node.names if alias.name.startswith("_") and not alias.name.startswith("__")]
                elif isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__") \
                        and node.attr not in public_anyway \
                        and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")):
                    found.append(f"{path.name}:{node.lineno} {ast.unparse(node)}")
    assert not found, found


def _import_graph() -> dict[str, set[str]]:
    """Every tinynas module and the tinynas modules it imports anywhere (module level and inside functions)."""
    modules = {}
    for name in _modules():
        path = PACKAGE.joinpath(*name.split(".")[1:])
        modules[name] = path / "__init__.py" if path.is_dir() else path.with_suffix(".py")
    return {name: {m for m in _all_imports(path, name) if m in modules and m != name}
            for name, path in modules.items()}


def _upward(graph: dict[str, set[str]]) -> list[str]:
    from tinynas.layers import upward

    return sorted(f"{a} -> {b}" for a, imported in graph.items() for b in imported if upward(a, b))


def test_every_room_has_its_place_in_the_layers():
    from tinynas.layers import LAYERS, layer_of, room_of

    rooms = {room_of(name) for name in _modules()}
    assert not sorted(room for room in rooms if layer_of(room) is None), "place it in tinynas/layers.py"
    listed = [room for layer in LAYERS for room in layer.rooms]
    assert len(listed) == len(set(listed)) and set(listed) == rooms  # each room once, none that is gone


def test_no_import_goes_up_the_declared_layers():
    """Module level or inside a function: a function-level import is a dependency all the same (it runs later)."""
    assert not _upward(_import_graph())


def test_the_layer_check_catches_a_planted_upward_import_inside_a_function():
    planted = "def load():\n    from tinynas.study.run import Study\n    return Study\n"
    graph = _import_graph()
    name = "tinynas.data.planted"
    graph[name] = {m for m in _imported(ast.walk(ast.parse(planted)), PACKAGE / "data" / "planted.py", name)
                   if m in graph}
    assert _upward(graph) == ["tinynas.data.planted -> tinynas.study.run"]
    sideways = "from tinynas.adaptation.adapt import adapt\n"  # one layer, two rooms: not allowed either
    graph = _import_graph()
    graph["tinynas.study.planted"] = _imported(ast.walk(ast.parse(sideways)), PACKAGE / "study" / "p.py",
                                               "tinynas.study.planted") & set(graph)
    assert _upward(graph) == ["tinynas.study.planted -> tinynas.adaptation.adapt"]


def test_firmware_bridge_stands_alone():
    """The bridge is copied to a sensor's host as it is: it never imports tinynas."""
    bridge = PACKAGE.parent / "firmware_bridge"
    found = [f"{path.name}: {module}" for path in sorted(bridge.rglob("*.py"))
             for module in _imported(ast.walk(ast.parse(path.read_text())), path, "firmware_bridge." + path.stem)]
    assert not found, found


FUNCTION_LEVEL_IMPORTS = 59
"""Function-level import statements of tinynas's own modules (234 imported modules when issue 55 was filed; 127 before
its last lift, 60 statements after). The commands (`tinynas.cli`) import a command's modules only when that command
runs, so `tinynas --help` and the service start in a third of a second; anywhere else each one says why on its line.
The count may go down, never up unnoticed."""


def _function_level_imports():
    """(module, line, source line) of every import inside a function of a tinynas module that is not imported at
    module level already."""
    for name in _modules():
        path = PACKAGE.joinpath(*name.split(".")[1:])
        path = path / "__init__.py" if path.is_dir() else path.with_suffix(".py")
        top, lines = _module_level_imports(path, name), path.read_text().splitlines()
        for function in ast.walk(ast.parse(path.read_text())):
            if isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for node in ast.walk(function):
                    if isinstance(node, (ast.Import, ast.ImportFrom)) and _imported([node], path, name) - top - {name}:
                        yield name, node.lineno, " ".join(lines[node.lineno - 1:node.end_lineno])


def test_function_level_imports_do_not_grow():
    count = len({(name, line) for name, line, _ in _function_level_imports()})
    assert count <= FUNCTION_LEVEL_IMPORTS, f"{count} function-level imports of tinynas modules: say why, or lower it"


def test_every_function_level_import_outside_the_commands_says_why():
    unexplained = [f"{name}:{line}" for name, line, source in _function_level_imports()
                   if not name.startswith("tinynas.cli") and name != "tinynas" and "#" not in source]
    assert not unexplained, f"a function-level import with no reason on its line (lift it, or say why): {unexplained}"


def test_the_reason_check_sees_an_import_with_no_reason(tmp_path, monkeypatch):
    planted = tmp_path / "tinynas" / "study"
    planted.mkdir(parents=True)
    (planted / "planted.py").write_text("def f():\n    from tinynas.units import kib\n    return kib\n")
    monkeypatch.setattr(sys.modules[__name__], "PACKAGE", tmp_path / "tinynas")
    assert [(name, source.strip()) for name, _, source in _function_level_imports()] == [
        ("tinynas.study.planted", "from tinynas.units import kib")]


def test_the_architecture_page_draws_the_declared_layers():
    from tinynas.layers import render

    page = (PACKAGE.parent / "docs" / "architecture.md").read_text()
    assert render() in page, "docs/architecture.md: paste `python -c 'import tinynas.layers as l; print(l.render())'`"


def test_tests_share_helpers_through_tests_support():
    """A test module never imports another test module or a conftest: what tests share lives in tests/support/."""
    tests = PACKAGE.parent / "tests"
    # A helper beside the tests (imported by its bare name, through pytest's rootdir on sys.path) is one too.
    beside = {path.stem for path in tests.rglob("*.py") if "support" not in path.parts}
    found = []
    for path in sorted(tests.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([alias.name for alias in node.names] if isinstance(node, ast.Import)
                     else [("." * node.level) + (node.module or "")] if isinstance(node, ast.ImportFrom) else [])
            found += [f"{path.relative_to(tests)}:{node.lineno} {name}" for name in names
                      if name.split(".")[-1].startswith(("test_", "conftest")) or name.startswith(".")
                      or name.split(".")[0] in beside]
    assert not found, found


def test_a_card_is_parsed_only_by_its_own_module():
    """card.json is untrusted input with one checked reader (`tinynas.card.read_card`): no other module parses it
    (a `json.load(s)` whose argument names the card file or a card path)."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path == PACKAGE / "card.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and ast.unparse(node.func) in ("json.loads", "json.load"):
                argument = " ".join(ast.unparse(a) for a in node.args).lower()
                if "card" in argument:
                    found.append(f"{path.relative_to(PACKAGE)}:{node.lineno} {ast.unparse(node)[:80]}")
    assert not found, found
