"""Identifying a dataset in the ledger, and the bundled sample datasets.

The fingerprint is a content hash used only inside the ledger (never in a release): SHA-256 over
the sorted per-row hashes of the table with its columns in name order, so re-ordering rows or
columns does not give the same data a fresh budget.
"""

from __future__ import annotations

import hashlib
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd

SAMPLES: dict[str, dict[str, str]] = {
    "adult": {
        "title": "UCI Adult (1994 US Census extract, 48,842 people)",
        "data": "adult.csv",
        "schema": "adult_schema.json",
        "source": "UCI Machine Learning Repository, Adult data set (Becker & Kohavi 1996); train and test joined",
        "licence": "CC BY 4.0",
    },
}


def dataset_fingerprint(df: pd.DataFrame) -> str:
    """Order-invariant SHA-256 of the table's content (for the ledger only)."""
    import numpy as np
    import pandas as pd

    cols = sorted(map(str, df.columns))
    frame = df.copy()
    frame.columns = [str(c) for c in frame.columns]
    frame = frame[cols].astype("string")
    rows = np.sort(pd.util.hash_pandas_object(frame, index=False).to_numpy(dtype=np.uint64))
    h = hashlib.sha256()
    h.update("\x1f".join(cols).encode("utf-8"))
    h.update(rows.tobytes())
    return h.hexdigest()


def file_fingerprint(source: str | Path | bytes) -> str:
    """Ledger id of a file: ``sha256:`` + SHA-256 of its bytes (a directory: its files in name order).

    The CLI (every engine) and the dashboard key a file's budget by this one id, so switching
    engine or interface never opens a second budget for the same file.
    """
    h = hashlib.sha256()
    if isinstance(source, bytes | bytearray | memoryview):
        h.update(source)
    else:
        p = Path(source)
        for f in sorted(f for f in p.rglob("*") if f.is_file()) if p.is_dir() else [p]:
            with open(f, "rb") as fh:
                while block := fh.read(1 << 24):
                    h.update(block)
    return "sha256:" + h.hexdigest()


def sample_path(name: str, part: str = "data") -> Path:
    """Path of a bundled sample file (``part`` = 'data' or 'schema')."""
    info = SAMPLES[name]
    return Path(str(resources.files("dpsynth") / "samples" / info[part]))


def table_identity(source: object) -> str:
    """The ledger's identity of a table: a DataFrame's content fingerprint, a file's bytes otherwise."""
    import pandas as pd

    if isinstance(source, pd.DataFrame):
        return dataset_fingerprint(source)
    if isinstance(source, str | Path):
        return file_fingerprint(Path(source))
    return ""
