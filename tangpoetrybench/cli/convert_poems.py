"""`tpb convert-poems`: convert chinese-poetry JSONL files (tang300, songci) to a poems file."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..numeric import counted


SUMMARY = 'convert chinese-poetry JSONL files (tang300, songci) to a poems file'
EXAMPLE = 'tpb convert-poems tang300.jsonl songci_busuanzi.jsonl poems.jsonl'


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("sources", type=Path, nargs="+", help="chinese-poetry JSON Lines files")
    p.add_argument("out", type=Path, help="the poems file to write")


def run(args: argparse.Namespace) -> None:
    from ..poems import convert_chinese_poetry, write_poems

    poems = [p for src in args.sources for p in convert_chinese_poetry(src)]
    write_poems(poems, args.out)
    print(f"Wrote {counted(len(poems), 'poem')} to {args.out}")
