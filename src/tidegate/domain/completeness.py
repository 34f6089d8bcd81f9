"""Completeness of inputs: how many rows a partition of an input must hold to be read."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from tidegate.domain.model import ModelSpec, Source

# what a model that reads nothing inherits: a partition of it must hold rows
DEFAULT_MIN_ROWS = 1


def min_rows_of(
    model: ModelSpec, sources: Mapping[str, Source], spec_of: Callable[[str], ModelSpec]
) -> int:
    """The rows each partition of `model` must hold for a downstream model to read it: its
    declared `min_rows`, or else the smallest of the sources and models it reads. A model fed
    by a source that allows empty windows may itself be empty, and its readers read it so; one
    fed only by sources that must hold rows is expected to hold rows too."""
    if model.min_rows is not None:
        return model.min_rows
    inherited = [sources[name].min_rows for name in model.sources if name in sources]
    inherited += [min_rows_of(spec_of(name), sources, spec_of) for name in model.upstream]
    return min(inherited, default=DEFAULT_MIN_ROWS)
