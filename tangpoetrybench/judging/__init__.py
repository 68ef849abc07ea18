"""The judging room: everything that turns an image and a poem into scores, a choice or a letter.

    prompt        the one prompt builder (inference, SFT and GRPO)
    reading/      reading a judge's answer, every task's (scores, reasons, winner, letter, SemJudge's steps) on one
                  core (a failed read, never a guess)
    constrained   decoding that keeps an answer in its JSON form (transformers)
    readout       the probability readout: scores from the anchors' probabilities, not decoded
    backends/     who answers: transformers (a local Qwen3-VL), vLLM, a served model or a fleet of them
    tasks/        what is asked: the rubric's scores, the pairwise choice, the Phase-1 letter
    judge         the one evaluator: a task joined to a backend (batching, the repair round, records, settings)
    registry      every evaluator by name: its tasks, backends and options (declared once), and plugins
    evaluators/   the records and the evaluator base class; the scalar baselines CLIPScore, BLIPScore, VQAScore
    semjudge      SemJudge: semiosis graphs of the poem and both images, then the choice, on any backend
    pairwise      `tpb compare`: pairs, both orders, verdicts, resumable pair records
    ocr/          text-ocr: the OCR evaluator, its evidence rules and the text-label draft
    scoring       `tpb score`: batch, resumable, data-parallel scoring to JSONL
    failures      what a run's unreadable answers looked like, and what to try (`tpb score`, `tpb compare`)
    ray_scoring   `tpb score --engine ray`: the same run on a Ray cluster (Ray Data, one worker per model copy)
    ray_vllm      PAE on Ray Data's vLLM engine stage (`ray.data.llm`): its configuration, requests and records
    results       results files: read once and checked, with their kind (`ResultsFile`); resumed and appended to
                  by `tpb score` and `tpb compare` alike (`Resume`)
    calibrated    a calibration file applied to results: intervals, prediction sets, calibrated confidences
    tiny_models   `tpb tiny-models`: tiny random-weight models built from configs, for tests and the sample

It imports the core modules, `dataset` and `generation`.
"""
