"""Wide tables made of Adult's columns copied side by side, for the wide path's benchmarks (issue 14).

Each table takes a seeded sample of Adult's rows and writes its 15 columns (or its 6 numeric ones) several times,
every copy after the first with its rows shuffled, so copies are independent of each other while the columns of
one copy keep Adult's dependence; the schema is Adult's, each column renamed ``NAME_k``. Written with their schemas
as ``NAME.csv`` and ``NAME_schema.json`` (what ``bench_independent.py`` and ``bench_ks_tables.py`` read):

| table | rows × columns |
|---|---|
| small30 | 2,000 × 30 (12 numeric) |
| small45 | 2,000 × 45 (18 numeric) |
| mid45 | 5,000 × 45 (18 numeric) |
| tiny60 | 1,000 × 60 (24 numeric) |
| num30 | 2,000 × 30 (all numeric) |

    python benchmarks/tables/wide_copies.py --out /tmp/wide
    python benchmarks/bench_independent.py --data /tmp/wide --eps 1 --seeds 16 --delta 0
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
SHARED = HERE.parent.parent.parent / "shared" / "data"

#: name: (copies, rows, numeric columns only, seed)
TABLES = {
    "small30": (2, 2000, False, 0),
    "small45": (3, 2000, False, 0),
    "mid45": (3, 5000, False, 0),
    "tiny60": (4, 1000, False, 0),
    "num30": (5, 2000, True, 1),
}


def write(out: Path, name: str, df: pd.DataFrame, schema: dict, copies: int, rows: int, numeric: bool,
          seed: int) -> None:
    g = np.random.default_rng(seed)
    cols = [c for c in schema["columns"] if c["type"] == "numeric" or not numeric]
    base = df.iloc[g.choice(len(df), rows, replace=False)].reset_index(drop=True)[[c["name"] for c in cols]]
    parts, out_cols = [], []
    for k in range(copies):
        part = base.iloc[g.permutation(len(base))].reset_index(drop=True) if k else base
        parts.append(part.add_suffix(f"_{k}"))
        out_cols += [dict(c, name=f"{c['name']}_{k}") for c in cols]
    pd.concat(parts, axis=1).to_csv(out / f"{name}.csv", index=False)
    (out / f"{name}_schema.json").write_text(json.dumps(dict(schema, columns=out_cols)))


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--data", default=str(SHARED), help="folder with adult.csv and adult_schema.json")
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    df = pd.read_csv(Path(args.data) / "adult.csv", dtype=str, keep_default_na=False)
    schema = json.loads((Path(args.data) / "adult_schema.json").read_text())
    for name, (copies, rows, numeric, seed) in TABLES.items():
        write(out, name, df, schema, copies, rows, numeric, seed)
        print(f"{name}: {rows:,} rows × {copies * (6 if numeric else len(schema['columns']))} columns")


if __name__ == "__main__":
    main()
