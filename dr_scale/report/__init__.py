"""Scheduled reports over a log share: ``dr-scale report``.

The flow, one module each:

* :mod:`~dr_scale.report.policies_file` — the candidate policies, estimators and reward model;
* :mod:`~dr_scale.report.partitions` — list the share, pick the window, identify each partition;
* :mod:`~dr_scale.report.state_cache` — per-partition :class:`~dr_scale.ope.evaluation.PolicyState`
  cache, verified by checksum and identity;
* :mod:`~dr_scale.report.build` — one Dask task per new or changed partition, merged with the
  cached states in sorted partition order;
* :mod:`~dr_scale.report.alerts` — support and drift alerts per policy and day, thresholds, ``fail_on``;
* :mod:`~dr_scale.report.plots` and :mod:`~dr_scale.report.render` — report.json / .md / .html
  with PNG plots, published atomically.
"""
