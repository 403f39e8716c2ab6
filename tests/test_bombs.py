"""Expansion bombs in uploads (issue 11): refused from declared and streamed sizes, in bounded memory.

Each bomb is small on disk and huge once read (before: a 110 KB Parquet file took 3.25 GB, an Excel
file 2.58 GB). Each is read in a separate process whose peak RSS is measured; refusal must come
with one line and a peak far under 500 MB. Files just under the limits are still read, also
under 500 MB.
"""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
import textwrap
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dpsynth.errors import InputError
from dpsynth.io import Limits, read_table

ROOT = Path(__file__).resolve().parents[1]

# ---------------------------------------------------------------- builders (small on disk)


def parquet_repeated_text(rows: int, width: int = 1000) -> bytes:
    """One ``width``-character string repeated, dictionary-encoded as pandas writes it (a few KB), but
    built from the dictionary so the builder never holds the text; no Arrow schema is stored, so it
    reads back as a plain text column."""
    arr = pa.DictionaryArray.from_arrays(pa.array(np.zeros(rows, dtype=np.int32)), pa.array(["x" * width]))
    buf = io.BytesIO()
    pq.write_table(pa.table({"s": arr}), buf, store_schema=False)
    return buf.getvalue()


def parquet_dictionary_column(rows: int, width: int = 1000) -> bytes:
    """The same as an Arrow dictionary column (read back as a pandas Categorical)."""
    arr = pa.DictionaryArray.from_arrays(pa.array(np.zeros(rows, dtype=np.int32)), pa.array(["y" * width]))
    buf = io.BytesIO()
    pq.write_table(pa.table({"s": arr}), buf, compression="zstd")
    return buf.getvalue()


def parquet_run_length_numbers(rows: int = 1_900_000, columns: int = 60) -> bytes:
    """Zeros in many columns: run-length encoded to nothing, 8 bytes a cell once read."""
    zeros = pa.array(np.zeros(rows, dtype=np.int64))
    buf = io.BytesIO()
    pq.write_table(pa.table({f"c{i}": zeros for i in range(columns)}), buf, compression="zstd")
    return buf.getvalue()


_NS = b'xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"'
_PARTS = {
    "[Content_Types].xml": b'<?xml version="1.0"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/'
    b'content-types"><Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>'
    b'<Default Extension="xml" ContentType="application/xml"/><Override PartName="/xl/workbook.xml" ContentType='
    b'"application/vnd.openxmlformats-officedocument.spreadsheetml.sheet.main+xml"/><Override PartName='
    b'"/xl/worksheets/sheet1.xml" ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.worksheet'
    b'+xml"/><Override PartName="/xl/sharedStrings.xml" ContentType="application/vnd.openxmlformats-officedocument.'
    b'spreadsheetml.sharedStrings+xml"/></Types>',
    "_rels/.rels": b'<?xml version="1.0"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/'
    b'relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/'
    b'relationships/officeDocument" Target="xl/workbook.xml"/></Relationships>',
    "xl/workbook.xml": b'<?xml version="1.0"?><workbook ' + _NS + b' xmlns:r="http://schemas.openxmlformats.org/'
    b'officeDocument/2006/relationships"><sheets><sheet name="S" sheetId="1" r:id="rId1"/></sheets></workbook>',
    "xl/_rels/workbook.xml.rels": b'<?xml version="1.0"?><Relationships xmlns="http://schemas.openxmlformats.org/'
    b'package/2006/relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/'
    b'2006/relationships/worksheet" Target="worksheets/sheet1.xml"/><Relationship Id="rId2" Type="http://schemas.'
    b'openxmlformats.org/officeDocument/2006/relationships/sharedStrings" Target="sharedStrings.xml"/></Relationships>',
}


def xlsx(rows: Iterator[bytes], shared: Iterator[bytes] = iter((b"h",)), dimension: bytes | None = None) -> bytes:
    """A minimal workbook whose sheet rows and shared strings are streamed in (never whole in memory)."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as zf:
        for name, data in _PARTS.items():
            zf.writestr(name, data)
        with zf.open("xl/sharedStrings.xml", "w", force_zip64=True) as m:
            m.write(b'<?xml version="1.0"?><sst ' + _NS + b">")
            for s in shared:
                m.write(b"<si><t>" + s + b"</t></si>")
            m.write(b"</sst>")
        with zf.open("xl/worksheets/sheet1.xml", "w", force_zip64=True) as m:
            m.write(b'<?xml version="1.0"?><worksheet ' + _NS + b">")
            if dimension:
                m.write(b'<dimension ref="' + dimension + b'"/>')
            m.write(b"<sheetData>")
            for row in rows:
                m.write(row)
            m.write(b"</sheetData></worksheet>")
    return out.getvalue()


def xlsx_shared_text(rows: int, width: int = 1000) -> bytes:
    """Every cell refers to one long shared string, which the reader copies into each cell."""
    body = (b'<row r="%d"><c r="A%d" t="s"><v>1</v></c></row>' % (i, i) for i in range(2, rows + 2))
    return xlsx(_header_then(body), shared=iter((b"h", b"x" * width)))


def xlsx_wide(rows: int = 20_000) -> bytes:
    """One cell in column XFD per row: the reader pads each row to 16,384 cells."""
    return xlsx(_header_then(b'<row r="%d"><c r="XFD%d"><v>1</v></c></row>' % (i, i) for i in range(2, rows + 2)))


def xlsx_far_corner() -> bytes:
    """A header and one cell in the last row, column 500: the reader pads a million rows of 500 cells."""
    return xlsx(_header_then(iter((b'<row r="1048576"><c r="SF1048576"><v>1</v></c></row>',))))


def xlsx_lying_dimension() -> bytes:
    """A sheet that declares itself 1,048,576 by 16,384."""
    return xlsx(_header_then(iter(())), dimension=b"A1:XFD1048576")


def xlsx_many_shared_strings(count: int = 1_700_000) -> bytes:
    """Millions of tiny shared strings: the reader holds one Python object each."""
    return xlsx(_header_then(iter(())), shared=(b"%d" % i for i in range(count)))


def _header_then(rows: Iterator[bytes]) -> Iterator[bytes]:
    yield b'<row r="1"><c r="A1" t="s"><v>0</v></c></row>'
    yield from rows


# ---------------------------------------------------------------- measuring a read in its own process

CHILD = textwrap.dedent("""
    import json, sys
    from dpsynth.errors import InputError
    from dpsynth.io import read_table
    import pandas, pyarrow.parquet, openpyxl  # loaded before the baseline: their code is not the bomb

    def peak_kb():  # this process's own high-water mark (ru_maxrss would carry the parent's across exec)
        try:
            with open("/proc/self/status") as fh:
                return next(int(line.split()[1]) for line in fh if line.startswith("VmHWM:"))
        except OSError:  # not Linux: ru_maxrss (bytes on macOS), an over-estimate here
            import resource
            kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
            return kb // 1024 if sys.platform == "darwin" else kb

    base = peak_kb()
    try:
        df = read_table(sys.argv[1])
        outcome = {"read": list(df.shape)}
    except InputError as exc:
        outcome = {"refused": str(exc)}
    peak = peak_kb()
    print(json.dumps({**outcome, "peak_mb": peak / 1024, "extra_mb": (peak - base) / 1024}))
""")


def read_in_child(path: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
    out = subprocess.run([sys.executable, "-c", CHILD, str(path)], capture_output=True, text=True, env=env,
                         timeout=600, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


BOMBS: dict[str, tuple[Callable[[], bytes], str, str]] = {
    "Parquet: a 1,000-character string a million times": (lambda: parquet_repeated_text(1_000_000), "x.parquet",
                                                           r"expands to more than 100 MB of cells.*decompression bomb"),
    "Parquet: an Arrow dictionary column": (lambda: parquet_dictionary_column(1_000_000), "x.parquet",
                                            r"expands to more than 100 MB of cells"),
    "Parquet: run-length encoded zeros in 60 columns": (parquet_run_length_numbers, "x.parquet",
                                                        r"expands to more than 100 MB of cells"),
    "xlsx: a long shared string in 500,000 cells": (lambda: xlsx_shared_text(500_000), "x.xlsx",
                                                      r"expands to more than 100 MB of cells when read"),
    "xlsx: a cell in column XFD on every row": (xlsx_wide, "x.xlsx", r"16,384 cells wide.*500 column limit"),
    "xlsx: one cell in the far corner": (xlsx_far_corner, "x.xlsx", r"more than 100 MB of cells when read"
                                                                     r" \(1,048,576 rows by 500 columns"),
    "xlsx: a dimension of the whole grid": (xlsx_lying_dimension, "x.xlsx", r"declares a sheet of 1,048,576 rows"),
    "xlsx: 1.7 million shared strings": (xlsx_many_shared_strings, "x.xlsx", r"shared strings expand to more than"),
}


@pytest.mark.parametrize("case", list(BOMBS))
def test_a_bomb_is_refused_in_one_line_with_little_memory(case: str, tmp_path: Path) -> None:
    build, name, pattern = BOMBS[case]
    path = tmp_path / name
    path.write_bytes(build())
    assert path.stat().st_size < 6 * 2**20  # small on disk
    got = read_in_child(path)
    assert "refused" in got, got
    assert re.search(pattern, got["refused"]), got["refused"]
    assert "\n" not in got["refused"] and name in got["refused"]
    assert got["extra_mb"] < 150 and got["peak_mb"] < 400, got  # far under 500 MB


@pytest.mark.parametrize("build, name", [
    (lambda: parquet_repeated_text(95_000), "x.parquet"),
    (lambda: parquet_dictionary_column(95_000), "x.parquet"),
    (lambda: xlsx_shared_text(90_000), "x.xlsx"),
])
def test_a_file_just_under_the_limit_is_read_under_500_mb(build: Callable[[], bytes], name: str,
                                                          tmp_path: Path) -> None:
    path = tmp_path / name
    path.write_bytes(build())
    got = read_in_child(path)
    assert got.get("read", [0])[0] >= 90_000, got
    assert got["peak_mb"] < 500, got


def test_the_decoded_limit_is_a_limit_the_caller_can_set() -> None:
    small = Limits(max_decoded_bytes=1 << 20)
    with pytest.raises(InputError, match="expands to more than 1 MB"):
        read_table(parquet_repeated_text(2_000), "x.parquet", limits=small)
    with pytest.raises(InputError, match="expands to more than 1 MB"):
        read_table(xlsx_shared_text(2_000), "x.xlsx", limits=small)
    assert read_table(parquet_repeated_text(2_000), "x.parquet").shape == (2_000, 1)
    df = read_table(xlsx_shared_text(2_000, width=20), "x.xlsx")
    assert df.shape == (2_000, 1) and set(df["h"]) == {"x" * 20}


def test_nested_parquet_columns_are_refused_by_name() -> None:
    buf = io.BytesIO()
    pq.write_table(pa.table({"a": [1, 2], "tags": [[1, 2], [3]]}), buf)
    with pytest.raises(InputError, match="column 'tags' holds nested values"):
        read_table(buf.getvalue(), "x.parquet")
