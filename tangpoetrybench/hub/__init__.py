"""The Hub room: what goes onto the Hugging Face Hub.

    publish      `tpb publish`: the dataset, model, metric and Space repos, each self-contained; uploads
    model_card   PAE's model card from `tpb agree` results
    space        the Gradio Space's logic (space/app.py lays it out)

It may import every other room; only the CLI sits above it.
"""
