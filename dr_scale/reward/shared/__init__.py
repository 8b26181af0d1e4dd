"""A ridge reward model shared across actions: context × action-feature interactions plus both main effects.

    ρ̂(x, a) = b + x·β_x + f_a·β_f + x·B·f_a

with f_a the action's features (the log's action catalogue, :class:`~dr_scale.logs.catalogue.Catalogue`),
so the parameter count, 1 + d + D_A + d·D_A, does not grow with the number of actions k. Fitted by
ridge regression on the logged rows' features φ(x_i, a_i) = (x_i, f_{a_i}, x_i ⊗ f_{a_i}),

    min_θ Σ_i (r_i − b − φ_i·θ)² + λ ‖θ‖²     (the intercept b not penalised),

on the pass engine of the per-action fitters (:func:`fit_shared_model`): the log's parts read once by
:func:`dr_scale.crossfit.parts.read_grouped_parts` and kept between passes (in memory, spilled to local files, or on a
Dask cluster's workers), then :func:`dr_scale.outofcore.ridge.fit`'s conjugate gradients, each iteration one pass
over the parts that computes Φᵀ(Φ v) without forming Φ or ΦᵀΦ. Sized by use, as the per-action models are: on a log
the fit, the model and its file hold β_x and B's rows for the m context features the rows have and β_f and B's
columns for the c catalogue columns some item has non-zero (memory O(part + m·c), not d·D_A; the model's
``features`` and ``item_columns`` are their ids). For 0/1 rewards the
logistic form (:class:`SharedLogisticRewardModel`),

    ρ̂(x, a) = σ(b + φ(x, a)·θ),   min_θ Σ_i [log(1 + e^{z_i}) − r_i z_i] + (λ/2) ‖θ‖²,   z_i = b + φ_i·θ,

by :func:`dr_scale.outofcore.glm.minimize` (L-BFGS, one pass per step). Cross-fitting (``folds=K``): K fold
models by the keyed folds of :func:`dr_scale.crossfit.parts.fold_of`, beside the full-data model, in the same passes;
λ = ``"auto"`` by the per-action models' rule (:func:`dr_scale.crossfit.engine.scan_lambdas`). Predictions for a
policy's listed actions only (:meth:`SharedRidgeRewardModel.predict_pairs`).
"""

from dr_scale.reward.shared.catalogue import check_log_catalogue, check_model_catalogue, log_and_catalogue
from dr_scale.reward.shared.features import fold_rows, phi, phi_t
from dr_scale.reward.shared.fitting import (
    fit_shared_from_log,
    fit_shared_model,
    fit_shared_on_parts,
    fit_shared_ridge,
    in_memory_parts,
)
from dr_scale.reward.shared.model import KIND, SharedLogisticRewardModel, SharedRidgeRewardModel, unflatten
from dr_scale.reward.shared.objective import (
    SharedModels,
    SharedObjective,
    add_shared_gram,
    add_shared_logistic_terms,
    shared_out_of_fold,
    shared_sums,
)

__all__ = [
    "KIND", "SharedLogisticRewardModel", "SharedModels", "SharedObjective", "SharedRidgeRewardModel",
    "add_shared_gram", "add_shared_logistic_terms", "check_log_catalogue", "check_model_catalogue",
    "fit_shared_from_log", "fit_shared_model", "fit_shared_on_parts", "fit_shared_ridge", "fold_rows",
    "in_memory_parts", "log_and_catalogue", "phi", "phi_t", "shared_out_of_fold", "shared_sums", "unflatten",
]
