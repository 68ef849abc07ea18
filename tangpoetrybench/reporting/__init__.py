"""The reporting room: what people read.

    report        `tpb report`: the paper's tables and findings recomputed from a built dataset
    findings      the §4 findings, each computed as defined
    plots         radar and scatter figures
    leaderboard   `tpb leaderboard`: generators ranked by an evaluator, beside people where they rated

It imports every room below it: core, `dataset`, `generation`, `judging`, `stats`.
"""
