"""The ``--policy`` grammar: a :class:`~dr_scale.policies.base.Policy` from its command-line spelling."""

from __future__ import annotations

from dr_scale.core.errors import UserError
from dr_scale.policies.base import Policy
from dr_scale.policies.columns import ActionColumnPolicy, ProbsColumnPolicy, SparsePolicy
from dr_scale.policies.function import CallablePolicy
from dr_scale.policies.linear import LinearPolicy, SoftmaxPolicy
from dr_scale.policies.logged import FORMS, LoggedPolicy
from dr_scale.policies.scorer import ItemScorerPolicy
from dr_scale.policies.simple import ConstantPolicy, EpsilonGreedyPolicy, LoggingPolicy, TopKPolicy, UniformPolicy


def parse_policy(spec: str | Policy, storage_options: dict | None = None) -> Policy:
    """A policy from its command-line spelling (the kinds: :mod:`dr_scale.policies`); a policy file is read here,
    once.

    Parameters
    ----------
    spec : str or Policy
        The spelling (a Policy is returned as it is).
    storage_options : dict, optional
        fsspec's options for the file of a ``linear:``, ``softmax:`` or ``scorer:`` policy.

    Returns
    -------
    Policy

    Examples
    --------
    >>> parse_policy("epsilon-greedy:0.1:constant:2")
    EpsilonGreedyPolicy(epsilon=0.1, policy=ConstantPolicy(action=2, item='2'))
    >>> str(parse_policy("topk:news,sports").resolve(["news", "sports", "weather"]))
    'topk:news,sports (#0,#1)'
    >>> parse_policy("uniform"), parse_policy("logging")
    (UniformPolicy(), LoggingPolicy())
    """
    if isinstance(spec, Policy):
        return spec
    if not isinstance(spec, str):
        raise UserError(f"bad policy {spec!r}: give a string such as column:target_action")
    kind, _, arg = spec.partition(":")
    if spec in ("uniform", "logging"):
        return UniformPolicy() if spec == "uniform" else LoggingPolicy()
    if kind == "constant" and arg.isdigit():
        return ConstantPolicy(int(arg), arg)
    if kind == "constant" and arg[:1] == "#" and arg[1:].isdigit():
        return ConstantPolicy(int(arg[1:]), arg)
    if kind == "constant" and arg and not arg.startswith("-"):
        return ConstantPolicy(None, arg)
    if kind == "topk" and arg:
        return TopKPolicy(tuple(arg.split(",")))
    if kind == "epsilon-greedy" and ":" in arg:
        text, _, inner = arg.partition(":")
        try:
            epsilon = float(text)
        except ValueError:
            raise UserError(f"bad policy {spec!r}: ε of epsilon-greedy:EPS:POLICY must be a number in [0, 1]") from None
        return EpsilonGreedyPolicy(epsilon, parse_policy(inner, storage_options))
    if kind == "column":
        return ActionColumnPolicy(arg or "target_action")
    if kind == "probs":
        return ProbsColumnPolicy(arg or "target_probs")
    if kind == "sparse":
        return SparsePolicy(arg or "target_topk")
    if kind == "scorer" and arg:
        return ItemScorerPolicy.load(arg, storage_options)
    if kind == "callable" and arg:
        return CallablePolicy(arg)
    if kind == "logged" and arg:
        path, _, form = arg.rpartition(":")
        return (LoggedPolicy.load(path, form, storage_options) if path and form in FORMS
                else LoggedPolicy.load(arg, "auto", storage_options))
    if kind == "linear" and arg:
        return LinearPolicy.load(arg, storage_options)
    if kind == "softmax" and ":" in arg:
        path, _, text = arg.rpartition(":")
        try:
            temperature = float(text)
        except ValueError:
            raise UserError(f"bad policy {spec!r}: the temperature T of softmax:POLICY.npz:T must be a number"
                            ) from None
        return SoftmaxPolicy(LinearPolicy.load(path, storage_options), temperature)
    raise UserError(
        f"bad policy {spec!r}: use constant:A (an action's id, its value, or #ID), topk:A,B,…, uniform, "
        "epsilon-greedy:EPS:POLICY, logging, column:NAME, probs:NAME, callable:module:function, "
        "linear:POLICY.npz, softmax:POLICY.npz:T, sparse:NAME, scorer:POLICY.npz or "
        "logged:OTHER_LOGS[:frequencies|:model]"
    )
