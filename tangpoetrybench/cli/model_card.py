"""`tpb model-card`: write a trained adapter's model card from tpb agree results."""

from __future__ import annotations

import argparse
from pathlib import Path


SUMMARY = "write a trained adapter's model card from tpb agree results"
EXAMPLE = 'tpb model-card --agree agree.json --adapter pae-grpo --dataset ORG/TangPoetryBench'


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--agree", type=Path, required=True, help="tpb agree --out results on the test split")
    p.add_argument("--adapter", required=True, help="the adapter folder (the card goes to its README.md) or Hub id")
    p.add_argument("--base-model", default="Qwen/Qwen3-VL-8B-Instruct", help="the model the adapter was trained on")
    p.add_argument("--name", default="PAE", help="the model's name in the card")
    p.add_argument("--dataset", help="the dataset's Hub id (default: as in the agree results)")
    p.add_argument("--license", default="apache-2.0", help="the adapter's licence (a Hub licence id)")
    p.add_argument("--recipe", help="a line on this run's settings")
    p.add_argument("--out", type=Path, help="where to write the card (default: ADAPTER/README.md)")


def run(args: argparse.Namespace) -> None:
    import json

    from ..models import trained_on
    from ..hub.eval_results import write_judge_eval_results
    from ..hub.model_card import render_model_card

    agree = json.loads(args.agree.read_text(encoding="utf-8"))
    card = render_model_card(agree, base_model=args.base_model, adapter_ref=args.adapter, model_name=args.name,
                             dataset=args.dataset, license=args.license, recipe=args.recipe,
                             trained=trained_on(args.adapter))
    out = args.out or Path(args.adapter) / "README.md"
    out.write_text(card, encoding="utf-8")
    print(f"Wrote {out}")
    results = write_judge_eval_results(agree, out.parent, args.dataset or agree["dataset"], args.name)
    print(f"Wrote {results}" if results else "No .eval_results: random weights measure nothing")
