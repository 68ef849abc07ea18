"""What every command's parser shares: options stored once, help that shows defaults, and small value types."""

from __future__ import annotations

import argparse
from typing import Callable

POEMS_FILE = "a poems file (JSON Lines: poem_id, title, author, text, tradition; see the README)"


def add_max_image_pixels(p: argparse.ArgumentParser) -> None:
    """--max-image-pixels: the bound every command that reads images checks from each image's header."""
    from ..files import DEFAULT_MAX_IMAGE_PIXELS

    p.add_argument("--max-image-pixels", type=int, default=DEFAULT_MAX_IMAGE_PIXELS,
                   help="refuse larger images (width × height) before decoding them")


def number_or_off(cast: Callable[[str], float | int]) -> Callable[[str], float | int | None]:
    """An option's type: a number, or `off` / `none` for None (a rule turned off)."""
    def parse(text: str):
        if text.lower() in ("off", "none"):
            return None
        try:
            return cast(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number or 'off', got {text!r}") from None
    return parse


class StoreOnce(argparse._StoreAction):
    """An option that takes one value (or one list) refuses to be given twice, instead of silently keeping the last;
    options that gather several values say `action="extend"`."""

    def __call__(self, parser, namespace, values, option_string=None):
        given = namespace.__dict__.setdefault("_given_once", set())
        if option_string is not None and self.dest in given:
            parser.error(f"{'/'.join(self.option_strings)} was given twice: give it once")
        given.add(self.dest)
        super().__call__(parser, namespace, values, option_string)


class Parser(argparse.ArgumentParser):
    """tpb's parser and each command's: every plain option is stored once (`StoreOnce`)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.register("action", None, StoreOnce)
        self.register("action", "store", StoreOnce)


class Help(argparse.RawDescriptionHelpFormatter):
    """Each option's default where it has one; descriptions and examples kept as written."""

    def _get_help_string(self, action):
        text = action.help or ""
        if "%(default)" not in text and action.option_strings and not any(
                action.default is none for none in (None, False, argparse.SUPPRESS)):
            text += " (default: %(default)s)"
        return text
