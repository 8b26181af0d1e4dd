"""Every mergeable state honours the contract of dr_scale/outofcore/mergeable.py: the state of a batch equals the
merge of its pieces' states for any split, grouping and order, ``empty`` is an identity, and the
persisted states round-trip through ``to_dict``/``from_dict`` exactly."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
import scipy.sparse as sp

from dr_scale.core import keyed_random
from dr_scale.experiments.visits.data import part_from_arrays
from dr_scale.experiments.visits.experiment import FitSums, Population, Projections
from dr_scale.experiments.visits.pca import FirstPass, RowSample
from dr_scale.ope.diagnostics import WeightStats
from dr_scale.ope.evaluation import ComparisonState, PolicyState
from dr_scale.ope.moments import Moments
from dr_scale.outofcore.mergeable import Mergeable, Persisted
from dr_scale.propensity.diagnostics import PropensityState
from dr_scale.reward.fitting import Extent, LogPart
from dr_scale.synthetic.bandit import Calibration

N, K, D = 90, 3, 6
SPLITS = [[0, 30, N], [0, 10, 55, N], [0, 1, 2, 89, N]]  # piece boundaries; one piece per run of rows


def _rows():
    rng = np.random.default_rng(7)
    X = sp.random(N, D, density=0.4, format="csr", random_state=rng)
    X.data[:] = 1.0
    action = rng.integers(0, K, N)
    reward = rng.normal(size=N)
    propensity = rng.uniform(0.05, 1.0, N)
    expected = rng.uniform(size=(N, K))
    probs = rng.dirichlet(np.ones(K), N)
    return X, action, reward, propensity, expected, probs


X, ACTION, REWARD, PROPENSITY, EXPECTED, PROBS = _rows()
ROW_ID = np.arange(N, dtype=np.int64) * 3 + 11
KEYS = keyed_random.uniform(ROW_ID, 0, "test-mergeable")


def _policy_state(s):
    weight = (ACTION[s] == 0) / PROPENSITY[s]
    ranges = (np.array([REWARD[s].min(initial=np.inf)]), np.array([REWARD[s].max(initial=-np.inf)]))
    return PolicyState({"ips": Moments.of(weight * REWARD[s], weight, ranges=ranges)},
                       WeightStats.of(weight, PROPENSITY[s], REWARD[s]),
                       {"dr": Moments.of(REWARD[s] - weight)},
                       folds={"dm": [Moments.of(EXPECTED[s, j], ranges=ranges) for j in range(K)]})


def _log_part(s):
    Xs = X[s]
    return LogPart(ROW_ID[s], Xs.indptr, Xs.indices, None, ACTION[s], REWARD[s], PROPENSITY[s])


#: Each state's ``of`` applied to the rows of a slice s.
STATES = {
    "Moments": lambda s: Moments.of(REWARD[s], PROPENSITY[s], ranges=(np.array([REWARD[s].min(initial=np.inf)]),
                                                                      np.array([REWARD[s].max(initial=-np.inf)]))),
    "WeightStats": lambda s: WeightStats.of(1 / PROPENSITY[s], PROPENSITY[s], REWARD[s]),
    "PolicyState": _policy_state,
    "ComparisonState": lambda s: ComparisonState({"A": _policy_state(s), "B": STATES["PolicyState"](s)}),
    "Extent": lambda s: Extent.of(_log_part(s)),
    "Projections": lambda s: Projections.of(REWARD[s]),
    "Population": lambda s: Population.of(REWARD[s] ** 2, PROPENSITY[s]),
    "RowSample": lambda s: RowSample.of(20, KEYS[s], X[s]),
    "FirstPass": lambda s: FirstPass.of(part_from_arrays(ROW_ID[s], X[s], REWARD[s]), 20),
    "Calibration": lambda s: Calibration.of(X[s], EXPECTED[s], PROBS[s], ACTION[s], REWARD[s], PROPENSITY[s]),
    "PropensityState": lambda s: PropensityState.of(PROBS[s], ACTION[s], floor=0.2, target=PROBS[::-1][s],
                                                    logged=PROPENSITY[s]),
}


def assert_same(a, b, rtol=1e-12):
    """Equal states: integers, minima and samples exactly, float sums to rounding."""
    if isinstance(a, dict):
        assert a.keys() == b.keys()
        for k in a:
            assert_same(a[k], b[k], rtol)
    elif isinstance(a, list) and a and dataclasses.is_dataclass(a[0]):  # a list of states (PolicyState.folds)
        assert len(a) == len(b)
        for x, y in zip(a, b, strict=True):
            assert_same(x, y, rtol)
    elif dataclasses.is_dataclass(a):
        assert type(a) is type(b)
        for f in dataclasses.fields(a):
            assert_same(getattr(a, f.name), getattr(b, f.name), rtol)
    elif a is None or isinstance(a, (int, np.integer)):
        assert a == b
    else:
        a, b = np.asarray(a), np.asarray(b)
        if a.dtype.kind in "iub":
            np.testing.assert_array_equal(a, b)
        else:
            np.testing.assert_allclose(a, b, rtol=rtol, atol=1e-12)


@pytest.mark.parametrize("name", STATES)
@pytest.mark.parametrize("bounds", SPLITS)
def test_of_the_whole_equals_the_merge_of_the_pieces_in_any_grouping_and_order(name, bounds):
    of = STATES[name]
    whole = of(slice(0, N))
    assert isinstance(whole, Mergeable)
    pieces = [of(slice(a, b)) for a, b in zip(bounds[:-1], bounds[1:])]
    left = pieces[0]
    for p in pieces[1:]:
        left = left + p  # ((a + b) + c) …
    right = pieces[-1]
    for p in reversed(pieces[:-1]):
        right = p + right  # … (a + (b + c))
    backwards = pieces[-1]
    for p in reversed(pieces[:-1]):
        backwards = backwards + p  # … (c + b) + a
    for merged in (left, right, backwards):
        assert_same(merged, whole)


@pytest.mark.parametrize("name", [n for n in STATES if n not in ("Extent", "Calibration")])  # built of parts with rows
def test_a_batch_of_no_rows_merges_as_an_identity(name):
    of = STATES[name]
    whole, nothing = of(slice(0, N)), of(slice(0, 0))
    assert_same(whole + nothing, whole, rtol=0)
    assert_same(nothing + whole, whole, rtol=0)


def test_running_totals_start_from_an_empty_state_that_is_an_identity():
    rng = np.random.default_rng(3)
    fits = FitSums(*(rng.normal(size=4) for _ in range(5)), *(rng.normal(size=(4, D)) for _ in range(3)),
                   Population.of(rng.normal(size=9), rng.uniform(size=9)))
    assert_same(FitSums.empty(4, D) + fits, fits, rtol=0)
    assert_same(Moments.empty(2, 1) + STATES["Moments"](slice(0, N)), STATES["Moments"](slice(0, N)), rtol=0)
    assert_same(WeightStats.empty() + STATES["WeightStats"](slice(0, N)), STATES["WeightStats"](slice(0, N)),
                rtol=0)


@pytest.mark.parametrize("name", ["Moments", "WeightStats", "PolicyState", "ComparisonState", "PropensityState"])
def test_persisted_states_round_trip_through_json_exactly(name):
    state = STATES[name](slice(0, N))
    assert isinstance(state, Persisted)
    assert_same(type(state).from_dict(json.loads(json.dumps(state.to_dict()))), state, rtol=0)
