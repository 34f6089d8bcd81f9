"""tidegate: a control plane for releasing data pipelines safely."""

from tidegate.api import Context, model

__version__ = "0.1.0"

__all__ = ["Context", "__version__", "model"]
