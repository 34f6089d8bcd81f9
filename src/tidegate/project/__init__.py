"""Reading a project: tidegate.toml, model files, validation and the model graph."""
