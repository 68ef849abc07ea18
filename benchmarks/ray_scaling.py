"""What a second Ray worker buys `tpb score --engine ray`, from a folder of images and from a built dataset: images/s
with 1 and with 2 workers of one CPU (one thread) each, on a local Ray on the CPU, and their ratio, in one run.

    python benchmarks/ray_scaling.py [--images 96] [--workers 1,2] [--out ray_scaling.json]

The same synthetic images (flat colours, 128×128) are scored from both sources: a folder of `generator/poem.png`
files (`--images DIR --poems FILE`) and a built dataset's split stored as one Parquet file with the images embedded
(`--dataset DIR`; the form `tpb build` writes, here holding only the columns scoring reads). The evaluator is PAE on
the tiny random-weight Qwen3-VL, decoding constrained to the rubric's form (about 120 answer tokens an image): the
model's time dominates, as it does at scale, but the figures measure the engine's plumbing and the machine's cores,
never a judge. images/s is counted between the first record and the last one the driver writes (the workers are up
and their models loaded by then); the wall time of the whole run, start-up included, is reported beside it. The
machine's load averages at the start and the end, its CPU model and the date are printed and written with the
figures: on a shared machine they say how much of a core each worker had.
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
from tangpoetrybench.judging.scoring import ROW_COLUMNS, DatasetSource, FolderSource, Source
from tangpoetrybench.judging.tiny_models import build_tiny_models
from tangpoetrybench.poems import sample_poems, write_poems

SYNTHETIC_CARD = """---
configs:
- config_name: images
  data_files:
  - split: test
    path: data/images/test-00000-of-00001.parquet
---
SYNTHETIC images (flat colours) for benchmarks/ray_scaling.py: no dataset, no ratings.
"""


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


def synthetic_dataset(folder: FolderSource, root: Path) -> DatasetSource:
    """The folder's images as a built dataset's test split in one Parquet file, each image's bytes embedded."""
    import datasets

    rows = [{**row, "image": {"bytes": (Path(folder.root) / row["image"]["path"]).read_bytes(),
                              "path": row["image"]["path"]}} for row in folder.rows()]
    features = datasets.Features({**{c: datasets.Value("string") for c in ROW_COLUMNS if c != "image"},
                                  "image": datasets.Image()})
    (root / "data" / "images").mkdir(parents=True)
    datasets.Dataset.from_list(rows, features=features).to_parquet(
        str(root / "data" / "images" / "test-00000-of-00001.parquet"))
    (root / "README.md").write_text(SYNTHETIC_CARD, encoding="utf-8")
    return DatasetSource(root, "images", "test")


def timed_run(workers: int, model: str, source: Source, out: Path) -> dict:
    """One run's wall time and its images/s between the first and the last record written (the file watched every
    20 ms, reading only what was appended since), with the machine's 1-minute load average as the run starts."""
    seen: list[tuple[float, int]] = []
    done = threading.Event()

    def watch() -> None:
        lines, reader = 0, None
        while not done.is_set():
            if reader is None and out.exists():
                reader = open(out, "rb")
            if reader is not None and (grown := reader.read().count(b"\n")):
                lines += grown
                seen.append((time.perf_counter(), lines))
            time.sleep(0.02)
        if reader is not None:
            reader.close()

    engine = RayEngine(workers=workers, worker_cpus=1)
    pae = engine.load_evaluator("pae", model=model, constrained=True)
    watcher = threading.Thread(target=watch)
    load = os.getloadavg()[0]
    start = time.perf_counter()
    watcher.start()
    try:
        summary = engine.score_to_jsonl(pae, source, out, batch_size=1, progress=False)
    finally:
        done.set()
        watcher.join()
    wall = time.perf_counter() - start
    (first, n0), (last, n1) = seen[0], seen[-1]
    return {"source": "dataset" if isinstance(source, DatasetSource) else "folder", "workers": workers,
            "images": summary.scored, "load": round(load, 2), "wall_s": round(wall, 2), "writes": len(seen),
            "images_per_s": round((n1 - n0) / (last - first), 3) if last > first else None}


def cpu_model() -> str:
    """The CPU's model name (Linux's /proc/cpuinfo), else what the platform says."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--images", type=int, default=96)
    parser.add_argument("--workers", default="1,2", help="worker counts to run, comma separated")
    parser.add_argument("--out", type=Path, help="write the figures as JSON here")
    args = parser.parse_args()
    counts = [int(w) for w in args.workers.split(",")]

    import ray

    load_before = os.getloadavg()
    model = str(build_tiny_models(Path(tempfile.gettempdir()) / f"tpb-tiny-models-{__version__}")["qwen3-vl"])
    # one CPU a worker, and one for Ray Data to read the dataset's Parquet file
    ray.init(address="local", num_cpus=max(counts) + 1, include_dashboard=False, log_to_driver=False)
    threads = ray.get(ray.remote(num_cpus=1)(lambda: __import__("torch").get_num_threads()).remote())
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = synthetic_folder(Path(tmp) / "images", args.images)
        sources = [folder, synthetic_dataset(folder, Path(tmp) / "dataset")]
        for source in sources:
            for workers in counts:
                name = "dataset" if isinstance(source, DatasetSource) else "folder"
                rows.append(timed_run(workers, model, source, Path(tmp) / f"scores-{name}-{workers}.jsonl"))
    ray.shutdown()
    print(f"| source | workers | images | load | wall s | records written in | images/s | × {counts[0]} worker |\n"
          "|---|---|---|---|---|---|---|---|")
    for row in rows:
        base = next(r["images_per_s"] for r in rows if r["source"] == row["source"])
        row["ratio"] = round(row["images_per_s"] / base, 2) if base and row["images_per_s"] else None
        print(f"| {row['source']} | {row['workers']} | {row['images']} | {row['load']} | {row['wall_s']} | "
              f"{row['writes']} writes | "
              f"{row['images_per_s']} | {row['ratio']}× |")
    machine = {"platform": platform.platform(), "cpu": cpu_model(), "cpus": os.cpu_count(),
               "load_average_start": [round(x, 2) for x in load_before],
               "load_average_end": [round(x, 2) for x in os.getloadavg()], "torch_threads_per_worker": threads,
               "date": time.strftime("%Y-%m-%d %H:%M")}
    print(json.dumps(machine))
    if args.out:
        args.out.write_text(json.dumps({"rows": rows, "machine": machine}, indent=2) + "\n")


if __name__ == "__main__":
    main()
