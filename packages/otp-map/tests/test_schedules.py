"""Noise schedules: values, limits, serialisation, bad arguments."""

import math
from itertools import pairwise

import pytest

from otp_map import (
    ConstantSchedule,
    CosineSchedule,
    GeometricSchedule,
    LinearSchedule,
    schedule_from_dict,
)


def test_geometric_values_and_floor():
    s = GeometricSchedule(start=2.0, floor=0.1, decay=0.9)
    assert s(0) == 2.0
    assert s(1) == pytest.approx(1.8)
    assert s(3) == pytest.approx(2.0 * 0.9**3)
    k = s.steps_to_floor()
    assert k == math.ceil(math.log(0.05) / math.log(0.9))
    assert s(k) == 0.1
    assert s(k - 1) > 0.1
    assert s(10**6) == 0.1


@pytest.mark.parametrize("cls", [LinearSchedule, CosineSchedule])
def test_linear_and_cosine_end_points_and_monotone(cls):
    s = cls(start=1.0, floor=0.2, n_steps=50)
    values = [s(t) for t in range(80)]
    assert values[0] == pytest.approx(1.0)
    assert values[50] == pytest.approx(0.2)
    assert values[79] == pytest.approx(0.2)
    assert all(b <= a + 1e-12 for a, b in pairwise(values))


def test_constant():
    assert ConstantSchedule(0.3)(0) == ConstantSchedule(0.3)(999) == 0.3


@pytest.mark.parametrize(
    "schedule",
    [
        ConstantSchedule(0.2),
        GeometricSchedule(1.5, 0.01, 0.99),
        LinearSchedule(1.0, 0.0, 10),
        CosineSchedule(0.5, 0.1, 7),
    ],
)
def test_round_trip(schedule):
    again = schedule_from_dict(schedule.to_dict())
    assert again == schedule
    assert [again(t) for t in range(20)] == [schedule(t) for t in range(20)]


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (lambda: GeometricSchedule(start=0.0), "start"),
        (lambda: GeometricSchedule(start=1.0, floor=2.0), "floor"),
        (lambda: GeometricSchedule(decay=1.5), "decay"),
        (lambda: LinearSchedule(n_steps=0), "n_steps"),
        (lambda: ConstantSchedule(-1.0), "eps"),
        (lambda: schedule_from_dict({"kind": "nope"}), "kind"),
        # a saved schedule names every field: a missing one is not silently defaulted
        (lambda: schedule_from_dict({"kind": "geometric", "start": 1.0}), "missing.*floor"),
        (lambda: schedule_from_dict({**GeometricSchedule().to_dict(), "rate": 2}), "unknown"),
        (lambda: GeometricSchedule()(-1), "step"),
    ],
)
def test_bad_arguments(make, match):
    with pytest.raises((ValueError, TypeError), match=match):
        make()
