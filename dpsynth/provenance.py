"""Where each schema value came from, and what a release does about values read off the data.

Every field of a column (a bound, the number of bins, the list of categories) carries its own
provenance (:attr:`dpsynth.schema.NumericColumn.sources`):
``public`` (the curator's knowledge), ``private`` (a DP estimate charged to the budget) or
``data`` (read off the table without a DP mechanism). A ``data`` value is not private: a bound
taken from the maximum *is* one person's value (lecture notes on differential privacy: "M =
max|x_i| is not allowed!!!"). So a release refuses a schema holding one, before anything is
charged, unless the curator explicitly accepts it; the release card then says so first.
"""

from __future__ import annotations

from collections import defaultdict

from dpsynth.errors import InputError
from dpsynth.schema import Schema

#: How a field is named to a curator.
FIELD_WORDS: dict[str, str] = {
    "lower": "lower bound", "upper": "upper bound", "bins": "number of bins", "categories": "categories",
}


def data_derived_summary(schema: Schema) -> str:
    """``age (lower bound, upper bound); colour (categories)``: the data-derived fields per column ('' if none)."""
    by_col: dict[str, list[str]] = defaultdict(list)
    for col, f in schema.data_derived_fields():
        by_col[col].append(FIELD_WORDS.get(f, f))
    return "; ".join(f"{c} ({', '.join(fs)})" for c, fs in by_col.items())


def refuse_data_derived(schema: Schema, *, accept: bool = False) -> None:
    """Raise :class:`InputError` (one line, naming the columns and fields) if the schema holds values read
    off the data and the curator has not accepted them. Call before anything is charged."""
    if accept:
        return
    summary = data_derived_summary(schema)
    if summary:
        raise InputError(
            f"The schema holds values read off the data, which are not private: {summary}. Replace them with"
            " public values, estimate them privately, or accept publishing them (--accept-data-derived-schema on the command line,"
            " accept_data_derived=True in Python)."
        )


def data_derived_warning(schema: Schema) -> str | None:
    """The warning a release card shows first when data-derived values were accepted (None if there are none)."""
    summary = data_derived_summary(schema)
    if not summary:
        return None
    return (
        "NOT PRIVATE — values read off the data were published with the curator's explicit acceptance: "
        f"{summary}. These values come from the real records without any privacy protection and can reveal"
        " individual people (for example the oldest person's age, or a name that occurs once). The privacy"
        " guarantee stated on this card does not cover them."
    )
