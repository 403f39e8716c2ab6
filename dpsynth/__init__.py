"""dpsynth: differentially private synthetic data from noisy histograms and marginals.

Public API::

    import dpsynth
    schema = dpsynth.load_schema("schema.json")
    rel = dpsynth.release(df, schema, epsilon=1.0, rng=dpsynth.secure_rng())
    rel.synthetic, rel.histogram, rel.card

Modules: ``schema`` (public domain), ``binning`` (values ↔ cells), ``neighbours`` (relation and
sensitivities), ``noise`` (exact samplers, secure generator), ``mechanisms`` (calibration),
``accounting`` (budgets, ledger), ``histogram``, ``marginals`` (many columns), ``synthesis``,
``release``, ``artifacts``, ``inference`` (honest statistics from a release), ``io``, ``utility``, ``risk``,
``discovery``, ``drafting``, ``cli``.

The names below are imported on first use (PEP 562), so ``python -m dpsynth`` and the engines
start without loading pandas before they need it.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import Any

__version__ = "0.1.0"

_LAZY = {
    "Ledger": "dpsynth.accounting", "PrivacyBudget": "dpsynth.accounting",
    "BudgetExceededError": "dpsynth.errors", "DPSynthError": "dpsynth.errors", "InputError": "dpsynth.errors",
    "LedgerError": "dpsynth.errors", "Neighbours": "dpsynth.neighbours", "secure_rng": "dpsynth.noise",
    "seeded_rng": "dpsynth.noise", "Release": "dpsynth.release", "release": "dpsynth.release",
    "CategoricalColumn": "dpsynth.schema", "NumericColumn": "dpsynth.schema", "Schema": "dpsynth.schema",
    "load_schema": "dpsynth.schema", "load_release": "dpsynth.inference",
}

__all__ = sorted([*_LAZY, "__version__"])


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'dpsynth' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


class _Package(types.ModuleType):
    """``dpsynth.release`` is the function, as before: importing the submodule must not rebind it."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "release" and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
