"""The paper's covariate-shift experiment (Section 5.2, Fig. cv), out-of-core on Dask.

The flow, one module per step (the passes over persisted parts, the Lanczos iteration
and the many-fits ridge regression ρ̂ come from :mod:`dr_scale.outofcore`):

* :mod:`~dr_scale.synthetic.visits` — a synthetic "user visits" set shaped like the
  paper's (N users, 5000 sparse binary features, a long-tailed visit count), written
  as Parquet parts in parallel, one Dask task per part keyed by (seed, part);
* :mod:`~dr_scale.experiments.visits.data` — reading the parts as binary CSR blocks;
* :mod:`~dr_scale.experiments.visits.pca` — the first principal component x̄ of the centred
  features by a Lanczos iteration on map-reduce matrix-vector products
  (:mod:`dr_scale.outofcore.lanczos`);
* :mod:`~dr_scale.experiments.visits.sampler` — the paper's propensities p_i = min{N(x_i·x̄), 1},
  keyed subsample membership and logging draws;
* :mod:`~dr_scale.experiments.visits.experiment` — fractions × repetitions of IPS and DR from
  mergeable per-partition sums, with ridge ρ̂ for all subsamples at once
  (:mod:`dr_scale.outofcore.ridge`);
* :mod:`~dr_scale.experiments.visits.outputs` — JSON, CSV, one PNG per panel of Fig. cv, Markdown;
* :mod:`~dr_scale.experiments.visits.job` — ``dr-scale run pipelines/visits.toml``.
"""
