"""`tpb distractors`: choose each poem's three Phase-1 distractors from the same corpus by text similarity, and check
that the texts alone do not give the answer away."""

from __future__ import annotations

import argparse
from pathlib import Path

from .base import POEMS_FILE

SUMMARY = ("choose each poem's three Phase-1 distractors from the same corpus by text similarity, and check that the "
           'texts alone do not give the answer away')
EXAMPLE = 'tpb distractors poems.jsonl --out candidates.jsonl --same-form --report distractors.json'


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("poems", type=Path, help=POEMS_FILE)
    p.add_argument("--out", type=Path, required=True, help="the candidates file to write (JSON Lines, one poem a line)")
    p.add_argument("--seed", type=int, default=0, help="the same poems, settings and seed give the same candidates")
    p.add_argument("--method", default="groups", choices=["groups", "neighbours"],
                   help="groups: sets of four mutually similar poems (no text-only cue); neighbours: each poem's "
                        "nearest (the answer is its set's centre)")
    p.add_argument("--same-form", action="store_true", help="distractors of the poem's form where there are enough")
    p.add_argument("--top-k", type=int, default=3, help="draw each choice among this many of the best")
    p.add_argument("--embedding-model", help="a text model (Hub id or local folder) whose mean-pooled hidden states "
                                             "measure similarity (default: character n-gram TF-IDF)")
    p.add_argument("--report", type=Path, help="also write the similarity distribution and baselines as JSON")


def run(args: argparse.Namespace) -> None:
    import json

    from ..dataset.distractors import format_run, run_distractors, write_candidates
    from ..poems import read_poems

    poems = read_poems(args.poems)
    run = run_distractors(poems, seed=args.seed, same_form=args.same_form, top_k=args.top_k, method=args.method,
                          embedding_model=args.embedding_model)
    write_candidates(run.sets, poems, args.out, run.method)
    print(format_run(run))
    print(f"\nWrote {args.out}: each poem's phase1_candidates (a ratings.csv cell) and the candidates' texts")
    if args.report:
        args.report.parent.mkdir(parents=True, exist_ok=True)
        args.report.write_text(json.dumps(run.to_json(), ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
        print(f"Wrote {args.report}")
