"""Each QC rule (SPEC §4), its default, its override, and turning it off."""

import json

import pytest

from conftest import rating, write_release
from tangpoetrybench.dataset.builder import build_dataset
from tangpoetrybench.dataset.qc import QCConfig, run_qc
from tangpoetrybench.dataset.raw_release import read_release

IMAGES = ["g1/p1", "g1/p2", "g1/p3", "g1/p4", "g2/p1", "g2/p2", "g2/p3", "g2/p4"]


def release_with(tmp_path, ratings):
    return read_release(write_release(tmp_path / "raw", ratings, images=IMAGES))


def dropped(release, config=QCConfig()):
    return run_qc(release, config).dropped


def test_response_time_floor(tmp_path):
    release = release_with(tmp_path, [rating("r1", "u1", "g1", "p1", seconds=19.9),
                                      rating("r2", "u1", "g1", "p2", seconds=20)])
    assert dropped(release) == {"r1": ["response_time"]}
    assert dropped(release, QCConfig(min_seconds=30)) == {"r1": ["response_time"], "r2": ["response_time"]}
    assert dropped(release, QCConfig(min_seconds=None)) == {}


def test_straight_lining_needs_identical_answers_in_all_ratings(tmp_path):
    same = [rating(f"s{i}", "liner", g, p, "abaaaaaaaa") for i, (g, p) in
            enumerate([("g1", "p1"), ("g1", "p2"), ("g1", "p3"), ("g1", "p4"), ("g2", "p1")])]
    four = [rating(f"f{i}", "four", g, p, "aaaaaaaaab") for i, (g, p) in
            enumerate([("g1", "p1"), ("g1", "p2"), ("g1", "p3"), ("g1", "p4")])]
    varied = [rating(f"v{i}", "varied", g, p, "aaaaaaaaaa" if i else "aaaaaaaaab") for i, (g, p) in
              enumerate([("g1", "p1"), ("g1", "p2"), ("g1", "p3"), ("g1", "p4"), ("g2", "p1")])]
    release = release_with(tmp_path, same + four + varied)
    assert dropped(release) == {f"s{i}": ["straight_lining"] for i in range(5)}
    assert set(dropped(release, QCConfig(straightline_min_ratings=4))) == {f"s{i}" for i in range(5)} | {
        f"f{i}" for i in range(4)}
    assert dropped(release, QCConfig(straightline_min_ratings=None)) == {}


def test_phase1_accuracy_floor(tmp_path):
    # "guess": 5 answers, 1 right (0.2); "ok": 5 answers, 2 right (0.4, not below the floor);
    # "few": 4 answers, none right (too few to judge).
    pairs = [("g1", "p1"), ("g1", "p2"), ("g1", "p3"), ("g1", "p4"), ("g2", "p1")]
    guess = [rating(f"a{i}", "guess", g, p, "aaaaaaaaab" if i % 2 else "aaaaaaaaba", choice=p if i == 0 else ("p2" if p != "p2" else "p3"))
             for i, (g, p) in enumerate(pairs)]
    ok = [rating(f"b{i}", "ok", g, p, "aaaaaaaaba" if i % 2 else "aaaaaaaaab", choice=p if i < 2 else "p4" if p != "p4" else "p3")
          for i, (g, p) in enumerate(pairs)]
    few = [rating(f"c{i}", "few", g, p, "aaaaaaaaab" if i % 2 else "aaaaaaaaba", choice="p4" if p != "p4" else "p3")
           for i, (g, p) in enumerate(pairs[:4])]
    release = release_with(tmp_path, guess + ok + few)
    assert dropped(release) == {f"a{i}": ["phase1_accuracy"] for i in range(5)}
    assert set(dropped(release, QCConfig(phase1_min_accuracy=0.5))) == {f"a{i}" for i in range(5)} | {
        f"b{i}" for i in range(5)}
    assert set(dropped(release, QCConfig(phase1_min_answers=4))) == {f"a{i}" for i in range(5)} | {
        f"c{i}" for i in range(4)}
    assert dropped(release, QCConfig(phase1_min_answers=None)) == {}


def test_consistency_rule(tmp_path):
    release = release_with(tmp_path, [rating("r1", "u1", "g1", "p1", "aaaaaaadaa"),   # overall a, core d
                                      rating("r2", "u2", "g1", "p2", "aaaaaaadab"),   # overall b, core d: fine
                                      rating("r3", "u3", "g1", "p3", "aaaaaaacaa")])  # overall a, core c: fine
    assert dropped(release) == {"r1": ["consistency"]}
    assert dropped(release, QCConfig(consistency=False)) == {}


def test_several_reasons_and_report(tmp_path):
    raw = write_release(tmp_path / "raw", [rating("r1", "u1", "g1", "p1", "aaaaaaadaa", seconds=3),
                                           rating("r2", "u2", "g1", "p2")], images=IMAGES)
    result = run_qc(read_release(raw))
    assert result.dropped == {"r1": ["response_time", "consistency"]}
    assert [r.rating_id for r in result.kept] == ["r2"]
    assert result.report["by_rule"] == {"response_time": 1, "straight_lining": 0, "phase1_accuracy": 0, "consistency": 1}
    assert result.report["dropped"][0] == {"rating_id": "r1", "rater_id": "u1", "image_id": "g1/p1", "line": 2,
                                           "reasons": ["response_time", "consistency"]}
    assert run_qc(read_release(raw), QCConfig.off()).dropped == {}

    out = build_dataset(raw, tmp_path / "ds", progress=False).out
    report = json.loads((out / "qc_report.json").read_text())
    assert report["qc_enabled"] and report["n_kept"] == 1 and report["config"]["min_seconds"] == 20.0
    no_qc = build_dataset(raw, tmp_path / "ds_noqc", qc=None, progress=False).out
    report = json.loads((no_qc / "qc_report.json").read_text())
    assert not report["qc_enabled"] and report["n_kept"] == 2 and report["dropped"] == []
    assert "turned off" in (no_qc / "README.md").read_text()


@pytest.mark.parametrize("flag,value,expect", [("--qc-min-seconds", "off", 2), ("--qc-min-seconds", "2", 2),
                                               ("--qc-min-seconds", "20", 1)])
def test_cli_overrides(tmp_path, flag, value, expect):
    from tangpoetrybench.cli import main

    raw = write_release(tmp_path / "raw", [rating("r1", "u1", "g1", "p1", seconds=3),
                                           rating("r2", "u2", "g1", "p2")], images=IMAGES)
    assert main(["build", str(raw), str(tmp_path / "ds"), flag, value, "--quiet"]) == 0
    assert json.loads((tmp_path / "ds" / "qc_report.json").read_text())["n_kept"] == expect
