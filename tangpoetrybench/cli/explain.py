"""`tpb explain`: print SemJudge's semiosis graphs of a poem and an image, as indented trees."""

from __future__ import annotations

import argparse
from pathlib import Path

from .base import POEMS_FILE, add_judge_options, judge_options
from ..numeric import counted

SUMMARY = "print SemJudge's semiosis graphs of a poem and an image, as indented trees"
EXAMPLE = ('tpb explain --image images/g1/p1.png --poem p1 --model Qwen/Qwen3-VL-8B-Instruct --base-url '
           'http://127.0.0.1:8000/v1\n'
           'tpb explain --image images/g1/p1.png --poem p1 --model sample/models/qwen3-vl   # a local model')


def add_arguments(p: argparse.ArgumentParser) -> None:
    from ..judging.registry import evaluator_spec

    p.add_argument("--image", type=Path, required=True, help="the image file")
    p.add_argument("--poem", required=True, help="a poem_id (in --poems, default the bundled poems) or a poems file "
                                                 "holding one poem")
    p.add_argument("--poems", type=Path, help="where --poem's poem_id is looked up: " + POEMS_FILE)
    add_judge_options(p, evaluator_spec("semjudge").options)
    p.add_argument("--out", type=Path, help="append both graphs as one JSON line here (a graphs file for tpb report)")
    p.add_argument("--image-id", help="the image's id in --out (default: FOLDER/STEM of --image, generator/poem_id)")


def run(args: argparse.Namespace) -> None:
    import json

    from ..files import open_image
    from ..judging.evaluators import load_evaluator
    from ..judging.semjudge import RANDOM_WEIGHTS_NOTE, graph_tree
    from ..poems import read_poems, sample_poems
    from ..rubric import format_title

    if not args.image.is_file():
        raise ValueError(f"{args.image}: no such image file")
    if Path(args.poem).is_file():
        poems = read_poems(args.poem)
        if len(poems) != 1:
            raise ValueError(f"{args.poem} holds {counted(len(poems), 'poem')}: give one poem's poem_id and "
                             f"--poems {args.poem}")
        poem = poems[0]
    else:
        catalogue = {p.poem_id: p for p in (read_poems(args.poems) if args.poems else sample_poems())}
        if args.poem not in catalogue:
            raise ValueError(f"no poem {args.poem!r} in {args.poems or 'the bundled poems'} (and no such file)")
        poem = catalogue[args.poem]
    if not args.model:
        raise ValueError("give --model: a Hub id or local folder, or the model name a server knows (with --base-url)")
    judge = load_evaluator("semjudge", task="pairwise", **judge_options(args))
    image = open_image(args.image)
    [poem_graph] = judge.poem_graphs([poem])
    [image_graph] = judge.image_graphs([image])
    if judge.random_weights:
        print(f"{args.model}: {RANDOM_WEIGHTS_NOTE}")
    for title, result in ((f"{format_title(poem.title)} {poem.author} — the poem's graph", poem_graph),
                          (f"{args.image} — the image's graph", image_graph)):
        print(graph_tree(result.value, title) if result.value is not None else f"{title}: {result.error}")
        print()
    if args.out and poem_graph.value is not None and image_graph.value is not None:
        record = {"image_id": args.image_id or f"{args.image.parent.name}/{args.image.stem}", "poem_id": poem.poem_id,
                  "model": judge.model_name, **judge.settings(), "size": list(judge.sent_size(image)),
                  "poem_graph": poem_graph.value, "image_graph": image_graph.value,
                  **({"random_weights": True} if judge.random_weights else {})}
        with open(args.out, "a", encoding="utf-8") as f:
            f.write(json.dumps(record, ensure_ascii=False) + "\n")
    asked = [r.usage for r in (poem_graph, image_graph) if not r.cached and r.usage]
    if asked:
        from ..judging.backends.served import usage_line

        print(f"{judge.requests} requests; " + usage_line(sum(u.get("prompt_tokens", 0) for u in asked),
                                                          sum(u.get("completion_tokens", 0) for u in asked)))
    failed = [r.error for r in (poem_graph, image_graph) if r.value is None]
    if failed:
        raise ValueError("; ".join(failed))
