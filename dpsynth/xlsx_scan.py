"""Measuring an Excel (.xlsx) sheet before it is read, in bounded memory.

A workbook is a zip of XML parts. Its declared sizes bound how much XML there is, but not what
reading it costs: a cell ``<c t="s"><v>1</v></c>`` of 25 bytes stands for shared string 1, which
may be 1,000 characters, and the reader copies it into every cell that refers to it; one cell in
column XFD makes the reader pad every row to 16,384 cells. So the first sheet is streamed
through an XML parser once (a few megabytes of memory, whatever its size), counting rows,
the widest row, and the text each cell expands to, and the file is refused, with one line, as
soon as the estimate passes the limits. A DOCTYPE (never in a real workbook; the door to entity
expansion bombs) is refused too.
"""

from __future__ import annotations

import io
import posixpath
import re
import zipfile
from array import array
from dataclasses import dataclass
from typing import Any
from xml.parsers import expat

from dpsynth.errors import InputError

_CHUNK = 1 << 20
_REF = re.compile(r"([A-Za-z]{1,3})(\d+)")


@dataclass(frozen=True)
class SheetSize:
    """What the first sheet holds, as streamed: rows (the highest row number), columns (the widest
    row), cells present, and the estimated bytes once read."""

    rows: int
    columns: int
    cells: int
    estimated_bytes: int


class _Refuse(Exception):
    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def scan_first_sheet(data: bytes, name: str, *, limits: Any, cell_bytes: int, pad_bytes: int) -> SheetSize:
    """Stream the workbook's first sheet; raise :class:`InputError` (one line) once it is seen to exceed
    ``limits`` (max_rows data rows + a header, max_columns, max_decoded_bytes once read)."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            sheet, shared = _parts(zf)
            lengths, shared_cost = _shared_string_lengths(zf, shared, name, limits, cell_bytes)
            return _scan_sheet(zf, sheet, lengths, shared_cost, name, limits, cell_bytes, pad_bytes)
    except _Refuse as exc:
        raise InputError(exc.message) from None
    except (zipfile.BadZipFile, expat.ExpatError, KeyError, ValueError, OSError, EOFError) as exc:
        raise InputError(f"{name} could not be read as Excel ({type(exc).__name__}); the file may be damaged.") from None


def _parts(zf: zipfile.ZipFile) -> tuple[str, str | None]:
    """The first sheet's part name and the shared strings part (workbook order, through the relationships)."""
    names = set(zf.namelist())
    rels: dict[str, tuple[str, str]] = {}
    if "xl/_rels/workbook.xml.rels" in names:
        for attrs in _elements(zf, "xl/_rels/workbook.xml.rels", "Relationship"):
            target = attrs.get("Target", "")
            path = target.lstrip("/") if target.startswith("/") else posixpath.normpath(posixpath.join("xl", target))
            rels[attrs.get("Id", "")] = (attrs.get("Type", ""), path)
    first = None
    if "xl/workbook.xml" in names:
        for attrs in _elements(zf, "xl/workbook.xml", "sheet"):
            rid = next((v for k, v in attrs.items() if k.endswith(":id") or k == "id"), None)
            if rid in rels and rels[rid][1] in names:
                first = rels[rid][1]
            break
    if first is None:
        sheets = sorted(n for n in names if n.startswith("xl/worksheets/") and n.endswith(".xml"))
        if not sheets:
            raise KeyError("no worksheet")
        first = sheets[0]
    shared = next((p for t, p in rels.values() if t.endswith("/sharedStrings") and p in names), None)
    if shared is None and "xl/sharedStrings.xml" in names:
        shared = "xl/sharedStrings.xml"
    return first, shared


def _parser() -> expat.XMLParserType:
    p = expat.ParserCreate()

    def no_doctype(*_a: object) -> None:
        raise _Refuse("")  # replaced with the file's name by the caller

    p.StartDoctypeDeclHandler = no_doctype
    p.EntityDeclHandler = no_doctype
    return p


def _feed(zf: zipfile.ZipFile, part: str, parser: expat.XMLParserType, name: str) -> None:
    try:
        with zf.open(part) as fh:
            while chunk := fh.read(_CHUNK):
                parser.Parse(chunk, False)
            parser.Parse(b"", True)
    except _Refuse as exc:
        if not exc.message:
            raise _Refuse(f"{name} declares XML entities (a DOCTYPE), which no workbook needs; refusing a"
                          " possible expansion bomb.") from None
        raise


def _local(tag: str) -> str:
    return tag.rsplit(":", 1)[-1]


def _elements(zf: zipfile.ZipFile, part: str, wanted: str) -> list[dict[str, str]]:
    """Attributes of every ``wanted`` element of a small part (workbook, relationships)."""
    if zf.getinfo(part).file_size > 16 << 20:
        raise ValueError(f"{part} is implausibly large")
    found: list[dict[str, str]] = []
    p = _parser()
    p.StartElementHandler = lambda tag, attrs: found.append(attrs) if _local(tag) == wanted else None
    _feed(zf, part, p, part)
    return found


def _shared_string_lengths(zf: zipfile.ZipFile, part: str | None, name: str, limits: Any,
                           cell_bytes: int) -> tuple[array, int]:
    """The length of every shared string (4 bytes each, however long the strings), and what the reader's
    own copy of the table costs (one object per string and its text)."""
    lengths = array("I")
    if part is None:
        return lengths, 0
    state = {"in_si": False, "in_t": False, "n": 0, "cost": 0}

    def start(tag: str, _attrs: dict[str, str]) -> None:
        t = _local(tag)
        if t == "si":
            state["in_si"], state["n"] = True, 0
        elif t == "t" and state["in_si"]:
            state["in_t"] = True

    def end(tag: str) -> None:
        t = _local(tag)
        if t == "t":
            state["in_t"] = False
        elif t == "si":
            state["in_si"] = False
            lengths.append(min(state["n"], 0xFFFFFFFF))
            state["cost"] += cell_bytes + state["n"]
            if state["cost"] > limits.max_decoded_bytes:
                raise _Refuse(f"{name}: its shared strings expand to more than {limits.max_decoded_bytes / 2**20:,.0f} MB"
                              " when read; refusing a possible decompression bomb.")

    def text(data: str) -> None:
        if state["in_t"]:
            state["n"] += len(data)

    p = _parser()
    p.StartElementHandler, p.EndElementHandler, p.CharacterDataHandler = start, end, text
    _feed(zf, part, p, name)
    return lengths, int(state["cost"])


def _column_number(letters: str) -> int:
    n = 0
    for ch in letters.upper():
        n = n * 26 + ord(ch) - 64
    return n


def _scan_sheet(zf: zipfile.ZipFile, part: str, lengths: array, shared_cost: int, name: str, limits: Any,
                cell_bytes: int, pad_bytes: int) -> SheetSize:
    max_rows, max_cols, max_bytes = limits.max_rows + 1, limits.max_columns, limits.max_decoded_bytes  # +1: the header
    s = {"row": 0, "max_row": 0, "col": 0, "max_col": 0, "cells": 0, "text": 0, "type": "n", "in_v": False,
         "value": [], "cost": shared_cost}

    def estimate() -> int:
        return s["cost"] + s["max_row"] * s["max_col"] * pad_bytes

    def check() -> None:
        if s["max_col"] > max_cols:
            raise _Refuse(f"{name} has a row {s['max_col']:,} cells wide (counting empty cells before the last),"
                          f" more than the {limits.max_columns:,} column limit.")
        if s["max_row"] > max_rows:
            raise _Refuse(f"{name} has at least {s['max_row']:,} rows (counting empty ones), more than the"
                          f" {limits.max_rows:,} limit.")
        if estimate() > max_bytes:
            raise _Refuse(f"{name} expands to more than {max_bytes / 2**20:,.0f} MB of cells when read"
                          f" ({s['max_row']:,} rows by {s['max_col']:,} columns so far, with their text);"
                          " refusing a possible decompression bomb.")

    def start(tag: str, attrs: dict[str, str]) -> None:
        t = _local(tag)
        if t == "c":
            ref = _REF.fullmatch(attrs.get("r", ""))
            s["col"] = _column_number(ref.group(1)) if ref else s["col"] + 1
            s["max_col"] = max(s["max_col"], s["col"])
            s["type"], s["text"], s["value"] = attrs.get("t", "n"), 0, []
            s["cells"] += 1
        elif t == "row":
            r = attrs.get("r")
            s["row"] = int(r) if r and r.isdigit() else s["row"] + 1
            s["max_row"] = max(s["max_row"], s["row"])
            s["col"] = 0
        elif t in ("v", "t"):
            s["in_v"] = True
        elif t == "dimension":
            ref = attrs.get("ref", "").split(":")[-1]
            m = _REF.fullmatch(ref)
            if m and (_column_number(m.group(1)) > max_cols or int(m.group(2)) > max_rows):
                raise _Refuse(f"{name} declares a sheet of {int(m.group(2)):,} rows by {_column_number(m.group(1)):,}"
                              f" columns ({ref}), more than the {limits.max_rows:,} row or {limits.max_columns:,}"
                              " column limit.")

    def text(data: str) -> None:
        if s["in_v"]:
            if s["type"] == "s":
                if len(s["value"]) < 12:
                    s["value"].append(data)
            else:
                s["text"] += len(data)

    def end(tag: str) -> None:
        t = _local(tag)
        if t in ("v", "t"):
            s["in_v"] = False
        elif t == "c":
            n = s["text"]
            if s["type"] == "s":
                idx = "".join(s["value"]).strip()
                n = lengths[int(idx)] if idx.isdigit() and int(idx) < len(lengths) else 0
            s["cost"] += cell_bytes + n
            if s["cost"] > max_bytes:
                check()
        elif t == "row":
            check()

    p = _parser()
    p.StartElementHandler, p.EndElementHandler, p.CharacterDataHandler = start, end, text
    _feed(zf, part, p, name)
    check()
    return SheetSize(s["max_row"], s["max_col"], s["cells"], estimate())
