"""The judging room: everything that turns an image and a poem into scores, a choice or a letter, in layers whose
imports run one way (each module imports only from its own layer or those below it; `tests/test_layout.py` keeps it):

what questions, answers and records are made of
    prompt        the one prompt builder (inference, SFT and GRPO)
    reading/      reading a judge's answer, every task's (scores, reasons, winner, letter, SemJudge's steps) on one
                  core (a failed read, never a guess)
    constrained   decoding that keeps an answer in its JSON form (a backend that constrains)
    readout       the probability readout: scores from the anchors' probabilities, not decoded
    abstention    selective judging's threshold, as a calibration file holds it: whether the judge keeps a score
    records       a record type per task (scores, text, letter, scalar, pairwise), its fields declared as features
    results       results files: read once and checked, their record type from their records (`ResultsFile`);
                  resumed and appended to by `tpb score` and `tpb compare` alike (`Resume`)
    failures      what a run's unreadable answers looked like, and what to try (`tpb score`, `tpb compare`)
who answers
    backends/     transformers (a local Qwen3-VL), vLLM, a served model or a fleet of them, by their capabilities
what is asked, and the evaluators
    tasks/        the rubric's scores, the pairwise choice, the Phase-1 letter
    evaluators/   the evaluator base class; the scalar baselines CLIPScore, BLIPScore, VQAScore
    ocr/          text-ocr: the OCR evaluator and its evidence rules (and, on top, the text-label draft)
the one evaluator
    judge         a task joined to a backend (batching, the repair round, records, settings)
    calibrated    a calibration file applied to an evaluator's results: intervals, prediction sets, confidences
every evaluator by name
    registry      every evaluator by name: its tasks, backends and options (declared once), and plugins
the drivers, on top
    scoring       `tpb score`: batch, resumable, data-parallel scoring to JSONL
    pairwise      `tpb compare`: pairs, both orders, verdicts, resumable pair records
    semjudge      SemJudge: semiosis graphs of the poem and both images, then the choice, on any backend
    ray_scoring   `tpb score --engine ray`: the same run on a Ray cluster (Ray Data, one worker per model copy)
    ray_vllm      a rubric judge on Ray Data's vLLM engine stage (`ray.data.llm`): its configuration, requests, records
    tiny_models   `tpb tiny-models`: tiny random-weight models built from configs, for tests and the sample

It imports the core modules, `dataset` and `generation`.
"""
