"""The plan's one writer of quantities (core/quantity `figure`): no exponent form anywhere, and
the scheduling and queue sections print the same amount the same way."""

from fractions import Fraction

import pytest

from trainforge.core.quantity import figure, parse_quantity, plain
from trainforge.plan.checks import queues
from trainforge.plan.checks.scheduling import _of


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (Fraction(10**6), "1000000"),
        (Fraction(2_500_000), "2500000"),
        (Fraction(948, 10), "94.8"),
        (Fraction(41192, 100), "411.92"),
        (Fraction(1, 10**5), "0.00001"),
        (Fraction(10**7 + 1, 2), "5000000.5"),
        (Fraction(0), "0"),
    ],
)
def test_plain_is_positional(value: Fraction, text: str) -> None:
    assert plain(value) == text
    assert parse_quantity(text) == value  # what we print reads back as the same quantity


def test_a_million_cores_reads_the_same_in_both_sections() -> None:
    million = Fraction(10**6)
    assert queues.amount("cpu", million) == "1000000 cores"
    assert _of("cpu", million, "2M") == "cpu 1000000 of 2000000 cores"
    assert queues.amount("nvidia.com/gpu", million) == "1000000 GPUs"
    assert figure("memory", Fraction(3 * 2**29)) == "1.5Gi"
    assert _of("memory", Fraction(3 * 2**29), "2Gi") == "memory 1.5Gi of 2Gi"


def test_the_sdk_sections_pod_size_uses_the_same_writer() -> None:
    from trainforge.plan.checks.submitted import pod_size

    req = {"nvidia.com/gpu": Fraction(2), "cpu": Fraction(10**6), "memory": Fraction(3 * 2**29)}
    assert pod_size(req) == "2 GPU, cpu 1000000, memory 1.5Gi"
    assert pod_size({"cpu": Fraction(1, 2), "memory": Fraction(0)}) == "cpu 0.5"
