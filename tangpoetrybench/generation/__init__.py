"""The generation room: images from text-to-image pipelines (diffusers) for the benchmark's poems.

    diffusers_generate   `tpb generate`: any diffusers text-to-image pipeline over a poem file, resumable
    prompt_variants      the generation prompt's variants, terse to rich (`tpb generate --prompt`)
    lmms_eval_model      `tpb_diffusers`: a diffusers pipeline as an lmms-eval model, generating as `tpb generate`

It imports the core modules and `dataset`.
"""
