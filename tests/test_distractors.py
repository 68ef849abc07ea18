"""Phase-1 distractors: valid, deterministic, compatible with a raw release, and giving no text-only cue."""

from __future__ import annotations

import csv
import json
import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from tangpoetrybench.cli import main
from tangpoetrybench.dataset.distractors import (
    choose_distractors, han_text, read_candidates, run_distractors, tfidf_similarity, write_candidates,
)
from tangpoetrybench.dataset.raw_release import read_release
from tangpoetrybench.errors import DataError
from tangpoetrybench.poems import convert_chinese_poetry, sample_poems

from conftest import SHARED

TANG300 = SHARED / "data" / "poems" / "tang300.jsonl"
SONGCI = SHARED / "data" / "poems" / "songci_busuanzi.jsonl"


@pytest.fixture(scope="module")
def real_poems():
    if not TANG300.is_file() or not SONGCI.is_file():
        pytest.skip("the real poems (../shared/data/poems) are not on this machine")
    return convert_chinese_poetry(TANG300) + convert_chinese_poetry(SONGCI)


def check_valid(sets, poems, same_tradition=True):
    by_id = {p.poem_id: p for p in poems}
    assert [s.poem_id for s in sets] == [p.poem_id for p in poems]
    for s in sets:
        assert len(s.candidates) == 4 and len(set(s.candidates)) == 4 and s.poem_id in s.candidates
        assert s.poem_id not in {d.poem_id for d in s.distractors}
        texts = [han_text(by_id[c]) for c in s.candidates]
        assert len(set(texts)) == 4, f"a duplicate text among {s.candidates}"
        if same_tradition and s.pool in ("form", "tradition"):
            assert {by_id[c].tradition for c in s.candidates} == {by_id[s.poem_id].tradition}
        if s.pool == "form":
            assert {by_id[c].form for c in s.candidates} == {by_id[s.poem_id].form}


def test_tfidf_similarity_by_hand():
    # "ab" and "ac": unigrams a, b, c and bigrams ab, ac; n = 2 documents.
    sim = tfidf_similarity(["ab", "ac"])
    idf_shared, idf_own = 1.0, math.log(3 / 2) + 1
    # shared: a (idf 1); own: b, ab (doc 1) and c, ac (doc 2), each with tf 1
    expected = idf_shared**2 / (idf_shared**2 + 2 * idf_own**2)
    assert sim[0, 1] == pytest.approx(expected) and sim[1, 0] == pytest.approx(expected)
    assert np.diag(sim) == pytest.approx([1.0, 1.0])


def test_sample_sets_are_valid_and_deterministic():
    poems = sample_poems()
    a = choose_distractors(poems, seed=0)
    check_valid(a, poems)
    assert a == choose_distractors(poems, seed=0)
    b = choose_distractors(poems, seed=0, method="neighbours")
    check_valid(b, poems)
    assert b == choose_distractors(poems, seed=0, method="neighbours")


def test_duplicates_and_near_duplicates_never_share_a_set():
    poems = sample_poems()
    twin = replace(poems[0], poem_id="twin-of-first")  # the same text under another id
    variant = replace(poems[1], poem_id="variant-of-second", text=poems[1].text.replace("。", "，", 1) + "啊")
    corpus = poems + [twin, variant]
    for method in ("groups", "neighbours"):
        sets = {s.poem_id: s for s in choose_distractors(corpus, seed=3, method=method)}
        check_valid(list(sets.values()), corpus)
        assert "twin-of-first" not in sets[poems[0].poem_id].candidates
        assert poems[0].poem_id not in sets["twin-of-first"].candidates
        assert "variant-of-second" not in sets[poems[1].poem_id].candidates


def test_a_corpus_too_small_is_refused():
    with pytest.raises(DataError, match="at least four different poems"):
        choose_distractors(sample_poems()[:3])


def test_real_poems_valid_deterministic_and_no_text_only_cue(real_poems):
    for same_form in (False, True):
        run = run_distractors(real_poems, seed=0, same_form=same_form)
        check_valid(run.sets, real_poems)
        assert sum(s.pool == "leftover" for s in run.sets) < 4
        # Distractors are far more similar to their poem than a random poem of its tradition is.
        assert run.distribution["all_distractors"]["q50"] > 2 * run.distribution["random_same_tradition_pair"]["q50"]
        for name, baseline in run.baselines.items():
            assert baseline["p_above_chance"] > 0.05, (same_form, name, baseline)
            assert baseline["interval"][0] < 0.25 < baseline["interval"][1] + 0.02, (name, baseline)
    assert choose_distractors(real_poems, seed=0) == run_distractors(real_poems, seed=0).sets
    assert choose_distractors(real_poems, seed=1) != choose_distractors(real_poems, seed=0)


def test_nearest_neighbours_give_the_answer_away(real_poems):
    """The check can fail: with each poem's nearest neighbours the answer is its set's centre."""
    run = run_distractors(real_poems, seed=0, method="neighbours")
    check_valid(run.sets, real_poems)
    assert run.baselines["centroid"]["p_above_chance"] < 0.01
    assert run.baselines["surface_classifier"]["accuracy"] > 0.35


def test_sample_has_no_text_only_cue():
    run = run_distractors(sample_poems(), seed=0)
    for name, baseline in run.baselines.items():
        assert baseline["p_above_chance"] > 0.05, (name, baseline)


def test_candidates_go_into_a_raw_release(demo_raw, tmp_path):
    """A new campaign starts from the same candidates a model sees: they fill ratings.csv's phase1_candidates."""
    import shutil

    raw = tmp_path / "raw"
    shutil.copytree(demo_raw, raw)
    poems = [p for p in read_release(raw).poems.values()]
    sets = {s.poem_id: s for s in choose_distractors(poems, seed=0)}
    with open(raw / "ratings.csv", encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f))
    for row in rows:
        row["phase1_candidates"] = sets[row["poem_id"]].phase1_candidates
        row["phase1_choice"] = row["poem_id"] if row["phase1_choice"] else ""
    with open(raw / "ratings.csv", "w", encoding="utf-8", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]), lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    release = read_release(raw)
    assert {r.phase1_candidates for r in release.ratings} == {tuple(sets[r.poem_id].candidates)
                                                            for r in release.ratings}


def test_cli_writes_a_file_the_judge_reads(tmp_path, capsys):
    out = tmp_path / "candidates.jsonl"
    assert main(["distractors", str(Path("tangpoetrybench/data/sample_poems.jsonl")), "--out", str(out),
                 "--report", str(tmp_path / "report.json"), "--same-form"]) == 0
    printed = capsys.readouterr().out
    assert "text-only baseline" in printed and "surface_classifier" in printed
    candidates = read_candidates(out)
    poems = {p.poem_id: p for p in sample_poems()}
    assert set(candidates) == set(poems)
    for pid, four in candidates.items():
        assert pid in [p.poem_id for p in four]
        assert all(p.text == poems[p.poem_id].text for p in four)
    report = json.loads((tmp_path / "report.json").read_text(encoding="utf-8"))
    assert report["method"]["same_form"] is True and report["n_poems"] == len(poems)

    lines = out.read_text(encoding="utf-8").splitlines()
    broken = json.loads(lines[1])
    broken["candidates"] = broken["candidates"][:3]
    (tmp_path / "bad.jsonl").write_text("\n".join([lines[0], json.dumps(broken), "{oops"]) + "\n", encoding="utf-8")
    with pytest.raises(DataError) as err:
        read_candidates(tmp_path / "bad.jsonl")
    assert "bad.jsonl:2" in str(err.value) and "bad.jsonl:3" in str(err.value)


def test_embedding_model_path(tmp_path):
    """The embedding path runs a real (tiny, random) transformers text model: plumbing only."""
    import torch
    from transformers import BertConfig, BertModel, BertTokenizer

    poems = sample_poems()
    chars = sorted({c for p in poems for c in p.text if not c.isspace()})
    (tmp_path / "vocab.txt").write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + chars) + "\n",
                                        encoding="utf-8")
    torch.manual_seed(0)
    BertTokenizer(vocab=str(tmp_path / "vocab.txt")).save_pretrained(tmp_path / "bert")
    BertModel(BertConfig(vocab_size=len(chars) + 5, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                         intermediate_size=32, max_position_embeddings=128)).save_pretrained(tmp_path / "bert")
    run = run_distractors(poems, seed=0, embedding_model=str(tmp_path / "bert"))
    check_valid(run.sets, poems)
    assert run.method["similarity"] == "embedding" and run.method["model"] == str(tmp_path / "bert")
    with pytest.raises(FileNotFoundError):
        run_distractors(poems, embedding_model=str(tmp_path / "missing"))


def test_written_file_is_stable(tmp_path):
    poems = sample_poems()
    run = run_distractors(poems, seed=5)
    a = write_candidates(run.sets, poems, tmp_path / "a.jsonl", run.method).read_bytes()
    b = write_candidates(run_distractors(poems, seed=5).sets, poems, tmp_path / "b.jsonl", run.method).read_bytes()
    assert a == b
