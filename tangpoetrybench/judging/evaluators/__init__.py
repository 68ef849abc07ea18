"""Evaluators behind one interface: PAE (transformers or vLLM), any served or hosted model asked PAE's question
(`api`), the scalar baselines, and text-ocr (text integrity with evidence, from a real OCR model).

    >>> from tangpoetrybench.judging.evaluators import load_evaluator
    >>> clip = load_evaluator("clipscore", model="OFA-Sys/chinese-clip-vit-base-patch16")
    >>> results = clip(images=[img], poems=[{"title": "静夜思", "author": "李白", "text": "床前明月光，..."}])

Models load once, when the evaluator is built; each call scores a batch.
"""

from __future__ import annotations

from .base import EvalResult, Evaluator, ScoringItem

EVALUATORS = ("pae", "api", "clipscore", "blipscore", "vqascore", "text-ocr", "recognize")
BACKENDS = ("transformers", "vllm")
API_OPTIONS = ("base_url", "api_key_env", "concurrency", "timeout", "retries", "structured", "backoff", "repair")


def load_evaluator(name: str, model: str | None = None, adapter: str | None = None, backend: str = "transformers",
                   **kwargs) -> Evaluator:
    """Build an evaluator by name. `model` and `adapter` are Hub ids or local folders; None means the default
    checkpoint. Other keyword arguments (device, max_pixels, max_new_tokens, rubric, constrained, explain; question
    for vqascore) go to the evaluator; `explain="poem"` or `"en"` asks a rubric judge for a reason per dimension.

    `api` asks a served or hosted model: `model` is the name the server knows, and `base_url`, `api_key_env`,
    `concurrency`, `timeout`, `retries` and `repair` (see `evaluators.api.APIJudge`) apply to it alone."""
    if name not in EVALUATORS:
        raise ValueError(f"unknown evaluator {name!r} (known: {', '.join(EVALUATORS)})")
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r} (known: {', '.join(BACKENDS)})")
    if name == "recognize":  # the Phase-1 question: candidates (and orders) in kwargs; served with base_url
        from .recognize import load_recognizer

        return load_recognizer(kwargs.pop("candidates", None), model=model, backend=backend, adapter=adapter, **kwargs)
    if adapter and name != "pae":
        raise ValueError(f"--adapter applies to pae only, not {name}")
    if backend == "vllm" and name != "pae":
        raise ValueError(f"the vllm backend serves pae only, not {name}")
    if kwargs.get("constrained") and name != "pae":
        raise ValueError(f"--constrained applies to pae only, not {name}")
    if kwargs.get("question") is not None and name != "vqascore":
        raise ValueError(f"--question applies to vqascore only, not {name}")
    question = kwargs.pop("question", None)
    if kwargs.get("explain") and name not in ("pae", "api"):
        raise ValueError(f"--explain applies to the rubric judges (pae, api) only, not {name}")
    if not kwargs.get("explain"):
        kwargs.pop("explain", None)
    if kwargs.get("quantize") and name != "pae":
        raise ValueError(f"--quantize applies to pae only, not {name}")
    if kwargs.get("readout", "decode") != "decode" and name not in ("pae", "api"):
        raise ValueError(f"--readout applies to pae and api only, not {name}")
    given = [k for k in API_OPTIONS if kwargs.get(k) is not None]
    if given and name != "api":
        raise ValueError(f"--{given[0].replace('_', '-')} applies to the api evaluator only, not {name}")
    if name == "api":
        from .api import APIJudge

        kwargs.pop("device", None)
        return APIJudge(model, **{k: v for k, v in kwargs.items() if v is not None})
    for option in API_OPTIONS:
        kwargs.pop(option, None)
    if name != "pae":
        kwargs.pop("readout", None)
        kwargs.pop("quantize", None)
    model_kw = {"model": model} if model else {}
    if name == "text-ocr":
        if model:
            raise ValueError("the text-ocr evaluator uses the OCR models bundled with rapidocr: give no --model")
        from ..ocr.evaluator import TextOCR

        return TextOCR(**{k: v for k, v in kwargs.items() if k in ("device", "max_pixels", "threads", "rubric")})
    if name == "pae":
        if backend == "vllm":
            from .pae_vllm import PAEVLLM

            kwargs.pop("device", None)
            kwargs.pop("constrained", None)  # vLLM always decodes to the rubric's JSON schema
            if kwargs.pop("quantize", None):
                raise ValueError("--quantize applies to the transformers backend (vLLM quantises with its own options)")
            return PAEVLLM(adapter=adapter, **model_kw, **kwargs)
        from .pae import PAE

        return PAE(adapter=adapter, **model_kw, **kwargs)
    scalar_kwargs = {k: v for k, v in kwargs.items() if k in ("device", "max_pixels")}
    if name == "vqascore":
        from .vqascore import VQAScore

        return VQAScore(**model_kw, **scalar_kwargs, **({"question": question} if question else {}))
    scalar_kwargs.pop("max_pixels", None)
    if name == "clipscore":
        from .clipscore import CLIPScore

        return CLIPScore(**model_kw, **scalar_kwargs)
    from .blipscore import BLIPScore

    return BLIPScore(**model_kw, **scalar_kwargs)


__all__ = ["EVALUATORS", "EvalResult", "Evaluator", "ScoringItem", "load_evaluator"]
