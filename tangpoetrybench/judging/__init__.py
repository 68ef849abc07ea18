"""The judging room: everything that turns an image and a poem into scores.

    prompt        the one prompt builder (inference, SFT and GRPO)
    reading/      reading a judge's answer, every task's (scores, reasons, winner, letter, SemJudge's steps) on one
                  core (a failed read, never a guess)
    constrained   decoding that keeps PAE's answer in the rubric's JSON form
    evaluators/   PAE (transformers, vLLM), the `api` judge, CLIPScore, BLIPScore, VQAScore
    ocr/          text-ocr: the OCR evaluator, its evidence rules and the text-label draft
    scoring       `tpb score`: batch, resumable, data-parallel scoring to JSONL, and reading results back
    tiny_models   `tpb tiny-models`: tiny random-weight models built from configs, for tests and the sample

It imports the core modules, `dataset` and `generation`.
"""
