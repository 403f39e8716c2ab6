"""Generated tables of 8–13 columns whose structure the public benchmark tables lack (issue 14's hidden
tables are of 7–16 columns): each function returns (rows, public schema), seeded, so a run is
reproducible without any file. The schemas state bounds, bins and categories a curator would know
from the table's documentation; no precision is declared.

- :func:`likert_table`: ten five-level answers driven by one latent trait (a questionnaire battery),
  with age, gender and region: every pair of answers is dependent, and no tree of small cliques holds
  them all.
- :func:`hospital_table`: admissions with a Zipf-distributed diagnosis of 25 codes, length of stay and a
  heavy-tailed cost with 15% zeros, readmission, insurance by age, admission type by severity.
- :func:`census_table`: 50 states, education, occupation, hours with a point mass at 40, incomes under
  [0, 1,000,000] in ten bins, marital status and children.
- :func:`panel_table`: twelve repeated measurements (an autoregressive chain with correlation 0.85),
  one decimal, ten bins each.
- :func:`weak_table`: nine columns that are nearly independent (sex × height and age × score the only
  dependences): every method's pair error there is mostly the real rows' own departure from
  independence, which no release at ε = 1 can learn.

    python benchmarks/bench_marginals.py --only likert hospital census panel weak --eps 1 10
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from dpsynth.schema import CategoricalColumn, NumericColumn, Schema  # noqa: E402


def _cat(name: str, categories: list) -> CategoricalColumn:
    return CategoricalColumn(name=name, categories=tuple(str(c) for c in categories))


def likert_table(n: int = 8_000, seed: int = 1) -> tuple[pd.DataFrame, Schema]:
    """Ten answers on a five-point scale, each a noisy threshold of one latent trait (loadings 0.5–0.95)."""
    g = np.random.default_rng(seed)
    trait = g.normal(size=n)
    data: dict[str, np.ndarray] = {
        "age": np.clip(np.round(45 + 15 * g.normal(size=n) + 5 * trait), 18, 90).astype(int),
        "gender": g.choice(["f", "m"], n),
        "region": np.array(list("ABCDEFGH"))[np.clip((trait * 1.2 + g.normal(size=n) * 1.5 + 4).astype(int), 0, 7)],
    }
    for i in range(10):
        load = 0.5 + 0.05 * i
        z = load * trait + g.normal(size=n) * np.sqrt(1 - load**2) + (0.3 if i % 2 else -0.2)
        data[f"q{i + 1}"] = np.digitize(z, [-1.2, -0.4, 0.4, 1.2]) + 1
    schema = Schema((NumericColumn(name="age", lower=18, upper=90, bins=8), _cat("gender", ["f", "m"]),
                     _cat("region", list("ABCDEFGH")), *(_cat(f"q{i + 1}", [1, 2, 3, 4, 5]) for i in range(10))))
    return pd.DataFrame(data), schema


def hospital_table(n: int = 15_000, seed: int = 2) -> tuple[pd.DataFrame, Schema]:
    """Admissions: age, sex, diagnosis, length of stay, cost (15% zeros, log-normal), readmission,
    insurance, admission type."""
    g = np.random.default_rng(seed)
    age = np.clip(g.gamma(4, 14, n), 0, 105).round().astype(int)
    sex = g.choice(["F", "M"], n)
    p = 1 / np.arange(1, 26) ** 1.1
    dx = g.choice(25, n, p=p / p.sum())
    severity = g.gamma(1.5, 1, n) * (1 + dx / 10)
    los = np.clip(g.poisson(severity * 2 + age / 30), 0, 365).astype(int)
    cost = np.where(g.random(n) < 0.15, 0.0,
                    np.round(np.exp(7 + 1.05 * np.log1p(los) + g.normal(size=n) * 0.6), 2)).clip(0, 500_000)
    readmit = (g.random(n) < 1 / (1 + np.exp(-(-3 + dx / 12 + age / 60 + los / 20)))).astype(int)
    insurance = np.where(age >= 65, g.choice(["medicare", "private", "none"], n, p=[0.8, 0.15, 0.05]),
                         g.choice(["medicaid", "private", "none", "other"], n, p=[0.25, 0.55, 0.15, 0.05]))
    admission = np.where(severity > 2.5, "emergency", g.choice(["elective", "urgent", "emergency"], n, p=[0.5, 0.3, 0.2]))
    codes = [f"D{k:02d}" for k in range(25)]
    df = pd.DataFrame({"age": age, "sex": sex, "dx": np.array(codes)[dx], "los": los, "cost": cost,
                       "readmit": readmit, "insurance": insurance, "admission": admission})
    schema = Schema((NumericColumn(name="age", lower=0, upper=110, bins=11), _cat("sex", ["F", "M"]), _cat("dx", codes),
                     NumericColumn(name="los", lower=0, upper=365, bins=10),
                     NumericColumn(name="cost", lower=0, upper=500_000, bins=10), _cat("readmit", [0, 1]),
                     _cat("insurance", ["medicare", "medicaid", "private", "none", "other"]),
                     _cat("admission", ["elective", "urgent", "emergency"])))
    return df, schema


def census_table(n: int = 30_000, seed: int = 3) -> tuple[pd.DataFrame, Schema]:
    """A census-like extract: state (50), urban, age, sex, education (0–15), occupation (20), hours, income,
    marital status, children."""
    g = np.random.default_rng(seed)
    g.gamma(1, 1, 50)  # keeps the draws of seed 3; the states' law is the same for every seed:
    w = np.random.default_rng(3).gamma(1, 1, 50)
    state = g.choice(50, n, p=w / w.sum())
    urban = (g.random(n) < 0.3 + 0.5 * (state % 5 == 0)).astype(int)
    age = np.clip(np.round(g.uniform(16, 90, n) * 0.5 + g.normal(40, 14, n) * 0.5), 16, 95).astype(int)
    sex = g.choice(["F", "M"], n)
    edu = np.clip(np.round(g.normal(11 + 2 * urban - (age > 70) * 2, 3, n)), 0, 15).astype(int)
    occ = np.clip(np.round(edu * 1.2 + g.normal(0, 3, n)), 0, 19).astype(int)
    hours = np.where(g.random(n) < 0.45, 40, np.clip(np.round(g.normal(38, 12, n)), 0, 99)).astype(int)
    hours = np.where(age > 67, np.where(g.random(n) < 0.7, 0, hours), hours)
    income = np.clip(np.round(np.exp(8.5 + edu * 0.1 + occ * 0.03 + hours / 80 + g.normal(0, 0.7, n)) * (hours > 0)), 0, 1_000_000)
    marital = np.where(age < 25, g.choice(["never", "married"], n, p=[0.85, 0.15]),
                       g.choice(["never", "married", "divorced", "widowed", "separated"], n, p=[0.2, 0.55, 0.13, 0.07, 0.05]))
    children = np.clip(g.poisson(np.where(marital == "married", 1.8, 0.5) * (age < 60)), 0, 9)
    states = [f"S{s:02d}" for s in range(50)]
    occupations = [f"O{o:02d}" for o in range(20)]
    df = pd.DataFrame({"state": np.array(states)[state], "urban": urban, "age": age, "sex": sex,
                       "education": edu, "occupation": np.array(occupations)[occ], "hours": hours, "income": income,
                       "marital": marital, "children": children})
    schema = Schema((_cat("state", states), _cat("urban", [0, 1]), NumericColumn(name="age", lower=16, upper=95, bins=8),
                     _cat("sex", ["F", "M"]), NumericColumn(name="education", lower=0, upper=15, bins=16),
                     _cat("occupation", occupations), NumericColumn(name="hours", lower=0, upper=99, bins=10),
                     NumericColumn(name="income", lower=0, upper=1_000_000, bins=10),
                     _cat("marital", ["never", "married", "divorced", "widowed", "separated"]),
                     NumericColumn(name="children", lower=0, upper=10, bins=5)))
    return df, schema


def panel_table(n: int = 5_000, seed: int = 4) -> tuple[pd.DataFrame, Schema]:
    """Twelve repeated measurements around 100 (sd 15, one decimal), an AR(1) chain with correlation 0.85."""
    g = np.random.default_rng(seed)
    x = g.normal(size=n)
    data = {}
    for t in range(12):
        x = 0.85 * x + np.sqrt(1 - 0.85**2) * g.normal(size=n)
        data[f"m{t + 1}"] = np.round(100 + 15 * x, 1)
    schema = Schema(tuple(NumericColumn(name=f"m{t + 1}", lower=20, upper=180, bins=10) for t in range(12)))
    return pd.DataFrame(data), schema


def weak_table(n: int = 10_000, seed: int = 5) -> tuple[pd.DataFrame, Schema]:
    """Nine nearly independent columns: age, sex, blood group, region, height (by sex), shoe size, pet,
    a score (slightly by age), birth month."""
    g = np.random.default_rng(seed)
    age = np.clip(np.round(g.normal(42, 13, n)), 18, 90).astype(int)
    sex = g.choice(["F", "M"], n)
    df = pd.DataFrame({
        "age": age, "sex": sex, "blood": g.choice(["O", "A", "B", "AB"], n, p=[0.45, 0.4, 0.11, 0.04]),
        "region": g.choice(list("NESWC"), n, p=[0.3, 0.2, 0.2, 0.2, 0.1]),
        "height": np.round(np.where(sex == "M", 176, 163) + g.normal(0, 7, n), 0), "shoe": g.choice(np.arange(35, 47), n),
        "pet": g.choice(["none", "dog", "cat", "fish", "bird"], n, p=[0.4, 0.3, 0.2, 0.05, 0.05]),
        "score": np.clip(np.round(g.normal(60, 15, n) + (age - 42) * 0.1), 0, 100).astype(int),
        "month": g.choice(np.arange(1, 13), n)})
    schema = Schema((NumericColumn(name="age", lower=18, upper=90, bins=8), _cat("sex", ["F", "M"]),
                     _cat("blood", ["O", "A", "B", "AB"]), _cat("region", list("NESWC")),
                     NumericColumn(name="height", lower=130, upper=210, bins=8), _cat("shoe", list(range(35, 47))),
                     _cat("pet", ["none", "dog", "cat", "fish", "bird"]), NumericColumn(name="score", lower=0, upper=100, bins=10),
                     _cat("month", list(range(1, 13)))))
    return df, schema


#: name → generator, for ``bench_marginals.py --only`` and the peers' runs (``--write DIR`` below)
TABLES: dict[str, Callable[..., tuple[pd.DataFrame, Schema]]] = {
    "likert": likert_table, "hospital": hospital_table, "census": census_table, "panel": panel_table, "weak": weak_table}


def population_tvd(name: str, rows: int = 1_000_000) -> tuple[float, float]:
    """2-/3-way TVD (bench_marginals' yardstick) between table ``name``'s rows and its population law (``rows``
    rows of another seed): what a release that knew the law exactly, and drew no rows, would score."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from bench_marginals import Workload

    from dpsynth.binning import encode

    df, schema = TABLES[name]()
    big, _ = TABLES[name](n=rows, seed=99)
    work = Workload(encode(df.astype(str), schema).codes, schema.sizes)
    return work.tvd(encode(big.astype(str), schema).codes)


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser(description="Write the generated tables as CSV + schema JSON (for run_peers.py).")
    ap.add_argument("--write", help="folder to write <name>.csv and <name>_schema.json into")
    ap.add_argument("--population", choices=list(TABLES), help="print this table's TVD to its population law")
    args = ap.parse_args()
    if args.population:
        two, three = population_tvd(args.population)
        print(f"{args.population}: population law against the rows, 2-way / 3-way TVD {two:.4f} / {three:.4f}")
    if args.write:
        out = Path(args.write)
        out.mkdir(parents=True, exist_ok=True)
        for name, make in TABLES.items():
            df, schema = make()
            df.to_csv(out / f"{name}.csv", index=False)
            (out / f"{name}_schema.json").write_text(schema.to_json())
            print(out / f"{name}.csv", f"{len(df):,} rows × {len(df.columns)} columns")
