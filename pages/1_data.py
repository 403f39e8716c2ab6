"""Data page: upload a table (CSV, Parquet, Excel) or load the bundled sample; preview it."""

from __future__ import annotations

import streamlit as st

from dpsynth.datasets import SAMPLES, sample_path
from dpsynth.errors import DPSynthError
from dpsynth.io import read_table
from dpsynth.schema import load_schema
from dpsynth.server_files import PREVIEW_ROWS, data_dir, list_files, resolve
from dpsynth.ui_state import AppState, get_state

UPLOAD_TYPES = ["csv", "tsv", "txt", "parquet", "pq", "xlsx"]


def load_upload(state: AppState) -> None:
    """Read the uploaded file once (reruns keep the table already read)."""
    up = st.session_state.get("data_upload")
    if up is None or up.file_id == state.upload_id:
        return
    try:
        data = up.getvalue()
        df = read_table(data, up.name)
        state.load(df, up.name, upload_id=up.file_id, source=data)
    except DPSynthError as exc:
        state.fail_load(str(exc), upload_id=up.file_id)


def load_sample(state: AppState, name: str = "adult") -> None:
    """Load a bundled sample with its public schema."""
    info = SAMPLES[name]
    try:
        df = read_table(sample_path(name))
        state.load(df, info["data"], label=info["title"], sample=name, public_schema=load_schema(sample_path(name, "schema")),
                   source=sample_path(name))
        # The sample's size is documented publicly (UCI), so it may serve as the row-count hint.
        state.expected_rows = 48_842 if name == "adult" else None
    except DPSynthError as exc:
        state.fail_load(str(exc))


def server_file_section(state: AppState) -> None:
    """Large files the administrator put in DPSYNTH_DATA_DIR: counted by DuckDB, never uploaded or loaded whole."""
    root = data_dir()
    if root is None:
        return
    with st.expander("…or a large file on this server (counted by DuckDB, not loaded)", expanded=state.source_path is not None):
        names = list_files(root)
        if not names:
            st.info("The server's data folder has no CSV or Parquet files.")
            return
        name = st.selectbox("File in the server's data folder", names, key="server_file")
        if st.button("Use this file", key="load_server_file"):
            try:
                state.load_server_file(resolve(root, name))
            except DPSynthError as exc:
                state.fail_load(str(exc))
        st.caption(f"Only the first {PREVIEW_ROWS:,} rows are read now, for the preview and the draft schema (and the"
                   " checks on the Utility and Risk pages compare with them); the release counts every row of the file.")


def main() -> None:
    state = get_state(st.session_state)
    st.title("1 · Your data")
    st.markdown(
        "dpsynth turns a private table into a **differentially private** (DP) release: noisy counts and a"
        " synthetic table that looks like yours but protects every person in it. Start by loading a table."
        " It stays in this browser session on this server; nothing is published until you press **Release**."
    )
    st.markdown("**The steps**: 1 · load a table → 2 · describe its columns (public ranges and categories) →"
                " 3 · choose how much privacy (ε) → 4 · release and download. Afterwards, the pages under"
                " *Check it* show how useful and how safe the result is — for your eyes only.")
    left, right = st.columns(2)
    with left:
        st.subheader("Upload your own file")
        st.file_uploader("CSV, Parquet or Excel (.xlsx), up to 50 MB", type=UPLOAD_TYPES, key="data_upload",
                         max_upload_size=50,
                         help="One row per person (or record), one column per variable, a header row with the names.")
        load_upload(state)
    with right:
        st.subheader("…or try the sample")
        info = SAMPLES["adult"]
        st.markdown(f"**{info['title']}**  \nSource: {info['source']}.  \nLicence: {info['licence']}.")
        if st.button("Load the sample dataset", key="load_sample", type="primary" if not state.has_data else "secondary"):
            load_sample(state)
    server_file_section(state)

    if state.load_error:
        st.error(state.load_error)
    if not state.has_data:
        st.info("No table loaded yet.")
        return

    df = state.data
    st.success(f"Loaded **{state.data_label}**: {len(df.columns)} columns."
               + (" A large server file: the release will count all of its rows with DuckDB." if state.source_path else ""))
    if state.sample:
        info = SAMPLES[state.sample]
        st.caption(f"Provenance: {info['source']}. Licence: {info['licence']}. It comes with a public schema"
                   " (bounds and categories from the UCI documentation, not from the data).")
    st.markdown("#### Preview (first 100 rows — only you see this)")
    st.dataframe(df.head(100), height=280, key="data_preview")
    table = state.schema_table
    st.markdown("#### Column types (" + ("from the sample's public schema" if state.sample else "guessed from the data")
                + "; change them on the Schema page)")
    st.write(", ".join(f"**{c}**: {k if inc else 'left out'}"
                       for c, k, inc in zip(table["column"], table["type"], table["include"], strict=True)))
    if state.left_out:
        st.warning("Left out of the schema for now (too many distinct values or empty): " + ", ".join(state.left_out))
    st.page_link("pages/2_schema.py", label="Next: describe the columns (Schema) →", icon=":material/table_chart:")


main()
