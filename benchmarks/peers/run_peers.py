"""Run reference peers (smartnoise-synth MST/AIM, DataSynthesizer PrivBayes) and score them.

Each peer runs in a subprocess inside its own virtual environment under
``benchmarks/.venvs/<env>`` (created on first use from the pinned lock files in
``benchmarks/peers/requirements/``), on the data coded by the schema's public domain
(:mod:`scoring`).  The synthetic rows come back as a CSV in our labels and are scored here
with the same TVD code for everyone: average 2-way TVD over all column pairs and 3-way TVD
over a fixed seeded sample of 300 triples, plus wall time.

Results are appended as JSON lines to ``benchmarks/peers/results.jsonl``.

Example (from the repository root)::

    python benchmarks/peers/run_peers.py --peers mst,aim,privbayes --epsilons 1 --seeds 0
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
VENVS = REPO / "benchmarks" / ".venvs"
sys.path.insert(0, str(HERE))

import scoring  # noqa: E402

# peer -> (virtual environment, runner script, delta is used, --peer passed to the runner)
PEERS: dict[str, tuple[str, str, bool, str]] = {
    "mst": ("snsynth", "peer_snsynth.py", True, "mst"),
    "aim": ("snsynth", "peer_snsynth.py", True, "aim"),
    # Diagnostic: smartnoise MST, rows drawn i.i.d. from the model instead of mbi 1.1.0's
    # default randomized rounding (which loses dependencies on unmeasured pairs).
    "mst-iid": ("snsynth", "peer_snsynth.py", True, "mst-iid"),
    "privbayes": ("datasynthesizer", "peer_privbayes.py", False, "privbayes"),
    # MST written from the paper on Private-PGM mbi 2.0.0 (PyPI ships no mechanisms).
    "mst-mbi2": ("mbi2", "peer_mbi2.py", True, "mst"),
    # AIM written from the paper on mbi 2.0.0 (the yardstick is AIM on mbi 2.0).
    "aim-mbi2": ("mbi2", "peer_aim_mbi2.py", True, "aim"),
}

# Installed in order into each environment; the lock file pins every transitive package.
ENV_STEPS: dict[str, list[list[str]]] = {
    "snsynth": [["-r", "requirements/snsynth.txt"]],
    "datasynthesizer": [["-r", "requirements/datasynthesizer.txt"]],
    "mbi2": [["-r", "requirements/mbi2.txt"]],
}


def ensure_env(env: str) -> Path:
    """Create ``.venvs/<env>`` and install its pinned packages if it is not there yet."""
    py = VENVS / env / "bin" / "python"
    marker = VENVS / env / ".installed"
    if marker.exists():
        return py
    print(f"[setup] creating {VENVS / env}", flush=True)
    subprocess.run([sys.executable, "-m", "venv", str(VENVS / env)], check=True)
    for step in ENV_STEPS[env]:
        subprocess.run([str(py), "-m", "pip", "install", "-q", *step], check=True, cwd=HERE)
    marker.write_text("ok\n")
    return py


def run_one(peer: str, data: Path, schema: Path, eps: float, delta: float, seed: int,
            timeout: float | None, workdir: Path) -> dict:
    """Run one peer in its environment; return its RESULT record (or an error record)."""
    env, script, uses_delta, name = PEERS[peer]
    py = ensure_env(env)
    out = workdir / f"{peer}_e{eps:g}_s{seed}.csv"
    cmd = [str(py), str(HERE / script), "--peer", name, "--data", str(data), "--schema", str(schema),
           "--epsilon", repr(eps), "--delta", repr(delta if uses_delta else 0.0),
           "--seed", str(seed), "--out", str(out)]
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                              env={**os.environ, "PYTHONWARNINGS": "ignore"})
    except subprocess.TimeoutExpired:
        return {"error": f"timeout after {timeout:g} s", "wall": time.perf_counter() - t0}
    wall = time.perf_counter() - t0
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-5:]
        return {"error": f"exit {proc.returncode}: " + " | ".join(tail), "wall": wall}
    rec = json.loads(lines[-1][len("RESULT "):])
    rec["wall"] = wall
    rec["out"] = out
    return rec


def baselines(real: np.ndarray, sizes: list[int], dataset: str, seeds: list[int],
              results: str) -> list[dict]:
    """Non-private reference rows: bootstrap resample of the real rows, and each column drawn
    independently from its real 1-way marginal (same n)."""
    n, d = real.shape
    out = []
    for seed in seeds:
        rng = np.random.default_rng(1000 + seed)
        for name, synth in (
            ("resample", real[rng.integers(0, n, n)]),
            ("independent", np.stack([real[rng.integers(0, n, n), j] for j in range(d)], axis=1)),
        ):
            rec = {"peer": name, "version": "non-private baseline", "dataset": dataset, "epsilon": None,
                   "delta": None, "seed": seed, **scoring.score(real, synth, sizes), "seconds": None,
                   "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
            with open(results, "a") as f:
                f.write(json.dumps(rec) + "\n")
            out.append(rec)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    shared = REPO.parent / "shared" / "data"
    ap.add_argument("--data", default=str(shared / "adult.csv"))
    ap.add_argument("--schema", default=str(shared / "adult_schema.json"))
    ap.add_argument("--peers", default="mst,aim,privbayes", help=f"comma list of {sorted(PEERS)}")
    ap.add_argument("--epsilons", default="1")
    ap.add_argument("--seeds", default="0")
    ap.add_argument("--delta", type=float, default=1e-9)
    ap.add_argument("--sample", type=int, default=0, help="score on a seeded subsample of this many rows")
    ap.add_argument("--timeout", type=float, default=None, help="seconds per peer run")
    ap.add_argument("--results", default=str(HERE / "results.jsonl"))
    ap.add_argument("--keep", default=None, help="directory to keep the synthetic CSVs in")
    ap.add_argument("--baselines", action="store_true",
                    help="also score resampled real rows (the floor) and independent columns (not private)")
    ap.add_argument("--setup-only", action="store_true", help="create the environments and stop")
    args = ap.parse_args()

    peers = [p for p in args.peers.split(",") if p]
    unknown = [p for p in peers if p not in PEERS]
    if unknown:
        sys.exit(f"unknown peer(s) {unknown}; choose from {sorted(PEERS)}")
    if args.setup_only:
        for env in dict.fromkeys(PEERS[p][0] for p in peers):
            ensure_env(env)
        return

    schema = scoring.load_schema(args.schema)
    sizes = scoring.domain_sizes(schema)
    real_df = scoring.read_csv(args.data, schema)
    dataset = Path(args.data).stem
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(args.keep) if args.keep else Path(tmp)
        workdir.mkdir(parents=True, exist_ok=True)
        data_path = Path(args.data)
        if args.sample:
            rng = np.random.default_rng(12345)
            idx = np.sort(rng.choice(len(real_df), size=min(args.sample, len(real_df)), replace=False))
            real_df = real_df.iloc[idx]
            data_path = workdir / f"{dataset}_sample{len(real_df)}.csv"
            real_df.to_csv(data_path, index=False)
            dataset = f"{dataset}[sample {len(real_df)}]"
        real = scoring.encode(real_df, schema)

        rows = []
        if args.baselines:
            rows += baselines(real, sizes, dataset, [int(s) for s in args.seeds.split(",")], args.results)
        for peer in peers:
            for eps in [float(e) for e in args.epsilons.split(",")]:
                for seed in [int(s) for s in args.seeds.split(",")]:
                    print(f"[run] {peer} eps={eps:g} seed={seed} on {dataset} ...", flush=True)
                    r = run_one(peer, data_path, Path(args.schema), eps, args.delta, seed,
                                args.timeout, workdir)
                    rec = {"peer": peer, "version": r.get("version"), "dataset": dataset,
                           "epsilon": eps, "delta": args.delta if PEERS[peer][2] else 0.0,
                           "seed": seed}
                    if "error" in r:
                        rec.update(tvd2=None, tvd3=None, seconds=None, wall=round(r["wall"], 1),
                                   error=r["error"])
                    else:
                        synth = scoring.encode(scoring.read_csv(r["out"], schema), schema)
                        rec.update(scoring.score(real, synth, sizes), seconds=r["seconds"],
                                   wall=round(r["wall"], 1))
                        kept = ("rho", "tree", "rounds", "measured")
                        rec.update({k: v for k, v in r.items() if k.startswith("sampler_gap") or k in kept})
                    rec["when"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
                    print(json.dumps(rec), flush=True)
                    with open(args.results, "a") as f:
                        f.write(json.dumps(rec) + "\n")
                    rows.append(rec)

    print(f"\n{'peer':<11} {'eps':>5} {'seed':>4} {'tvd2':>7} {'tvd3':>7} {'seconds':>8}  version")
    for r in rows:
        t2 = "   err" if r["tvd2"] is None else f"{r['tvd2']:.4f}"
        t3 = "   err" if r["tvd3"] is None else f"{r['tvd3']:.4f}"
        sec = "-" if r["seconds"] is None else f"{r['seconds']:.0f}"
        eps = "-" if r["epsilon"] is None else f"{r['epsilon']:g}"
        print(f"{r['peer']:<11} {eps:>5} {r['seed']:>4} {t2:>7} {t3:>7} {sec:>8}  "
              f"{r['version'] or r.get('error', '')}")


if __name__ == "__main__":
    main()
