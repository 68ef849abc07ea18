"""The generation room: images from text-to-image pipelines (diffusers) for the benchmark's poems.

    diffusers_generate   `tpb generate`: any diffusers text-to-image pipeline over a poem file, resumable

It imports the core modules and `dataset`.
"""
