"""Kubernetes resource quantities ("100m", "1.5Gi", "1e3") parsed exactly, and turned into the integers
the scheduler computes with.

Who calls it: :mod:`kubesched.api.objects` when a manifest's requests, limits, overhead, capacity or
allocatable are read (so every quantity is parsed once, when an object enters the program), and the CLI
and reason strings through :func:`format_quantity`.

The accepted grammar and the rounding follow apimachinery's ``resource.ParseQuantity``: a sign, digits with
at most one ".", then one suffix (decimal SI, binary SI, or a decimal exponent ``e3``/``E-3``). Values are
rounded up to whole nano-units, binary-SI values are capped at 2^63-1, and ``MilliValue``/``Value`` round up.
"""

from __future__ import annotations

import functools
import math
from fractions import Fraction

__all__ = [
    "INT64_MAX",
    "INT64_MIN",
    "QuantityError",
    "format_quantity",
    "milli_value",
    "parse_quantity",
    "to_canonical",
    "value",
]

INT64_MAX = 2**63 - 1
INT64_MIN = -(2**63)

_REGEX_TEXT = "^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$"
_FORMAT_WRONG = f"quantities must match the regular expression '{_REGEX_TEXT}'"
_SUFFIX_WRONG = "unable to parse quantity's suffix"
_NUMERIC_WRONG = "unable to parse numeric part of quantity"

_SUFFIX_CHARS = frozenset("eEinumkKMGTP")
_DIGITS = frozenset("0123456789")

# (base, exponent, is_binary) per suffix.
_SUFFIXES: dict[str, tuple[int, int, bool]] = {
    "": (10, 0, False),
    "n": (10, -9, False),
    "u": (10, -6, False),
    "m": (10, -3, False),
    "k": (10, 3, False),
    "M": (10, 6, False),
    "G": (10, 9, False),
    "T": (10, 12, False),
    "P": (10, 15, False),
    "E": (10, 18, False),
    "Ki": (2, 10, True),
    "Mi": (2, 20, True),
    "Gi": (2, 30, True),
    "Ti": (2, 40, True),
    "Pi": (2, 50, True),
    "Ei": (2, 60, True),
}

# apimachinery accepts any int32 exponent; no real manifest needs more than this, and a bound keeps a
# hostile "1e999999999" from building a gigantic integer.
_MAX_EXPONENT = 1000
_NANO = 10**9

_BYTE_RESOURCES = frozenset({"memory", "ephemeral-storage", "storage"})
_BINARY_UNITS = (("Ei", 2**60), ("Pi", 2**50), ("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10))


class QuantityError(ValueError):
    """A text is not a Kubernetes quantity; the message is apimachinery's wording."""


def _split(text: str) -> tuple[bool, str, str, str]:
    """Scan ``text`` into (negative, integer digits, fraction digits, suffix) the way apimachinery does."""
    end = len(text)
    pos = 0
    negative = False
    if pos < end and text[0] in "+-":
        negative = text[0] == "-"
        pos = 1
    while pos < end and text[pos] == "0":
        pos += 1
    if pos == end:
        return negative, "0", "", ""
    start = pos
    while pos < end and text[pos] in _DIGITS:
        pos += 1
    num = text[start:pos] or "0"
    denom = ""
    if pos < end and text[pos] == ".":
        pos += 1
        start = pos
        while pos < end and text[pos] in _DIGITS:
            pos += 1
        denom = text[start:pos]
    suffix_start = pos
    while pos < end and text[pos] in _SUFFIX_CHARS:
        pos += 1
    if pos < end and text[pos] in "+-":
        pos += 1
    while pos < end and text[pos] in _DIGITS:
        pos += 1
    if pos != end:
        raise QuantityError(_FORMAT_WRONG)
    return negative, num, denom, text[suffix_start:]


def _interpret(suffix: str) -> tuple[int, int, bool]:
    known = _SUFFIXES.get(suffix)
    if known is not None:
        return known
    if len(suffix) > 1 and suffix[0] in "eE":
        exponent_text = suffix[1:]
        # Go's strconv.ParseInt: optional sign then ASCII digits only.
        digits = exponent_text[1:] if exponent_text[0] in "+-" else exponent_text
        if digits and all(c in _DIGITS for c in digits):
            exponent = int(exponent_text)
            if abs(exponent) > _MAX_EXPONENT:
                raise QuantityError(f"quantity exponent {exponent} is out of range (±{_MAX_EXPONENT})")
            return 10, exponent, False
    raise QuantityError(_SUFFIX_WRONG)


def parse_quantity(text: str | int | float) -> Fraction:
    """Parse a quantity exactly; YAML/JSON numbers are read as their decimal text, as apimachinery does.

    Raises :class:`QuantityError` with apimachinery's message when ``text`` is not a quantity.
    """
    if isinstance(text, bool):
        # JSON true/false reach Quantity.UnmarshalJSON as the words "true"/"false", which fail the grammar.
        raise QuantityError(_FORMAT_WRONG)
    if isinstance(text, int):
        return Fraction(text)
    if isinstance(text, float):
        if not math.isfinite(text):
            raise QuantityError(_FORMAT_WRONG)
        return _parse_text(repr(text))
    if not isinstance(text, str):
        raise QuantityError(f"quantities must be a string or a number, got {type(text).__name__}")
    return _parse_text(text.strip())  # Quantity.UnmarshalJSON trims surrounding white space


# Manifests repeat the same few texts ("100m", "1Gi") thousands of times; Fractions are immutable.
@functools.lru_cache(maxsize=4096)
def _parse_text(text: str) -> Fraction:
    if not text:
        raise QuantityError(_FORMAT_WRONG)
    negative, num, denom, suffix = _split(text)
    base, exponent, binary = _interpret(suffix)
    try:
        mantissa = int(num + denom)
    except ValueError as exc:  # more digits than Python converts (sys.int_info.default_max_str_digits)
        raise QuantityError(_NUMERIC_WRONG) from exc
    amount = Fraction(mantissa, 10 ** len(denom)) * Fraction(base) ** exponent
    nanos = amount * _NANO
    if nanos.denominator != 1:
        # Non-zero values are rounded up (away from zero) to a whole nano-unit: asking for a little gets some.
        amount = Fraction(math.ceil(nanos), _NANO)
    if binary and amount > INT64_MAX:
        amount = Fraction(INT64_MAX)
    return -amount if negative else amount


def milli_value(q: Fraction) -> int:
    """``Quantity.MilliValue``: the value in thousandths, rounded up."""
    return math.ceil(q * 1000)


def value(q: Fraction) -> int:
    """``Quantity.Value``: the value in whole units, rounded up."""
    return math.ceil(q)


def to_canonical(resource_name: str, text: str | int | float) -> int:
    """The integer the scheduler stores for ``resource_name``: milli-CPU for "cpu", whole units otherwise.

    Results are clamped to the int64 range so the columnar (numpy int64) path can hold every value.
    """
    if isinstance(text, str):
        return _canonical_text(resource_name == "cpu", text)
    return _canonical(resource_name == "cpu", parse_quantity(text))


# Every watch event of a pod or node parses its requests and capacities again, and they are a few texts
# ("100m", "500Mi") repeated cluster-wide: the Fraction arithmetic is worth remembering too.
@functools.lru_cache(maxsize=4096)
def _canonical_text(milli: bool, text: str) -> int:
    return _canonical(milli, parse_quantity(text))


def _canonical(milli: bool, q: Fraction) -> int:
    result = milli_value(q) if milli else value(q)
    return min(max(result, INT64_MIN), INT64_MAX)


def _is_bytes(resource_name: str) -> bool:
    return resource_name in _BYTE_RESOURCES or resource_name.startswith("hugepages-")


def format_quantity(resource_name: str, amount: int) -> str:
    """Display a canonical integer: cpu as "500m" or "2"; byte resources with the largest exact binary
    suffix ("1Gi", "1536Mi") or as plain bytes; everything else as a plain integer."""
    if resource_name == "cpu":
        whole, rest = divmod(abs(amount), 1000)
        sign = "-" if amount < 0 else ""
        return f"{sign}{whole}" if rest == 0 else f"{amount}m"
    if amount != 0 and _is_bytes(resource_name):
        for unit, size in _BINARY_UNITS:
            if amount % size == 0:
                return f"{amount // size}{unit}"
    return str(amount)
