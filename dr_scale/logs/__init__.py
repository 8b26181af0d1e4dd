"""The logged-data contract (:mod:`.contract`): Parquet logs of (row_id, features, action, reward, propensity),
read into CSR parts and validated, written atomically."""
