"""Generation prompt variants, from terse to richly specified, to probe a generator's ceiling (`tpb generate --prompt`).

- `appendix-b` (the default): the paper's Appendix B prompt, verbatim (`rubrics/generation_prompt.txt`);
- `terse`: the title, the author, the poem and "a traditional Chinese painting" (`rubrics/generation_prompt_terse.txt`);
- `rich`: the poem line by line, its form, a modern-reading slot and its imagery spelled out
  (`rubrics/generation_prompt_rich.txt`).

Each is a template over the poem's own fields — nothing is written by hand per poem. Placeholders: `{title}`,
`{author}`, `{content}` (the poem's text), `{lines}` (one line per line, numbered), `{form}` (the poem's form, its
tune for a Song Ci, or "classical poem"), `{imagery}` (the images the poem names, found with the lexicon
`rubrics/imagery_lexicon.txt`: each of its words in the poem, longest first, as "English name (word)", in the
poem's order) and `{paraphrase}`. A poems file has no paraphrase field, so `{paraphrase}` says that none is given
and points the painter to the lines and the imagery (`NO_PARAPHRASE`). A FILE may use any of these.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path

from ..errors import DataError, Problem
from ..poems import Poem

VARIANTS = {"appendix-b": "generation_prompt.txt", "terse": "generation_prompt_terse.txt",
            "rich": "generation_prompt_rich.txt"}
DEFAULT_VARIANT = "appendix-b"
FIELDS = ("title", "author", "content", "lines", "form", "imagery", "paraphrase")
PLACEHOLDER = re.compile(r"\{(" + "|".join(FIELDS) + r")\}")
LEXICON = "imagery_lexicon.txt"
NO_PARAPHRASE = "none is given (the poems file has none); paint from the lines and the imagery they name."


@dataclass(frozen=True)
class PromptVariant:
    name: str  # appendix-b | terse | rich | file
    template: str
    source: str  # the file it came from


def _packaged(file: str) -> str:
    return (resources.files("tangpoetrybench") / "rubrics" / file).read_text(encoding="utf-8")


def resolve_prompt(spec: str | Path | None) -> PromptVariant:
    """A variant by name, or a template FILE (which must place the poem, `{content}` or `{lines}`)."""
    if spec is None or str(spec) in VARIANTS:
        name = DEFAULT_VARIANT if spec is None else str(spec)
        return PromptVariant(name, _packaged(VARIANTS[name]), f"tangpoetrybench/rubrics/{VARIANTS[name]}")
    path = Path(spec)
    try:
        template = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise DataError(Problem(str(path), f"not a prompt variant ({', '.join(VARIANTS)}) and cannot be read as a "
                                f"prompt file: {exc}")) from None
    if "{content}" not in template and "{lines}" not in template:
        raise DataError(Problem(str(path), "the prompt has no {content} (or {lines}) placeholder for the poem's text "
                                f"(it may also use {', '.join('{' + f + '}' for f in FIELDS)})"))
    return PromptVariant("file", template, str(path))


@lru_cache(maxsize=1)
def imagery_lexicon() -> tuple[tuple[str, str], ...]:
    """(word, English name) pairs, longest word first."""
    pairs = []
    for line in _packaged(LEXICON).splitlines():
        if line.strip() and not line.startswith("#"):
            word, name = line.split("\t")
            pairs.append((word, name))
    return tuple(sorted(pairs, key=lambda p: -len(p[0])))


def imagery(text: str) -> str:
    """The imagery the poem names, as "name (word)", in the order of first mention; each name once."""
    found: list[tuple[int, str, str]] = []
    taken = [False] * len(text)
    for word, name in imagery_lexicon():
        for m in re.finditer(re.escape(word), text):
            if not any(taken[m.start():m.end()]):
                taken[m.start():m.end()] = [True] * len(word)
                found.append((m.start(), name, word))
    seen, out = set(), []
    for _, name, word in sorted(found):
        if name not in seen:
            seen.add(name)
            out.append(f"{name} ({word})")
    return ", ".join(out) or "the scene the lines describe"


def prompt_fields(poem: Poem) -> dict[str, str]:
    return {"title": poem.title, "author": poem.author, "content": poem.text,
            "lines": "\n".join(f"{i}. {line}" for i, line in enumerate(poem.lines, start=1)),
            "form": poem.form or (f"ci to the tune {poem.tune}" if poem.tune else "classical poem"),
            "imagery": imagery(poem.text), "paraphrase": NO_PARAPHRASE}


def fill_template(template: str, poem: Poem) -> str:
    """The prompt for one poem, in one pass (a brace in a poem is never read as a placeholder)."""
    values = prompt_fields(poem)
    return PLACEHOLDER.sub(lambda m: values[m.group(1)], template)
