"""The main commands' outputs on the demo release, byte for byte: build, score (PAE constrained and CLIPScore on the
tiny models), agree, report and leaderboard, against the files in tests/snapshots/pipeline/ (timing fields and the
temporary folder's path aside; figures by name; a JSON number to 12 significant digits on both sides, and one under
1e-9 as 0, since the last digit of a float moves between CPUs, whose vectorised exp and log take other paths). A refactor must leave them
identical; a change that means to alter an output updates the snapshot in the same commit
(TPB_UPDATE_SNAPSHOTS=1 python -m pytest -m slow -k outputs_unchanged), so the diff shows what changed.

The test drives only `tangpoetrybench.cli.main`, so the same file checks any version of the package."""

import json
import os
import re
from pathlib import Path

import pytest

from tangpoetrybench.cli import main

SNAPSHOTS = Path(__file__).parent / "snapshots" / "pipeline"
TIMING = ("seconds",)
TEXT_OUTPUTS = ("build.txt", "agree.txt", "agree.json", "scores.jsonl", "clip.jsonl", "report/report.md",
                "report/numbers.json", "board/leaderboard.md", "board/leaderboard.json")


def run(args: list[str], out: Path, capsys) -> None:
    assert main(args) == 0, args
    out.write_text(capsys.readouterr().out, encoding="utf-8")


def rounded(value):
    """`value` with every float in it to 12 significant digits, and one under 1e-9 in size (a zero in exact
    arithmetic, left as rounding noise) as 0."""
    if isinstance(value, float):
        return float(f"{value:.12g}") if abs(value) >= 1e-9 else 0.0
    if isinstance(value, dict):
        return {k: rounded(v) for k, v in value.items()}
    if isinstance(value, list):
        return [rounded(v) for v in value]
    return value


def normalised(path: Path, root: Path) -> str:
    text = path.read_text(encoding="utf-8").replace(str(root), "ROOT")
    if path.suffix == ".json":
        text = json.dumps(rounded(json.loads(text)), ensure_ascii=False, indent=1) + "\n"
    if path.suffix == ".jsonl":
        records = [json.loads(line) for line in text.splitlines()]
        text = "".join(json.dumps(rounded({k: v for k, v in r.items() if k not in TIMING}), ensure_ascii=False)
                       + "\n" for r in records)
    return re.sub(r"\d+\.\d+ s\b", "N s", text)


@pytest.mark.slow
def test_main_outputs_are_unchanged(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.chdir(tmp_path)
    assert main(["demo-release", "raw", "--quiet"]) == 0
    run(["build", "raw", "ds", "--quiet"], tmp_path / "build.txt", capsys)
    assert main(["tiny-models", "models"]) == 0
    assert main(["score", "--dataset", "ds", "--evaluator", "pae", "--model", "models/qwen3-vl", "--constrained",
                 "--out", "scores.jsonl", "--quiet"]) == 0
    assert main(["score", "--dataset", "ds", "--evaluator", "clipscore", "--model", "models/chinese-clip",
                 "--out", "clip.jsonl", "--quiet"]) == 0
    run(["agree", "--dataset", "ds", "--scores", "scores.jsonl", "--out", "agree.json"], tmp_path / "agree.txt", capsys)
    assert main(["report", "--dataset", "ds", "--scores", "scores.jsonl", "--scores", "clip.jsonl", "--out",
                 "report"]) == 0
    assert main(["leaderboard", "--dataset", "ds", "--scores", "scores.jsonl", "--out", "board"]) == 0
    capsys.readouterr()
    found = {name: normalised(tmp_path / name, tmp_path) for name in TEXT_OUTPUTS}
    found["figures.txt"] = "".join(f"{p.relative_to(tmp_path)}\n" for folder in ("report", "board")
                                   for p in sorted((tmp_path / folder / "figures").iterdir()))
    if os.environ.get("TPB_UPDATE_SNAPSHOTS"):
        for name, text in found.items():
            (SNAPSHOTS / name).parent.mkdir(parents=True, exist_ok=True)
            (SNAPSHOTS / name).write_text(text, encoding="utf-8")
    for name, text in found.items():
        kept = SNAPSHOTS / name
        assert text == (normalised(kept, tmp_path) if kept.suffix in (".json", ".jsonl") else
                        kept.read_text(encoding="utf-8")), f"{name} differs from its snapshot"
