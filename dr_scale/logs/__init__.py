"""The logged-data contract (:mod:`.contract`, the schema and its rules): Parquet logs of (row_id, features,
action, reward, propensity), listed (:mod:`.listing`), read into CSR parts and validated (:mod:`.reading`,
:mod:`.sparse`), written atomically (:mod:`.writing`), with their action catalogue (:mod:`.catalogue`) and
target-policy columns (:mod:`.targets`)."""
