"""tidegate: a control plane for releasing data pipelines safely."""

__version__ = "0.1.0"
