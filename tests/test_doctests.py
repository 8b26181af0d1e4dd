"""The runnable examples in the estimators' docstrings (numpydoc ``Examples`` sections)."""

import doctest

import pytest

import dr_scale.synthetic.finite_world
import dr_scale.estimators

MODULES = [dr_scale.estimators, dr_scale.synthetic.finite_world]


@pytest.mark.parametrize("module", MODULES, ids=lambda m: m.__name__)
def test_docstring_examples(module):
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0
    assert result.failed == 0
