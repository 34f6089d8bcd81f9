"""Dagster definitions for a tidegate project: one asset per model.

Copy this file next to your project (or point TIDEGATE_PROJECT at it), then:

    pip install 'tidegate[dagster]'
    dagster dev -f definitions.py

Materializing a partition range of an asset runs one `tidegate backfill MODEL --partitions
FIRST..LAST`; see docs/guides/dagster.md.
"""

from __future__ import annotations

import os
from pathlib import Path

from dagster import Definitions

from tidegate.dagster import tidegate_assets

PROJECT = Path(os.environ.get("TIDEGATE_PROJECT", Path(__file__).parent))

# One asset per model. To retry failures worth a retry (tidegate's exit codes 1 and 4), pass
# e.g. retry_policy=dagster.RetryPolicy(max_retries=2, delay=60); refusals are never retried.
defs = Definitions(assets=tidegate_assets(PROJECT))
