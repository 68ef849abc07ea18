"""The text-ocr evaluator on the synthetic demo release: precision and recall of each issue type against the
planted labels, and images per second on this machine.

    python benchmarks/ocr_text.py                      # 100 of the 320 Tang poems (../shared), seed 0, 512×512
    python benchmarks/ocr_text.py --poems 320 --size 1024
    python benchmarks/ocr_text.py --raw my_release     # any raw release with a text_labels.csv

Makes a demo release (planted text drawn with the installed Chinese font; without one the planted text is stroke
patterns, which the OCR is not meant to read, and the script stops), scores every labelled image with
`load_evaluator("text-ocr")` in one process, and prints the agreement table (the same computation as
`tpb report --ocr`), the verdicts per planted label, and the OCR's throughput (decoding the files not counted).
Synthetic images: the figures measure the OCR on this painter's planted text, not on real generators' images.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import time
from collections import Counter
from importlib.metadata import version
from pathlib import Path

from PIL import Image
from tqdm.auto import tqdm

from tangpoetrybench.dataset.synthetic import write_demo_release
from tangpoetrybench.judging.evaluators import ScoringItem, load_evaluator
from tangpoetrybench.fonts import cjk_font
from tangpoetrybench.poems import convert_chinese_poetry, sample_poems
from tangpoetrybench.dataset.raw_release import read_release
from tangpoetrybench.judging.ocr.labels import issue_agreement

SHARED_TANG = Path(__file__).resolve().parents[2] / "shared" / "data" / "poems" / "tang300.jsonl"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--raw", type=Path, help="a raw release with text_labels.csv (default: make a demo release)")
    p.add_argument("--poems", type=int, default=100, help="demo release: the first N poems (default: 100)")
    p.add_argument("--size", type=int, default=512, help="demo release: image side in pixels (default: 512)")
    p.add_argument("--seed", type=int, default=0, help="demo release: seed (default: 0)")
    p.add_argument("--batch-size", type=int, default=8, help="images per evaluator call (default: 8)")
    p.add_argument("--out", type=Path, help="also write the figures and every verdict as JSON here")
    args = p.parse_args()

    if args.raw is None:
        if cjk_font() is None:
            raise SystemExit("no Chinese font installed (apt-get install fonts-noto-cjk): the demo's planted text "
                             "would be stroke patterns, which is not what this benchmark measures")
        poems = convert_chinese_poetry(SHARED_TANG) if SHARED_TANG.is_file() else sample_poems()
        args.raw = write_demo_release(Path(tempfile.mkdtemp(prefix="tpb-ocr-bench-")) / "raw", poems,
                                      n_poems=min(args.poems, len(poems)), seed=args.seed, size=args.size)
    release = read_release(args.raw)
    if not release.text_labels:
        raise SystemExit(f"{args.raw} has no text_labels.csv to compare with")
    planted = {i: label.issue_type for i, label in release.text_labels.items()}
    image_ids = sorted(planted)
    ocr = load_evaluator("text-ocr")
    found, verdicts, seconds = {}, {}, 0.0
    for start in tqdm(range(0, len(image_ids), args.batch_size), desc="OCR", unit="batch"):
        batch = image_ids[start:start + args.batch_size]
        items = [ScoringItem(i, Image.open(release.images[i].path).convert("RGB"),
                             release.poems[release.images[i].poem_id]) for i in batch]
        began = time.perf_counter()
        results = ocr.score(items)
        seconds += time.perf_counter() - began
        for r in results:
            if r.evidence:
                found[r.image_id], verdicts[r.image_id] = r.evidence["issue_type"], r.evidence["verdict"]
    agreement = issue_agreement(planted, found)
    by_label = Counter((planted[i], verdicts[i]) for i in verdicts)
    figures = {
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs",
        "rapidocr": version("rapidocr"), "onnxruntime": version("onnxruntime"),
        "font": cjk_font().name if cjk_font() else None, "release": str(args.raw), "images": len(image_ids),
        "failed": len(image_ids) - len(found), "seconds": round(seconds, 1),
        "images_per_second": round(len(image_ids) / seconds, 2),
        "agreement": {k: v.to_json() for k, v in agreement.items()},
        "verdicts_by_planted_label": {f"{a} -> {b}": n for (a, b), n in sorted(by_label.items())},
    }
    print(f"{len(image_ids)} labelled images of {args.raw} (synthetic), {figures['machine']}, "
          f"rapidocr {figures['rapidocr']}, font {figures['font']}")
    print(f"{'issue type':<16}{'planted':>8}{'OCR':>6}{'both':>6}{'precision':>11}{'recall':>8}")
    for issue, a in agreement.items():
        cells = (f"{x:.3f}" if x is not None else "—" for x in (a.precision, a.recall))
        print(f"{issue:<16}{a.human:>8}{a.ocr:>6}{a.both:>6}{next(cells):>11}{next(cells):>8}")
    print("verdicts by planted label: " + ", ".join(f"{k} {v}" for k, v in figures["verdicts_by_planted_label"].items()))
    print(f"OCR: {figures['images_per_second']} images/s ({figures['seconds']} s for {len(image_ids)} images at "
          f"{Image.open(release.images[image_ids[0]].path).size[0]} px, one process, failed {figures['failed']})")
    if args.out:
        args.out.write_text(json.dumps({**figures, "verdicts": verdicts}, ensure_ascii=False, indent=1) + "\n",
                            encoding="utf-8")


if __name__ == "__main__":
    main()
