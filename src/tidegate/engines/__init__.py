"""Warehouse engines behind one narrow interface. Import an engine only where it is needed."""
