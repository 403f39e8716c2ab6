"""Nightly privacy audit of ``dpsynth.release()``: more runs, more pairs, secure randomness.

    python benchmarks/audit_nightly.py                  # 10^5 runs per dataset, CSPRNG noise (~1 h on 2 cores)
    python benchmarks/audit_nightly.py --runs 20000     # a quicker pass
    python benchmarks/audit_nightly.py --matrix         # also every planted bug against every pair
    python benchmarks/audit_nightly.py --seed 7         # reproducible (seeded) noise instead of the CSPRNG
    python benchmarks/audit_nightly.py --marginals-runs 0   # skip the (slow) marginals-method pairs

The same audit as ``tests/test_audit.py`` (``tests/audit_tools.py``: event chosen on separate
selection runs, Clopper–Pearson at α = 10⁻³, ε_lb = ln((p̂₁ − δ)/p̂₂)), on the CI pairs at ε = 0.5
and ε = 1 plus the discrete Gaussian, with ten times the runs, and on the marginals method (including a pair whose
capped cliques make the fit run a pair-factor round, ``tests.audit_tools.factor_pair``). It prints, per pair, the lower
bound as a ratio to the claimed ε (≤ 1 passes; the closer to 1, the tighter the audit) and, per
planted bug, the ratio it reaches (> 1 means caught). The cost line is a ratio too: one release()
against one draw of the same mechanism on the same cells, measured in this process. Results go
to ``benchmarks/out/audit_nightly.json``. Exit status 1 if a correct pair fails or a bug is missed.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.audit_tools import MUTANTS, audit, marginals_pairs, nightly_pairs, pairs  # noqa: E402


def cost_ratio(samples: int = 2_000) -> float:
    """Time of one release() on the add-to-empty-cell pair over one mechanism draw on its 3 cells."""
    import importlib

    import numpy as np

    from dpsynth import noise
    from dpsynth.mechanisms import calibrate

    rel = importlib.import_module("dpsynth.release")
    p = pairs(0.5)["add to empty cell"]
    rng = noise.seeded_rng(1)
    mech = calibrate(0.5, 0.0, "add-remove")
    counts = np.array([3, 2, 0])
    t = time.perf_counter()
    for _ in range(samples):
        mech(counts, rng=rng)
    base = time.perf_counter() - t
    t = time.perf_counter()
    for _ in range(samples):
        rel.release(p.d, p.schema, rng=rng, **p.options)
    return (time.perf_counter() - t) / base


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=100_000, help="fresh runs per dataset for the final bound")
    ap.add_argument("--selection-runs", type=int, default=5_000, help="runs per dataset in each selection round")
    ap.add_argument("--mutant-runs", type=int, default=10_000, help="runs per dataset for the planted bugs")
    ap.add_argument("--matrix", action="store_true", help="run every planted bug against every ε = 0.5 pair")
    ap.add_argument("--marginals-runs", type=int, default=10_000,
                    help="runs per dataset for the marginals method (about 25 ms per release; 0 skips it)")
    ap.add_argument("--seed", type=int, default=None, help="seeded noise (reproducible) instead of the CSPRNG")
    ap.add_argument("--workers", type=int, default=None, help="worker processes (default: up to 2)")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "out" / "audit_nightly.json"))
    args = ap.parse_args()
    secure = args.seed is None
    seed = args.seed or 0
    common = {"selection_runs": args.selection_runs, "workers": args.workers, "secure": secure, "seed": seed}

    print(f"cost: one release() = {cost_ratio():.0f}× one mechanism draw (same process)\n", flush=True)
    results, failures = [], []
    print(f"{'pair':58s} {'ε':>5s} {'ε_lb':>7s} {'ratio':>6s}  verdict  event")
    todo = [(p, args.runs) for p in nightly_pairs().values()]
    if args.marginals_runs:
        todo += [(p, args.marginals_runs) for p in marginals_pairs().values()]
    for pair, runs in todo:
        name = pair.name
        r = audit(pair, runs=runs, **({**common, "selection_runs": min(args.selection_runs, max(100, runs // 10))}))
        results.append({"kind": "pair", **_row(r)})
        print(f"{name:58s} {r.claimed_epsilon:5g} {r.eps_lb:7.3f} {r.eps_lb / r.claimed_epsilon:6.3f}  "
              f"{'pass' if r.passed else 'FAIL':7s}  {r.event} ({r.direction}, {r.k1}/{r.n1} vs {r.k2}/{r.n2})",
              flush=True)
        if not r.passed:
            failures.append(name)

    print(f"\n{'planted bug':40s} {'pair':28s} {'ε_lb':>7s} {'ratio':>6s}  caught")
    base = pairs(0.5)
    for mutant, (_, home) in MUTANTS.items():
        for pname in (base if args.matrix else [home]):
            r = audit(base[pname], runs=args.mutant_runs, mutant=mutant, **common)
            results.append({"kind": "mutant", "mutant": mutant, **_row(r)})
            caught = not r.passed
            print(f"{mutant:40s} {pname:28s} {r.eps_lb:7.3f} {r.eps_lb / r.claimed_epsilon:6.3f}  "
                  f"{'yes' if caught else 'no'}{'' if pname == home else ' (not its target pair)'}", flush=True)
            if pname == home and not caught:
                failures.append(f"{mutant} (missed)")

    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"date": datetime.now(UTC).isoformat(timespec="seconds"), "runs": args.runs,
                               "selection_runs": args.selection_runs, "secure": secure, "results": results},
                              indent=2, ensure_ascii=False))
    print(f"\nwritten {out}")
    if failures:
        print("FAILED: " + "; ".join(failures))
        return 1
    return 0


def _row(r) -> dict[str, object]:  # noqa: ANN001 - AuditResult
    return {"pair": r.pair, "epsilon": r.claimed_epsilon, "delta": r.delta, "eps_lb": r.eps_lb,
            "ratio": r.eps_lb / r.claimed_epsilon, "passed": r.passed, "event": r.event, "direction": r.direction,
            "k1": r.k1, "n1": r.n1, "k2": r.k2, "n2": r.n2, "seconds": r.extra.get("seconds")}


if __name__ == "__main__":
    raise SystemExit(main())
