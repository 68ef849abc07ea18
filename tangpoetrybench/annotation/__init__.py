"""The annotation room: collecting human ratings with the paper's two-phase protocol, into a raw release.

    campaign     what is rated: a raw release's images and poems, each poem's Phase-1 candidates, the rubric, and
                 the rubric's texts in the rater's language
    store        the SQLite store (WAL, one transaction per submitted answer, nothing lost or counted twice, online
                 backup): people and their link tokens' digests, assignments, Phase-1 choices, Phase-2 answers
    assignment   which image a rater gets next (overlap, never twice, balanced across generators, a priority list
                 first) and the rater's fixed order of the candidates
    protocol     the rater's steps: Phase 1 (the poem hidden until the choice), Phase 2 (every question required),
                 each with its time; the interface texts per language
    live_qc      the admin page's numbers: `tpb build`'s own QC over the ratings so far, progress, agreement
    export       the answers as a raw release's ratings.csv (and every answer's time), for `tpb build`
    app          the Gradio app (`tpb annotate serve`): the rating page and the protected admin page

It imports only the core modules (rubric, poems, errors, ...) and `dataset/`; the agreement statistic (`stats/`) and
the Hub's CommitScheduler (`hub/annotation_space.py`) are handed in from above.
"""
