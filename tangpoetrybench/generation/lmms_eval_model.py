"""`tpb_diffusers`: a diffusers text-to-image pipeline as an lmms-eval model, generating exactly as `tpb generate`.

lmms-eval (0.7.x) finds it through the `lmms_eval.models` entry point this package declares, and runs it on the
`tangpoetrybench` task (harness/lmms_eval/tangpoetrybench/):

    lmms-eval --model tpb_diffusers --model_args pretrained=PIPELINE,generator=KEY,output_dir=RAW \\
        --tasks tangpoetrybench --include_path harness/lmms_eval --batch_size 1 --output_path results/

Each request's poem (the task's document) goes through `generate_images`, so the prompt, the per-image seed, the
file layout (RAW/images/KEY/<poem_id>.png), the manifest and resuming are `tpb generate`'s own; the answer is the
JSON lmms-eval's image-generation tasks read (`{"text": "", "images": [PATH]}`, WISE's convention), with the
generator's key beside it. This module imports lmms-eval, which is installed in an environment of its own.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from lmms_eval.api.model import lmms

from ..poems import Poem, write_poems
from .diffusers_generate import fill_prompt, generate_images, image_path, paper_prompt


def poem_of(doc: dict) -> Poem:
    """The poem of a task document (the `tangpoetrybench` task's documents are poems)."""
    return Poem(poem_id=doc["poem_id"], title=doc["title"], author=doc["author"], text=doc["text"],
                tradition=doc["tradition"])


class TPBDiffusers(lmms):
    """`model_args`: pretrained (a diffusers pipeline, Hub id or local folder), generator (its key), output_dir (a
    raw release folder), and tpb generate's seed, steps, guidance_scale, height, width, negative_prompt, device."""

    is_simple = True

    def __init__(self, pretrained: str, generator: str, output_dir: str, seed: int = 0, steps: int = 30,
                 guidance_scale: float = 5.0, height: int = 1024, width: int = 1024, negative_prompt: str | None = None,
                 device: str | None = None, batch_size: int | str = 1, **_ignored) -> None:
        super().__init__()
        self.pretrained, self.generator, self.output_dir = pretrained, generator, Path(output_dir)
        self.settings = {"seed": int(seed), "steps": int(steps), "guidance_scale": float(guidance_scale),
                         "height": int(height), "width": int(width), "negative_prompt": negative_prompt or None}
        self.device_name = device

    def generate_until(self, requests) -> list[str]:
        poems = []
        for request in requests:
            context, _, _, doc_id, task, split = request.args
            poem = poem_of(self.task_dict[task][split][doc_id])
            if context != fill_prompt(paper_prompt(), poem):
                raise ValueError(f"the task's prompt for {poem.poem_id} is not the paper's Appendix B prompt: "
                                 "tpb_diffusers generates with tpb generate's prompt only")
            poems.append(poem)
        with tempfile.TemporaryDirectory() as tmp:
            write_poems(poems, Path(tmp) / "poems.jsonl")
            generate_images(self.pretrained, Path(tmp) / "poems.jsonl", self.output_dir, self.generator,
                            device=self.device_name, progress=self.rank == 0, **self.settings)
        return [json.dumps({"text": "", "images": [str(image_path(self.output_dir, self.generator, p.poem_id))],
                            "generator": self.generator}) for p in poems]

    def loglikelihood(self, requests):
        raise NotImplementedError("tpb_diffusers generates images; it has no log-likelihoods")

    def generate_until_multi_round(self, requests):
        raise NotImplementedError("tpb_diffusers generates one image per poem")


def manifest():
    """The `lmms_eval.models` entry point: registers `tpb_diffusers`."""
    from lmms_eval.models.registry_v2 import ModelManifest

    return ModelManifest(model_id="tpb_diffusers", simple_class_path=f"{__name__}.TPBDiffusers")
