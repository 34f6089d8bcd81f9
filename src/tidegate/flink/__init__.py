"""Flink stream jobs on PyFlink's local MiniCluster: starting a version from a restore point
(runtime.py, the only importer of PyFlink), watching it over the REST API (rest.py), and the
folders a stream keeps (places.py: checkpoints, savepoints, code snapshots, output files)."""
