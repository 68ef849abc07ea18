"""The judging room: everything that turns an image and a poem into scores.

    prompt        the one prompt builder (inference, SFT and GRPO)
    parsing       reading a judge's answer against the rubric (a failed parse, never a guess)
    constrained   decoding that keeps PAE's answer in the rubric's JSON form
    evaluators/   PAE (transformers, vLLM), the `api` judge, CLIPScore, BLIPScore, VQAScore
    ocr/          text-ocr: the OCR evaluator, its evidence rules and the text-label draft
    scoring       `tpb score`: batch, resumable, data-parallel scoring to JSONL, and reading results back
    calibrated    a calibration file applied to results: intervals, prediction sets, calibrated confidences
    tiny_models   `tpb tiny-models`: tiny random-weight models built from configs, for tests and the sample

It imports the core modules, `dataset` and `generation`.
"""
