"""A shared model against a log's action catalogue: the catalogue a fit needs, and a model refused on a log whose
catalogue is not the one it was fitted on."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

import numpy as np
import scipy.sparse as sp

from dr_scale.crossfit.folded import used_columns
from dr_scale.reward.shared.model import SharedRidgeRewardModel

if TYPE_CHECKING:
    from dr_scale.logs.catalogue import Catalogue
    from dr_scale.logs.opened import OpenedLog


def check_log_catalogue(models: Iterable[tuple[object, str]], logs: str | OpenedLog,
                        storage_options: dict | None = None) -> None:
    """:func:`check_model_catalogue` of each (model, name) pair against the catalogue of the log at ``logs``, read
    once and only if a model is a shared one."""
    from dr_scale.logs.catalogue import read_catalogue

    shared = [(m, name) for m, name in models if isinstance(m, SharedRidgeRewardModel)]
    if shared:
        catalogue = read_catalogue(logs, storage_options)
        for model, name in shared:
            check_model_catalogue(model, catalogue, name)


def check_model_catalogue(model: object, catalogue: Catalogue | None, name: str) -> None:
    """Refuse a shared model on a log whose action catalogue is not the one it was fitted on (its f_a would score
    other items): a :class:`~dr_scale.core.errors.UserError` naming ``name``. No check for other models, or
    without a catalogue (a log with none is refused where its catalogue is needed)."""
    from dr_scale.core.errors import UserError

    if not isinstance(model, SharedRidgeRewardModel) or catalogue is None:
        return
    features = sp.csr_matrix(catalogue.features)
    shape = (model.n_actions, model.n_item_features)
    same = features.shape == shape
    columns = np.arange(shape[1]) if model.item_columns is None else model.item_columns
    kept = used_columns(features, columns).toarray() if same else None  # and no non-zero in the other columns:
    if kept is None or not np.array_equal(kept, model.item_features) or \
            np.count_nonzero(features.data) != np.count_nonzero(kept):
        raise UserError(f"{name} is a shared model fitted over another action catalogue ({shape[0]} actions × "
                        f"{shape[1]} features; this log's {catalogue.source}: "
                        f"{features.shape[0]} × {features.shape[1]}{', other values' if same else ''}); "
                        "refit it on this log (dr-scale fit --model shared)")


def log_and_catalogue(logs: str | OpenedLog, storage_options: dict | None, needs: str) -> tuple:
    """(fs, the log's part paths, its action catalogue); a log without a catalogue is a
    :class:`~dr_scale.core.errors.UserError` saying what ``needs`` it."""
    from dr_scale.core.errors import UserError
    from dr_scale.logs.catalogue import read_catalogue
    from dr_scale.logs.listing import list_parts

    fs, paths = list_parts(logs, storage_options)  # a missing log is said as such, before its catalogue
    catalogue = read_catalogue(logs, storage_options)
    if catalogue is None:
        raise UserError(f"{logs}: the log has no action catalogue (_actions.parquet): {needs} (dr-scale import with "
                        "an [actions] table, or generate bandit --action-features)")
    return fs, paths, catalogue
