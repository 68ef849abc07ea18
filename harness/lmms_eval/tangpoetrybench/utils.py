"""The lmms-eval task `tangpoetrybench`: thin hooks over tangpoetrybench.reporting.harness (documents, judge and
metrics live in the package, once)."""

from __future__ import annotations

import datasets

from tangpoetrybench.generation.diffusers_generate import fill_prompt, paper_prompt
from tangpoetrybench.generation.lmms_eval_model import poem_of
from tangpoetrybench.numeric import mean_or_none  # noqa: F401  (the task file's aggregation)
from tangpoetrybench.reporting import harness

kendall_tau_human = harness.kendall_tau_human


def process_docs(dataset: datasets.Dataset) -> datasets.Dataset:
    """The split's images → one document per poem, with the human quality of each rated generator's image."""
    return datasets.Dataset.from_list(harness.poem_docs(dataset.remove_columns("image")))


def doc_to_visual(doc):
    """Text-to-image: the model is given no image."""
    return []


def doc_to_text(doc, lmms_eval_specific_kwargs=None):
    """The paper's Appendix B prompt, filled from the poem (what tpb generate sends)."""
    return fill_prompt(paper_prompt(), poem_of(doc))


def doc_to_target(doc):
    return ""


def process_results(doc, results):
    """The judge (TPB_JUDGE…) scores the image the model answered with."""
    return harness.metric_values(harness.judge(), doc, results[0])


def count(values) -> int:
    return int(sum(values))
