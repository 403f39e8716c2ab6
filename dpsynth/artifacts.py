"""The files of a release (a face over :class:`dpsynth.release.Release`): synthetic CSV, noisy
histogram or marginals and model, schema, card (JSON, Markdown), and the zip of them all.

Everything here is a function of the released objects only, so downloads carry no more than the
mechanism released; every path (Python, CLI, dashboard) gets the same bytes from the same writer.
"""

from __future__ import annotations

from dpsynth.card import card_json, card_markdown
from dpsynth.release import Release


def release_files(rel: Release) -> dict[str, bytes]:
    """Name → bytes of every released file."""
    return rel.files()


def release_zip(rel: Release) -> bytes:
    """All released files in one zip (deterministic bytes for the same release)."""
    return rel.zip()


__all__ = ["card_json", "card_markdown", "release_files", "release_zip"]
