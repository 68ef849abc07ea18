"""`text-ocr`: text integrity with evidence, from a real OCR model that runs offline.

RapidOCR (Apache-2.0) ships PP-OCRv6's detection and recognition models and PP-OCRv4's orientation classifier as
ONNX files inside its wheel; they are loaded from there by path, so nothing is downloaded (its `.vis()`, which
fetches a font, is never called). Each image gets its text regions (box, text, confidence), a verdict (see
`tangpoetrybench.judging.ocr.evidence`) and the score of its rubric's adjudicated dimension (`adjudicated_dimension`:
Tang's `text_integrity`) on that dimension's scale; the regions and the verdict go to the result's `evidence`,
`raw_output` holds the lines read. A rubric that names no adjudicated dimension has nothing for the OCR to score: its
items fail as `input`, saying so.

    >>> ocr = load_evaluator("text-ocr")
    >>> [r] = ocr(images=[Image.open("fengqiao.png")], poems=[{"title": "枫桥夜泊", "author": "张继", "text": "..."}])
    >>> r.scores["text_integrity"], r.evidence["verdict"], r.evidence["matched"]
"""

from __future__ import annotations

import json
from importlib.metadata import version
from pathlib import Path
from typing import Sequence

import numpy as np
import torch

from .evidence import RULES_VERSION, TextRegion, judge
from ..evaluators.base import EvalResult, Evaluator, ScoringItem, TextResult
from ...models import DEFAULT_MAX_PIXELS, fit_pixels

MODEL_FILES = {"Det": "PP-OCRv6_det_small.onnx", "Cls": "ch_ppocr_mobile_v2.0_cls_mobile.onnx",
               "Rec": "PP-OCRv6_rec_small.onnx"}
INSTALL_HINT = 'the OCR evaluator needs rapidocr and onnxruntime: pip install "tangpoetrybench[ocr]"'


def load_engine(threads: int | None = None):
    """RapidOCR on the CPU with the models bundled in its wheel, named by path (a missing file is an error here,
    never a download). Every recognised line is kept (`text_score` 0): the rules look at low confidences."""
    try:
        import rapidocr
        from rapidocr import RapidOCR
    except ImportError as exc:
        raise ImportError(INSTALL_HINT) from exc
    models = Path(rapidocr.__file__).parent / "models"
    missing = [name for name in MODEL_FILES.values() if not (models / name).is_file()]
    if missing:
        raise ImportError(f"rapidocr {version('rapidocr')} has no bundled {', '.join(missing)} in {models}: "
                          'install the version tangpoetrybench names (pip install "tangpoetrybench[ocr]")')
    params = {"Global.log_level": "error", "Global.text_score": 0.0,
              **{f"{stage}.model_path": str(models / name) for stage, name in MODEL_FILES.items()}}
    if threads:
        params["EngineConfig.onnxruntime.intra_op_num_threads"] = threads
    return RapidOCR(params=params)


def read_regions(engine, image: np.ndarray) -> list[TextRegion]:
    """Every line the OCR reads in an RGB image array, with per-character confidences. (RapidOCR takes an array as
    OpenCV's BGR, the order its models were trained in.)"""
    out = engine(np.ascontiguousarray(image[..., ::-1]), return_word_box=True)
    if not out.txts:
        return []
    words = out.word_results if len(out.word_results) == len(out.txts) else [()] * len(out.txts)
    return [TextRegion(box=np.rint(box).astype(int).tolist(), text=text, confidence=round(float(score), 4),
                       chars=[round(float(w[1]), 4) for w in chars if w and w[0]])
            for box, text, score, chars in zip(out.boxes, out.txts, out.scores, words)]


class TextOCR(Evaluator):
    name = "text-ocr"
    record_type = TextResult
    model_name = "rapidocr/PP-OCRv6-small"
    _model_attributes = ("engine",)

    def __init__(self, device: str | None = None, max_pixels: int = DEFAULT_MAX_PIXELS, threads: int | None = None,
                 rubric=None):
        super().__init__(rubric)
        if device not in (None, "cpu"):
            raise ValueError(f"the {self.name} evaluator runs on the CPU (ONNX Runtime), not on {device}")
        self.engine = load_engine(threads)
        self.device = torch.device("cpu")
        self.max_pixels = max_pixels
        self.ocr_version = f"rapidocr {version('rapidocr')}"

    def settings(self) -> dict:
        return {"ocr": self.ocr_version, "rules": RULES_VERSION, "max_pixels": self.max_pixels}

    def _prepare(self, items: Sequence[ScoringItem]) -> list[np.ndarray]:
        return [np.asarray(fit_pixels(it.image, self.max_pixels)) for it in items]

    def _run(self, inputs: list[np.ndarray], items: Sequence[ScoringItem]) -> list[EvalResult]:
        results = []
        for image, item in zip(inputs, items):
            rubric = self.rubric_for(item)
            key = rubric.adjudicated_dimension
            if key is None:
                results.append(self.failed(item, f"the rubric {rubric.fingerprint} names no adjudicated dimension "
                                                 "(adjudicated_dimension: the text in the picture), so the OCR has "
                                                 "nothing to score", "input"))
                continue
            judgement = judge(read_regions(self.engine, image), item.poem, image)
            scale = rubric.dimension(key).scores  # best first: no text issue … text issue
            score = scale[-1] if judgement.text_issue else scale[0]
            raw = json.dumps([r.text for r in judgement.regions], ensure_ascii=False)
            result = self.result(item, {key: score}, score, raw, "ok", None)
            result.evidence = judgement.evidence()
            results.append(result)
        return results
