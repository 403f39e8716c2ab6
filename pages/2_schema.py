"""Schema page: the editable table of columns, domain size, private estimates, save/load JSON."""

from __future__ import annotations

import streamlit as st

from dpsynth.errors import DPSynthError
from dpsynth.estimates import estimate, estimate_flagged
from dpsynth.prediction import cell_count_words, predict_utility
from dpsynth.provenance import data_derived_summary
from dpsynth.schema import Schema
from dpsynth.ui_state import SOURCE_LABELS, AppState, editor_view, get_state, show_errors
from dpsynth.verdicts import utility_verdict

COLUMN_CONFIG = {
    "include": st.column_config.CheckboxColumn("include?", help="Put this column in the release."),
    "column": st.column_config.TextColumn("column", disabled=True),
    "type": st.column_config.SelectboxColumn("type", options=["numeric", "categorical"], required=True,
                                             help="numeric: cut into equal bins between lower and upper; categorical: a list."),
    "lower": st.column_config.TextColumn("lower", help="Smallest value you expect (values below are raised to it).",
                                         width="small"),
    "upper": st.column_config.TextColumn("upper", help="Largest value you expect (values above are lowered to it).",
                                         width="small"),
    "bins": st.column_config.TextColumn("bins", help="Number of equal-width bins between lower and upper (1 to 10,000).",
                                        width="small"),
    "integer": st.column_config.CheckboxColumn("whole numbers?", help="Synthetic values are whole numbers."),
    "decimals": st.column_config.TextColumn(
        "decimals", width="small",
        help="Number of decimals synthetic values are written with (the precision the data are recorded to);"
             " leave empty for full precision. Whole numbers: tick the box instead."),
    "categories": st.column_config.TextColumn("categories (comma-separated)", width="medium",
                                              help="Every possible value, separated by commas."),
    "missing": st.column_config.CheckboxColumn("may be empty?", help="Keep a cell for empty values."),
    "unknown": st.column_config.SelectboxColumn(
        "values not listed", options=["error", "missing", "drop"],
        help="Categorical columns: a value not in the list stops the release with a message (error), is counted as"
             " empty (missing: needs 'may be empty?'), or its row is left out (drop). Private category estimates"
             " choose missing, so rare values stay hidden."),
}


def source_config(table) -> st.column_config.SelectboxColumn:  # noqa: ANN001 - DataFrame
    """The source column: pick 'public' to declare a whole row public knowledge; mixed rows list their fields."""
    options = list(SOURCE_LABELS.values()) + sorted(set(table["source"]) - set(SOURCE_LABELS.values()) - {""})
    return st.column_config.SelectboxColumn(
        "where the values come from", options=options, width="medium",
        help="Per field: values read off the data are NOT private. Typing a value makes that field yours (public);"
             " picking 'public' here declares the whole row public knowledge. Or estimate them privately below.")


def estimate_panel(state: AppState, schema: Schema | None) -> None:
    """Replace data-derived values by a DP estimate, charged to the ledger first."""
    flagged = schema.data_derived() if schema is not None else []
    with st.expander(f"Replace values read from the data by a private estimate ({len(flagged)} column(s) flagged)",
                     expanded=bool(flagged)):
        st.markdown(
            "Bounds and categories read off the data can reveal individuals (the oldest person's age, a rare"
            " job title). Either type values you know from public sources into the table above, or estimate"
            " them here with a small DP spend that is **recorded in the privacy ledger before anything is read**."
        )
        for note in state.analyses.get("estimate_notes", []):
            st.warning(note)
        if not flagged:
            st.caption("No included column has values read from the data.")
            return
        estimate_all(state, schema)
        st.markdown("**Or one column at a time**")
        table = state.schema_table
        name = st.selectbox("Column", flagged, key="est_column")
        row = table.loc[table["column"] == name].iloc[0]
        c1, c2, c3 = st.columns(3)
        eps = c1.number_input("ε to spend on this estimate", min_value=0.01, max_value=10.0, value=0.1, step=0.05,
                              key="est_epsilon", format="%g")
        if row["type"] == "numeric":
            lo = c2.number_input("public outer range: lowest possible", value=0.0, key="est_outer_lo", format="%g",
                                 help="A range you know holds every value, from public knowledge (e.g. age 0 to 120)."
                                      " It is not read from the data.")
            hi = c3.number_input("public outer range: highest possible", value=1000.0, key="est_outer_hi", format="%g")
            delta = 0.0
        else:
            delta = c2.number_input("δ (chance a one-person category shows up)", min_value=1e-12, max_value=1e-3,
                                    value=1e-6, format="%.0e", key="est_delta")
            lo = hi = 0.0
        if st.button(f"Estimate {name!r} privately (spends ε = {eps:g})", key="est_run"):
            with show_errors():
                current = state.template_column(name)
                est = estimate(
                    state.data, current, epsilon=eps, delta=delta, outer=(lo, hi), ledger=state.ledger(),
                    dataset_id=state.dataset_id, budget=state.budget(), neighbours=state.neighbours,
                    dataset_label=state.data_label, id_column=state.id_column,
                    max_contributions=state.max_contributions,
                )
                state.replace_column(est.column)
                state.analyses["estimate_notes"] = list(est.notes)
                st.rerun()


def estimate_all(state: AppState, schema: Schema) -> None:
    """One ε (and δ) split over every flagged column, one ledger entry per column."""
    import pandas as pd

    flagged = schema.data_derived()
    numeric = [c for c in flagged if schema.column(c).type == "numeric"]
    st.markdown(f"**Estimate all {len(flagged)} flagged column(s) privately** with one budget split evenly between"
                " them (each column's spend is its own line in the ledger).")
    c1, c2 = st.columns(2)
    eps = c1.number_input("ε for all of them together", min_value=0.01, max_value=10.0, value=0.5, step=0.1,
                          key="est_all_epsilon", format="%g")
    delta = c2.number_input("δ for all category lists together", min_value=1e-12, max_value=1e-3, value=1e-6,
                            format="%.0e", key="est_all_delta")
    outers = {}
    if numeric:
        st.caption("Numeric columns need a public outer range that surely holds every value (from public knowledge,"
                   " e.g. age 0 to 120; never read from the data).")
        blank = pd.DataFrame({"column": numeric, "lowest possible": [""] * len(numeric),
                              "highest possible": [""] * len(numeric)})
        ranges = st.data_editor(blank, key="est_all_outers", hide_index=True, num_rows="fixed", disabled=["column"])
        lo = pd.to_numeric(ranges["lowest possible"], errors="coerce")
        hi = pd.to_numeric(ranges["highest possible"], errors="coerce")
        outers = {c: (float(a), float(b)) for c, a, b in zip(ranges["column"], lo, hi, strict=True)
                  if pd.notna(a) and pd.notna(b)}
    if st.button(f"Estimate all {len(flagged)} flagged columns privately (spends ε = {eps:g})", key="est_all_run"):
        with show_errors():
            batch = estimate_flagged(
                state.data, schema, epsilon=eps, delta=delta, outers=outers, ledger=state.ledger(),
                dataset_id=state.dataset_id, budget=state.budget(), neighbours=state.neighbours,
                dataset_label=state.data_label, id_column=state.id_column, max_contributions=state.max_contributions,
            )
            for est in batch.estimates.values():
                state.replace_column(est.column)
            state.analyses["estimate_notes"] = [n for e in batch.estimates.values() for n in e.notes] + list(
                batch.failed.values())
            st.rerun()


def provenance_section(state: AppState, schema: Schema | None) -> None:
    """How many fields are read off the data, which, and the explicit acceptance that lets them be published."""
    fields = schema.data_derived_fields() if schema else []
    if not fields:
        state.accept_data_derived = False
        if schema is not None:
            st.success("Every value of the schema is public or a private estimate.")
        return
    st.warning(f":material/warning: **{len(fields)} field(s) of {len(schema.data_derived())} column(s) were read from"
               f" your data and are not private**: {data_derived_summary(schema)}. The release is blocked until you"
               " type public values, estimate them privately (below), or accept publishing them.")
    state.accept_data_derived = st.checkbox(
        "I accept publishing these values read from the data (not private; the release card will say so first)",
        value=state.accept_data_derived, key="schema_accept_data")


def save_load(state: AppState, schema: Schema | None) -> None:
    c1, c2 = st.columns(2)
    with c1:
        st.download_button("Save schema (JSON)", data=schema.to_json() if schema else "", file_name="schema.json",
                           mime="application/json", disabled=schema is None, key="schema_save")
    with c2:
        up = st.file_uploader("Load a schema (JSON)", type=["json"], key="schema_upload", max_upload_size=1)
        if up is not None and state.analyses.get("schema_upload_id") != up.file_id:
            state.analyses["schema_upload_id"] = up.file_id
            with show_errors():
                try:
                    text = up.getvalue().decode("utf-8")
                except UnicodeDecodeError:
                    raise DPSynthError(f"{up.name} is not UTF-8 text.") from None
                state.set_schema(Schema.from_json(text))
                st.rerun()


def main() -> None:
    state = get_state(st.session_state)
    st.title("2 · Schema: describe each column")
    if not state.has_data:
        st.info("Load a dataset first.")
        st.page_link("pages/1_data.py", label="Go to Data", icon=":material/upload_file:")
        return
    st.markdown(
        "The schema is the **public** description of your columns: the range and number of bins of each"
        " number, the list of possible values of each category. It must not come from the data itself —"
        " otherwise the release could reveal, say, the age of the oldest person. Untick columns you do not"
        " want to release. Every combination of cells becomes one cell of the histogram."
    )
    edited = st.data_editor(editor_view(state.schema_table), key=state.editor_key,
                            column_config={**COLUMN_CONFIG, "source": source_config(state.schema_table)},
                            hide_index=True, num_rows="fixed", width="stretch",
                            column_order=["include", "column", "type", "categories", "lower", "upper", "bins", "missing",
                                          "source", "integer", "decimals", "unknown"],
                            height=min(36 * (len(state.schema_table) + 1) + 3, 740))
    state.take_edits(edited)
    state.save_schema_work()  # kept with the dataset: loading the same table again restores this work
    if state.schema_restored:
        st.caption("This table was loaded before: the schema you built for it (public values and private estimates)"
                   " was restored.")
    schema, errors = state.schema()
    provenance_section(state, schema)
    for msg in errors:
        st.error(msg)

    if schema is not None:
        st.markdown("#### Size of the histogram")
        sizes = " × ".join(f"{c.n_cells}" for c in schema.columns)
        cells = schema.n_cells
        st.metric("cells (combinations of all columns)", cell_count_words(cells),
                  help=f"{sizes} (each column's cells multiplied)")
        with show_errors():
            pred = predict_utility(schema, state.epsilon, state.spend_delta(), state.neighbours,
                                   max_contributions=state.max_contributions, mechanism=state.mechanism,
                                   method=state.method, expected_rows=state.expected_rows)
            verdict = utility_verdict(pred, schema)
            if verdict.ok:
                st.caption(f"At ε = {state.epsilon:g}: " + pred.summary())
            else:
                st.warning(f"At ε = {state.epsilon:g}: {verdict.message} " + " ".join(verdict.advice))
        estimate_panel(state, schema)
    else:
        estimate_panel(state, None)
    st.markdown("#### Save or load")
    save_load(state, schema)
    st.page_link("pages/3_privacy.py", label="Next: choose the privacy level →", icon=":material/lock:")


main()
