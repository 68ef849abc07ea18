"""The reporting room: what people read.

    report         `tpb report`: the paper's tables and findings recomputed from a built dataset, and its rendering
    findings       the §4 findings, each computed as defined
    plots          radar and scatter figures
    leaderboard    `tpb leaderboard`: generators ranked by a rubric judge, beside people where they rated
    pairwise       the pairwise tables of the report and the leaderboard (computed by `stats.pairs`)
    recognition    the recognizability judge in the report and the leaderboard
    explanations   why: explain mode's reasons and SemJudge's graphs in the report
    variants       one generator under several prompt variants, side by side in the leaderboard
    harness        what the lmms-eval task computes: its documents, its judge and its metrics

It imports every room below it: core, `dataset`, `generation`, `judging`, `stats`.
"""
