"""The Hub room: what goes onto the Hugging Face Hub.

    publish            `tpb publish`: the dataset, model, metric and Space repos, each self-contained; uploads
    model_card         PAE's model card from `tpb agree` results
    eval_results       the Hub's Eval Results: a generator's `.eval_results/` file from `tpb leaderboard`
    space              the Gradio Space's logic (space/app.py lays it out)
    annotation_space   the rating app from its variables, with the noise floor's agreement and, in a Space, its
                       CommitScheduler to a private dataset repo
    sealed             a release sealed for a public Space (images under random names) and its key (kept private)

It may import every other room; only the CLI sits above it.
"""
