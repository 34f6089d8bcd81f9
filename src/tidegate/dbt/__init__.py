"""dbt projects as they are: dbt compiles (compiler.py), tidegate reads the manifest
(manifest.py), turns every model into a tidegate SQL model (models.py) whose reads of refs and
sources are rewritten to tidegate's relations and partition windows (relations.py), and
describes the columns of models without a contract (columns.py)."""
