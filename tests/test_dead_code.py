"""No dead code: every function, class and module-level name the package defines is used somewhere else in the
repository (the package, its tests, benchmarks, training, the Spaces, the docs, pyproject's entry points). A name
used only inside definitions that are themselves unused is unused too (the check runs to a fixed point), so a cluster
of leftovers that call each other is found as a whole. Read with `ast` and a word scan: nothing is imported."""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from pathlib import Path

import tangpoetrybench

ROOT = Path(tangpoetrybench.__file__).parent.parent
PACKAGE = ROOT / "tangpoetrybench"
TEXT = (".py", ".toml", ".yaml", ".yml", ".md", ".sh", ".cfg", ".txt", ".json")
SKIP = {".git", "__pycache__", "snapshots", ".venv", "node_modules", "build", "dist"}  # and what a build leaves
# Methods a library calls by name (its own protocol), which nothing in this repository names.
CALLED_BY_LIBRARIES = {
    "_get_help_string",  # argparse.HelpFormatter
    "loglikelihood", "generate_until_multi_round",  # lmms-eval's model protocol
    "push_to_hub",  # huggingface_hub's CommitScheduler, overridden
    "compose_node",  # PyYAML's Composer, overridden
}
WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def definitions(root: Path) -> list[tuple[str, Path, int, int]]:
    """(name, file, first line, last line) of every function, method, class and module-level assignment."""
    found = []
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                found.append((node.name, path, node.lineno, node.end_lineno))
        for node in tree.body:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
                node, ast.AnnAssign) else []
            found += [(t.id, path, node.lineno, node.end_lineno) for t in targets if isinstance(t, ast.Name)]
    return [d for d in found if not d[0].startswith("__") and d[0] not in CALLED_BY_LIBRARIES]


def occurrences(root: Path) -> dict[str, list[tuple[Path, int]]]:
    """Every word of every text file of the repository → where it stands (file, line)."""
    where = defaultdict(list)
    for path in root.rglob("*"):
        parts = path.relative_to(root).parts
        if path.suffix not in TEXT or not path.is_file() or SKIP & set(parts) or any(
                p.endswith(".egg-info") for p in parts):
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8", errors="ignore").splitlines(), start=1):
            for word in WORD.findall(line):
                where[word].append((path, number))
    return where


def unused(package: Path, root: Path) -> list[str]:
    defs = definitions(package)
    words = occurrences(root)
    dead: set[int] = set()

    def inside(place: tuple[Path, int], index: int) -> bool:
        _, path, first, last = defs[index]
        return place[0] == path and first <= place[1] <= last

    changed = True
    while changed:
        changed = False
        for i, (name, *_rest) in enumerate(defs):
            if i in dead:
                continue
            live = [p for p in words[name] if not inside(p, i) and not any(inside(p, j) for j in dead)]
            if not live:
                dead.add(i)
                changed = True
    return sorted(f"{defs[i][1].relative_to(root)}:{defs[i][2]} {defs[i][0]}" for i in dead)


def test_nothing_is_defined_that_nothing_uses():
    assert unused(PACKAGE, ROOT) == []


def test_a_planted_cluster_of_leftovers_is_found(tmp_path):
    root = tmp_path / "repo"
    package = root / "tangpoetrybench"
    package.mkdir(parents=True)
    (package / "used.py").write_text("def live():\n    return 1\n\n\nVALUE = live()\n", encoding="utf-8")
    (package / "left.py").write_text("def helper():\n    return 2\n\n\ndef leftover():\n    return helper()\n",
                                     encoding="utf-8")
    (root / "README.md").write_text("VALUE is documented here.\n", encoding="utf-8")
    assert unused(package, root) == ["tangpoetrybench/left.py:1 helper", "tangpoetrybench/left.py:5 leftover"]
