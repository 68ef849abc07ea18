"""The dataset room: from a raw release (what the authors export) to the built dataset that `load_dataset` reads.

    raw_release   reading and validating a raw release folder (poems, images, ratings, text labels)
    qc            the quality-control rules over ratings
    aggregate     per-image scores from the kept ratings
    features      the `datasets` features of each config
    splits        the default split by poem
    builder       `tpb build`: validate, QC, aggregate, write Parquet shards and the card, atomically
    dataset_card  the dataset card (README.md with the `configs:` block)
    reading       reading a built dataset's configs (a local folder or a Hub id)
    distractors   `tpb distractors`: each poem's three Phase-1 distractors (look-alike poems of the same corpus)
    synthetic/    the synthetic demo release (real poems, painted images, simulated ratings)

It imports only the core modules (rubric, poems, errors, numeric, files, fonts, models).
"""
