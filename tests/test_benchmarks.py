"""The benchmark scripts keep working (their --smoke modes; figures from them are not asserted)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_score_throughput_smoke(tmp_path):
    out = tmp_path / "figures.json"
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "score_throughput.py"), "--smoke",
                           "--batch-sizes", "1,2", "--repeats", "1", "--out", str(out)],
                          capture_output=True, text=True, check=True)
    assert "| batch | prompt tokens | process s | prefill s | decode s | total s | images/s | × batch 1 |" in done.stdout
    assert '"smoke": true' in out.read_text()


def test_score_end_to_end_smoke(tmp_path):
    out = tmp_path / "figures.json"
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "score_throughput.py"), "--smoke", "--end-to-end",
                           "--batch-sizes", "1,2", "--images", "4", "--num-workers", "1", "--out", str(out)],
                          capture_output=True, text=True, check=True)
    assert "End to end (PNG files → JSONL)" in done.stdout
    figures = json.loads(out.read_text())
    assert figures["end_to_end"] is True and [r["images"] for r in figures["rows"]] == [4, 4]


def test_train_step_smoke(tmp_path):
    out = tmp_path / "figures.json"
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "train_step.py"), "--smoke", "--out", str(out)],
                          capture_output=True, text=True, check=True)
    assert "tokens_per_s" in done.stdout
    figures = json.loads(out.read_text())
    assert figures["smoke"] is True and figures["tokens_per_step"] > 0 and figures["mfu"] is None


@pytest.mark.slow
def test_ray_scaling_reports_both_sources_in_one_run(tmp_path):
    """1 and 2 workers from a folder and from a built dataset (4 synthetic images), each source's ratio to its own
    1-worker run, and the machine's load beside them."""
    out = tmp_path / "figures.json"
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "ray_scaling.py"), "--images", "4", "--workers",
                           "1,2", "--out", str(out)], capture_output=True, text=True, check=True)
    assert "| source | workers | images | load | wall s | records written in | images/s | × 1 worker |" in done.stdout
    figures = json.loads(out.read_text())
    assert [(r["source"], r["workers"], r["images"]) for r in figures["rows"]] == [
        ("folder", 1, 4), ("folder", 2, 4), ("dataset", 1, 4), ("dataset", 2, 4)]
    assert {"load_average_start", "load_average_end", "cpu", "cpus", "date"} <= set(figures["machine"])


def test_agreement_speed_runs():
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "agreement_speed.py"), "--poems", "20",
                           "--bootstrap", "200"], capture_output=True, text=True, check=True)
    assert "20 poems × 4 images, 200 resamples" in done.stdout


def test_the_full_size_architecture_is_qwen3_vl_8b():
    """The benchmarks' random-weight model, built on the meta device (no memory, no download), has the published
    parameter counts of Qwen3-VL-8B-Instruct (8.767B in all, 576.4M vision, 8.191B language model), and the FLOP
    count uses exactly its language model's matmul weights."""
    import torch

    sys.path.insert(0, str(ROOT / "benchmarks"))
    from _models import build_model, language_model_parameters, tiny_processor

    processor, tiny = tiny_processor()
    model = build_model(False, processor, tiny, torch.device("meta"))
    total = sum(p.numel() for p in model.parameters())
    vision = sum(p.numel() for name, p in model.named_parameters() if ".visual." in f".{name}")
    assert (round(total / 1e9, 3), round(vision / 1e6, 1), round((total - vision) / 1e9, 3)) == (8.767, 576.4, 8.191)
    matmuls = sum(m.weight.numel() for name, m in model.named_modules()
                  if isinstance(m, torch.nn.Linear) and ".visual." not in f".{name}.")
    assert language_model_parameters() == matmuls


def test_the_mfu_counts_a_lora_step():
    """With LoRA the frozen weights get no weight gradients: model FLOPs are 4N + 6A per token (6N would overstate MFU
    by half), and recomputation for activation checkpointing adds 2(N + A). A is the paper's r-16 adapter on the
    full-size architecture: 16 × (in + out) of the 7 projections of each of the 36 layers."""
    import torch
    from peft import LoraConfig, get_peft_model

    sys.path.insert(0, str(ROOT / "benchmarks"))
    from _models import build_model, language_model_parameters, tiny_processor
    from train_step import LORA, flops_per_token

    processor, tiny = tiny_processor()
    model = get_peft_model(build_model(False, processor, tiny, torch.device("meta")), LoraConfig(**LORA))
    adapter = sum(p.numel() for p in model.parameters() if p.requires_grad)
    h, i, kv = 4096, 12288, 8 * 128
    assert adapter == 36 * 16 * ((h + h) * 2 + (h + kv) * 2 + (h + i) * 2 + (i + h)) == 43_646_976
    n = language_model_parameters()
    assert flops_per_token(n, adapter, False) == (4 * n + 6 * adapter,) * 2
    assert flops_per_token(n, adapter, True) == (4 * n + 6 * adapter, 6 * n + 8 * adapter)


@pytest.mark.slow
def test_readout_speed_smoke(tmp_path):
    out = tmp_path / "readout_speed.json"
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / "readout_speed.py"), "--smoke", "--pixels", "64",
                    "--out", str(out)], capture_output=True, text=True, check=True)
    figures = json.loads(out.read_text())
    assert figures["smoke"] is True and [b["batch_size"] for b in figures["batches"]] == [1, 2]
    assert figures["forward_passes"]["readout"] == 11 and all(b["ratio_free"] > 0 for b in figures["batches"])


@pytest.mark.slow
def test_quantize_check_smoke(tmp_path):
    out = tmp_path / "quantize_check.json"
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / "quantize_check.py"), "--smoke", "--images", "2",
                    "--pixels", "64", "--out", str(out)], capture_output=True, text=True, check=True)
    settings = json.loads(out.read_text())["settings"]
    assert list(settings) == ["float32", "8bit", "4bit"]  # the CPU: bitsandbytes quantises there too
    assert settings["float32"]["weights_gib"] > settings["8bit"]["weights_gib"] > settings["4bit"]["weights_gib"]
    assert all(0 <= settings[q]["mean_abs_score_change"] <= 1 for q in ("8bit", "4bit"))
