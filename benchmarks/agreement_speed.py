"""How long the agreement statistics (docs/statistics.md) and their bootstrap take: 320 poems × 4 images, 10,000
resamples.

    python benchmarks/agreement_speed.py [--poems 320] [--bootstrap 10000]

The scores are synthetic (random human scores on the rubric's anchors, predictions = human + noise): this
times the computation and measures no evaluator. Target (issue 4): under 2 s on the 2-core machine.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from tangpoetrybench.stats.agreement import AgreementData, agreement
from tangpoetrybench.rubric import load_rubric


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--poems", type=int, default=320)
    p.add_argument("--images-per-poem", type=int, default=4)
    p.add_argument("--bootstrap", type=int, default=10_000)
    args = p.parse_args()
    rubric = load_rubric("tang")
    rng = np.random.default_rng(0)
    n = args.poems * args.images_per_poem
    human = rng.choice([0, 0.33, 0.5, 0.67, 1.0], size=(n, len(rubric.keys)))
    pred = np.clip(human + rng.normal(0, 0.15, human.shape), 0, 1)
    to_list = lambda m: [[None if rng.random() < 0.03 else float(v) for v in row] for row in m]  # noqa: E731
    data = AgreementData.from_lists(to_list(pred), to_list(human), [f"p{i // args.images_per_poem}" for i in range(n)], rubric)
    start = time.perf_counter()
    result = agreement(data, n_bootstrap=args.bootstrap)
    seconds = time.perf_counter() - start
    print(f"{args.poems} poems × {args.images_per_poem} images, {args.bootstrap:,} resamples: {seconds:.2f} s "
          f"({'meets' if seconds < 2 else 'MISSES'} the 2 s target); {len(result)} figures")


if __name__ == "__main__":
    main()
