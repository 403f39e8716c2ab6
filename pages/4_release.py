"""Release page: one explicit button spends the budget (ledger first); the result stays in the session."""

from __future__ import annotations

import streamlit as st

from dpsynth.artifacts import card_markdown, release_files, release_zip
from dpsynth.errors import DPSynthError, InputError
from dpsynth.humanize import cells, number
from dpsynth.plan import ReleaseRequest, make_plan
from dpsynth.release import card_summary_line, release, release_from_source
from dpsynth.ui_state import AppState, get_state


def do_release(state: AppState) -> None:
    """Make the release once: the ledger is charged inside ``release()`` before any noise is drawn."""
    schema, errors = state.schema()
    if schema is None:
        state.release_error = " ".join(errors)
        return
    settings = state.settings_key()  # what the release is made with, taken before it starts
    # A new key for the next button: a second click of this one (double-click) is then ignored.
    state.release_attempt += 1
    state.release_in_progress = True
    bar = st.progress(0.0, text="Starting")
    try:
        state.release = release_server_file(state, schema, bar) if state.source_path is not None else release(
            state.data, schema, epsilon=state.epsilon, delta=state.spend_delta(), neighbours=state.neighbours,
            mechanism=state.mechanism, method=state.method, seed=state.demo_seed, ledger=state.ledger(),
            dataset_id=state.dataset_id, dataset_label=state.data_label, budget=state.budget(),
            id_column=state.id_column, max_contributions=state.max_contributions, expected_rows=state.expected_rows,
            progress=lambda f, msg: bar.progress(min(1.0, f), text=msg),
        )
        state.release_settings = settings
        bar.progress(1.0, text="Preparing the downloads")
        state.release_files = release_files(state.release)
        state.release_zip = release_zip(state.release)
        state.release_error = None
        state.release_messages = state.release.report.messages()
        state.analyses = {}
    except DPSynthError as exc:
        state.release_error = str(exc)
    state.release_in_progress = False


def release_server_file(state: AppState, schema, bar):  # noqa: ANN001, ANN201 - Schema, st.progress -> Release
    """A server file: counted on DuckDB straight from disk (the library's engine path; one row per person)."""
    if state.id_column:
        raise InputError("Several rows per person need an uploaded table for now; a server file counts one row per record.")
    return release_from_source(
        state.source_path, schema, engine="duckdb", epsilon=state.epsilon, delta=state.spend_delta(),
        neighbours=state.neighbours, mechanism=state.mechanism, seed=state.demo_seed, ledger=state.ledger(),
        dataset_id=state.dataset_id, dataset_label=state.data_label, budget=state.budget(),
        expected_rows=state.expected_rows, method=state.method,
        progress=lambda f, msg: bar.progress(min(1.0, f), text=msg),
    )


def release_blocker(state: AppState) -> str | None:
    """Why the button is disabled (budget used up, ε out of range), or None."""
    try:
        return state.release_blocker()
    except DPSynthError as exc:
        return str(exc)


def summary(state: AppState) -> bool:
    """What will be released; False if something is missing."""
    schema, errors = state.schema()
    if schema is None:
        st.error("The schema needs attention: " + " ".join(errors))
        st.page_link("pages/2_schema.py", label="Go to Schema", icon=":material/table_chart:")
        return False
    delta = state.spend_delta()
    # the page shows the plan the release will run (the same object, from public inputs only)
    plan = make_plan(ReleaseRequest(schema=schema, epsilon=state.epsilon, delta=delta, neighbours=state.neighbours,
                                    mechanism=state.mechanism, method=state.method, expected_rows=state.expected_rows,
                                    id_column=state.id_column, max_contributions=state.max_contributions))
    method, why = plan.method, plan.why
    st.markdown(
        f"- **Data**: {state.data_label}\n"
        f"- **Columns**: {', '.join(schema.names)} (a full table of {cells(schema.n_cells)})\n"
        f"- **Privacy**: ε = {number(state.epsilon)}" + (f", δ = {number(delta)}" if delta else " (pure DP)") +
        f", {state.neighbours} neighbours, unit: "
        + (f"a person ({state.id_column!r}, ≤ {state.max_contributions} rows)" if state.id_column else "one row") + "\n"
        f"- **Method**: {method} ({why})"
    )
    if schema.data_derived():
        st.warning(":material/warning: Some bounds or categories were read from the data (" + ", ".join(schema.data_derived()) +
                   "). The release card will say they are NOT private. Fix them on the Schema page first if you"
                   " intend to publish.")
    return True


def show_release(state: AppState) -> None:
    rel = state.release
    card = rel.card
    if state.release_is_stale:
        st.warning(":material/history: **Made with different settings.** This release was made before you changed"
                   " ε, δ, the noise, the method or the schema; it does not reflect the current settings. Press"
                   " **Start a new release** below to release with them (this spends budget again).")
    st.success(f"Released: {card_summary_line(card)}. This spend is recorded in the ledger.")
    for w in card["warnings"]:
        st.warning(w)
    if state.release_messages:
        with st.expander("What happened to your data while encoding (only you see this; not part of the release)"):
            for m in state.release_messages:
                st.write("• " + m)
    st.markdown("#### Downloads")
    st.markdown("- **synthetic.csv**: the synthetic table, same columns as the schema, no real person's row\n"
                "- **histogram.csv** / **marginals.csv**: the noisy counts the synthetic data was drawn from\n"
                "- **card.json** / **card.md**: the release card — ε, δ, whom it protects, the schema, software"
                " versions, date. Publish it with the data.\n"
                "- **everything (.zip)**: all of the above in one file")
    files = state.release_files
    cols = st.columns(len(files) + 1)
    mimes = {"csv": "text/csv", "json": "application/json", "md": "text/markdown"}
    for i, (name, data) in enumerate(files.items()):
        cols[i].download_button(name, data=data, file_name=name, mime=mimes.get(name.rsplit(".", 1)[-1], "text/plain"),
                                key=f"download_{name}")
    cols[-1].download_button("everything (.zip)", data=state.release_zip, file_name="dpsynth_release.zip",
                             mime="application/zip", key="download_zip", type="primary")
    tab_syn, tab_hist, tab_card = st.tabs(["Synthetic data", "Noisy counts", "Release card"])
    with tab_syn:
        st.caption(f"{len(rel.synthetic):,} synthetic rows (first 200 shown). They are sampled from the noisy counts:"
                   " no row is a real person's.")
        st.dataframe(rel.synthetic.head(200), height=300, key="release_synthetic")
    with tab_hist:
        if rel.histogram is not None:
            st.caption("Every cell of the domain with its noisy count (empty cells got noise too; counts can be negative).")
            st.dataframe(rel.histogram.head(1000), height=300, key="release_histogram")
        else:
            if "marginal_frames" not in state.analyses:  # built once: all tables take ~0.2 s on Adult
                state.analyses["marginal_frames"] = rel.marginals
            frames = state.analyses["marginal_frames"]
            st.caption(f"{len(frames)} noisy marginal tables were released (see marginals.csv).")
            if frames:
                st.dataframe(frames[0].head(500), height=300, key="release_marginal0")
    with tab_card:
        st.markdown(card_markdown(card))
    st.divider()
    st.caption("Changing settings or reloading this page shows the same release; it never draws new noise.")
    st.page_link("pages/5_utility.py", label="Next: check how useful it is (Utility) →", icon=":material/bar_chart:")
    if st.button("Start a new release (will spend budget again)", key="new_release"):
        state.clear_release()
        st.rerun()


def main() -> None:
    state = get_state(st.session_state)
    st.title("4 · Release")
    if not state.has_data:
        st.info("Load a dataset first.")
        st.page_link("pages/1_data.py", label="Go to Data", icon=":material/upload_file:")
        return
    if state.release is not None:
        show_release(state)
        return
    st.markdown("Pressing the button below **spends** ε from this dataset's budget. It is recorded in the privacy"
                " ledger first, then the noise is drawn. It cannot be undone.")
    try:
        ok = summary(state)
    except DPSynthError as exc:
        st.error(str(exc))
        ok = False
    with st.expander("Demonstration mode (not for publication)"):
        demo = st.checkbox("Use reproducible 'demo' noise from a fixed seed", value=state.demo_seed is not None,
                           key="release_demo")
        if demo:
            state.demo_seed = int(st.number_input("seed", min_value=0, value=state.demo_seed or 0, key="release_seed"))
            st.warning("Seeded noise can be reproduced by anyone who knows the seed: such a release is for teaching"
                       " and testing only, and its card says so.")
        else:
            state.demo_seed = None
    if state.release_in_progress:
        # the previous run stopped inside release() (e.g. the page was left): its spend may be recorded
        state.release_in_progress = False
        st.warning("The last release was interrupted before it finished; check the ledger: its spend may already be"
                   " recorded. Press the button to try again (this spends again).")
    if state.release_error:
        st.error(state.release_error)
    blocker = release_blocker(state)
    if blocker:
        st.error(blocker)
    if ok and st.button(f"Release with ε = {state.epsilon:g} (spends budget)", key=f"release_button_{state.release_attempt}",
                        type="primary", disabled=blocker is not None):
        do_release(state)
        st.rerun()


main()
