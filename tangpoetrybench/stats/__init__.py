"""The statistics room: how far an evaluator's scores agree with people.

    agreement          agreement statistics with bootstrap intervals (poems resampled)
    noise_floor        the human noise floor (a rater against the others)
    agree              `tpb agree` and `tpb calibrate`: a scores file against a built dataset's human ratings
    calibration        conformal intervals, prediction sets and temperatures: fitted, and tested on held-out images
    selective          selective judging: the abstention threshold fitted by Learn then Test, and its held-out check
    external_ratings   multi-rater ratings of other text-to-image benchmarks
    evaluate_metric    the glue behind the `evaluate` module (metric/pae)
    pairs              human pairs: which of two illustrations people prefer, and how judges and generators fare
    recognition        a recognizability judge against the human Phase-1 track
    scales             what the agreement statistics need of each bundled rubric (the evaluate module reads it)

It imports the core modules, `dataset` and `judging`.
"""
