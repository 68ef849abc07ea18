"""README.md runs as written: its ```bash blocks, then those of docs/tour.md (the steps after the set-up), in order,
in a clean copy of the repository (the files git tracks or would track, nothing built), offline (HF_HUB_OFFLINE=1, an
empty Hub cache). ```console blocks are shown, not run (they need a GPU, the Hub, a long time, or they are this test
suite itself)."""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RUN = ("README.md", "docs/tour.md")  # whose ```bash blocks run, in this order
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
    """The two set-up commands open the README: the main job, then the tests (in its first 60 lines)."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert bash_blocks(text)[0] == "bash scripts/quickstart.sh\n"
    top = "\n".join(text.splitlines()[:60])
    assert 'python -m pip install -e ".[dev]" && python -m pytest' in top
    assert "bash scripts/quickstart.sh" in top.split("python -m pytest")[0]


# What users read: the README, pyproject.toml, docs/, the cards (the repo's and the Hub repos' READMEs) and the
# templates the cards are made from.
READ = ["README.md", "pyproject.toml", "dataset_card.md", "model_card.md", "metric/pae/README.md", "space/README.md",
        "training/README.md", "dataset_builder/README.md", "tangpoetrybench/data/README.md", "docs/**/*.md",
        "tangpoetrybench/templates/*"]
UNSHIPPED = re.compile(r"SPEC\b|STACK_NOTES|\.\./shared|/work/|\bissue \d")  # the developers' notes, not the users'
TOP = ("docs", "tests", "benchmarks", "scripts", "training", "tangpoetrybench", "metric", "space", "harness",
       "dataset_builder")


def unshipped_citations(root: Path) -> list[str]:
    """Every citation of a file users do not have: the developers' notes, a relative link to no file, a path of
    this repository in backticks that names nothing."""
    found = []
    for path in sorted({p for pattern in READ for p in root.glob(pattern) if p.is_file()}):
        where, text = path.relative_to(root), path.read_text(encoding="utf-8")
        found += [f"{where}: cites {m.group(0)!r}" for m in UNSHIPPED.finditer(text)]
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if not re.match(r"[a-z]+:|#", target) and not (path.parent / target.split("#")[0]).exists():
                found.append(f"{where}: links to {target}, which is not there")
        for named in re.findall(rf"`((?:{'|'.join(TOP)})/[^`\s:]*)", text):
            if not re.search(r"[<>*{}]|[A-Z]{3,}", named) and not (root / named).exists():
                found.append(f"{where}: names {named}, which is not there")
    return found


def test_nothing_users_read_cites_what_does_not_ship(tmp_path):
    assert unshipped_citations(ROOT) == []
    (tmp_path / "docs").mkdir()  # the check itself catches each kind
    (tmp_path / "pyproject.toml").write_text("# see STACK_NOTES\n", encoding="utf-8")
    (tmp_path / "docs" / "a.md").write_text("[b](b.md), `docs/c.md`, `docs/a.md`, as SPEC §7 says\n", encoding="utf-8")
    assert unshipped_citations(tmp_path) == ["docs/a.md: cites 'SPEC'", "docs/a.md: links to b.md, which is not there",
                                             "docs/a.md: names docs/c.md, which is not there",
                                             "pyproject.toml: cites 'STACK_NOTES'"]


PROGRESS = re.compile(r"^[^|]*\d+%\|[^|]*\|\s*\d+/\d+ \[")  # a tqdm bar: "Scoring (pae):  67%|██  | 8/12 [00:17<..."
EXPECTED: tuple[re.Pattern, ...] = ()  # lines the main job may print that are no trouble (none now)


def unexplained(stderr: str) -> list[str]:
    """What a run printed on stderr besides progress bars and `EXPECTED` lines: a library's warning, an error, a
    stray source line. The main job prints none; a new one fails the test until it is explained (kept, if it is a
    real warning) or silenced at its cause."""
    lines = [part for line in stderr.splitlines() for part in line.split("\r") if part.strip()]
    return [line for line in lines if not PROGRESS.match(line) and not any(e.search(line) for e in EXPECTED)]


def test_the_main_jobs_check_sees_warnings_among_progress_bars():
    bars = ("Scoring (pae):   0%|          | 0/12 [00:00<?, ?image/s]\rScoring (pae):  67%|██▋  | 8/12 "
            "[00:17<00:08,  2.13s/image]\n  0%|          | 0/2 [00:00<?, ?it/s]\n")
    assert unexplained(bars) == []
    noise = ("Failed to load CPU gemm_4bit_forward from kernels-community\n/x/modeling_utils.py:3312: FutureWarning: "
             "`is_gradient_checkpointing` is deprecated\n  warnings.warn(\n")
    assert unexplained(bars + noise) == noise.splitlines()


@pytest.mark.slow
def test_the_readme_runs_as_written(tmp_path):
    repo = clean_copy(tmp_path / "repo")
    # The package is installed already (editable, from this checkout): the quickstart's pip step is skipped, and
    # PYTHONPATH makes the copy's code the one that runs.
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf"), "PYTHONPATH": str(repo),
           "TPB_SKIP_INSTALL": "1", "TPB_SFT_STEPS": SFT_STEPS,
           "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    blocks = [b for page in RUN for b in bash_blocks((repo / page).read_text(encoding="utf-8"))]
    for n, block in enumerate(blocks):
        done = subprocess.run(["bash", "-euo", "pipefail", "-c", block], cwd=repo, env=env, capture_output=True,
                              text=True)
        assert done.returncode == 0, f"{block}\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
        if n == 0:  # the main job: nothing on its stderr but progress, the note once, then what to do next
            assert unexplained(done.stderr) == [], "\n".join(unexplained(done.stderr))
            assert done.stdout.count("NOTE: random weights") == 1
            assert done.stdout.rstrip().splitlines()[-7].startswith("Next: open sample/report/report.html")
    records = [json.loads(line) for line in (repo / "sample" / "scores.jsonl").read_text().splitlines()]
    assert len(records) == 12 and all(r["parse_status"] == "ok" and r["quality"] is not None for r in records)
    assert records[0]["dataset"]["config"] == "images" and records[0]["settings"]["constrained"] is True
    assert "Table 4" in (repo / "sample" / "report" / "report.html").read_text(encoding="utf-8")
    board = json.loads((repo / "sample" / "board" / "leaderboard.json").read_text(encoding="utf-8"))
    assert "tinysd" in {row["generator"] for row in board["leaderboard"]}


def test_the_quickstart_installs_pytorchs_cpu_build_where_there_is_no_gpu(tmp_path):
    """`scripts/cpu_torch.py` (the quickstart's first step): on Linux with no NVIDIA GPU and no torch, PyTorch's
    CPU build from its index when the index answers (here a real one on loopback), else pip's default with one line
    saying so; nothing to do on a GPU machine, where torch is there already, or off Linux."""
    import functools
    import http.server
    import socket
    import threading

    from conftest import load_module

    cpu_torch = load_module(ROOT / "scripts" / "cpu_torch.py", "cpu_torch")
    (tmp_path / "torch").mkdir()
    (tmp_path / "torch" / "index.html").write_text("<a href='torch-2.14.1+cpu.whl'>torch</a>", encoding="utf-8")
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(tmp_path))
    with http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler) as index:
        threading.Thread(target=index.serve_forever, daemon=True).start()
        url = f"http://127.0.0.1:{index.server_address[1]}"
        assert cpu_torch.cpu_torch_args("Linux", False, False, url) == (
            ["torch", "torchvision", "--index-url", url], None)
        index.shutdown()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        silent = f"http://127.0.0.1:{s.getsockname()[1]}"  # nothing listens there once the socket closes
    args, why = cpu_torch.cpu_torch_args("Linux", False, False, silent)
    assert args == [] and why == (f"quickstart: PyTorch's CPU index ({silent}) did not answer: installing pip's "
                                  "default PyTorch, the CUDA build (about 6 GB)")
    for system, gpu, torch_there in (("Linux", True, False), ("Linux", False, True), ("Darwin", False, False)):
        assert cpu_torch.cpu_torch_args(system, gpu, torch_there, silent) == ([], None)
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "cpu_torch.py")], capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.strip() == ""  # here torch is installed: nothing to add
    assert 'cpu_torch=$(python scripts/cpu_torch.py)' in (ROOT / "scripts" / "quickstart.sh").read_text()


def quickstart_extras(script: str) -> list[str]:
    """The extras the quickstart installs the package with (`pip install -e ".[train,space]"`)."""
    [extras] = re.findall(r'pip install -e "\.\[([^\]]*)\]"', script)
    return extras.split(",")


def next_commands(script: str) -> list[str]:
    """The commands the quickstart's "Next:" prints: its indented lines."""
    text = script.split("<<'NEXT'\n", 1)[1].split("\nNEXT", 1)[0]
    return [line.strip() for line in text.splitlines() if line.startswith("  ")]


def installed_by(extras: list[str]) -> set[str]:
    """The distributions `pip install -e ".[EXTRAS]"` installs: the project's requirements (its pyproject.toml) with
    those extras, and theirs, transitively (each dependency's own requirements, from its installed metadata)."""
    import tomllib
    from importlib.metadata import PackageNotFoundError, distribution

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    todo = [Requirement(r) for r in project["dependencies"]]
    todo += [Requirement(r) for e in extras for r in project["optional-dependencies"][e]]
    found: set[str] = set()
    while todo:
        req = todo.pop()
        name = canonicalize_name(req.name)
        if name == "tangpoetrybench":
            todo += [Requirement(r) for e in req.extras for r in project["optional-dependencies"][e]]
            continue
        if name in found:
            continue
        try:
            requires = distribution(req.name).requires or []
        except PackageNotFoundError:
            continue  # not installed here: a platform's package (nvidia-*), nothing any command can import
        found.add(name)
        for text in requires:
            sub = Requirement(text)
            if sub.marker is None or any(sub.marker.evaluate({"extra": e}) for e in ("", *req.extras)):
                todo.append(sub)
    return found


def site_of(dists: set[str], folder: Path) -> Path:
    """A site-packages folder holding only `dists` (links to this environment's files of each): what a fresh
    environment with the quickstart's install set would import from."""
    from importlib.metadata import distributions

    from packaging.utils import canonicalize_name

    folder.mkdir()
    for dist in distributions():
        if canonicalize_name(dist.metadata["Name"]) not in dists:
            continue
        site = Path(dist.locate_file(""))
        for top in {Path(str(f)).parts[0] for f in dist.files or () if not str(f).startswith("..")}:
            if not (folder / top).exists() and (site / top).exists():
                (folder / top).symlink_to(site / top)
    return folder


@pytest.mark.slow
def test_every_command_the_quickstart_suggests_runs_with_what_it_installed(tiny_models, tiny_pae, demo_raw, tmp_path):
    """Each command the main job's "Next:" prints runs right after it: in an environment holding only what the
    quickstart installs (the package's requirements with its extras, no more), on the sample it made (here its
    tiny models and a tiny adapter), the placeholders DIR and POEMS.jsonl filled in. The Space's app is built, not
    served (it serves until stopped); every other command runs to the end."""
    script = (ROOT / "scripts" / "quickstart.sh").read_text(encoding="utf-8")
    commands = next_commands(script)
    assert [c.split()[-1] for c in commands] == ["space/app.py", "mine.jsonl", "help"]
    site = site_of(installed_by(quickstart_extras(script)), tmp_path / "site")
    work = tmp_path / "work"
    (work / "sample").mkdir(parents=True)
    (work / "sample" / "models").symlink_to(tiny_models["qwen3-vl"].parent)
    (work / "sample" / "pae-tiny").symlink_to(tiny_pae)
    mine = work / "mine" / "painter_a"
    mine.mkdir(parents=True)
    for poem in ("tang300-011", "tang300-278"):
        shutil.copy(demo_raw / "images" / "painter_a" / f"{poem}.png", mine)
    python = [sys.executable, "-S"]  # no site-packages: only `site`, and the repository's own code
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": f"{site}:{ROOT}", "HF_HUB_OFFLINE": "1",
           "HF_HOME": str(tmp_path / "hf"), "GRADIO_ANALYTICS_ENABLED": "False"}
    for command in commands:
        words = command.replace("DIR", str(work / "mine")).replace("POEMS.jsonl", str(demo_raw / "poems.jsonl"))
        words = words.split()
        assigned = dict(w.split("=", 1) for w in words if re.fullmatch(r"[A-Z_]+=\S+", w))
        argv = [w for w in words if w.split("=", 1)[0] not in assigned]
        if argv[0] == "tpb":
            argv = [*python, "-m", "tangpoetrybench.cli", *argv[1:]]
        else:
            assert argv == ["python", "space/app.py"], argv
            argv = [*python, "-c", f"import runpy; runpy.run_path({str(ROOT / 'space' / 'app.py')!r}, "
                                   "run_name='space_app')"]  # built, not launched
        done = subprocess.run(argv, cwd=work, env={**env, **assigned}, capture_output=True, text=True)
        assert done.returncode == 0, f"{command}\n{done.stderr[-3000:]}"
    assert len((work / "mine.jsonl").read_text(encoding="utf-8").splitlines()) == 2
