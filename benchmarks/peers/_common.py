"""Shared CLI and I/O for the per-peer runners (run inside each peer's own virtual environment).

A runner reads the real CSV and our schema, codes the data with :mod:`scoring` (the public
domain), hands the coded table to its peer, maps the peer's output back to codes, writes it
with our labels, and prints one JSON line: peer, version, seconds (fit + sample only).
"""

from __future__ import annotations

import argparse
import json
import sys
from importlib import metadata
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import scoring  # noqa: E402


def parse(peers: list[str]) -> argparse.Namespace:
    """Arguments common to every runner."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--peer", choices=peers, required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--schema", required=True)
    ap.add_argument("--epsilon", type=float, required=True)
    ap.add_argument("--delta", type=float, default=1e-9)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", required=True, help="synthetic CSV to write (our labels)")
    return ap.parse_args()


def load(args: argparse.Namespace):
    """Schema, coded real rows (n, d) and domain sizes."""
    schema = scoring.load_schema(args.schema)
    codes = scoring.encode(scoring.read_csv(args.data, schema), schema)
    return schema, codes, scoring.domain_sizes(schema)


def versions(*dists: str) -> str:
    """'name==version' of the distributions that matter for this peer."""
    return " ".join(f"{d}=={metadata.version(d)}" for d in dists)


def finish(args, schema, synth_codes, peer: str, version: str, seconds: float, **extra) -> None:
    """Write the synthetic rows and report the run as one JSON line on stdout."""
    scoring.write_codes_csv(synth_codes, schema, args.out)
    rec = {"peer": peer, "version": version, "seconds": round(seconds, 2), **extra}
    print("RESULT " + json.dumps(rec), flush=True)


def sampler_gap(model, rows, attrs) -> dict:
    """How far a model's own sampled rows are from the model, on pairs it measured or not.

    ``model`` and ``rows`` are Private-PGM objects with ``project(attrs).datavector()`` (the
    fitted model and a ``Dataset`` sampled from it, on the same domain).  A faithful sampler
    gives a small TVD on *every* pair; a sampler that drops dependencies is exact on the
    measured cliques and off on the pairs it never measured.
    """
    import itertools

    import numpy as np

    cliques = [set(c) for c in model.cliques]
    gap: dict[str, list[float]] = {"measured": [], "unmeasured": []}
    for a, b in itertools.combinations(attrs, 2):
        p = np.asarray(model.project((a, b)).datavector(), dtype=float)
        q = np.asarray(rows.project((a, b)).datavector(), dtype=float)
        tv = 0.5 * float(np.abs(p / p.sum() - q / q.sum()).sum())
        gap["measured" if any({a, b} <= c for c in cliques) else "unmeasured"].append(tv)
    return {f"sampler_gap_{k}": round(float(np.mean(v)), 4) if v else None for k, v in gap.items()}
