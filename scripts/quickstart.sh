#!/usr/bin/env bash
# The main job, offline, on the bundled sample (16 real poems, synthetic images and ratings), on the CPU:
# install the package (with the train extra, and the space extra for the Space its last lines suggest), build the
# dataset, build tiny random-weight models, teach the tiny PAE the answer format, score the test split, print the
# agreement table and write the report. The tiny model learns the format, not judgement: its numbers measure nothing
# about images.
#
#   TPB_SKIP_INSTALL=1   the package is already installed (skip the pip step)
#   TPB_SFT_STEPS=N      train N steps instead of the recipe's 200 (a quicker plumbing check)
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${TPB_SKIP_INSTALL:-0}" != 1 ]; then
    # Linux without an NVIDIA GPU and without torch: PyTorch's CPU build, not the CUDA one pip would pull (6.2 GB)
    cpu_torch=$(python scripts/cpu_torch.py)
    if [ -n "$cpu_torch" ]; then
        python -m pip install $cpu_torch
    fi
    python -m pip install -e ".[train,space]"  # space: the Space its last lines suggest (gradio)
fi
tpb demo-release sample/raw --overwrite
tpb build sample/raw sample/dataset --overwrite
tpb tiny-models sample/models
# the long step: 200 optimizer steps on the CPU; tqdm shows the steps done and an estimate of the time left
# every launch setting given, so that accelerate lists none it had to choose
accelerate launch --cpu --num_processes 1 --num_machines 1 --mixed_precision no --dynamo_backend no \
    --num_cpu_threads_per_process "$(python -c 'import os; print(os.cpu_count() or 1)')" \
    training/sft.py --config training/recipes/demo_tiny_sft.yaml ${TPB_SFT_STEPS:+--max_steps "$TPB_SFT_STEPS"}
rm -f sample/scores.jsonl   # scored afresh by the adapter just trained (a resume would keep the older answers)
tpb score --dataset sample/dataset --evaluator pae --model sample/models/qwen3-vl --adapter sample/pae-tiny \
    --constrained --out sample/scores.jsonl
tpb agree --dataset sample/dataset --scores sample/scores.jsonl
tpb report --dataset sample/dataset --scores sample/scores.jsonl --out sample/report
cat <<'NEXT'

Next: open sample/report/report.html in a browser. The Space on the sample (it serves until stopped):
  PAE_MODEL=sample/models/qwen3-vl PAE_ADAPTER=sample/pae-tiny CLIP_MODEL=sample/models/clip BLIP_MODEL=sample/models/blip python space/app.py
Your own images (DIR/<generator>/<poem_id>.png), scored by the tiny PAE:
  tpb score --images DIR --poems POEMS.jsonl --evaluator pae --model sample/models/qwen3-vl --adapter sample/pae-tiny --constrained --out mine.jsonl
Every command, and each one's help (tpb help COMMAND):
  tpb help
With real models (a GPU, the Hub): the README's console blocks and docs/.
NEXT
