"""tpb (tangpoetrybench): build the benchmark's dataset, score illustrations of poems with PAE or a baseline,
measure agreement with people, report the human-data findings, and publish to the Hub."""

from __future__ import annotations

import argparse
import warnings
import sys
from pathlib import Path
from typing import Callable

from .errors import DataError, RunStopped, SystematicFailure
from .dataset.qc import QCConfig
from .dataset.raw_release import DEFAULT_MAX_IMAGE_PIXELS


def _number_or_off(cast: Callable[[str], float | int]) -> Callable[[str], float | int | None]:
    def parse(text: str):
        if text.lower() in ("off", "none"):
            return None
        try:
            return cast(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number or 'off', got {text!r}") from None
    return parse


def _demo_release(args: argparse.Namespace) -> None:
    from .dataset.synthetic import write_demo_release
    from .poems import read_poems, sample_poems

    poems = read_poems(args.poems_file) if args.poems_file else sample_poems()
    out = write_demo_release(args.out, poems, n_poems=args.poems, seed=args.seed, size=args.size,
                             overwrite=args.overwrite, progress=not args.quiet)
    print(f"Wrote a synthetic raw release to {out} (seed {args.seed}). Next: tpb build {out} OUT")


def _build(args: argparse.Namespace) -> None:
    from .dataset.builder import build_dataset
    from .hub.publish import push_dataset

    if args.out is None and args.text_labels_from is None:
        raise ValueError("give OUT, the dataset folder to build (or --text-labels-from OCR.jsonl for a label draft)")
    if args.text_labels_from is not None:
        _text_labels_draft(args)
        if args.out is None:
            return
    qc = None if args.no_qc else QCConfig(
        min_seconds=args.qc_min_seconds, straightline_min_ratings=args.qc_straightline_min,
        phase1_min_answers=args.qc_phase1_min_answers, phase1_min_accuracy=args.qc_phase1_min_accuracy,
        consistency=not args.qc_no_consistency,
    )
    summary = build_dataset(args.raw, args.out, qc=qc, overwrite=args.overwrite,
                            max_image_pixels=args.max_image_pixels, progress=not args.quiet)
    print(f"Built {summary.out} (fingerprint {summary.fingerprint})")
    for cfg, by_split in summary.rows.items():
        print(f"  {cfg:<17} " + "  ".join(f"{split} {n}" for split, n in by_split.items()))
    qc_line = ", ".join(f"{k} {v}" for k, v in summary.qc["by_rule"].items())
    print(f"  QC: kept {summary.qc['n_kept']} of {summary.qc['n_ratings']} ratings ({qc_line})")
    if args.push:
        print(f"Pushed to {push_dataset(summary.out, args.push, private=args.private or None)}")


def _text_labels_draft(args: argparse.Namespace) -> None:
    from .judging.ocr.labels import draft_text_labels

    d = draft_text_labels(args.raw, args.text_labels_from, overwrite=args.overwrite)
    issues = ", ".join(f"{k} {v}" for k, v in d.issues.items())
    print(f"Wrote {d.draft} ({d.rows} images: {issues}) and its evidence {d.evidence}: adjudicate it, then save it "
          f"as {args.raw / 'text_labels.csv'}")
    if d.failed or d.missing:
        print(f"  not in the draft: {len(d.failed)} images whose OCR failed, {d.missing} without an OCR result")


def _convert_poems(args: argparse.Namespace) -> None:
    from .poems import convert_chinese_poetry, write_poems

    poems = [p for src in args.sources for p in convert_chinese_poetry(src)]
    write_poems(poems, args.out)
    print(f"Wrote {len(poems)} poems to {args.out}")


def _score(args: argparse.Namespace) -> None:
    from .judging.evaluators import load_evaluator
    from .models import process_state
    from .judging.scoring import score_to_jsonl, source_of

    if args.evaluator != "api" and (args.price_in is not None or args.price_out is not None):
        raise ValueError("--price-in and --price-out apply to the api evaluator only")
    if args.reason_language and not args.explain:
        raise ValueError("--reason-language applies with --explain only")
    source = source_of(args.dataset, args.images, args.poems, args.config, args.split)
    state = process_state()  # under a launcher: the process group, before any model is loaded
    if args.backend == "vllm" and state.num_processes > 1:
        raise ValueError("the vLLM backend runs as one process that uses its GPUs itself: start tpb score without "
                         "accelerate launch or torchrun")
    extra = {k: v for k, v in (("device", args.device), ("max_pixels", args.max_pixels),
                               ("max_new_tokens", args.max_new_tokens), ("base_url", args.base_url),
                               ("api_key_env", args.api_key_env), ("concurrency", args.concurrency),
                               ("timeout", args.timeout), ("retries", args.retries), ("repair", args.repair))
             if v is not None}
    if args.constrained:
        extra["constrained"] = True
    if args.question:
        extra["question"] = args.question
    if (args.candidates is not None or args.orders != "rotations") and args.evaluator != "recognize":
        raise ValueError("--candidates and --orders apply to the recognize evaluator only")
    if args.evaluator == "recognize":
        extra.update(candidates=args.candidates, orders=args.orders)
    if args.explain:
        extra["explain"] = args.reason_language or "poem"
    extra.update({k: v for k, v in (("readout", args.readout), ("quantize", args.quantize)) if v is not None})
    evaluator = load_evaluator(args.evaluator, model=args.model, adapter=args.adapter, backend=args.backend, **extra)
    summary = score_to_jsonl(evaluator, source, args.out, batch_size=args.batch_size, limit=args.limit,
                             num_workers=args.num_workers, progress=not args.quiet)
    if summary.num_processes > 1:
        print(f"process {summary.process_index} of {summary.num_processes} on {evaluator.device}: "
              f"scored {summary.process_scored}", file=sys.stderr)
    if not summary.main_process:
        return
    retry = (f", {summary.retryable} of them in the model: run again to retry them" if summary.retryable else "")
    print(f"{summary.out}: {summary.scored} scored now ({summary.failed} failed{retry}), "
          f"{summary.skipped} already there, {summary.total} in the source")
    if args.evaluator == "api" or args.base_url:
        from .judging.evaluators.api import usage_line

        usage = usage_line(summary.prompt_tokens, summary.completion_tokens, args.price_in, args.price_out)
        print(f"{evaluator.model_name}: {usage} in this run")
        print(f"repair round: {summary.repair_rounds} of the {summary.scored} answers did not parse and were asked "
              f"again, {summary.repair_parsed} of them then parsed" if evaluator.repair else
              "repair round: off (--repair 0)")
    if summary.truncated:
        print(f"warning: the text encoder saw only the start of {summary.truncated} of the {summary.scored} poems "
              f"(its token limit): each record's evidence.text_seen says how much")
    if evaluator.random_weights:
        from .stats.agree import RANDOM_WEIGHTS_NOTE

        print(RANDOM_WEIGHTS_NOTE)
    if summary.scored and summary.failed == summary.scored and not summary.retryable:
        print(every_answer_failed(summary.failed, args), file=sys.stderr)


def every_answer_failed(n: int, args: argparse.Namespace) -> str:
    """What to try when no answer of a run could be read (the records say why, in their `error` field)."""
    tries = ["--constrained (decoding in the rubric's JSON form)"] if args.evaluator == "pae" and not args.constrained else []
    tries += ["a PAE adapter (--adapter)"] if args.evaluator == "pae" and not args.adapter else []
    tries += ["a larger --max-new-tokens (an answer cut short does not parse)"]
    return (f"WARNING: all {n} answers of this run failed (see their `error` in {args.out}): the model did not "
            f"answer in the rubric's form. Try {', or '.join(tries)}.")


def _agree(args: argparse.Namespace) -> None:
    import json

    from .stats.agree import RANDOM_WEIGHTS_NOTE, agree, format_table
    from .stats.pairs import format_pairs, is_pair_file, pair_agreement
    from .stats.recognition import agree_recognition, format_recognition, is_recognize_file

    pairwise = is_pair_file(args.scores)  # tpb compare's pair records: only the pairwise statistics apply
    if not pairwise and is_recognize_file(args.scores):  # the recognize judge against the human Phase-1 track
        result = agree_recognition(args.dataset, args.scores, split=args.split, n_bootstrap=args.bootstrap,
                                   seed=args.seed, config=args.config)
        print(format_recognition(result, [RANDOM_WEIGHTS_NOTE] if result["random_weights"] else []))
    else:
        result = {} if pairwise else agree(args.dataset, args.scores, split=args.split, n_bootstrap=args.bootstrap,
                                           seed=args.seed, config=args.config, margin=args.margin)
        result["pairs"] = pair_agreement(args.dataset, args.scores, args.split, args.config, args.margin,
                                         args.bootstrap, args.seed, with_literal_bias=args.literal_bias)
        print(("" if pairwise else format_table(result) + "\n\n") + format_pairs(result["pairs"]))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
        print(f"\nWrote {args.out}")


def _distractors(args: argparse.Namespace) -> None:
    import json

    from .dataset.distractors import format_run, run_distractors, write_candidates
    from .poems import read_poems

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


def _compare(args: argparse.Namespace) -> None:
    from .judging.pairwise import compare_to_jsonl, dataset_pairs, load_pairwise_judge
    from .numeric import fmt
    from .stats.pairs import pair_table

    selected = None if args.all_pairs else pair_table(args.dataset, args.split, args.config, args.margin).id_pairs()
    pairs, load = dataset_pairs(args.dataset, args.config, args.split, selected)
    options = {k: getattr(args, k) for k in ("model", "adapter", "device", "max_pixels", "max_new_tokens", "base_url",
                                             "api_key_env", "concurrency", "timeout", "retries")}
    if args.evaluator == "pae":
        options.update(backend=args.backend, constrained=args.constrained or None)
    elif args.adapter or args.constrained:
        raise ValueError("--adapter and --constrained apply to --evaluator pae only")
    judge = load_pairwise_judge(args.evaluator, **options)
    summary = compare_to_jsonl(judge, pairs[:args.limit], load, args.out, batch_size=args.batch_size)
    bias = summary.bias
    print(f"{summary.out}: {summary.judged} pairs judged now in both orders ({summary.failed} without a verdict), "
          f"{summary.skipped} already there, {summary.total} asked for")
    print(f"position bias: {bias['first_position']} of {bias['answers']} answers chose the first image (share "
          f"{fmt(bias['first_position_share'])}; 0.5 is none); {fmt(bias['consistent_share'])} of {bias['pairs']} "
          "pairs answered alike in both orders")
    if judge.random_weights:
        from .stats.agree import RANDOM_WEIGHTS_NOTE

        print(RANDOM_WEIGHTS_NOTE)


def _report(args: argparse.Namespace) -> None:
    from .reporting.report import build_report, write_report

    out = write_report(build_report(args.dataset, args.scores or [], split=args.split, n_bootstrap=args.bootstrap,
                                    seed=args.seed, ocr=args.ocr, graphs=args.graphs, pairs=args.pairs or []), args.out)
    print(f"Wrote {out / 'report.md'}, {out / 'report.html'}, {out / 'numbers.json'} and {out / 'figures'}/")


def _generate(args: argparse.Namespace) -> None:
    from .generation.diffusers_generate import generate_images

    summary = generate_images(args.pipeline, args.poems, args.out, args.generator, seed=args.seed, steps=args.steps,
                              guidance_scale=args.guidance_scale, height=args.height, width=args.width,
                              negative_prompt=args.negative_prompt, prompt_file=args.prompt_file, device=args.device,
                              progress=not args.quiet, prompt=args.prompt)
    if summary.num_processes > 1:
        print(f"process {summary.process_index} of {summary.num_processes}: generated {summary.process_generated}",
              file=sys.stderr)
    if summary.main_process:
        print(f"{summary.out}/images/{summary.generator}: {summary.generated} generated now, {summary.skipped} already "
              f"there, {summary.total} poems. Next: tpb score --images {summary.out}/images --poems "
              f"{summary.out}/poems.jsonl --evaluator pae --out scores.jsonl")


def _leaderboard(args: argparse.Namespace) -> None:
    from .reporting.leaderboard import build_leaderboard, write_leaderboard

    rep = build_leaderboard(args.dataset, args.scores, split=args.split, n_bootstrap=args.bootstrap, seed=args.seed,
                            recognize=args.recognize or [], generation=args.generation or [])
    out = write_leaderboard(rep, args.out)
    print(f"Wrote {out / 'leaderboard.md'}, {out / 'leaderboard.html'}, {out / 'leaderboard.json'} and {out / 'figures'}/")
    if args.eval_results:
        _eval_results(args, rep.numbers)


def _eval_results(args: argparse.Namespace, numbers: dict) -> None:
    from .hub.eval_results import write_eval_results
    from .hub.publish import PLACEHOLDER_ORG, ids

    local = Path(args.dataset).exists()
    dataset_id = args.dataset_id or (ids(PLACEHOLDER_ORG)["dataset"] if local else args.dataset)
    for generator, path in write_eval_results(numbers, args.eval_results, dataset_id, args.dataset_revision).items():
        print(f"{generator:<16} {path}")
    if dataset_id.startswith(f"{PLACEHOLDER_ORG}/"):
        print(f"The results name the dataset {dataset_id}: give --dataset-id ORG/NAME for the real repo.")


def _model_card(args: argparse.Namespace) -> None:
    import json

    from .hub.eval_results import write_judge_eval_results
    from .hub.model_card import render_model_card

    agree = json.loads(args.agree.read_text(encoding="utf-8"))
    card = render_model_card(agree, base_model=args.base_model, adapter_ref=args.adapter, model_name=args.name,
                             dataset=args.dataset, license=args.license, recipe=args.recipe)
    out = args.out or Path(args.adapter) / "README.md"
    out.write_text(card, encoding="utf-8")
    print(f"Wrote {out}")
    results = write_judge_eval_results(agree, out.parent, args.dataset or agree["dataset"], args.name)
    print(f"Wrote {results}" if results else "No .eval_results: random weights measure nothing")


def _publish(args: argparse.Namespace) -> None:
    from .hub.publish import PLACEHOLDER_ORG, publish, push

    if args.eval_results:
        _publish_eval_results(args)
        return
    if args.out is None:
        raise ValueError("give OUT, the folder to write the repos to (or --eval-results ORG/MODEL --from DIR)")
    org = args.push or args.org
    written = publish(args.out, org=org, dataset=args.dataset, adapter=args.adapter, agree=args.agree,
                      base_model=args.base_model)
    for name, path in written.items():
        print(f"{name:<8} {path}")
    if "dataset" in written and not (written["dataset"] / "eval.yaml").is_file():
        from .hub.eval_results import dataset_eval_yaml

        print(f"No eval.yaml in {written['dataset']}: {dataset_eval_yaml()[1]}")
    if args.push:
        for name, url in push(written, org, private=args.private or None).items():
            print(f"Pushed {name}: {url}")
    elif org == PLACEHOLDER_ORG:
        print(f"The cards name the repos {PLACEHOLDER_ORG}/…: give --org ORG (or --push ORG) for the real ids.")


def _publish_eval_results(args: argparse.Namespace) -> None:
    from .hub.eval_results import eval_results_pr, open_pr

    if args.source is None:
        raise ValueError("--eval-results ORG/MODEL needs --from DIR/<generator>, a folder of tpb leaderboard "
                         "--eval-results DIR")
    pr = eval_results_pr(args.eval_results, args.source)
    print(pr.show())
    if args.dry_run:
        print("Dry run: nothing was sent.")
    else:
        print(f"Opened {open_pr(pr)}")


def _tiny_models(args: argparse.Namespace) -> None:
    from .judging.tiny_models import build_tiny_models

    built = build_tiny_models(args.out, overwrite=args.overwrite)
    for name, path in built.items():
        print(f"{name:<13} {path}")
    if "text-to-image" not in built:
        print("text-to-image not built: diffusers is not installed (pip install -e \".[generate]\")")
    print("Random weights: use these to run the pipeline offline, never to measure anything.")


def _explain(args: argparse.Namespace) -> None:
    import json

    from PIL import Image

    from .judging.semjudge import RANDOM_WEIGHTS_NOTE, graph_tree, load_semjudge
    from .poems import read_poems, sample_poems

    if not args.image.is_file():
        raise ValueError(f"{args.image}: no such image file")
    if Path(args.poem).is_file():
        poems = read_poems(args.poem)
        if len(poems) != 1:
            raise ValueError(f"{args.poem} holds {len(poems)} poems: give one poem's poem_id and --poems {args.poem}")
        poem = poems[0]
    else:
        catalogue = {p.poem_id: p for p in (read_poems(args.poems) if args.poems else sample_poems())}
        if args.poem not in catalogue:
            raise ValueError(f"no poem {args.poem!r} in {args.poems or 'the bundled poems'} (and no such file)")
        poem = catalogue[args.poem]
    judge = load_semjudge(args.model, base_url=args.base_url, cache_dir=args.cache, local=args.local,
                          device=args.device, **({"max_new_tokens": args.max_new_tokens} if args.max_new_tokens else {}),
                          **({"api_key_env": args.api_key_env} if args.api_key_env else {}))
    image = Image.open(args.image)
    [poem_graph] = judge.poem_graphs([poem])
    [image_graph] = judge.image_graphs([image])
    if judge.random_weights:
        print(f"{args.model}: {RANDOM_WEIGHTS_NOTE}")
    for title, result in ((f"《{poem.title}》 {poem.author} — the poem's graph", poem_graph),
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
        from .judging.evaluators.api import usage_line

        print(f"{judge.requests} requests; " + usage_line(sum(u.get("prompt_tokens", 0) for u in asked),
                                                          sum(u.get("completion_tokens", 0) for u in asked)))
    failed = [r.error for r in (poem_graph, image_graph) if r.value is None]
    if failed:
        raise ValueError("; ".join(failed))


class _StoreOnce(argparse._StoreAction):
    """An option that takes one value (or one list) refuses to be given twice, instead of silently keeping the last;
    options that gather several values say `action="extend"`."""

    def __call__(self, parser, namespace, values, option_string=None):
        given = namespace.__dict__.setdefault("_given_once", set())
        if option_string is not None and self.dest in given:
            parser.error(f"{'/'.join(self.option_strings)} was given twice: give it once")
        given.add(self.dest)
        super().__call__(parser, namespace, values, option_string)


class _Parser(argparse.ArgumentParser):
    """tpb's parser and each command's: every plain option is stored once (`_StoreOnce`)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.register("action", None, _StoreOnce)
        self.register("action", "store", _StoreOnce)


class _Help(argparse.RawDescriptionHelpFormatter):
    """Each option's default where it has one; descriptions and examples kept as written."""

    def _get_help_string(self, action):
        text = action.help or ""
        if "%(default)" not in text and action.option_strings and not any(
                action.default is none for none in (None, False, argparse.SUPPRESS)):
            text += " (default: %(default)s)"
        return text


POEMS_FILE = "a poems file (JSON Lines: poem_id, title, author, text, tradition; see the README)"


def make_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="tpb", description=__doc__, formatter_class=_Help, epilog=(
        "start with: tpb demo-release sample/raw && tpb build sample/raw sample/dataset\n"
        "every command: tpb COMMAND --help"))
    parser.add_argument("--version", action="version", version=f"%(prog)s {__import__('tangpoetrybench').__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, summary: str, example: str, func):
        p = sub.add_parser(name, help=summary, description=summary[0].upper() + summary[1:] + ".",
                           epilog="example:\n  " + example, formatter_class=_Help)
        p.set_defaults(func=func)
        return p

    p = command("demo-release", "write a synthetic raw release: real poems, painted images, simulated ratings",
                "tpb demo-release sample/raw --poems 8 --seed 1", _demo_release)
    p.add_argument("out", type=Path, help="the folder to write (poems.jsonl, images/, ratings.csv, ...)")
    p.add_argument("--poems", type=int, default=None, help="use the first N poems (default: all)")
    p.add_argument("--poems-file", type=Path, default=None, help=POEMS_FILE + " (default: the bundled poems)")
    p.add_argument("--seed", type=int, default=0, help="the same seed gives the same bytes")
    p.add_argument("--size", type=int, default=512, help="image side in pixels")
    p.add_argument("--overwrite", action="store_true", help="replace OUT if it exists")
    p.add_argument("--quiet", action="store_true", help="no progress bars")

    p = command("build", "validate, quality-control and aggregate a raw release into a dataset folder (Parquet)",
                "tpb build sample/raw sample/dataset --qc-min-seconds 30\n"
                "  tpb build sample/raw --text-labels-from ocr.jsonl   # a text_labels.csv draft from the OCR", _build)
    p.add_argument("raw", type=Path, help="the raw release folder (layout in the README)")
    p.add_argument("out", type=Path, nargs="?",
                   help="the dataset folder to write; load it with datasets.load_dataset(OUT) (optional with "
                        "--text-labels-from)")
    p.add_argument("--text-labels-from", type=Path, metavar="OCR.jsonl",
                   help="text-ocr results of RAW's images (tpb score --evaluator text-ocr): write a draft "
                        "RAW/text_labels.draft.csv with its evidence beside it, for people to adjudicate")
    p.add_argument("--no-qc", action="store_true", help="keep every rating")
    defaults = QCConfig()
    p.add_argument("--qc-min-seconds", type=_number_or_off(float), default=defaults.min_seconds,
                   help="drop ratings faster than this many seconds ('off' disables)")
    p.add_argument("--qc-straightline-min", type=_number_or_off(int), default=defaults.straightline_min_ratings,
                   help="straight-lining: the fewest ratings of a rater for the rule to apply ('off')")
    p.add_argument("--qc-phase1-min-answers", type=_number_or_off(int), default=defaults.phase1_min_answers,
                   help="Phase-1 floor: the fewest answers of a rater for the rule to apply ('off')")
    p.add_argument("--qc-phase1-min-accuracy", type=_number_or_off(float), default=defaults.phase1_min_accuracy,
                   help="Phase-1 floor: drop raters below this accuracy ('off')")
    p.add_argument("--qc-no-consistency", action="store_true", help="turn off the consistency rule")
    p.add_argument("--max-image-pixels", type=int, default=DEFAULT_MAX_IMAGE_PIXELS,
                   help="refuse larger images before decoding them")
    p.add_argument("--overwrite", action="store_true", help="replace OUT (and a label draft) if it exists")
    p.add_argument("--push", metavar="ORG/NAME", help="then upload OUT to the Hub as this dataset repo")
    p.add_argument("--private", action="store_true",
                   help="with --push: a private repo (without it: the owner's default visibility)")
    p.add_argument("--quiet", action="store_true", help="no progress bars")

    p = command("score", "score images with PAE, a served or hosted judge, a baseline or the OCR, to JSON Lines that "
                "a rerun resumes", "tpb score --dataset sample/dataset --evaluator pae --adapter ORG/PAE --out scores.jsonl\n"
                "  tpb score --dataset sample/dataset --evaluator api --model pae --base-url http://127.0.0.1:8000/v1 "
                "--concurrency 16 --out served.jsonl\n"
                "  tpb score --images sample/raw/images --poems sample/raw/poems.jsonl --evaluator text-ocr --out ocr.jsonl",
                _score)
    p.add_argument("--dataset", help="a built dataset folder or Hub id")
    p.add_argument("--config", default="images", help="with --dataset: images, unseen_generator or song_ci")
    p.add_argument("--split", default="test", help="with --dataset: train, validation or test")
    p.add_argument("--images", type=Path, help="instead of --dataset: a folder of <poem_id>.png or <generator>/<poem_id>.png")
    p.add_argument("--poems", type=Path, help="with --images: " + POEMS_FILE)
    p.add_argument("--evaluator", required=True,
                   choices=["pae", "api", "clipscore", "blipscore", "vqascore", "text-ocr", "recognize"],
                   help="pae (the ten rubric scores), api (PAE's question to a served or hosted model), a scalar "
                        "baseline, text-ocr (text integrity with the OCR's evidence; CPU, offline), or recognize "
                        "(which of four candidate poems the image shows; served with --base-url)")
    p.add_argument("--model", help="Hub id or local folder (default: the evaluator's checkpoint); for api, required: "
                                   "the model name the server knows")
    p.add_argument("--adapter", help="PAE's LoRA adapter, Hub id or local folder (without it: zero-shot)")
    p.add_argument("--backend", default="transformers", choices=["transformers", "vllm"],
                   help="vllm: its own environment and a GPU")
    p.add_argument("--batch-size", type=int, help="images per batch (default: 8; vLLM takes chunks of at least 256, "
                                                "api batches of at least 4 × --concurrency)")
    p.add_argument("--num-workers", type=int,
                   help="processes that decode and prepare batches while the model scores (default: up to 4 beside "
                        "a GPU, 0 on the CPU)")
    p.add_argument("--limit", type=int, help="score only the first N images (default: all)")
    p.add_argument("--device", help="cpu, cuda, cuda:1 ... (default: the GPU when there is one)")
    p.add_argument("--max-pixels", type=int, help="shrink larger images to this many pixels (default: 1024×1024)")
    p.add_argument("--max-new-tokens", type=int, help="PAE's answer length limit (default: 256)")
    p.add_argument("--constrained", action="store_true",
                   help="PAE on transformers: decode only answers in the rubric's JSON form, so every answer parses "
                        "(the vllm backend always does)")
    p.add_argument("--question", choices=["t2v_metrics", "poem"],
                   help="vqascore: t2v_metrics' question, comparable with published VQAScore, or this project's own "
                        "(title, author and full text) (default: t2v_metrics)")
    p.add_argument("--explain", action="store_true",
                   help="pae, api: answer the rubric with a one-sentence reason per dimension too (kept in each "
                        "record's reasons; the default answer length grows to 1536 tokens)")
    p.add_argument("--reason-language", choices=["poem", "en"],
                   help="with --explain: reasons in the poem's language (Chinese; the default) or in English")
    p.add_argument("--readout", choices=["decode", "expected"],
                   help="pae, api: expected = read each dimension's score from the anchors' probabilities (expected "
                        "score, distribution, confidence) instead of decoding the answer (default: decode)")
    p.add_argument("--quantize", choices=["8bit", "4bit"],
                   help="pae on transformers: load the language model quantised by bitsandbytes (a CUDA GPU or the CPU)")
    p.add_argument("--base-url", help="api: an OpenAI-compatible server, e.g. http://127.0.0.1:8000/v1 (default: "
                                      "Hugging Face Inference Providers route --model)")
    p.add_argument("--api-key-env", metavar="NAME",
                   help="api: the environment variable that holds the API key; the key itself is never an argument "
                        "(default: HF_TOKEN)")
    p.add_argument("--concurrency", type=int, help="api: requests in flight at once (default: 8)")
    p.add_argument("--timeout", type=float, help="api: seconds a request may take before it is retried (default: 120)")
    p.add_argument("--retries", type=int,
                   help="api: retries of a request on 429, 5xx, timeouts and lost connections (default: 5)")
    p.add_argument("--repair", type=int, choices=[0, 1],
                   help="api: repair rounds for an answer that does not parse: asked again in the same conversation "
                        "for the JSON alone (default: 1; 0 turns it off)")
    p.add_argument("--price-in", type=float, metavar="USD",
                   help="api: USD per million prompt tokens, for a cost estimate at the end (default: none)")
    p.add_argument("--price-out", type=float, metavar="USD",
                   help="api: USD per million completion tokens, for the cost estimate (default: none)")
    p.add_argument("--out", type=Path, required=True, help="the results file (JSON Lines); an existing one is resumed")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--candidates", type=Path, metavar="FILE",
                   help="recognize: each poem's four candidates (tpb distractors POEMS --out FILE)")
    p.add_argument("--orders", default="rotations", choices=["rotations", "all"],
                   help="recognize: ask in the four cyclic rotations of the candidates, or in all 24 orders")

    p = command("agree", "how well an evaluator's scores agree with the human ones, with intervals and the human "
                "noise floor", "tpb agree --dataset sample/dataset --scores scores.jsonl --out agree.json", _agree)
    p.add_argument("--dataset", required=True, help="a built dataset folder or Hub id")
    p.add_argument("--scores", type=Path, required=True, help="one evaluator's results (tpb score --out)")
    p.add_argument("--config", default="images", choices=["images", "unseen_generator", "song_ci"],
                   help="the held-out poems, or a generalization test; the rubric follows the poems' tradition")
    p.add_argument("--split", default="test", help="the split the scores cover")
    p.add_argument("--bootstrap", type=int, default=10_000, help="resamples of poems for the 95%% intervals (0: none)")
    p.add_argument("--seed", type=int, default=0, help="the bootstrap's seed")
    p.add_argument("--out", type=Path, help="also write every figure as JSON here")
    p.add_argument("--margin", type=float, default=0.05,
                   help="human pairs: two images of a poem whose human quality differs by at least this")
    p.add_argument("--literal-bias", action="store_true",
                   help="also the literal-bias test: accuracy when the more recognizable image wins minus when the "
                        "less recognizable one does, with a bootstrap bound, Cohen's d and a permutation p")

    p = command("compare", "which of two illustrations of a poem is better: a pairwise judge asked every pair in both "
                "orders, records resumable", "tpb compare --dataset sample/dataset --evaluator pae --model MODEL "
                "--out pairs.jsonl", _compare)
    p.add_argument("--dataset", required=True, help="a built dataset folder or Hub id")
    p.add_argument("--evaluator", required=True, help="a registered pairwise judge: pae, api, semjudge (or one a plugin adds)")
    p.add_argument("--out", type=Path, required=True, help="the pair records (JSON Lines), resumed if they exist")
    p.add_argument("--task", default="pairwise", choices=["pairwise"], help="the judging task (compare: pairwise)")
    p.add_argument("--config", default="images", choices=["images", "unseen_generator", "song_ci"])
    p.add_argument("--split", default="test")
    p.add_argument("--margin", type=float, default=0.05, help="the human pairs: human quality apart by at least this")
    p.add_argument("--all-pairs", action="store_true", help="every pair of images of one poem, not only human pairs")
    p.add_argument("--model", help="the base model (pae: Hub id or folder) or the name the server knows (api)")
    p.add_argument("--adapter", help="pae: a LoRA adapter (Hub id or folder)")
    p.add_argument("--backend", default="transformers", choices=["transformers", "vllm"])
    p.add_argument("--device")
    p.add_argument("--constrained", action="store_true", help="pae: decode every answer in the pairwise JSON form")
    p.add_argument("--max-pixels", type=int)
    p.add_argument("--max-new-tokens", type=int)
    p.add_argument("--base-url", help="api: the OpenAI-compatible server's URL")
    p.add_argument("--api-key-env", help="api: the environment variable holding the key")
    p.add_argument("--concurrency", type=int)
    p.add_argument("--timeout", type=float)
    p.add_argument("--retries", type=int)
    p.add_argument("--batch-size", type=int, default=8, help="pairs per batch (two questions each)")
    p.add_argument("--limit", type=int, help="only the first N pairs")

    p = command("distractors", "choose each poem's three Phase-1 distractors from the same corpus by text similarity, "
                "and check that the texts alone do not give the answer away",
                "tpb distractors poems.jsonl --out candidates.jsonl --same-form --report distractors.json", _distractors)
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

    p = command("report", "the paper's human-data analysis of a built dataset, as Markdown, HTML and JSON",
                "tpb report --dataset sample/dataset --out report/ --scores scores.jsonl --ocr ocr.jsonl", _report)
    p.add_argument("--dataset", required=True, help="a built dataset folder or Hub id")
    p.add_argument("--out", type=Path, required=True, help="the report folder (report.md, report.html, numbers.json)")
    p.add_argument("--scores", type=Path, nargs="*", action="extend",
                   help="evaluators' results (tpb score), one file each: Table 4 (repeat the option, or list the files)")
    p.add_argument("--pairs", type=Path, nargs="*", action="extend", help="pairwise judges' results (tpb compare), one "
                   "file each: Tables 4P, 4L and 6 beside the --scores evaluators")
    p.add_argument("--ocr", type=Path, metavar="OCR.jsonl",
                   help="text-ocr results (tpb score --evaluator text-ocr): Table 3 from the OCR beside the "
                        "adjudicated one, with precision and recall per issue type")
    p.add_argument("--split", default="test", help="the split the scores cover")
    p.add_argument("--bootstrap", type=int, default=10_000, help="resamples for the 95%% intervals")
    p.add_argument("--seed", type=int, default=0, help="the bootstrap's seed")
    p.add_argument("--graphs", type=Path, metavar="GRAPHS.jsonl",
                   help="SemJudge graphs (tpb explain --out): one image's graph per generator in the report")

    p = command("generate", "illustrate every poem with a diffusers text-to-image pipeline and the paper's prompt, "
                "into a raw release that a rerun resumes",
                "tpb generate --pipeline Kwai-Kolors/Kolors-diffusers --poems poems.jsonl --out raw --generator kolors",
                _generate)
    p.add_argument("--pipeline", required=True, help="a diffusers text-to-image pipeline: Hub id or local folder")
    p.add_argument("--poems", type=Path, required=True, help=POEMS_FILE)
    p.add_argument("--out", type=Path, required=True,
                   help="the raw release folder: images/GENERATOR/<poem_id>.png, poems.jsonl, generation.json")
    p.add_argument("--generator", required=True, help="the generator's key: its folder under images/")
    p.add_argument("--prompt-file", type=Path,
                   help="a variant prompt with {title}, {author} and {content} (default: the paper's Appendix B prompt)")
    p.add_argument("--seed", type=int, default=0, help="each image's seed is derived from this and its poem_id")
    p.add_argument("--steps", type=int, default=30, help="denoising steps")
    p.add_argument("--guidance-scale", type=float, default=5.0, help="classifier-free guidance scale")
    p.add_argument("--height", type=int, default=1024, help="image height in pixels")
    p.add_argument("--width", type=int, default=1024, help="image width in pixels")
    p.add_argument("--negative-prompt", help="a negative prompt, for pipelines that take one (default: none)")
    p.add_argument("--device", help="cpu, cuda, cuda:1 ... (default: the GPU when there is one; bf16 there)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--prompt", metavar="VARIANT|FILE",
                   help="the prompt: appendix-b (the paper's, the default), terse, rich, or a template file with "
                        "{title}, {author}, {content}, {lines}, {form}, {imagery}, {paraphrase}")

    p = command("leaderboard", "rank generators by PAE-estimated quality beside the human scores, as Markdown, HTML "
                "and JSON", "tpb leaderboard --dataset sample/dataset --scores rated.jsonl new.jsonl --out board/",
                _leaderboard)
    p.add_argument("--dataset", required=True, help="a built dataset folder or Hub id (its human scores)")
    p.add_argument("--scores", type=Path, nargs="+", required=True, action="extend",
                   help="PAE results (tpb score --out) covering every generator, all made with the same settings "
                        "(repeat the option, or list the files)")
    p.add_argument("--out", type=Path, required=True,
                   help="the folder to write (leaderboard.md, leaderboard.html, leaderboard.json, figures/)")
    p.add_argument("--split", default="test", help="the dataset split whose poems the generators are compared on")
    p.add_argument("--bootstrap", type=int, default=10_000, help="resamples of poems for the 95%% intervals (0: none)")
    p.add_argument("--seed", type=int, default=0, help="the bootstrap's seed")
    p.add_argument("--eval-results", type=Path, metavar="DIR",
                   help="also write DIR/<generator>/.eval_results/tangpoetrybench.yaml, the Hub's Eval Results file "
                        "each generator's model repo would carry")
    p.add_argument("--dataset-id", metavar="ORG/NAME",
                   help="with --eval-results: the dataset's Hub repo (default: --dataset when it is a Hub id, else "
                        "ORG/TangPoetryBench)")
    p.add_argument("--dataset-revision", metavar="SHA", help="with --eval-results: the dataset's revision hash")
    p.add_argument("--recognize", type=Path, nargs="+", metavar="FILE",
                   help="recognize results (tpb score --evaluator recognize) of the same generators: a "
                        "recognizability table with intervals")
    p.add_argument("--generation", type=Path, nargs="+", metavar="generation.json",
                   help="tpb generate's records of the generators: one pipeline's prompt variants side by side, and "
                        "whether the ranking changes with the prompt")

    p = command("model-card", "write a trained adapter's model card from tpb agree results",
                "tpb model-card --agree agree.json --adapter pae-grpo --dataset ORG/TangPoetryBench", _model_card)
    p.add_argument("--agree", type=Path, required=True, help="tpb agree --out results on the test split")
    p.add_argument("--adapter", required=True, help="the adapter folder (the card goes to its README.md) or Hub id")
    p.add_argument("--base-model", default="Qwen/Qwen3-VL-8B-Instruct", help="the model the adapter was trained on")
    p.add_argument("--name", default="PAE", help="the model's name in the card")
    p.add_argument("--dataset", help="the dataset's Hub id (default: as in the agree results)")
    p.add_argument("--license", default="apache-2.0", help="the adapter's licence (a Hub licence id)")
    p.add_argument("--recipe", help="a line on this run's settings")
    p.add_argument("--out", type=Path, help="where to write the card (default: ADAPTER/README.md)")

    p = command("publish", "write the Hub repos (dataset, model, metric, Space), each self-contained, and push them",
                "tpb publish hub --dataset sample/dataset --adapter pae-grpo --agree agree.json --push ORG", _publish)
    p.add_argument("out", type=Path, nargs="?", help="a folder: OUT/dataset, OUT/model, OUT/metric, OUT/space")
    p.add_argument("--dataset", type=Path, help="a dataset folder made by tpb build")
    p.add_argument("--adapter", type=Path, help="a trained PAE adapter folder")
    p.add_argument("--agree", type=Path, help="with --adapter: tpb agree --out results for its model card")
    p.add_argument("--base-model", default="Qwen/Qwen3-VL-8B-Instruct", help="the model the adapter was trained on")
    p.add_argument("--org", default="ORG", help="the Hub owner the cards name (ORG is a placeholder)")
    p.add_argument("--push", metavar="ORG", help="upload each folder to its repo under ORG (needs `hf auth login`)")
    p.add_argument("--private", action="store_true",
                   help="with --push: private repos (without it: the owner's default visibility)")
    p.add_argument("--eval-results", metavar="ORG/MODEL",
                   help="instead: open a pull request (never a push) adding --from's Eval Results to this model repo")
    p.add_argument("--from", dest="source", type=Path, metavar="DIR",
                   help="with --eval-results: a generator's folder of tpb leaderboard --eval-results DIR")
    p.add_argument("--dry-run", action="store_true", help="with --eval-results: show the pull request, send nothing")

    p = command("tiny-models", "build tiny random-weight models, for offline runs of the pipeline (never for figures)",
                "tpb tiny-models sample/models", _tiny_models)
    p.add_argument("out", type=Path, help="the folder to write: OUT/qwen3-vl, OUT/clip, ..., OUT/text-to-image")
    p.add_argument("--overwrite", action="store_true", help="rebuild even if OUT holds this version's models")

    p = command("explain", "print SemJudge's semiosis graphs of a poem and an image, as indented trees",
                "tpb explain --image images/g1/p1.png --poem p1 --model Qwen/Qwen3-VL-8B-Instruct "
                "--base-url http://127.0.0.1:8000/v1", _explain)
    p.add_argument("--image", type=Path, required=True, help="the image file")
    p.add_argument("--poem", required=True, help="a poem_id (in --poems, default the bundled poems) or a poems file "
                                                 "holding one poem")
    p.add_argument("--poems", type=Path, help="where --poem's poem_id is looked up: " + POEMS_FILE)
    p.add_argument("--model", required=True, help="the model the server knows; with --local, a Hub id or folder")
    p.add_argument("--base-url", help="an OpenAI-compatible server (default: Hugging Face Inference Providers)")
    p.add_argument("--api-key-env", metavar="NAME", help="the environment variable holding the API key (default: HF_TOKEN)")
    p.add_argument("--local", action="store_true", help="ask a local Qwen3-VL on transformers instead of a server")
    p.add_argument("--device", help="with --local: cpu, cuda, ... (default: the GPU when there is one)")
    p.add_argument("--max-new-tokens", type=int, help="a graph's length limit (default: 1536)")
    p.add_argument("--cache", type=Path, help="a folder of graphs kept between runs (default: none)")
    p.add_argument("--out", type=Path, help="append both graphs as one JSON line here (a graphs file for tpb report)")
    p.add_argument("--image-id", help="the image's id in --out (default: FOLDER/STEM of --image, generator/poem_id)")

    p = command("convert-poems", "convert chinese-poetry JSONL files (tang300, songci) to a poems file",
                "tpb convert-poems tang300.jsonl songci_busuanzi.jsonl poems.jsonl", _convert_poems)
    p.add_argument("sources", type=Path, nargs="+", help="chinese-poetry JSON Lines files")
    p.add_argument("out", type=Path, help="the poems file to write")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = make_parser().parse_args(argv)
    # said on every run (and by every data-loader worker) by a library's import, about that library's own code
    warnings.filterwarnings("ignore", message=r"`torch\.jit\.script` is deprecated", category=FutureWarning)
    if getattr(args, "quiet", False):
        from .models import quiet_progress

        quiet_progress()
    try:
        args.func(args)
    except (DataError, FileExistsError, ValueError, ImportError, OSError, SystematicFailure, RunStopped) as exc:  # OSError: a model that cannot be loaded
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
