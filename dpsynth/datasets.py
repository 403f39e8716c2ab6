"""The bundled sample datasets (a table's key in the ledger is :mod:`dpsynth.identity`)."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

SAMPLES: dict[str, dict[str, str]] = {
    "adult": {
        "title": "UCI Adult (1994 US Census extract, 48,842 people)",
        "data": "adult.csv",
        "schema": "adult_schema.json",
        "source": "UCI Machine Learning Repository, Adult data set (Becker & Kohavi 1996); train and test joined",
        "licence": "CC BY 4.0",
    },
}


def sample_path(name: str, part: str = "data") -> Path:
    """Path of a bundled sample file (``part`` = 'data' or 'schema')."""
    info = SAMPLES[name]
    return Path(str(resources.files("dpsynth") / "samples" / info[part]))
