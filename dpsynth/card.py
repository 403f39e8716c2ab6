"""The release card: what was released and under which guarantee, built once per release.

:func:`build_card` is the only place a card is made, from the plan (public choices), the
measured result (what the mechanism released) and the run's public facts (randomness, time,
the ledger's record of this dataset). It describes every method correctly: each stage's
mechanism and budget, how the stages compose, and the dataset's total privacy loss including
any private schema estimates. Nothing on it depends on the data except through released values
(the noisy total, the model's noisy measurements): not n, not a hash of the table, not min/max,
not which engine counted the rows. :func:`card_markdown` renders the same card for people.
"""

from __future__ import annotations

import json
import platform
from datetime import UTC, datetime
from typing import Any

import numpy as np

from dpsynth.neighbours import Neighbours

FORMAT = "dpsynth-release-card/2"


def build_card(
    plan: Any, result: Any, *, rows: int, post_seed: int, secure: bool, seed: int | None, created: str | None,
    label: str, release_id: str, ledger_state: dict[str, Any] | None = None, extra_stages: list[dict[str, Any]] | None = None,
    values: Any = None,
) -> dict[str, Any]:
    """The card of one release (a plain dict, ready for JSON). ``plan``: :class:`dpsynth.plan.ReleasePlan`;
    ``result``: a :mod:`dpsynth.results` result; ``post_seed``: the post-processing seed (released: the
    synthetic rows are a public function of the released tables and this seed)."""
    r = plan.request
    schema = plan.schema
    rel = Neighbours.parse(r.neighbours)
    eps, dlt = r.epsilon, r.delta
    stages = _row_count_stage(plan) + _stages(plan, result) + list(extra_stages or [])
    if values is not None:
        d = values.describe()
        stage = {"stage": "value model: fine distribution of each numeric column (hierarchical histograms)",
                 "mechanism": d.get("mechanism", "discrete Laplace on tree levels"), "guarantee": d["guarantee"]}
        stage.update({"rho": plan.budget.rho_values} if plan.budget.composition == "zcdp" else
                     {"epsilon": plan.budget.epsilon_values, "delta": 0.0})
        stages.append(stage)
    warnings = list(plan.warnings)
    from dpsynth.provenance import data_derived_warning

    derived = data_derived_warning(schema)
    if derived:
        warnings.insert(0, derived)
    if not secure:
        warnings.append("Reproducible (seeded) noise: for tests and demonstrations only, NOT for publication.")
    estimates = [c.name for c in schema.columns if getattr(c, "provenance", "public") == "private"]
    privacy: dict[str, Any] = {
        "epsilon": eps,
        "delta": dlt,
        "epsilon_main_method": plan.budget.epsilon_main,
        "epsilon_value_model": plan.budget.epsilon_values,
        **({"rho_total": plan.budget.rho_total, "rho_main_method": plan.budget.rho_main, "rho_value_model": plan.budget.rho_values}
           if plan.budget.composition == "zcdp" else {}),
        "definition": "approximate (ε, δ)-DP" if dlt > 0 else "pure ε-DP",
        "neighbours": rel.value,
        "neighbours_meaning": rel.describe(),
        "unit_of_protection": r.unit,
        "composition": _composition(plan, result, stages),
        "stages": stages,
    }
    loss: dict[str, Any] = {
        "this_release": {"epsilon": eps, "delta": dlt},
        "schema_estimates": (
            f"the bounds or categories of {', '.join(map(repr, estimates))} are private estimates; their ε and δ were"
            " charged to this dataset's budget separately" if estimates else "none"
        ),
    }
    if ledger_state is not None:
        loss.update(ledger_state)
        loss["meaning"] = ("everything released about this dataset so far (this release, earlier releases and private"
                           " schema estimates) is together (ε, δ)-DP with the totals spent, by basic composition")
    privacy["dataset_privacy_loss"] = loss
    return {
        "format": FORMAT,
        "release_id": release_id,
        "created": created or datetime.now(UTC).isoformat(timespec="seconds"),
        "dataset": label,
        "privacy": privacy,
        "method": {"name": plan.method, "why": plan.why},
        "mechanism": _mechanism(plan, result),
        "released_tables": result.card_entry(),
        "value_model": (({"rho": plan.budget.rho_values, "share_of_rho": plan.budget.rho_values / plan.budget.rho_total}
                          | ({"share_rule": _share_rule(plan)} if plan.budget.adaptive else {})
                          if plan.budget.composition == "zcdp" else
                          {"epsilon": plan.budget.epsilon_values, "share_of_epsilon": plan.budget.epsilon_values / eps})
                         | {"stage": values.describe()} if values is not None else None),
        "randomness": {
            "source": "cryptographically secure (ChaCha20 keyed from OS entropy)" if secure
            else "seeded pseudo-random generator",
            "reproducible": not secure,
            "for_publication": secure,
        },
        "schema": schema.to_dict(),
        "unknown_category_policies": {
            c.name: c.on_unknown for c in schema.columns if getattr(c, "on_unknown", "error") != "error"
        },
        "post_processing": _post_processing(plan, rows, post_seed),
        "artifacts": list(plan.artifacts),
        "warnings": warnings,
        "software": _versions(),
    }


def _row_count_stage(plan: Any) -> list[dict[str, Any]]:
    """The noisy row count that set an adaptive budget split, or a histogram release's row count (none otherwise)."""
    if plan.budget.epsilon_rows > 0:
        m = plan.histogram_rows_mechanism().describe()
        return [{"stage": "noisy row count: sets the number of synthetic rows (basic composition with the rest)",
                 "mechanism": m["mechanism"], "guarantee": m["guarantee"], "epsilon": plan.budget.epsilon_rows,
                 "delta": 0.0, "scale": m["scale"]}]
    if not plan.budget.adaptive:
        return []
    m = plan.row_count_mechanism().describe()
    return [{"stage": "noisy row count: sets the value model's share of the budget", "mechanism": m["mechanism"],
             "guarantee": f"{plan.budget.rho_rows:.6g}-zCDP", "rho": plan.budget.rho_rows, "sigma": m["sigma"],
             "released": {"noisy_rows": plan.budget.noisy_rows}, "rule": _share_rule(plan)}]


def _share_rule(plan: Any) -> str:
    """How the noisy row count set the value model's share (card wording)."""
    from dpsynth.marginals.budget import WIDE_COLUMNS
    from dpsynth.value_model import (
        DEFAULT_VALUE_RHO_SHARE,
        VALUE_COLUMNS_REFERENCE,
        VALUE_RHO_SHARE_CEILING,
        VALUE_RHO_SHARE_MAX,
        VALUE_SHARE_FULL_SIZE,
        value_columns_factor,
    )

    b = plan.budget
    share = b.rho_values / max(b.rho_total - b.rho_rows, 1e-300)
    head = (f"the value model gets {share:.1%} of the ρ left after the count: {DEFAULT_VALUE_RHO_SHARE:.0%} when the noisy"
            f" rows n̂ times √ρ reach {VALUE_SHARE_FULL_SIZE:g}, more as the table is smaller (in proportion to"
            f" 1/(n̂·√ρ)²), at most {VALUE_RHO_SHARE_MAX:.0%}")
    tail = " (post-processing of the released count and the public schema)"
    if b.wide:
        return (f"{head} whatever the number of numeric columns: on a table of more than {WIDE_COLUMNS} columns its share"
                " is taken from every column's one-way marginal, which the wide path keeps about as accurate as"
                f" independent noisy one-ways; here n̂ = {b.noisy_rows:,}, √ρ = {b.rho_total ** 0.5:.4g}{tail}")
    f = value_columns_factor(b.value_columns)
    return (f"{head}; with more than {VALUE_COLUMNS_REFERENCE} numeric columns"
            f" to describe, that growing share and its cap are multiplied by their number ÷ {VALUE_COLUMNS_REFERENCE}"
            f" (each column's part stays as large), at most {VALUE_RHO_SHARE_CEILING:.0%}; here n̂ = {b.noisy_rows:,},"
            f" √ρ = {b.rho_total ** 0.5:.4g} and {b.value_columns} numeric columns (×{f:.3g}){tail}")


def _stages(plan: Any, result: Any) -> list[dict[str, Any]]:
    if plan.method == "histogram":
        m = plan.mechanism.describe()
        return [{"stage": "noisy histogram: every cell of the domain counted and noised",
                 "mechanism": m["mechanism"], "guarantee": m["guarantee"], "epsilon": m["epsilon"], "delta": m["delta"]}]
    out = []
    for s in result.model.stages:
        out.append({"stage": s.get("stage", s.get("name", "")), **{k: v for k, v in s.items() if k not in {"stage", "name"}}})
    return out


def _mechanism(plan: Any, result: Any) -> dict[str, Any]:
    if plan.method == "histogram":
        return plan.mechanism.describe()
    d = result.model.describe()
    d.setdefault("mechanism", "noisy marginals: discrete Gaussian (zCDP) or discrete Laplace (δ = 0),"
                              " selected by the exponential mechanism")
    return d


def _composition(plan: Any, result: Any, stages: list[dict[str, Any]]) -> str:
    extra = len(stages) > (1 if plan.method == "histogram" else len(result.model.stages))
    tail = " The stages listed compose by basic composition: their ε and δ add up to the totals above." if extra else ""
    if plan.budget.composition == "zcdp":
        # the value model's stage is composed in ρ just below; only further stages add up in (ε, δ)
        counted = 1 if plan.budget.adaptive else 0
        others = len(stages) - (1 if plan.method == "histogram" else len(result.model.stages)) - 1 - counted
        tail = ((f" The noisy row count (ε_n = {plan.budget.epsilon_rows:g}, pure) composes" if plan.budget.epsilon_rows > 0
                 else " The other stages listed compose") + " with these by basic composition: their ε and δ add up to"
                " the totals above." if others > 0 else "")
        first = (f" three parts: a noisy row count ρ_n = {plan.budget.rho_rows:.6g}-zCDP, which sets the split of the"
                 " rest (adaptive composition: the split is a function of the released count);"
                 if counted else " two parts:")
        tail = (f" zCDP composition of{first} the {plan.method} method is ρ = {plan.budget.rho_main:.6g}-zCDP (alone"
                f" ({plan.budget.epsilon_main:.6g}, {plan.request.delta:g})-DP) and the value model of the numeric columns"
                f" ρ_v = {plan.budget.rho_values:.6g}-zCDP; their ρ add up (Bun & Steinke 2016, Lemma 2.3) to at most"
                f" {plan.budget.rho_total:.6g}, which is ({plan.request.epsilon - plan.budget.epsilon_rows:g},"
                f" {plan.request.delta:g})-DP by Canonne,"
                " Kamath & Steinke 2020, Corollary 13." + tail)
    elif plan.budget.epsilon_values > 0:
        counted = plan.budget.epsilon_rows > 0
        tail = (f" Basic composition of {'three' if counted else 'two'} parts: the {plan.method} method is"
                f" (ε − ε_v{' − ε_n' if counted else ''} = {plan.budget.epsilon_main:g},"
                f" δ = {plan.request.delta:g})-DP{',' if counted else ' and'} the value model of the numeric columns is"
                f" ε_v = {plan.budget.epsilon_values:g}-DP (pure)"
                + (f" and the noisy row count ε_n = {plan.budget.epsilon_rows:g}-DP (pure)" if counted else "")
                + f", so the release is ({plan.request.epsilon:g}, {plan.request.delta:g})-DP." + tail)
    if plan.method == "histogram":
        return ("One measurement: each row is in exactly one cell, so the noisy counts of all cells together cost"
                " (ε, δ) once (parallel composition over disjoint cells); everything after the noise — clamping,"
                " sampling, decoding — is post-processing." + tail)
    if plan.request.delta == 0:
        return ("Several adaptive measurements (one-way marginals, selections, selected marginals): their ε add up"
                " by adaptive basic composition to the ε above; estimation and sampling are post-processing." + tail)
    return ("Several adaptive measurements (one-way marginals, selections, selected marginals), each ρ-zCDP: their ρ"
            " add up (Bun & Steinke 2016, Lemma 2.3) and the total ρ is converted to (ε, δ) by Canonne, Kamath &"
            " Steinke 2020, Corollary 13; estimation and sampling are post-processing." + tail)


def _post_processing(plan: Any, rows: int, post_seed: int) -> dict[str, Any]:
    from dpsynth.synthesis import POST_PROCESSING_RANDOMNESS

    if plan.method == "histogram":
        steps = ["negative noisy counts clamped to 0", "normalised to probabilities",
                 "cells of the synthetic rows drawn i.i.d. from those probabilities (in random order)"]
        if plan.request.threshold > 1:
            steps.insert(1, f"noisy counts below {plan.request.threshold} set to 0")
    else:
        steps = ["noisy total = inverse-variance mean of the measured tables' sums",
                 "a junction-tree model fitted to all noisy measurements (mirror descent, Private-PGM style; at a"
                 " high signal-to-noise its first half takes iterative-proportional-fitting steps)",
                 "cells of the synthetic rows drawn ancestrally from the model, one clique at a time, with counts"
                 " rounded under control (each within one of the model's) and spread over the columns drawn before",
                 "for each pair factor (mechanism.pair_factors: a measured pair no clique holds whose table differed"
                 " from the model's by more than its noise), one column of the rows redrawn through a maximal"
                 " coupling with its current value, so that pair takes its measured law and the model's other tables"
                 " with that column stay as they were"]
    if plan.budget.has_values:
        steps.append("values of numeric columns drawn inside each bin from the released value model (its fine"
                     " distribution restricted to the bin; uniform on the bin's grid where it holds no mass), at evenly"
                     " spread points of the bin's distribution; category labels written as they are")
    else:
        steps.append("values drawn uniformly inside each numeric bin (on the grid of whole numbers or declared decimals"
                     " where the schema has one); category labels written as they are")
    steps.append("all of this drawn from a fast generator (SFC64) seeded by 256 bits of the release's generator:"
                 " independent of the data, so post-processing (no privacy cost)")
    return {
        "steps": steps,
        "randomness": POST_PROCESSING_RANDOMNESS,
        "seed": f"{post_seed:064x}",
        "synthetic_rows": int(rows),
        "synthetic_rows_source": plan.rows_source,
    }


def _versions() -> dict[str, str]:
    import pandas as pd
    import scipy

    from dpsynth import __version__

    return {"dpsynth": __version__, "python": platform.python_version(), "numpy": np.__version__,
            "pandas": pd.__version__, "scipy": scipy.__version__}


def card_json(card: dict[str, Any]) -> str:
    """The release card as indented JSON."""
    return json.dumps(card, indent=2, ensure_ascii=False, default=str)


def card_summary_line(card: dict[str, Any]) -> str:
    """One line: method, ε, δ, neighbours."""
    p = card["privacy"]
    d = f", δ = {p['delta']:g}" if p["delta"] else ""
    return f"{card['method']['name']} release, ε = {p['epsilon']:g}{d}, {p['neighbours']} neighbours"


def card_markdown(card: dict[str, Any]) -> str:
    """A readable summary of the release card for people who do not read JSON."""
    p = card["privacy"]
    unit = p["unit_of_protection"]
    mech = card["mechanism"]
    mech_name = mech.get("mechanism") or mech.get("method") or ""
    lines = [
        f"# Differentially private release{': ' + card['dataset'] if card.get('dataset') else ''}",
        "",
        f"- **Created**: {card['created']}",
        f"- **Guarantee**: {p['definition']} with ε = {p['epsilon']:g}" + (f", δ = {p['delta']:g}" if p["delta"] else ""),
        f"- **Neighbouring datasets**: {p['neighbours']} — {p['neighbours_meaning']}",
        f"- **Unit of protection**: {unit['description']}",
        f"- **Method**: {card['method']['name']} ({card['method']['why']})",
        f"- **Mechanism**: {mech_name}; {mech.get('guarantee', '')}",
        *([f"- **Model**: {mech['capacity']['text']}"] if (mech.get("capacity") or {}).get("text") else []),
        f"- **Randomness**: {card['randomness']['source']}",
        f"- **Synthetic rows**: {card['post_processing']['synthetic_rows']:,} ({card['post_processing']['synthetic_rows_source']})",
        f"- **Composition**: {p['composition']}",
    ]
    loss = p.get("dataset_privacy_loss", {})
    if "spent_epsilon" in loss:
        lines.append(f"- **Privacy loss of this dataset so far**: ε = {loss['spent_epsilon']:g}, δ = {loss['spent_delta']:g}"
                     f" of a total budget of ε = {loss['total_epsilon']:g}, δ = {loss['total_delta']:g}"
                     " (all releases and private schema estimates)")
    lines.append(f"- **Private schema estimates**: {loss.get('schema_estimates', 'none')}")
    lines += ["", "## Stages", "", "| stage | mechanism | guarantee |", "|---|---|---|"]
    for s in p.get("stages", []):
        mech = s.get("mechanism") or s.get("detail", "")
        lines.append(f"| {s.get('stage', '')} | {mech} | {s.get('guarantee', _budget_text(s))} |")
    lines.append("")
    if card["warnings"]:
        lines += ["## Warnings", ""] + [f"- ⚠️ {w}" for w in card["warnings"]] + [""]
    lines += ["## Columns (public schema)", "", "| column | type | domain | missing cell |", "|---|---|---|---|"]
    value_columns = ((card.get("value_model") or {}).get("stage") or {}).get("columns", {})
    for c in card["schema"]["columns"]:
        if c["type"] == "numeric":
            dom = f"[{c['lower']:g}, {c['upper']:g}] in {c['bins']} bins" + (", whole numbers" if c.get("integer") else "")
            if "precision" in value_columns.get(c["name"], {}):  # the release chose the column's grid privately
                dom += f"; values on {value_columns[c['name']]['grid']}"
        else:
            cats = c["categories"]
            dom = ", ".join(cats[:8]) + (f", … ({len(cats)} categories)" if len(cats) > 8 else "")
        prov = {"data": " (⚠️ taken from the data, NOT private)", "private": " (private estimate)"}.get(c.get("provenance", ""), "")
        lines.append(f"| {c['name']} | {c['type']} | {dom}{prov} | {'yes' if c.get('missing') else 'no'} |")
    lines += ["", "## How it was made", ""] + [f"1. {s}" for s in card["post_processing"]["steps"]]
    lines += ["", "## Software", ""] + [f"- {k} {v}" for k, v in card["software"].items()]
    lines += ["", "Everything in this release depends on the data only through the noise mechanisms above;"
              " comparisons with the real data are not part of it.", ""]
    return "\n".join(lines)


def _budget_text(stage: dict[str, Any]) -> str:
    parts = [f"{k} = {v:.4g}" for k, v in stage.items() if k in {"epsilon", "delta", "rho"} and isinstance(v, int | float)]
    return ", ".join(parts)
