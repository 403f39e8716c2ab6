"""The files of a release: synthetic CSV, noisy histogram or marginals, model, card (JSON, Markdown), zip.

Everything here is a function of the released objects only, so downloads carry no more than the
mechanism released. CSV files are written injection-safe (:func:`dpsynth.io.to_safe_csv`).
"""

from __future__ import annotations

import io
import json
import zipfile
from typing import Any

import pandas as pd

from dpsynth.io import to_safe_csv
from dpsynth.release import Release

# A fixed timestamp inside the zip keeps identical releases byte-identical.
_ZIP_TIME = (2020, 1, 1, 0, 0, 0)


def card_json(card: dict[str, Any]) -> str:
    """The release card as indented JSON."""
    return json.dumps(card, indent=2, ensure_ascii=False, default=str)


def card_markdown(card: dict[str, Any]) -> str:
    """A readable summary of the release card for people who do not read JSON."""
    p = card["privacy"]
    unit = p["unit_of_protection"]
    mech = card["mechanism"]
    lines = [
        f"# Differentially private release{': ' + card['dataset'] if card.get('dataset') else ''}",
        "",
        f"- **Created**: {card['created']}",
        f"- **Guarantee**: {p['definition']} with ε = {p['epsilon']:g}" + (f", δ = {p['delta']:g}" if p["delta"] else ""),
        f"- **Neighbouring datasets**: {p['neighbours']} — {p['neighbours_meaning']}",
        f"- **Unit of protection**: {unit['description']}",
        f"- **Method**: {card['method']['name']} ({card['method']['why']})",
        f"- **Mechanism**: {mech.get('mechanism', mech.get('name', ''))}; {mech.get('guarantee', '')}",
        f"- **Randomness**: {card['randomness']['source']}",
        f"- **Synthetic rows**: {card['post_processing']['synthetic_rows']:,} ({card['post_processing']['synthetic_rows_source']})",
        f"- **Composition**: {p['composition']}",
        "",
    ]
    if card.get("value_model"):
        vm = card["value_model"]
        lines[-1:-1] = [f"- **Numeric values**: drawn inside their bins from a value model costing ε_v = {vm['epsilon']:g}"
                        f" of ε ({vm['stage']['mechanism']})"]
    if card["warnings"]:
        lines += ["## Warnings", ""] + [f"- ⚠️ {w}" for w in card["warnings"]] + [""]
    lines += ["## Columns (public schema)", "", "| column | type | domain | missing cell |", "|---|---|---|---|"]
    for c in card["schema"]["columns"]:
        if c["type"] == "numeric":
            dom = f"[{c['lower']:g}, {c['upper']:g}] in {c['bins']} bins" + (", whole numbers" if c.get("integer") else "")
        else:
            cats = c["categories"]
            dom = ", ".join(cats[:8]) + (f", … ({len(cats)} categories)" if len(cats) > 8 else "")
        prov = " (⚠️ taken from the data)" if c.get("provenance") == "data" else ""
        lines.append(f"| {c['name']} | {c['type']} | {dom}{prov} | {'yes' if c.get('missing') else 'no'} |")
    lines += ["", "## How it was made", ""] + [f"1. {s}" for s in card["post_processing"]["steps"]]
    lines += ["", "## Software", ""] + [f"- {k} {v}" for k, v in card["software"].items()]
    lines += ["", "Everything in this release depends on the data only through the noise mechanism above;"
              " comparisons with the real data are not part of it.", ""]
    return "\n".join(lines)


def release_files(rel: Release) -> dict[str, bytes]:
    """Name → bytes of every released file."""
    files: dict[str, bytes] = {"synthetic.csv": to_safe_csv(rel.synthetic)}
    if rel.histogram is not None:
        files["histogram.csv"] = to_safe_csv(rel.histogram)
    if rel.model is not None:
        frames = []
        for i, frame in enumerate(rel.marginals):
            f = frame.copy()
            f.insert(0, "marginal", i + 1)
            frames.append(f)
        files["marginals.csv"] = to_safe_csv(pd.concat(frames, ignore_index=True)) if frames else b""
        files["model.json"] = json.dumps(rel.model.to_dict(), ensure_ascii=False).encode("utf-8")
    if rel.values is not None:
        files["value_model.json"] = rel.values.to_json().encode("utf-8")
    files["card.json"] = card_json(rel.card).encode("utf-8")
    files["card.md"] = card_markdown(rel.card).encode("utf-8")
    return files


def release_zip(rel: Release) -> bytes:
    """All released files in one zip (deterministic bytes for the same release)."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name, data in release_files(rel).items():
            info = zipfile.ZipInfo(name, date_time=_ZIP_TIME)
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, data)
    return buf.getvalue()
