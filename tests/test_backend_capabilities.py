"""Backends are asked what they can do, never what they are called: a backend defined outside the package (the
transformers backend under another name, in a module of its own) and registered with one row runs PAE's constrained
rubric task, the probability readout and the letter task, its records as the transformers backend's would be. Real
tiny models (random weights, the tiny PAE trained in conftest): plumbing only."""

from __future__ import annotations

import pytest

from conftest import tiny_pae_items, tiny_pae_targets
from tangpoetrybench.dataset.distractors import choose_distractors, write_candidates
from tangpoetrybench.judging.backends import BACKENDS, BackendRow, load_backend
from tangpoetrybench.judging.evaluators import load_evaluator
from tangpoetrybench.judging.prompt import format_answer
from tangpoetrybench.judging.registry import chosen_backend
from tangpoetrybench.poems import sample_poems
from tangpoetrybench.rubric import load_rubric

EXTERNAL = '''"""A backend of a plugin author's own: the transformers backend under another name."""

from tangpoetrybench.judging.backends.transformers import TransformersBackend


class LocalQwen(TransformersBackend):
    name = "local-qwen"
'''


@pytest.fixture
def local_qwen(tmp_path, monkeypatch) -> str:
    """The module written outside the package, importable, and its one row in `BACKENDS`."""
    (tmp_path / "tpb_external_backend.py").write_text(EXTERNAL, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(BACKENDS, "local-qwen", BackendRow("tpb_external_backend:LocalQwen",
                                                           "a local Qwen3-VL under another name"))
    return "local-qwen"


@pytest.fixture(scope="module")
def candidates(tmp_path_factory):
    poems = sample_poems()
    return write_candidates(choose_distractors(poems, seed=0), poems,
                            tmp_path_factory.mktemp("cand") / "candidates.jsonl", {"seed": 0})


def test_a_backend_outside_the_package_runs_constrained_scores_the_readout_and_the_letter(
        local_qwen, tiny_models, tiny_pae, candidates):
    model, adapter = str(tiny_models["qwen3-vl"]), str(tiny_pae)
    tang, items = load_rubric("tang"), tiny_pae_items()
    assert chosen_backend("pae", {"backend": local_qwen}).constrains  # what the registry asks, by capability
    constrained = load_evaluator("pae", backend=local_qwen, model=model, adapter=adapter, constrained=True,
                                 device="cpu").score(items)
    read = load_evaluator("pae", backend=local_qwen, model=model, adapter=adapter, readout="expected",
                          device="cpu").score(items)
    for c, r, target in zip(constrained, read, tiny_pae_targets(tang)):
        assert c.settings["backend"] == r.settings["backend"] == local_qwen and c.settings["constrained"] is True
        assert c.parse_status == r.parse_status == "ok" and c.raw_output == r.raw_output == format_answer(target, tang)
        assert r.readout is not None and r.settings["readout"] == "expected"
    letter = load_evaluator("recognize", backend=local_qwen, model=model, candidates=candidates, device="cpu")
    [result] = letter.score(items[:1])
    assert result.settings["backend"] == local_qwen and result.settings["readout"] == "letter-logits"
    assert len(result.evidence["letter_probs"]) == 4 and result.evidence["p_correct"] is not None


def test_a_served_backend_says_it_is_served_after_listing_the_models():
    """`served` is the capability (a class attribute); the models a server lists are kept apart from it."""
    backend = load_backend("api", model="m", base_url="http://127.0.0.1:9/v1")
    backend.listed = ["m"]
    assert backend.served is True and backend.reads_choices is None and not backend.constrains


def test_a_backend_is_recorded_under_the_row_it_was_chosen_by(tmp_path, monkeypatch, tiny_models):
    """A subclass that inherits its parent's `name`, registered under a row of its own, is recorded as that row (its
    records said "transformers", so a resume or the leaderboard could not tell the two apart)."""
    (tmp_path / "tpb_inheriting_backend.py").write_text(
        "from tangpoetrybench.judging.backends.transformers import TransformersBackend\n\n\n"
        "class Ink(TransformersBackend):\n    pass\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(BACKENDS, "ink", BackendRow("tpb_inheriting_backend:Ink", "inherits its name"))
    [result] = load_evaluator("pae", backend="ink", model=str(tiny_models["qwen3-vl"]), constrained=True,
                              device="cpu").score(tiny_pae_items()[:1])
    assert result.settings["backend"] == "ink"
    assert load_backend("transformers", model=str(tiny_models["qwen3-vl"]), device="cpu").name == "transformers"
