"""The `datasets` features of every config of the built dataset (SPEC §5)."""

from __future__ import annotations

import datasets

from ..rubric import Rubric


TEXT_LABEL_COLUMNS = ("text_issue", "text_issue_type", "text_label_source")
FACE_AVOIDANCE_COLUMN = "face_avoidance"


def role_columns(rubric: Rubric) -> tuple[str, ...]:
    """The image columns that come from the rubric's roles: the adjudicated text label where it names an adjudicated
    dimension, face avoidance where it names that role. A rubric without a role has no column that would always be
    empty."""
    return ((TEXT_LABEL_COLUMNS if rubric.adjudicated_dimension else ())
            + ((FACE_AVOIDANCE_COLUMN,) if rubric.face_avoidance else ()))


def image_features(rubric: Rubric) -> datasets.Features:
    roles = role_columns(rubric)
    return datasets.Features({
        "image": datasets.Image(),
        "image_id": datasets.Value("string"),
        "poem_id": datasets.Value("string"),
        "generator": datasets.Value("string"),
        "title": datasets.Value("string"),
        "author": datasets.Value("string"),
        "poem": datasets.Value("string"),
        "tradition": datasets.Value("string"),
        **{key: datasets.Value("float64") for key in rubric.keys},
        "quality": datasets.Value("float64"),
        "recognizability": datasets.Value("float64"),
        **({"text_issue": datasets.Value("int8"), "text_issue_type": datasets.Value("string"),
            "text_label_source": datasets.Value("string")} if TEXT_LABEL_COLUMNS[0] in roles else {}),
        "n_ratings": datasets.Value("int32"),
        "multi_rated": datasets.Value("bool"),
        **({FACE_AVOIDANCE_COLUMN: datasets.Value("float64")} if FACE_AVOIDANCE_COLUMN in roles else {}),
    })


def rating_features(rubric: Rubric) -> datasets.Features:
    return datasets.Features({
        "rating_id": datasets.Value("string"),
        "rater_id": datasets.Value("string"),
        "rater_group": datasets.Value("string"),
        "image_id": datasets.Value("string"),
        "image_config": datasets.Value("string"),
        "generator": datasets.Value("string"),
        "poem_id": datasets.Value("string"),
        "seconds": datasets.Value("float64"),
        "phase1_candidates": datasets.List(datasets.Value("string")),
        "phase1_choice": datasets.Value("string"),
        "phase1_correct": datasets.Value("bool"),
        **{f"{key}_option": datasets.Value("string") for key in rubric.keys},
        **{key: datasets.Value("float64") for key in rubric.keys},
    })


POEM_FEATURES = datasets.Features({
    "poem_id": datasets.Value("string"),
    "title": datasets.Value("string"),
    "author": datasets.Value("string"),
    "text": datasets.Value("string"),
    "tradition": datasets.Value("string"),
    "form": datasets.Value("string"),
    "tune": datasets.Value("string"),
})
