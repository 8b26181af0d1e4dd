"""Synthetic data with known truth: generated logs for checking estimators, reward models and learners."""
