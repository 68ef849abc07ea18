"""`tpb generate`: illustrate every poem of a poems file with a diffusers text-to-image pipeline, as the paper did.

- The prompt is the paper's Appendix B prompt (`rubrics/generation_prompt.txt`), with `{title}`, `{author}` and
  `{content}` filled in from the poem; `prompt` takes a variant (`terse`, `rich`) or a template file
  (`prompt_variants`), and `generation.json` records which (`prompt_variant`).
- Image i of generator KEY is `OUT/images/KEY/<poem_id>.png`, the raw-release layout (docs/dataset.md); the poems go
  to `OUT/poems.jsonl`, so `tpb score --images OUT/images --poems OUT/poems.jsonl` scores them.
- `split` illustrates only one split's poems (the leaderboard compares generators on one split): the split each poem
  of the file gives, else the default split by poem that `tpb build` makes of the same poems; `limit` the first N.
- Each image has its own seed, derived from (seed, poem_id) by SHA-256: the same settings give the same bytes, in
  any order and with any number of processes.
- Images are written to a hidden temporary file and renamed into place (`files.atomic_file`), so an image file is
  always whole and never written through a symbolic link planted in OUT. A rerun
  skips the images already there; it refuses other settings for the same generator (they would mix two runs).
- `OUT/generation.json` records, per generator, the pipeline, its class, the diffusers and torch versions, the
  prompt template and its SHA-256, every setting, and every image's seed and prompt exactly as sent.
- Under `accelerate launch` or `torchrun` each process generates every n-th poem on its own device.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import logging
from dataclasses import asdict, dataclass
from importlib import resources
from pathlib import Path
from typing import Callable

from tqdm.auto import tqdm


from ..files import atomic_file, local_or_hub, open_image, write_file
from ..errors import ImageError
from ..models import pick_dtype, process_state
from ..poems import Poem, check_generator, read_poems, write_poems
from .prompt_variants import fill_template, resolve_prompt

PROMPT_FILE = "generation_prompt.txt"
MANIFEST = "generation.json"
RANDOM_WEIGHTS_INDEX_KEY = "_tpb_random_weights"  # in model_index.json of `tpb tiny-models`' pipeline
# Pipelines that need an input image, a mask, a control signal, or make something other than one image.
NOT_TEXT_TO_IMAGE = ("Img2Img", "Inpaint", "ControlNet", "Control", "Video", "Audio", "Edit", "Upscale", "Depth2Img",
                     "Variation", "Pix2Pix", "Kontext", "Prior")
CONDITIONING_INPUTS = {"image", "mask_image", "control_image", "init_image", "video"}


def paper_prompt() -> str:
    """The paper's Appendix B generation prompt, verbatim, with `{title}`, `{author}` and `{content}` placeholders."""
    return (resources.files("tangpoetrybench") / "rubrics" / PROMPT_FILE).read_text(encoding="utf-8")


def fill_prompt(template: str, poem: Poem) -> str:
    """The prompt for one poem, in one pass (a brace in a poem is never read as a placeholder); the placeholders are
    `prompt_variants.FIELDS`."""
    return fill_template(template, poem)


def image_seed(seed: int, poem_id: str) -> int:
    """A per-image seed from (seed, poem_id): the first 8 bytes of SHA-256, below 2**63. Never Python's `hash()`,
    which changes between processes."""
    digest = hashlib.sha256(f"{seed}:{poem_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") % 2**63


@dataclass(frozen=True)
class GenerationSettings:
    """Every setting that changes an image; a rerun for the same generator must use the same ones."""

    pipeline: str
    seed: int = 0
    steps: int = 30
    guidance_scale: float = 5.0
    height: int = 1024
    width: int = 1024
    negative_prompt: str | None = None
    prompt_sha256: str = ""


INSTALL_HINT = 'tpb generate needs diffusers: pip install -e ".[generate]" (or pip install "tangpoetrybench[generate]")'


@dataclass
class GenerationSummary:
    out: Path
    generator: str
    total: int  # poems illustrated (the poems file's, or those of `split`, up to `limit`)
    skipped: int  # images already there
    generated: int  # by this run, all processes
    process_generated: int = 0
    process_index: int = 0
    num_processes: int = 1
    left_out: int = 0  # poems of the file not illustrated (another split, or past the limit)

    @property
    def main_process(self) -> bool:
        return self.process_index == 0


def chosen_poems(poems: list[Poem], split: str | None = None, limit: int | None = None) -> list[Poem]:
    """The poems to illustrate: those of `split` (each poem's own, else the default split by poem, as `tpb build`
    assigns them), then the first `limit`."""
    if split is not None:
        from ..dataset.builder import poem_splits
        from ..poems import SPLITS

        if split not in SPLITS:
            raise ValueError(f"--split {split!r}: one of {', '.join(SPLITS)}")
        splits = poem_splits({p.poem_id: p for p in poems})
        poems = [p for p in poems if splits[p.poem_id] == split]
        if not poems:
            raise ValueError(f"no poem of the poems file is in the {split} split")
    if limit is not None and limit < 1:
        raise ValueError("--limit must be at least 1")
    return poems[:limit]


def check_pipeline_path(pipeline: str) -> None:
    """A local folder must hold a diffusers pipeline; anything else must look like a Hub id (ORG/NAME)."""
    path = Path(local_or_hub(pipeline, "pipeline")).expanduser()
    if path.exists() and not (path / "model_index.json").is_file():
        raise ValueError(f"{pipeline} is not a diffusers pipeline folder (it has no model_index.json): give a "
                         "folder written by save_pretrained, or a Hub id such as Kwai-Kolors/Kolors-diffusers")


def is_text_to_image(cls: type) -> bool:
    """A pipeline class that makes an image from a prompt alone: it takes `prompt` (or is one of diffusers' own
    text-to-image classes) and no input image, mask or control signal, and its name says no other task."""
    from diffusers.pipelines.auto_pipeline import AUTO_TEXT2IMAGE_PIPELINES_MAPPING

    known = any(c is cls for c in AUTO_TEXT2IMAGE_PIPELINES_MAPPING.values())
    params = set(inspect.signature(inspect.unwrap(cls.__call__)).parameters)
    return not (any(marker in cls.__name__ for marker in NOT_TEXT_TO_IMAGE) or CONDITIONING_INPUTS & params
                or ("prompt" not in params and not known))


def pipeline_class(pipeline: str) -> tuple[type, dict]:
    """The pipeline's class and its model_index.json, refused unless it is a diffusers text-to-image pipeline.
    Only the index is read (downloaded, for a Hub id): nothing is loaded or written before this check."""
    try:
        import diffusers
        from diffusers import DiffusionPipeline
    except ImportError:
        raise ImportError(INSTALL_HINT) from None

    check_pipeline_path(pipeline)
    try:
        index = DiffusionPipeline.load_config(pipeline)
    except (OSError, ValueError) as exc:
        raise ValueError(f"cannot read the pipeline {pipeline}: {str(exc).splitlines()[0]}") from None
    name = index.get("_class_name", "")
    cls = getattr(diffusers, name, None)
    if cls is None:
        raise ValueError(f"{pipeline} is a {name or 'nameless'} pipeline, which this diffusers does not have "
                         "(custom pipelines run remote code and are refused): use a text-to-image pipeline of diffusers")
    if not isinstance(cls, type):  # diffusers' placeholder for a class whose extra packages are missing
        raise ImportError(f"{name} needs packages that are not installed: pip install {' '.join(cls._backends)}")
    if not is_text_to_image(cls):
        raise ValueError(f"{pipeline} is a {name}, not a text-to-image pipeline (it needs more than a prompt): "
                         "give a text-to-image pipeline such as StableDiffusionXLPipeline or KolorsPipeline")
    return cls, index


class OnceEach(logging.Filter):
    """Lets a warning through once per kind (its text up to the first colon): diffusers warns that CLIP read only
    the first 77 tokens on every prompt, each time with the prompt's cut-off part."""

    def __init__(self):
        super().__init__()
        self.seen: set[str] = set()

    def filter(self, record: logging.LogRecord) -> bool:
        kind = record.getMessage().split(":", 1)[0]
        if record.levelno < logging.WARNING or kind not in self.seen:
            self.seen.add(kind)
            return True
        return False


def warn_once_each(pipe) -> None:
    """Each kind of warning of the pipeline's modules (its class and the classes it inherits from) shown once."""
    once = OnceEach()
    for module in {c.__module__ for c in type(pipe).__mro__ if c.__module__.startswith("diffusers")}:
        logging.getLogger(module).addFilter(once)


def load_pipeline(cls: type, pipeline: str, device):
    """The pipeline on `device`, bf16 on a GPU and fp32 on the CPU; safetensors only, no remote code. Its loading
    bar follows huggingface_hub's switch, as transformers' does (`--quiet` turns both off)."""
    from diffusers.utils import logging as diffusers_logging
    from huggingface_hub.utils import are_progress_bars_disabled

    if are_progress_bars_disabled():
        diffusers_logging.disable_progress_bar()
    try:
        pipe = cls.from_pretrained(pipeline, dtype=pick_dtype(device), use_safetensors=True)
    except (OSError, ValueError) as exc:
        raise ValueError(f"cannot load the pipeline {pipeline}: {str(exc).splitlines()[0]}") from None
    pipe.set_progress_bar_config(disable=True)
    warn_once_each(pipe)
    return pipe.to(device)


def image_path(out: Path, generator: str, poem_id: str) -> Path:
    return out / "images" / generator / f"{poem_id}.png"


def _complete(path: Path) -> bool:
    """An image file that decodes (a file copied in by hand may be cut short; ours are renamed into place whole)."""
    try:
        open_image(path).close()
        return True
    except ImageError:
        return False


def _manifest_entry(settings: GenerationSettings, template: str, prompt_file: str | None, pipe_class: str,
                    poems: list[Poem], tiny: bool) -> dict:
    import diffusers
    import torch

    return {
        "pipeline": settings.pipeline, "pipeline_class": pipe_class, "diffusers_version": diffusers.__version__,
        "torch_version": torch.__version__, "prompt_file": prompt_file or f"tangpoetrybench/rubrics/{PROMPT_FILE}",
        "prompt_template": template, "prompt_sha256": settings.prompt_sha256, "random_weights": tiny,
        "settings": asdict(settings), "dtype": "bfloat16 on a GPU, float32 on the CPU",
        "images": {p.poem_id: {"seed": image_seed(settings.seed, p.poem_id), "prompt": fill_prompt(template, p)}
                   for p in poems},
    }


def _check_poems_file(out: Path, poems: list[Poem]) -> None:
    """OUT/poems.jsonl, when it exists, must hold these poems as they are (the images are of them)."""
    path = out / "poems.jsonl"
    if not path.is_file():
        return
    held = {p.poem_id: p for p in read_poems(path)}
    for poem in poems:
        if held.get(poem.poem_id) != poem:
            state = "has no" if poem.poem_id not in held else "holds another version of"
            raise ValueError(f"{path} {state} poem {poem.poem_id!r}: write to another --out, or generate with the "
                             "poems of that file")


def _check_same_run(manifest: dict, generator: str, entry: dict, path: Path) -> None:
    held = manifest.get("generators", {}).get(generator)
    if held is None:
        return
    advice = f"choose another --generator or --out, or delete {path.parent / 'images' / generator} to start over"
    for key, value in entry["settings"].items():
        if held["settings"].get(key) != value:
            raise ValueError(f"{path} says the images of {generator!r} were made with {key} "
                             f"{held['settings'].get(key)!r}, not {value!r}: {advice}")


def generate_images(
    pipeline: str,
    poems_file: Path | str,
    out: Path | str,
    generator: str,
    seed: int = 0,
    steps: int = 30,
    guidance_scale: float = 5.0,
    height: int = 1024,
    width: int = 1024,
    negative_prompt: str | None = None,
    prompt_file: Path | str | None = None,
    device: str | None = None,
    progress: bool = True,
    after_image: Callable[[str], None] | None = None,
    prompt: str | Path | None = None,
    split: str | None = None,
    limit: int | None = None,
) -> GenerationSummary:
    """Generate the missing images of `generator` for every poem of `poems_file` (or those of `split`, up to
    `limit`: `chosen_poems`) into the raw release `out`; `OUT/poems.jsonl` holds the whole file's poems.

    `prompt` is a variant (`appendix-b`, the default, `terse`, `rich`) or a template file (`prompt_variants`);
    `prompt_file` is a template file too, kept for older callers.

    Everything is checked (poems, prompt, pipeline kind, an earlier run's settings) before anything is written.
    `after_image(poem_id)` is called after each image is in place."""
    from ..models import pick_device

    check_generator(generator, "--generator")
    every_poem = read_poems(poems_file)
    poems = chosen_poems(every_poem, split, limit)
    if prompt is not None and prompt_file is not None:
        raise ValueError("give --prompt or --prompt-file, not both")
    variant = resolve_prompt(prompt if prompt is not None else prompt_file)
    template = variant.template
    pipe_class, index = pipeline_class(pipeline)
    out = Path(out)
    settings = GenerationSettings(pipeline=pipeline, seed=seed, steps=steps, guidance_scale=guidance_scale,
                                  height=height, width=width, negative_prompt=negative_prompt,
                                  prompt_sha256=hashlib.sha256(template.encode("utf-8")).hexdigest())
    entry = _manifest_entry(settings, template, variant.source, pipe_class.__name__, poems,
                            bool(index.get(RANDOM_WEIGHTS_INDEX_KEY)))
    entry["prompt_variant"] = variant.name
    manifest_path = out / MANIFEST
    manifest = json.loads(manifest_path.read_text(encoding="utf-8")) if manifest_path.is_file() else {}
    _check_same_run(manifest, generator, entry, manifest_path)
    _check_poems_file(out, every_poem)

    state = process_state()
    rank, world = (state.process_index, state.num_processes) if state else (0, 1)
    dev = pick_device(device)
    pipe = load_pipeline(pipe_class, pipeline, dev)  # before anything is written: a pipeline that fails to load leaves no trace
    if rank == 0:
        out.mkdir(parents=True, exist_ok=True)
        for stale in (out / "images" / generator).glob(".*.tmp"):  # left by a killed run: never an image
            stale.unlink()
        if not (out / "poems.jsonl").is_file():
            write_poems(every_poem, out / "poems.jsonl")
        held = manifest.get("generators", {}).get(generator, {})
        entry["images"] = {**held.get("images", {}), **entry["images"]}
        manifest.setdefault("generators", {})[generator] = entry
        write_file(manifest_path, json.dumps(manifest, ensure_ascii=False, indent=1) + "\n")
    if world > 1:
        state.wait_for_everyone()

    done = {p.poem_id for p in poems if image_path(out, generator, p.poem_id).is_file()
            and _complete(image_path(out, generator, p.poem_id))}
    todo = [p for i, p in enumerate(poems) if p.poem_id not in done and i % world == rank]
    made = 0
    for poem in tqdm(todo, desc=f"Generating ({generator})", unit="image", disable=not progress or rank != 0):
        image = _generate_one(pipe, entry["images"][poem.poem_id], settings)
        with atomic_file(image_path(out, generator, poem.poem_id), "wb", root=out) as f:
            image.save(f, format="PNG")
        made += 1
        if after_image is not None:
            after_image(poem.poem_id)
    total = made
    if world > 1:
        import torch
        import torch.distributed as dist

        count = torch.tensor([made], device=state.device)
        dist.all_reduce(count)
        total = int(count[0])
        state.wait_for_everyone()
    return GenerationSummary(out=out, generator=generator, total=len(poems), skipped=len(done), generated=total,
                             process_generated=made, process_index=rank, num_processes=world,
                             left_out=len(every_poem) - len(poems))


def _generate_one(pipe, image: dict, settings: GenerationSettings):
    """One image from its prompt and seed; the noise is drawn on the CPU, so a seed gives the same start on any
    device."""
    import torch

    kwargs = {"negative_prompt": settings.negative_prompt} if settings.negative_prompt else {}
    result = pipe(prompt=image["prompt"], num_inference_steps=settings.steps, guidance_scale=settings.guidance_scale,
                  height=settings.height, width=settings.width, generator=torch.Generator("cpu").manual_seed(image["seed"]),
                  output_type="pil", **kwargs)
    return result.images[0]
