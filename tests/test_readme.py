"""README.md runs as written: its ```bash blocks, in order, in a clean copy of the repository (the files git
tracks or would track, nothing built), offline (HF_HUB_OFFLINE=1, an empty Hub cache). ```console blocks are
shown, not run (they need a GPU, the Hub, a long time, or they are this test suite itself)."""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SFT_STEPS = "20"  # the recipe's 200 steps teach the format; 20 check the plumbing (decoding is constrained anyway)


def bash_blocks(text: str) -> list[str]:
    return re.findall(r"^```bash\n(.*?)^```", text, flags=re.M | re.S)


def clean_copy(dest: Path) -> Path:
    """The repository as a fresh clone would have it, with this checkout's uncommitted changes."""
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT, check=True,
                           capture_output=True, text=True).stdout.split("\0")
    for name in filter(None, files):
        if (ROOT / name).is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, dest / name)
    return dest


def test_the_readme_has_its_set_up_first():
    blocks = bash_blocks((ROOT / "README.md").read_text(encoding="utf-8"))
    assert blocks[0] == "bash scripts/quickstart.sh\n"
    assert not re.search(r"SPEC|\.\./shared|issue \d", (ROOT / "README.md").read_text(encoding="utf-8"))


@pytest.mark.slow
def test_the_readme_runs_as_written(tmp_path):
    repo = clean_copy(tmp_path / "repo")
    # The package is installed already (editable, from this checkout): the quickstart's pip step is skipped, and
    # PYTHONPATH makes the copy's code the one that runs.
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf"), "PYTHONPATH": str(repo),
           "TPB_SKIP_INSTALL": "1", "TPB_SFT_STEPS": SFT_STEPS,
           "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    for block in bash_blocks((repo / "README.md").read_text(encoding="utf-8")):
        done = subprocess.run(["bash", "-euo", "pipefail", "-c", block], cwd=repo, env=env, capture_output=True,
                              text=True)
        assert done.returncode == 0, f"{block}\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    records = [json.loads(line) for line in (repo / "sample" / "scores.jsonl").read_text().splitlines()]
    assert len(records) == 12 and all(r["parse_status"] == "ok" and r["quality"] is not None for r in records)
    assert records[0]["dataset"]["config"] == "images" and records[0]["settings"]["constrained"] is True
    assert "Table 4" in (repo / "sample" / "report" / "report.html").read_text(encoding="utf-8")
    board = json.loads((repo / "sample" / "board" / "leaderboard.json").read_text(encoding="utf-8"))
    assert "tinysd" in {row["generator"] for row in board["leaderboard"]}
