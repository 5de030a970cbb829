"""Quantity parsing against apimachinery's behaviour (golden vectors), canonical values and display."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kubesched.api.quantity import (
    INT64_MAX,
    QuantityError,
    format_quantity,
    milli_value,
    parse_quantity,
    to_canonical,
    value,
)

REGEX_MESSAGE = "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
SUFFIX_MESSAGE = "unable to parse quantity's suffix"


@pytest.mark.parametrize(
    ("text", "milli", "whole"),
    [
        pytest.param("100m", 100, 1, id="milli-suffix"),
        pytest.param("1", 1000, 1, id="plain-integer"),
        pytest.param("0.5", 500, 1, id="fraction-value-rounds-up"),
        pytest.param("1.5", 1500, 2, id="one-and-a-half"),
        pytest.param("0.0001", 1, 1, id="below-one-milli-rounds-up"),
        pytest.param(".5", 500, 1, id="leading-dot"),
        pytest.param("1.", 1000, 1, id="trailing-dot"),
        pytest.param("1Ki", 1024_000, 1024, id="kibi"),
        pytest.param("1Mi", 1048576_000, 1048576, id="mebi"),
        pytest.param("1.5Gi", 1610612736_000, 1610612736, id="fractional-gibi"),
        pytest.param("1G", 10**12, 10**9, id="giga"),
        pytest.param("1k", 10**6, 1000, id="kilo"),
        pytest.param("1E", 10**21, 10**18, id="exa-suffix"),
        pytest.param("1e3", 10**6, 1000, id="lower-exponent"),
        pytest.param("1E3", 10**6, 1000, id="upper-exponent"),
        pytest.param("1e-3", 1, 1, id="negative-exponent"),
        pytest.param("1.5e+2", 150_000, 150, id="signed-exponent-with-fraction"),
        pytest.param("2n", 1, 1, id="nano-rounds-up"),
        pytest.param("250u", 1, 1, id="micro-rounds-up"),
        pytest.param("+2", 2000, 2, id="plus-sign"),
        pytest.param("-1", -1000, -1, id="negative-parses"),
        pytest.param("007", 7000, 7, id="leading-zeros"),
        pytest.param(" 100m ", 100, 1, id="surrounding-space-trimmed"),
        pytest.param(2, 2000, 2, id="yaml-integer"),
        pytest.param(0.25, 250, 1, id="yaml-float"),
        pytest.param(1e-07, 1, 1, id="yaml-float-exponent-form"),
    ],
)
def test_golden_values(text: str | int | float, milli: int, whole: int) -> None:
    q = parse_quantity(text)
    assert (milli_value(q), value(q)) == (milli, whole)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("0.0000000001", Fraction(1, 10**9), id="rounded-up-to-one-nano"),
        pytest.param("-0.0000000001", Fraction(-1, 10**9), id="negative-rounded-away-from-zero"),
        pytest.param("1.5Gi", Fraction(3 * 2**29), id="binary-fraction-exact"),
        pytest.param("123m", Fraction(123, 1000), id="milli-exact"),
        pytest.param("9Ei", Fraction(INT64_MAX), id="binary-capped-at-int64-max"),
        pytest.param("10E", Fraction(10**19), id="decimal-not-capped"),
        pytest.param("0", Fraction(0), id="zero"),
        pytest.param("-", Fraction(0), id="lone-sign-is-zero-like-apimachinery"),
        pytest.param(".", Fraction(0), id="lone-dot-is-zero-like-apimachinery"),
    ],
)
def test_exact_fractions(text: str, expected: Fraction) -> None:
    assert parse_quantity(text) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param("12x", REGEX_MESSAGE, id="unknown-letter"),
        pytest.param("", REGEX_MESSAGE, id="empty"),
        pytest.param("   ", REGEX_MESSAGE, id="only-space"),
        pytest.param("1.2.3", REGEX_MESSAGE, id="two-dots"),
        pytest.param("1 Gi", REGEX_MESSAGE, id="inner-space"),
        pytest.param("0x10", REGEX_MESSAGE, id="hex"),
        pytest.param("1e3e3", REGEX_MESSAGE, id="two-exponents"),
        pytest.param(True, REGEX_MESSAGE, id="yaml-boolean"),
        pytest.param(float("nan"), REGEX_MESSAGE, id="nan"),
        pytest.param("1e", SUFFIX_MESSAGE, id="exponent-without-digits"),
        pytest.param("1kk", SUFFIX_MESSAGE, id="doubled-suffix"),
        pytest.param("1Mi3", SUFFIX_MESSAGE, id="digits-after-binary-suffix"),
        pytest.param("1ki", SUFFIX_MESSAGE, id="lower-case-binary-suffix"),
        pytest.param("--1", SUFFIX_MESSAGE, id="double-sign"),
        pytest.param("1e5000", "quantity exponent 5000 is out of range (±1000)", id="huge-exponent"),
        pytest.param("1" * 5000, "unable to parse numeric part of quantity", id="too-many-digits"),
    ],
)
def test_parse_errors(text: str | float, message: str) -> None:
    with pytest.raises(QuantityError) as info:
        parse_quantity(text)
    assert str(info.value) == message


def test_non_scalar_is_rejected() -> None:
    with pytest.raises(QuantityError, match="got list"):
        parse_quantity([1])  # type: ignore[arg-type]


def test_quantity_error_is_a_value_error() -> None:
    assert issubclass(QuantityError, ValueError)


@pytest.mark.parametrize(
    ("resource", "text", "expected"),
    [
        pytest.param("cpu", "500m", 500, id="cpu-in-milli"),
        pytest.param("cpu", "2", 2000, id="cpu-cores-in-milli"),
        pytest.param("memory", "1Gi", 2**30, id="memory-in-bytes"),
        pytest.param("memory", "100m", 1, id="milli-memory-rounds-up-to-a-byte"),
        pytest.param("ephemeral-storage", "1G", 10**9, id="ephemeral-storage-bytes"),
        pytest.param("pods", "110", 110, id="pods-count"),
        pytest.param("hugepages-2Mi", "4Mi", 4 * 2**20, id="hugepages-bytes"),
        pytest.param("nvidia.com/gpu", 2, 2, id="extended-resource-count"),
        pytest.param("cpu", "9Ei", INT64_MAX, id="clamped-to-int64"),
    ],
)
def test_to_canonical(resource: str, text: str | int, expected: int) -> None:
    assert to_canonical(resource, text) == expected


@pytest.mark.parametrize(
    ("resource", "amount", "shown"),
    [
        pytest.param("cpu", 500, "500m", id="cpu-milli"),
        pytest.param("cpu", 2000, "2", id="cpu-whole"),
        pytest.param("cpu", 2500, "2500m", id="cpu-not-whole"),
        pytest.param("cpu", 0, "0", id="cpu-zero"),
        pytest.param("memory", 2**30, "1Gi", id="memory-gibi"),
        pytest.param("memory", 512 * 2**20, "512Mi", id="memory-mebi"),
        pytest.param("memory", 1536 * 2**20, "1536Mi", id="memory-largest-exact-unit"),
        pytest.param("memory", 1000, "1000", id="memory-not-binary"),
        pytest.param("memory", 0, "0", id="memory-zero"),
        pytest.param("ephemeral-storage", 2**40, "1Ti", id="ephemeral-storage-tebi"),
        pytest.param("hugepages-1Gi", 2 * 2**30, "2Gi", id="hugepages"),
        pytest.param("pods", 1024, "1024", id="counts-stay-plain"),
        pytest.param("nvidia.com/gpu", 2, "2", id="extended-plain"),
    ],
)
def test_format_quantity(resource: str, amount: int, shown: str) -> None:
    assert format_quantity(resource, amount) == shown


@given(st.integers(min_value=0, max_value=2**50))
def test_memory_display_parses_back(amount: int) -> None:
    assert to_canonical("memory", format_quantity("memory", amount)) == amount


@given(st.integers(min_value=0, max_value=2**50))
def test_cpu_display_parses_back(milli: int) -> None:
    assert to_canonical("cpu", format_quantity("cpu", milli)) == milli
