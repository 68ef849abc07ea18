"""How long the builder takes on a benchmark-sized release, and how long loading the result takes.

    python benchmarks/build_speed.py                       # 320 poems × 4 generators, 512×512
    python benchmarks/build_speed.py --poems-file my_poems.jsonl --size 1024

Makes a synthetic release (the 320 poems of Three Hundred Tang Poems from ../shared, converted, or any
poems file), then times `build_dataset` and a cold and a warm `load_dataset(OUT, "images")`, each
with a fresh cache. Targets (issue 2): build < 60 s and load < 5 s on the 2-core development machine.
"""

from __future__ import annotations

import argparse
import json
import platform
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import datasets

from tangpoetrybench.dataset.builder import build_dataset
from tangpoetrybench.dataset.synthetic import write_demo_release
from tangpoetrybench.poems import convert_chinese_poetry, read_poems

SHARED_TANG = Path(__file__).resolve().parents[2] / "shared" / "data" / "poems" / "tang300.jsonl"


@dataclass
class Args:
    poems_file: Path | None
    size: int
    workdir: Path | None
    out: Path | None


def parse_args() -> Args:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--poems-file", type=Path, help="a poems file (default: the 320 Tang poems in ../shared)")
    p.add_argument("--size", type=int, default=512, help="image side in pixels")
    p.add_argument("--workdir", type=Path, help="where to write the release and dataset (default: a temp dir)")
    p.add_argument("--out", type=Path, help="write the figures as JSON here")
    return Args(**vars(p.parse_args()))


def timed(fn, *args, **kwargs):
    start = time.perf_counter()
    result = fn(*args, **kwargs)
    return result, time.perf_counter() - start


def main() -> None:
    args = parse_args()
    if args.poems_file:
        poems = read_poems(args.poems_file)
    elif SHARED_TANG.is_file():
        poems = convert_chinese_poetry(SHARED_TANG)
    else:
        raise SystemExit(f"no poems: pass --poems-file (the default {SHARED_TANG} is absent)")
    work = args.workdir or Path(tempfile.mkdtemp(prefix="tpb-bench-"))
    raw, out = work / "raw", work / "dataset"
    _, t_demo = timed(write_demo_release, raw, poems, size=args.size, overwrite=True)
    summary, t_build = timed(build_dataset, raw, out, overwrite=True)
    n_images = sum(sum(s.values()) for c, s in summary.rows.items() if c in ("images", "song_ci", "unseen_generator"))
    size_mb = sum(p.stat().st_size for p in (raw / "images").rglob("*") if p.is_file()) / 2**20
    _, t_cold = timed(datasets.load_dataset, str(out), "images", cache_dir=str(work / "cache"))
    _, t_warm = timed(datasets.load_dataset, str(out), "images", cache_dir=str(work / "cache"))
    figures = {
        "date": time.strftime("%Y-%m-%d"), "machine": f"{platform.processor() or platform.machine()}, "
        f"{__import__('os').cpu_count()} cores", "poems": len(poems), "images": n_images, "image_size": args.size,
        "images_mb": round(size_mb), "demo_release_s": round(t_demo, 1), "build_s": round(t_build, 1),
        "load_images_cold_s": round(t_cold, 2), "load_images_warm_s": round(t_warm, 2),
    }
    print("\n" + "\n".join(f"{k:>20}: {v}" for k, v in figures.items()))
    print(f"\nbuild {'meets' if t_build < 60 else 'MISSES'} the 60 s target; "
          f"cold load {'meets' if t_cold < 5 else 'MISSES'} the 5 s target")
    if args.out:
        args.out.write_text(json.dumps(figures, indent=1) + "\n")


if __name__ == "__main__":
    main()
