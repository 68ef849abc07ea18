"""The public API: what a user imports from the top without knowing the layout, and `python -m tangpoetrybench`."""

import subprocess
import sys

import tangpoetrybench
from tangpoetrybench import agree, build_report, load_evaluator, load_rubric, parse_answer, score, write_report


def test_every_public_name_resolves_and_import_stays_light():
    for name in tangpoetrybench.__all__:
        assert getattr(tangpoetrybench, name) is not None, name
    code = "import sys, tangpoetrybench; print(any(m in sys.modules for m in ('torch', 'datasets', 'matplotlib')))"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip() == "False"


def test_python_dash_m_runs_the_cli():
    out = subprocess.run([sys.executable, "-m", "tangpoetrybench", "--version"], capture_output=True, text=True)
    assert out.returncode == 0 and tangpoetrybench.__version__ in out.stdout + out.stderr


def test_the_one_screen_example_runs(tiny_models, demo_built, tmp_path):
    """docs/architecture.md's example, on the tiny model (constrained decoding, so every answer parses)."""
    pae = load_evaluator("pae", model=str(tiny_models["qwen3-vl"]), constrained=True, max_new_tokens=160)
    summary = score(pae, tmp_path / "scores.jsonl", dataset=demo_built, progress=False)
    assert summary.scored == summary.total > 0 and summary.failed == 0
    result = agree(demo_built, tmp_path / "scores.jsonl", n_bootstrap=50)
    assert result["agreement"]["coverage"] > 0 and result["random_weights"]
    write_report(build_report(demo_built, scores=[tmp_path / "scores.jsonl"], n_bootstrap=50), tmp_path / "report")
    assert (tmp_path / "report" / "report.html").is_file()
    assert parse_answer("A lovely painting, full of feeling.", load_rubric("tang")).status == "failed"
