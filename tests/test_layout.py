"""The package is laid out as the pipeline: core → dataset → annotation → generation → judging → stats → reporting →
hub, with the CLI (and the top-level API) above them. A module imports only from its own room or rooms below it, and no
imports form a cycle. The imports are read with `ast`, so nothing is imported to check them."""

from __future__ import annotations

import ast
import dataclasses
import re
import shutil
from pathlib import Path

import tangpoetrybench

PACKAGE = Path(tangpoetrybench.__file__).parent
ROOMS = ("dataset", "annotation", "generation", "judging", "stats", "reporting", "hub")
# Above every room: the API that re-exports them, the reward built on the judges, and the command line.
TOP = {"tangpoetrybench", "tangpoetrybench.cli", "tangpoetrybench.__main__", "tangpoetrybench.reward"}


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def level(module: str) -> int:
    """0 for the core modules, then each room in pipeline order, and the top last."""
    if module in TOP or module.startswith("tangpoetrybench.cli."):
        return len(ROOMS) + 1
    parts = module.split(".")
    return ROOMS.index(parts[1]) + 1 if len(parts) > 2 and parts[1] in ROOMS else 0


def imports(root: Path) -> dict[str, set[str]]:
    """Every module of the package → the package's modules it imports (at any depth of its code)."""
    modules = {module_name(p, root): p for p in root.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        found = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - node.level + 1]
                    target = ".".join(base + ([node.module] if node.module else []))
                else:
                    target = node.module or ""
                if target == "tangpoetrybench" and {alias.name for alias in node.names} == {"__version__"}:
                    continue  # the version string, which the package's __init__ defines before importing anything
                candidates = [target] + [f"{target}.{alias.name}" for alias in node.names]
            elif isinstance(node, ast.Import):
                candidates = [alias.name for alias in node.names]
            else:
                continue
            found |= {c for c in candidates if c in modules and c != name}
        graph[name] = found
    return graph


def upward(graph: dict[str, set[str]]) -> list[str]:
    return sorted(f"{m} imports {t}" for m, targets in graph.items() for t in targets if level(t) > level(m))


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import cycles, each once (depth-first search over the graph)."""
    found, state = [], {}

    def visit(node: str, path: list[str]) -> None:
        state[node] = "open"
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == "open":
                found.append(path[path.index(nxt):] + [nxt])
            elif nxt not in state:
                visit(nxt, path + [nxt])
        state[node] = "done"

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])
    return found


def test_imports_run_down_the_pipeline_without_cycles():
    graph = imports(PACKAGE)
    assert upward(graph) == []
    assert cycles(graph) == []


def test_a_planted_upward_import_and_a_cycle_are_caught(tmp_path):
    root = tmp_path / "tangpoetrybench"
    shutil.copytree(PACKAGE, root, ignore=shutil.ignore_patterns("__pycache__"))
    qc = root / "dataset" / "qc.py"
    qc.write_text(qc.read_text(encoding="utf-8") + "\nfrom ..reporting.report import build_report\n", encoding="utf-8")
    assert upward(imports(root)) == ["tangpoetrybench.dataset.qc imports tangpoetrybench.reporting.report"]
    numeric = root / "numeric.py"
    numeric.write_text(numeric.read_text(encoding="utf-8") + "\n\ndef late():\n    from .files import atomic_folder\n",
                       encoding="utf-8")
    files = root / "files.py"
    files.write_text(files.read_text(encoding="utf-8") + "\nfrom .numeric import fmt\n", encoding="utf-8")
    [cycle] = cycles(imports(root))  # found from whichever of the two the search reaches first
    assert cycle[0] == cycle[-1] and sorted(cycle[:-1]) == ["tangpoetrybench.files", "tangpoetrybench.numeric"]


def test_every_room_says_what_it_holds_and_the_top_level_stays_small():
    for room in ROOMS:
        doc = ast.get_docstring(ast.parse((PACKAGE / room / "__init__.py").read_text(encoding="utf-8")))
        assert doc and len(doc) > 80, room
    top = {p.stem for p in PACKAGE.glob("*.py")} - {"__init__", "__main__", "cli"}
    assert len(top) <= 8, sorted(top)
    vague = {"common", "utils", "misc", "helpers", "util"}
    names = {p.stem for p in PACKAGE.rglob("*.py")} | {p.stem for p in (PACKAGE.parent / "training").glob("*.py")}
    assert not names & vague


# Names that the rubric files and the registry hold, retyped in code: a tradition's dimension key or a bundled
# tradition's name in a string literal. Allowed: the default tradition's one definition, the converter of a source
# whose poems are of those traditions, and the Space's OCR summary (issue 42b's, which takes it from the rubric).
RETYPED_ALLOWED = {("rubric.py", "tang"), ("poems.py", "tang"), ("poems.py", "song_ci"),
                   ("hub/space.py", "text_integrity")}


def retyped_names(root: Path) -> list[str]:
    from tangpoetrybench.rubric import BUILTIN, load_rubric

    keys = {k for t in BUILTIN for k in load_rubric(t).keys}
    listed = ", ".join(BUILTIN)
    found = []
    for path in sorted(root.rglob("*.py")):
        where = path.relative_to(root).as_posix()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                value = node.value
                if (value in keys or value in BUILTIN) and (where, value) not in RETYPED_ALLOWED:
                    found.append(f"{where}:{node.lineno} {value!r}")
                elif listed in value:
                    found.append(f"{where}:{node.lineno} lists the bundled rubrics by hand")
    return found


def test_dimensions_and_traditions_come_from_the_rubrics_never_retyped():
    assert retyped_names(PACKAGE) == []
    from tangpoetrybench.judging.registry import JudgeOptions
    from tangpoetrybench.rubric import BUILTIN

    [rubric] = [f for f in dataclasses.fields(JudgeOptions) if f.name == "rubric"]
    assert f"a bundled name ({', '.join(BUILTIN)})" in rubric.metadata["help"]


# --- every module on its room's map and on docs/architecture.md -----------------------------------------------------

ARCHITECTURE = PACKAGE.parent / "docs" / "architecture.md"


def modules_of(package: Path) -> list[Path]:
    """The package's modules and subpackages (their `__init__.py`), but `__main__` and the command modules, which
    `cli.COMMANDS` names (checked below)."""
    return sorted(p for p in package.rglob("*.py") if p.name != "__main__.py" and p != package / "__init__.py"
                  and "__pycache__" not in p.parts and not (p.parent.name == "cli" and p.name not in ("__init__.py",
                                                                                                    "base.py")))


def unnamed_in_docstrings(package: Path) -> list[str]:
    """Each module (or subpackage) its folder's `__init__` docstring does not name (a word of the docstring)."""
    missing = []
    for path in modules_of(package):
        subpackage = path.name == "__init__.py"
        folder, name = (path.parent.parent, path.parent.name) if subpackage else (path.parent, path.stem)
        doc = ast.get_docstring(ast.parse((folder / "__init__.py").read_text(encoding="utf-8"))) or ""
        if not re.search(rf"(?<![\w.]){re.escape(name)}\b", doc):
            missing.append(path.relative_to(package).as_posix())
    return missing


def off_the_map(package: Path, architecture: str) -> list[str]:
    """Each module the table of docs/architecture.md does not name in its folder's row (`name.py`; a subpackage has a
    row of its own, or is named `name/` in its parent's): a row per folder, `core (top level)` for the core modules and
    `top` for what sits on the pipeline (the command line and the reward)."""
    rows = {}
    for line in architecture.splitlines():
        cells = line.split("|")
        if line.startswith("| ") and len(cells) > 3:
            rows[cells[1].strip().strip("`")] = cells[2]
    missing = []
    for path in modules_of(package):
        relative = path.relative_to(package)
        inner = relative.parent.parent if path.name == "__init__.py" else relative.parent
        shown = f"{relative.parent.name}/" if path.name == "__init__.py" else path.name
        folder = inner.as_posix().strip(".")
        top = folder == "cli" or shown in ("cli/", "reward.py") and not folder
        row = "top" if top else f"{folder}/" if folder else "core (top level)"
        own_row = path.name == "__init__.py" and f"{relative.parent.as_posix()}/" in rows  # a room, a folder in one
        if shown not in rows.get(row, "") and not own_row:
            missing.append(relative.as_posix())
    return missing


def not_modules(package: Path, architecture: str) -> list[str]:
    """Each `name.py` the table of docs/architecture.md names in a folder's row that is no module there (a module
    removed, or renamed, while the map still names it)."""
    found = []
    for line in architecture.splitlines():
        cells = line.split("|")
        if not (line.startswith("| ") and len(cells) > 3):
            continue
        row = cells[1].strip().strip("`")
        folders = ([package / "cli", package] if row == "top" else [package] if row == "core (top level)"
                   else [package / row.rstrip("/")])
        for name in re.findall(r"`([a-z_0-9]+\.py)`", cells[2]):
            if not any((folder / name).is_file() for folder in folders):
                found.append(f"{row}: {name}")
    return found


def test_every_module_is_named_in_its_rooms_docstring_and_on_the_map():
    from tangpoetrybench.cli import COMMANDS

    assert unnamed_in_docstrings(PACKAGE) == []
    assert off_the_map(PACKAGE, ARCHITECTURE.read_text(encoding="utf-8")) == []
    assert not_modules(PACKAGE, ARCHITECTURE.read_text(encoding="utf-8")) == []
    commands = {p.stem for p in (PACKAGE / "cli").glob("*.py")} - {"__init__", "__main__", "base"}
    assert commands == {c.replace("-", "_") for c in COMMANDS}  # a command module is named by its command


def test_a_module_missing_from_the_maps_is_found(tmp_path):
    root = tmp_path / "tangpoetrybench"
    shutil.copytree(PACKAGE, root, ignore=shutil.ignore_patterns("__pycache__"))
    (root / "stats" / "orphan.py").write_text('"""Nobody names me."""\n', encoding="utf-8")
    assert unnamed_in_docstrings(root) == ["stats/orphan.py"]
    assert off_the_map(root, ARCHITECTURE.read_text(encoding="utf-8")) == ["stats/orphan.py"]
    (root / "stats" / "scales.py").unlink()
    assert not_modules(root, ARCHITECTURE.read_text(encoding="utf-8")) == ["stats/: scales.py"]


# --- inside judging/: layers whose imports run one way -------------------------------------------------------------

# Bottom up; a module belongs to the layer of the longest name here that is it or a package above it.
JUDGING_LAYERS = (
    # what questions, answers and records are made of, read and written
    ("prompt", "reading", "constrained", "readout", "abstention", "records", "results", "failures", "ocr", "ocr.evidence"),
    ("backends",),  # who answers
    ("tasks", "evaluators.base", "evaluators.clipscore", "evaluators.blipscore", "evaluators.vqascore",
     "ocr.evaluator"),  # what is asked, and the evaluators of their own
    ("judge", "calibrated"),  # the one evaluator
    ("registry", "evaluators"),  # every evaluator by name (`evaluators/__init__` re-exports `load_evaluator`)
    ("scoring", "pairwise", "ray_scoring", "ray_vllm", "semjudge", "tiny_models", "ocr.labels"),  # the drivers
)


def judging_layer(module: str) -> int | None:
    """The layer of a module of `judging/` (None for a module outside it, or the room itself)."""
    prefix = "tangpoetrybench.judging."
    if not module.startswith(prefix):
        return None
    name = module[len(prefix):]
    found = [(len(entry), i) for i, layer in enumerate(JUDGING_LAYERS) for entry in layer
             if name == entry or name.startswith(entry + ".")]
    assert found, f"{module} is in no layer of JUDGING_LAYERS: put it in one"
    return max(found)[1]


def judging_downward(graph: dict[str, set[str]]) -> list[str]:
    return sorted(f"{m} imports {t}" for m, targets in graph.items() for t in targets
                  if judging_layer(m) is not None and judging_layer(t) is not None
                  and judging_layer(t) > judging_layer(m))


def test_imports_inside_judging_run_up_its_layers():
    assert judging_downward(imports(PACKAGE)) == []


def test_a_planted_import_of_a_driver_is_caught(tmp_path):
    root = tmp_path / "tangpoetrybench"
    shutil.copytree(PACKAGE, root, ignore=shutil.ignore_patterns("__pycache__"))
    judge = root / "judging" / "judge.py"
    judge.write_text(judge.read_text(encoding="utf-8") + "\nfrom .pairwise import compare_to_jsonl\n",
                     encoding="utf-8")
    assert judging_downward(imports(root)) == ["tangpoetrybench.judging.judge imports "
                                               "tangpoetrybench.judging.pairwise"]
