"""The default split by poem (SPEC §5): no poem is in two splits, so no poem is both trained and tested on."""

from __future__ import annotations

import hashlib

TEST_SHARE = 0.2
VALIDATION_SHARE = 0.1


def default_splits(poem_ids: list[str], seed: int = 0) -> dict[str, str]:
    """Order the poem_ids by sha256(f"{seed}:{poem_id}"); the first 20 % are test, the next 10 % validation.

    320 poems give 64 / 32 / 224. Shares are rounded half up, so small sets still get a test poem.
    """
    order = sorted(poem_ids, key=lambda pid: hashlib.sha256(f"{seed}:{pid}".encode()).hexdigest())
    n_test = int(len(order) * TEST_SHARE + 0.5)
    n_val = int(len(order) * VALIDATION_SHARE + 0.5)
    return {
        pid: "test" if i < n_test else "validation" if i < n_test + n_val else "train"
        for i, pid in enumerate(order)
    }
