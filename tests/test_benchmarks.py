"""The benchmark scripts keep working (their --smoke modes; figures from them are not asserted)."""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_score_throughput_smoke(tmp_path):
    out = tmp_path / "figures.json"
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "score_throughput.py"), "--smoke",
                           "--batch-sizes", "1,2", "--repeats", "1", "--out", str(out)],
                          capture_output=True, text=True, check=True)
    assert "| batch | prompt tokens | process s | prefill s | decode s | total s | images/s | × batch 1 |" in done.stdout
    assert '"smoke": true' in out.read_text()


def test_train_step_smoke(tmp_path):
    out = tmp_path / "figures.json"
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "train_step.py"), "--smoke", "--out", str(out)],
                          capture_output=True, text=True, check=True)
    assert "tokens_per_s" in done.stdout
    figures = json.loads(out.read_text())
    assert figures["smoke"] is True and figures["tokens_per_step"] > 0 and figures["mfu"] is None


def test_agreement_speed_runs():
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "agreement_speed.py"), "--poems", "20",
                           "--bootstrap", "200"], capture_output=True, text=True, check=True)
    assert "20 poems × 4 images, 200 resamples" in done.stdout
