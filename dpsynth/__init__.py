"""dpsynth: differentially private synthetic data from noisy histograms and marginals.

Public API::

    import dpsynth
    schema = dpsynth.load_schema("schema.json")
    rel = dpsynth.release(df, schema, epsilon=1.0, rng=dpsynth.secure_rng())
    rel.synthetic, rel.histogram, rel.card

Modules: ``schema`` (public domain), ``binning`` (values ↔ cells), ``neighbours`` (relation and
sensitivities), ``noise`` (exact samplers, secure generator), ``mechanisms`` (calibration),
``accounting`` (budgets, ledger), ``histogram``, ``marginals`` (many columns), ``synthesis``,
``release``, ``artifacts``, ``io``, ``utility``, ``risk``, ``discovery``, ``drafting``, ``cli``.
"""

__version__ = "0.1.0"

from dpsynth.accounting import Ledger, PrivacyBudget  # noqa: E402
from dpsynth.errors import BudgetExceededError, DPSynthError, InputError, LedgerError  # noqa: E402
from dpsynth.neighbours import Neighbours  # noqa: E402
from dpsynth.noise import secure_rng, seeded_rng  # noqa: E402
from dpsynth.release import Release, release  # noqa: E402
from dpsynth.schema import CategoricalColumn, NumericColumn, Schema, load_schema  # noqa: E402

__all__ = [
    "BudgetExceededError", "CategoricalColumn", "DPSynthError", "InputError", "Ledger", "LedgerError",
    "Neighbours", "NumericColumn", "PrivacyBudget", "Release", "Schema", "__version__", "load_schema",
    "release", "secure_rng", "seeded_rng",
]
