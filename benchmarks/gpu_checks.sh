#!/usr/bin/env bash
# The GPU figures the README is waiting for, as one prepared run on one GPU (a few minutes by estimate; not yet run):
# PAE scoring throughput by batch size (issue 3), the same end to end from PNG files through `score_to_jsonl`
# (issue 11), and one SFT step's tokens/s, memory and MFU (issue 5), all on the full-size Qwen3-VL-8B
# architecture with random bf16 weights; and `tpb generate`'s images/s on the SDXL architecture at 1024×1024
# (issue 16; it also needs diffusers: pip install diffusers). It needs only torch, transformers, peft,
# pillow, numpy and pyyaml (the lent machine's image has them) and reads nothing from the Hub.
#
#     bash benchmarks/gpu_checks.sh [OUT_DIR]        # default: $OUT, else benchmarks/out
#
# Writes gpu.txt (device and versions), score_throughput.json/.log, score_end_to_end.json/.log and
# train_step.json/.log, generate_throughput.json/.log, readout_speed.json/.log, quantize_check.json/.log and
# ray_vllm_check.json/.log, ray_vllm_full.json/.log to OUT_DIR.
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-${OUT:-benchmarks/out}}"
mkdir -p "$out"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
python=$(command -v python3 || command -v python)

{
    date -u +%Y-%m-%dT%H:%MZ
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
    "$python" -c "import sys, torch, transformers, peft; print('python', sys.version.split()[0], '| torch', \
torch.__version__, '| transformers', transformers.__version__, '| peft', peft.__version__)"
} | tee "$out/gpu.txt"

"$python" benchmarks/score_throughput.py --out "$out/score_throughput.json" 2>&1 | tee "$out/score_throughput.log"
"$python" benchmarks/score_throughput.py --end-to-end --batch-sizes 1,8,32 --images 64 \
    --out "$out/score_end_to_end.json" 2>&1 | tee "$out/score_end_to_end.log"
"$python" benchmarks/train_step.py --out "$out/train_step.json" 2>&1 | tee "$out/train_step.log"
"$python" benchmarks/generate_throughput.py --out "$out/generate_throughput.json" 2>&1 | tee "$out/generate_throughput.log"
# PAE's readout against JSON decoding at batch 1 and 16 on the 8B architecture (goal: the readout ≥ 3× faster at
# batch 1, not slower at 16), and --quantize 8bit|4bit against bf16: peak memory, images/s and the scores' change
# (needs bitsandbytes: pip install bitsandbytes).
"$python" benchmarks/readout_speed.py --full --out "$out/readout_speed.json" 2>&1 | tee "$out/readout_speed.log"
"$python" benchmarks/quantize_check.py --out "$out/quantize_check.json" 2>&1 | tee "$out/quantize_check.log"
# PAE on Ray Data's vLLM engine stage (tpb score --engine ray --backend vllm, issue 37): the tiny model with a LoRA
# adapter (every image once, every answer in the rubric's form, the readout from the stage's logprobs), then images/s
# of the 8B architecture (vLLM's dummy weights) on one GPU, the figure docs/scale.md's plan waits for. It needs vLLM
# and Ray Data (pip install "ray[data]" vllm); without them it says so and the script goes on.
"$python" benchmarks/ray_vllm_check.py --out "$out/ray_vllm_check.json" 2>&1 | tee "$out/ray_vllm_check.log"
"$python" benchmarks/ray_vllm_check.py --full --images 256 --out "$out/ray_vllm_full.json" 2>&1 \
    | tee "$out/ray_vllm_full.log"
