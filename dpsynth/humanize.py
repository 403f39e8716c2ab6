"""Numbers written for people: counts with the right plural, rounded figures, large numbers in words.

Everything a curator reads in the dashboard or a report goes through these helpers instead of
``:g`` or ``:.3g`` formats, which print ``2.2e+04`` and ``1.22e+03``. Pure text functions; no
data, no randomness.
"""

from __future__ import annotations

import math
from typing import Any

_SUPERSCRIPT = str.maketrans("0123456789-", "⁰¹²³⁴⁵⁶⁷⁸⁹⁻")

#: Short-scale names used up to 10^33; beyond that a power of ten reads better than a word.
_NAMES = [(10**33, "decillion"), (10**30, "nonillion"), (10**27, "octillion"), (10**24, "septillion"),
          (10**21, "sextillion"), (10**18, "quintillion"), (10**15, "quadrillion"), (10**12, "trillion"),
          (10**9, "billion"), (10**6, "million")]


def power_of_ten(exponent: int) -> str:
    """10 with a superscript exponent: ``power_of_ten(17)`` → ``10¹⁷``."""
    return "10" + str(int(exponent)).translate(_SUPERSCRIPT)


def round_sig(x: float, sig: int = 2) -> float:
    """``x`` rounded to ``sig`` significant digits (0 stays 0)."""
    if x == 0 or not math.isfinite(x):
        return x
    return round(x, sig - 1 - math.floor(math.log10(abs(x))))


def number(x: float, sig: int = 3) -> str:
    """A number as a person writes it: ``1,220``, ``0.043``, ``2.5``, ``about 3 million`` for large ones.

    Whole numbers below a million are printed exactly with thousands separators; other values are
    rounded to ``sig`` significant digits and never use scientific notation.
    """
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "—"
    if not math.isfinite(x):
        return "infinite" if x > 0 else "minus infinite"
    if abs(x) >= 1e6:
        return big_number(x)
    if float(x).is_integer():
        return f"{int(x):,}"
    r = round_sig(float(x), sig)
    if abs(r) >= 1:
        decimals = max(0, sig - 1 - math.floor(math.log10(abs(r))))
        text = f"{r:,.{decimals}f}"
        return text.rstrip("0").rstrip(".") if "." in text else text
    if abs(r) >= 1e-4:
        decimals = sig - 1 - math.floor(math.log10(abs(r)))
        return f"{r:.{decimals}f}".rstrip("0").rstrip(".")
    return small_number(x)


def budget(x: float) -> str:
    """An ε or budget amount: float sums rounded away (0.1 + 0.2 → ``0.3``, 4 − 3.9999999999 → ``0``)."""
    return number(round(float(x), 6) + 0.0)


def small_number(x: float) -> str:
    """A tiny positive number as a power of ten: ``1e-06`` → ``10⁻⁶``, ``2.5e-07`` → ``2.5 × 10⁻⁷``."""
    if x == 0:
        return "0"
    mant_text, exp_text = f"{abs(x):.1e}".split("e")  # exact for any float, subnormals included
    mant, exp = float(mant_text), int(exp_text)
    sign = "−" if x < 0 else ""
    m = f"{mant:g}"
    return sign + (power_of_ten(exp) if m == "1" else f"{m} × {power_of_ten(exp)}")


def big_number(x: float) -> str:
    """A large number in words: ``about 122 trillion``; past the named scales, ``about 10¹⁷⁴``.

    Numbers below a million are returned exactly (``48,842``).
    """
    sign = "minus " if x < 0 else ""
    ax = abs(int(x)) if float(x).is_integer() or isinstance(x, int) else abs(x)
    if ax < 10**6:
        return sign + (f"{int(ax):,}" if float(ax).is_integer() else number(ax))
    for scale, name in _NAMES:
        if ax >= scale:
            if ax >= scale * 1000:  # past decillion
                break
            return f"{sign}about {round_sig(ax / scale, 2):g} {name}"
    digits = len(str(int(ax)))
    return f"{sign}about {power_of_ten(digits - 1)}"


def count(n: float, singular: str, plural: str | None = None) -> str:
    """``count(1, "row")`` → ``1 row``; ``count(2, "row")`` → ``2 rows``; large counts in words."""
    word = singular if n == 1 else (plural or singular + "s")
    return f"{number(n)} {word}"


def about(x: float, unit: str = "", plural: str | None = None) -> str:
    """``about 1,220 rows``: a rounded figure (2 significant digits above 100)."""
    sig = 2 if abs(x) >= 100 else 3
    r = round_sig(float(x), sig)
    text = number(r, sig) if abs(r) < 1e6 else big_number(r).removeprefix("about ")
    if not unit:
        return f"about {text}"
    word = unit if r == 1 else (plural or unit + "s")
    return f"about {text} {word}"


def factor(x: float) -> str:
    """A multiplicative factor: ``e^ε`` for ε = 10 → ``22,000``; for ε = 1 → ``2.7``."""
    if x >= 100:
        return number(round_sig(x, 2))
    return number(x, 2 if x >= 10 else 3)


def likelihood_factor(epsilon: float) -> str:
    """``e^ε`` as a factor (:func:`factor`), also where e^ε overflows a float (ε > 709): ``about 10³⁰⁰``."""
    if epsilon < 700:
        return factor(math.exp(epsilon))
    return "about " + power_of_ten(int(epsilon / math.log(10)))


def percent(p: float, decimals: int = 1) -> str:
    """A share as a percentage: ``0.917`` → ``91.7%``; tiny non-zero shares say so."""
    if p is None or (isinstance(p, float) and math.isnan(p)):
        return "—"
    if 0 < p < 10 ** -(decimals + 2):
        return f"less than {10 ** -decimals:g}%"
    return f"{100 * p:.{decimals}f}%"


def level(p: float) -> str:
    """An interval's confidence level as given: ``0.95`` → ``95%``, ``0.995`` → ``99.5%`` (never rounded up to 100%)."""
    return f"{100 * float(p):.6g}%"


def cells(n: int) -> str:
    """The size of a domain: ``48 cells``, ``about 120 trillion cells``, ``about 10¹⁷⁴ cells (a 175-digit number)``."""
    if n < 10**6:
        return count(n, "cell")
    digits = len(str(int(n)))
    words = big_number(n)
    if words.endswith(power_of_ten(digits - 1)):  # past the named scales
        return f"{words} cells (a {digits}-digit number)"
    return f"{words} cells"


def blank_missing(frame: Any) -> Any:
    """A table as a curator reads it: a missing value shown as an empty cell, as in the CSV file,
    never as ``None`` or ``nan`` (which read like a category or a value). Other cells unchanged."""
    shown = frame.astype(object)
    return shown.where(frame.notna(), "")
