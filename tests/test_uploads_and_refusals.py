"""CSV uploads that are not what they seem, and the CLI's refusal of a schema read off the data."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from dpsynth.cli import main
from dpsynth.errors import InputError
from dpsynth.io import read_table


@pytest.mark.parametrize("sep", [",", ";", "\t", "|"])
def test_delimiter_detected_from_the_header(sep: str) -> None:
    text = sep.join(["name", "age", "town"]) + "\n" + sep.join(["Ann", "31", "Oslo"]) + "\n"
    df = read_table(text.encode(), "t.csv")
    assert list(df.columns) == ["name", "age", "town"] and df.iloc[0].tolist() == ["Ann", "31", "Oslo"]


def test_decimal_commas_become_numbers_with_semicolons() -> None:
    df = read_table(b"item;price;total\na;11,69;1.234,50\nb;-0,5;12\nc;;3,0\n", "prices.csv")
    assert df["price"].tolist()[:2] == ["11.69", "-0.5"] and pd.isna(df["price"].iloc[2])
    assert df["total"].tolist() == ["1234.50", "12", "3.0"]
    assert pd.to_numeric(df["price"]).notna().sum() == 2


def test_commas_are_left_alone_in_comma_files() -> None:
    df = read_table(b'item,price\na,"11,69"\n', "c.csv")
    assert df["price"].tolist() == ["11,69"]


@pytest.mark.parametrize("text", [
    b"It was the best of times, it was the worst of times, it was the age of wisdom.\n"
    b"It was the epoch of belief, it was the epoch of incredulity, it was the season of Light.\n"
    b"We had everything before us, we had nothing before us.\n",
    b"Minutes of the meeting held on Tuesday\n\nThe committee discussed the budget for next year at length.\n"
    b"Everyone agreed that the proposal needs more work before it goes out.\n",
])
def test_prose_is_not_a_table(text: bytes) -> None:
    with pytest.raises(InputError, match="does not look like a table"):
        read_table(text, "notes.csv")


def test_one_column_table_still_reads() -> None:
    assert read_table(b"age\n31\n45\n", "a.csv")["age"].tolist() == ["31", "45"]


def test_cli_refuses_data_derived_schema_before_any_charge(tmp_path, small_df, small_schema, capsys) -> None:
    data = tmp_path / "data.csv"
    small_df.to_csv(data, index=False)
    raw = json.loads(small_schema.to_json())
    raw["columns"][0]["sources"] = {"lower": "data"}
    raw["columns"][1]["provenance"] = "data"
    schema = tmp_path / "schema.json"
    schema.write_text(json.dumps(raw))
    led = tmp_path / "ledger.sqlite"
    assert main(["ledger", "init", "--ledger", str(led)]) == 0
    capsys.readouterr()
    args = ["release", str(data), "--schema", str(schema), "--epsilon", "1", "--out", str(tmp_path / "s.csv"),
            "--ledger", str(led), "--seed", "1"]
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "age (lower bound)" in err and "colour (categories)" in err
    from dpsynth.accounting import Ledger

    assert Ledger(led, create=False).spends() == [] and not (tmp_path / "s.csv").exists()
    assert main([*args, "--accept-data-derived-schema"]) == 0
    assert (tmp_path / "s.csv").exists()
