"""A dataset's schema work, kept with it: the curator's typed public values and private estimates.

Stored beside the release archive (one small JSON file per dataset identity, written atomically),
so loading the same table again — another session, a reload, a server restart — restores the
schema the curator built instead of a fresh draft read off the data. Only public values are
kept: the schema editor's table, whose data-derived fields stay flagged as such.
"""

from __future__ import annotations

import hashlib
import io
import os
import uuid
from pathlib import Path

import pandas as pd


class SchemaStore:
    """Schema editor tables keyed by dataset identity, in ``folder``."""

    def __init__(self, folder: str | Path) -> None:
        self.folder = Path(folder)

    @classmethod
    def for_ledger(cls, ledger_path: str | Path) -> SchemaStore:
        """The store beside a ledger's release archive."""
        from dpsynth.archive import archive_path_for

        return cls(archive_path_for(ledger_path) / "schema-work")

    def _path(self, dataset_id: str) -> Path:
        return self.folder / (hashlib.sha256(dataset_id.encode("utf-8")).hexdigest()[:32] + ".json")

    def save(self, dataset_id: str, table: pd.DataFrame) -> None:
        """Keep the editor table of this dataset (replacing the previous one)."""
        self.folder.mkdir(parents=True, exist_ok=True)
        path = self._path(dataset_id)
        tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.tmp")
        tmp.write_text(table.to_json(orient="split", index=False), encoding="utf-8")
        os.replace(tmp, path)

    def load(self, dataset_id: str) -> pd.DataFrame | None:
        """The kept table, or None (none kept, or unreadable: a fresh draft is then made)."""
        path = self._path(dataset_id)
        if not path.exists():
            return None
        try:
            return pd.read_json(io.StringIO(path.read_text(encoding="utf-8")), orient="split", dtype=False)
        except (OSError, ValueError):
            return None
