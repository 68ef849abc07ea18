"""The package is laid out as the pipeline: core → dataset → annotation → generation → judging → stats → reporting →
hub, with the CLI (and the top-level API) above them. A module imports only from its own room or rooms below it, and no
imports form a cycle. The imports are read with `ast`, so nothing is imported to check them."""

from __future__ import annotations

import ast
import dataclasses
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
