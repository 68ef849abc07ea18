#!/usr/bin/env bash
# The main job, offline, on the bundled sample (16 real poems, synthetic images and ratings), on the CPU:
# install the package, build the dataset, build tiny random-weight models, teach the tiny PAE the answer format,
# score the test split, print the agreement table and write the report. The tiny model learns the format, not
# judgement: its numbers measure nothing about images.
#
#   TPB_SKIP_INSTALL=1   the package is already installed (skip the pip step)
#   TPB_SFT_STEPS=N      train N steps instead of the recipe's 200 (a quicker plumbing check)
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${TPB_SKIP_INSTALL:-0}" != 1 ]; then
    python -m pip install -e ".[train]"
fi
tpb demo-release sample/raw --overwrite
tpb build sample/raw sample/dataset --overwrite
tpb tiny-models sample/models
# the long step: 200 optimizer steps on the CPU; tqdm shows the steps done and an estimate of the time left
accelerate launch --cpu --num_processes 1 training/sft.py --config training/recipes/demo_tiny_sft.yaml \
    ${TPB_SFT_STEPS:+--max_steps "$TPB_SFT_STEPS"}
rm -f sample/scores.jsonl   # scored afresh by the adapter just trained (a resume would keep the older answers)
tpb score --dataset sample/dataset --evaluator pae --model sample/models/qwen3-vl --adapter sample/pae-tiny \
    --constrained --out sample/scores.jsonl
tpb agree --dataset sample/dataset --scores sample/scores.jsonl
tpb report --dataset sample/dataset --scores sample/scores.jsonl --out sample/report
