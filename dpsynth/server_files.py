"""Large files on the dashboard's server, counted by DuckDB instead of being uploaded.

An administrator opts in by setting ``DPSYNTH_DATA_DIR`` to a folder; the dashboard then lists
the CSV and Parquet files directly in it (no sub-folders, no paths typed by the user, no
symbolic links leading outside), so a session can never name another file on the server. Only
the first :data:`PREVIEW_ROWS` rows are read into memory, for the curator's preview and draft
schema; a release counts the whole file on the DuckDB engine
(:func:`dpsynth.release.release_from_source`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from dpsynth.errors import InputError

if TYPE_CHECKING:
    import pandas as pd

DATA_DIR_ENV = "DPSYNTH_DATA_DIR"
SUFFIXES = (".csv", ".tsv", ".txt", ".parquet", ".pq")
PREVIEW_ROWS = 10_000


def data_dir() -> Path | None:
    """The folder the administrator opened to the dashboard, or None (the feature is off)."""
    raw = os.environ.get(DATA_DIR_ENV, "").strip()
    if not raw:
        return None
    root = Path(raw).expanduser().resolve()
    return root if root.is_dir() else None


def list_files(root: Path) -> list[str]:
    """Names of the CSV/Parquet files directly in ``root`` (sorted; links leading outside left out)."""
    out = []
    for p in sorted(root.iterdir()):
        if p.suffix.lower() in SUFFIXES and p.is_file() and p.resolve().parent == root:
            out.append(p.name)
    return out


def resolve(root: Path, name: str) -> Path:
    """The file ``name`` of :func:`list_files`; anything else (another folder, ``..``) is refused."""
    if name not in list_files(root):
        raise InputError(f"{name!r} is not one of the files offered in the server's data folder.")
    return root / name


def head(path: Path, rows: int = PREVIEW_ROWS) -> pd.DataFrame:
    """The first ``rows`` rows, read by DuckDB as the engine reads them (CSV cells as text)."""
    import duckdb

    from dpsynth.engines.duckdb_engine import source_sql

    try:
        df = duckdb.connect().execute(f"SELECT * FROM {source_sql(path)} LIMIT {int(rows)}").fetchdf()
    except duckdb.Error as exc:
        first = next((ln for ln in str(exc).splitlines() if ln.strip()), type(exc).__name__)
        raise InputError(f"{path.name} could not be read: {first}") from None
    if df.empty:
        raise InputError(f"{path.name} has no data rows.")
    return df
