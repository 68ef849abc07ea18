"""What a second Ray worker buys `tpb score --engine ray`: images/s with 1 and with 2 workers of one CPU (one thread)
each, on a local Ray on the CPU, and their ratio, in one run.

    python benchmarks/ray_scaling.py [--images 96] [--workers 1,2] [--out ray_scaling.json]

The evaluator is PAE on the tiny random-weight Qwen3-VL, decoding constrained to the rubric's form (about 120 answer
tokens an image): the model's time dominates, as it does at scale, but the figures measure the engine's plumbing and
the machine's cores, never a judge. The images are synthetic (flat colours, 128×128). images/s is counted between the
first record and the last one the driver writes (the workers are up and their models loaded by then); the wall time
of the whole run, start-up included, is reported beside it.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import threading
import time
from pathlib import Path

from PIL import Image

from tangpoetrybench import __version__
from tangpoetrybench.judging.ray_scoring import RayEngine
from tangpoetrybench.judging.scoring import FolderSource
from tangpoetrybench.judging.tiny_models import build_tiny_models
from tangpoetrybench.poems import sample_poems, write_poems


def synthetic_folder(root: Path, n: int) -> FolderSource:
    """`n` synthetic images (flat colours), a poem each, under generator folders (`synthetic-k/`)."""
    poems = sample_poems()
    for i in range(n):
        folder = root / f"synthetic-{i // len(poems)}"
        folder.mkdir(parents=True, exist_ok=True)
        Image.new("RGB", (128, 128), (i * 37 % 256, 90, 200 - i * 11 % 200)).save(
            folder / f"{poems[i % len(poems)].poem_id}.png")
    poems_file = root / "poems.jsonl"
    write_poems(poems, poems_file)
    return FolderSource(root, poems_file)


def timed_run(workers: int, model: str, source: FolderSource, out: Path) -> dict:
    """One run's wall time and its images/s between the first and the last record written."""
    seen: list[tuple[float, int]] = []
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            lines = out.read_text().count("\n") if out.exists() else 0
            if lines and (not seen or lines != seen[-1][1]):
                seen.append((time.perf_counter(), lines))
            time.sleep(0.02)

    engine = RayEngine(workers=workers, worker_cpus=1)
    pae = engine.load_evaluator("pae", model=model, constrained=True)
    watcher = threading.Thread(target=watch)
    start = time.perf_counter()
    watcher.start()
    try:
        summary = engine.score_to_jsonl(pae, source, out, batch_size=1, progress=False)
    finally:
        done.set()
        watcher.join()
    wall = time.perf_counter() - start
    (first, n0), (last, n1) = seen[0], seen[-1]
    return {"workers": workers, "images": summary.scored, "wall_s": round(wall, 2),
            "images_per_s": round((n1 - n0) / (last - first), 3) if last > first else None}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--images", type=int, default=96)
    parser.add_argument("--workers", default="1,2", help="worker counts to run, comma separated")
    parser.add_argument("--out", type=Path, help="write the figures as JSON here")
    args = parser.parse_args()
    counts = [int(w) for w in args.workers.split(",")]

    import ray

    model = str(build_tiny_models(Path(tempfile.gettempdir()) / f"tpb-tiny-models-{__version__}")["qwen3-vl"])
    ray.init(address="local", num_cpus=max(counts) + 1, include_dashboard=False, log_to_driver=False)
    threads = ray.get(ray.remote(num_cpus=1)(lambda: __import__("torch").get_num_threads()).remote())
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        source = synthetic_folder(Path(tmp) / "images", args.images)
        for workers in counts:
            rows.append(timed_run(workers, model, source, Path(tmp) / f"scores-{workers}.jsonl"))
    ray.shutdown()
    base = rows[0]["images_per_s"]
    print(f"| workers | images | wall s | images/s | × {counts[0]} worker |\n|---|---|---|---|---|")
    for row in rows:
        row["ratio"] = round(row["images_per_s"] / base, 2) if base and row["images_per_s"] else None
        print(f"| {row['workers']} | {row['images']} | {row['wall_s']} | {row['images_per_s']} | {row['ratio']}× |")
    machine = {"platform": platform.platform(), "processor": platform.processor() or platform.machine(),
               "cpus": os.cpu_count(), "load_average": os.getloadavg(), "torch_threads_per_worker": threads,
               "date": time.strftime("%Y-%m-%d")}
    print(json.dumps(machine))
    if args.out:
        args.out.write_text(json.dumps({"rows": rows, "machine": machine}, indent=2) + "\n")


if __name__ == "__main__":
    main()
