"""What the commands print: no library progress bars under --quiet, a repeated library warning once, a hint when
no answer of a run could be read, and sentences in the number's form."""

import json
import os
import subprocess
import sys

from tangpoetrybench.cli import main
from tangpoetrybench.dataset.reading import dataset_rows
from tangpoetrybench.numeric import ZERO_WIDTH_NOTE, counted
from tangpoetrybench.poems import sample_poems, write_poems
from tangpoetrybench.rubric import rubric_for_tradition


def test_generate_under_quiet_warns_of_clip_truncation_once(tiny_models, tmp_path):
    """A real console (a process of its own): the tiny pipeline's CLIP reads 77 tokens of the ~250-token prompt."""
    poems = tmp_path / "poems.jsonl"
    write_poems(sample_poems()[:3], poems)
    done = subprocess.run([sys.executable, "-m", "tangpoetrybench.cli", "generate", "--pipeline",
                           str(tiny_models["text-to-image"]), "--poems", str(poems), "--out", str(tmp_path / "new"),
                           "--generator", "tiny", "--steps", "1", "--height", "64", "--width", "64", "--quiet"],
                          capture_output=True, text=True, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert done.returncode == 0, done.stderr
    assert done.stderr.count("was truncated because CLIP can only handle") == 1, done.stderr
    assert "Loading weights" not in done.stderr and "Loading pipeline components" not in done.stderr
    assert "FutureWarning" not in done.stderr, done.stderr


def test_a_run_whose_every_answer_failed_says_what_to_try(tiny_models, demo_built, tmp_path, capfd):
    """The zero-shot tiny model, unconstrained and cut to 4 tokens, answers noise with no JSON in it: the advice
    follows from that (not a longer answer, which would not read either)."""
    out = tmp_path / "s.jsonl"
    assert main(["score", "--dataset", str(demo_built), "--evaluator", "pae", "--model", str(tiny_models["qwen3-vl"]),
                 "--max-new-tokens", "4", "--limit", "2", "--out", str(out), "--quiet"]) == 0
    err = capfd.readouterr().err
    assert f"WARNING: all 2 answers of this run failed (see their `error` in {out}): none of them holds a JSON " \
           "object (e.g. '" in err
    assert "a longer answer would not read either. Try --constrained" in err and "--adapter" in err
    assert "A random-weight test model answers noise" in err and "--max-new-tokens" not in err
    assert "Loading weights" not in err


def test_the_advice_follows_from_what_the_failed_answers_looked_like():
    from tangpoetrybench.judging.failures import FailedAnswer, every_answer_failed

    cut = [FailedAnswer.of('{"safety": 1.0, "technical_qua', "the answer was cut off: 1 of 10 keys", {"completion_tokens": 8},
                           8)] * 3
    assert every_answer_failed(3, cut, "s.jsonl", ["--constrained"]).endswith(
        ": 3 of the 3 looked at stopped at the length limit in the middle of the answer (e.g. '{\"safety\": 1.0, "
        '"technical_qua\'). Give a larger --max-new-tokens.')
    noise = [FailedAnswer.of("有恨无人省 Judge", "no JSON object", {"completion_tokens": 8}, 8)]
    assert "none of them holds a JSON object (e.g. '有恨无人省 Judge')" in every_answer_failed(1, noise, "s", ["X"])
    assert FailedAnswer.of(["first", "repair"], None, None, None).text == "first"  # a pair order's raw answers
    other = [FailedAnswer.of('{"quality": "high"}', "no key matches a rubric dimension", {"completion_tokens": 9}, 256)]
    assert ("they hold JSON, but not in the answer's form (e.g. '{\"quality\": \"high\"}': no key matches a rubric "
            "dimension). Try a model.") in every_answer_failed(1, other, "s", ["a model"])
    empty = [FailedAnswer.of("", "empty answer", {"completion_tokens": 0}, 256)] * 2
    assert "every answer was empty, so the model stopped at once" in every_answer_failed(2, empty, "s")


def test_wording_and_zero_width_intervals(demo_built, tmp_path, capsys):
    assert (counted(1, "poem"), counted(2, "poem"), counted(1, "region"), counted(0, "region")) == (
        "1 poem", "2 poems", "1 region", "0 regions")
    keys = list(rubric_for_tradition("tang").keys)
    scores = tmp_path / "human.jsonl"  # SYNTHETIC: the human scores as predictions, so every coverage is 1
    scores.write_text("".join(json.dumps({"image_id": r["image_id"], "evaluator": "pae", "model": "synthetic",
                                          "scores": {k: r[k] for k in keys}, "quality": r["quality"],
                                          "parse_status": "ok"}) + "\n"
                              for r in dataset_rows(demo_built, "images", "test", ["image_id", "quality", *keys])))
    assert main(["agree", "--dataset", str(demo_built), "--scores", str(scores), "--bootstrap", "50"]) == 0
    out = capsys.readouterr().out
    coverage = next(line for line in out.splitlines() if line.startswith("coverage"))
    assert "‡" in coverage and ZERO_WIDTH_NOTE in out  # every resample covers every image: a zero-width interval
    assert "poems)" in out and "(1 poems)" not in out
    assert "rated images" in out and "rated more than once" in out and " of 12 rated" not in out


def test_a_warning_of_the_package_is_one_plain_line(tmp_path):
    """`tpb demo-release` without a Chinese font says so in one sentence on stderr: no Python warning with its source
    file and line (a real console: a process of its own)."""
    done = subprocess.run([sys.executable, "-m", "tangpoetrybench.cli", "demo-release", str(tmp_path / "raw"),
                           "--poems", "2", "--size", "64", "--quiet"], capture_output=True, text=True,
                          env={**os.environ, "TPB_CJK_FONT": "none"})
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines() == [
        "warning: no Chinese font is installed, so the planted text is drawn as stroke patterns an OCR cannot read "
        "(install fonts-noto-cjk to draw real characters)"]


def test_every_warning_the_package_gives_is_a_notice():
    """The package warns its user only with `errors.Notice`, which the command line says in one plain line; a
    `warnings.warn` of another category would print Python's form (the source file, line and code)."""
    import ast
    from pathlib import Path

    import tangpoetrybench

    found = []
    for path in Path(tangpoetrybench.__file__).parent.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and ast.unparse(node.func) == "warnings.warn":
                category = node.args[1] if len(node.args) > 1 else next(
                    (k.value for k in node.keywords if k.arg == "category"), None)
                if category is None or ast.unparse(category) != "Notice":
                    found.append(f"{path.name}:{node.lineno}")
    assert found == []


def test_the_command_line_says_a_notice_plainly_and_leaves_other_warnings_alone():
    script = ("import warnings; from tangpoetrybench.cli import say_notices; from tangpoetrybench.errors import Notice; "
              "say_notices(); warnings.warn('a fit did not converge', Notice); "
              "warnings.warn(\"a library's own word\", UserWarning)")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0 and done.stderr.startswith("warning: a fit did not converge\n"), done.stderr
    assert "UserWarning: a library's own word" in done.stderr  # Python's form: not the package's to reword


def test_the_advice_follows_from_what_the_backend_can_do():
    """--constrained is advised only where the backend holds decoding to a form (not vLLM's, which is asked for the
    schema already), the adapter only to a rubric judge that takes one; a served judge is advised another model."""
    from argparse import Namespace

    from tangpoetrybench.cli.base import what_to_try

    assert what_to_try(Namespace(evaluator="pae", backend=None)) == [
        "--constrained (decoding held to the answer's JSON form)", "a PAE adapter (--adapter)"]
    assert what_to_try(Namespace(evaluator="pae", backend="vllm")) == ["a PAE adapter (--adapter)"]
    assert what_to_try(Namespace(evaluator="recognize", backend=None)) == []
    assert what_to_try(Namespace(evaluator="api", backend=None))[0].startswith("a model that follows")
