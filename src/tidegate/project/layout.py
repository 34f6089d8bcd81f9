"""Where a project's own files are: the project file and the folder of model files."""

PROJECT_FILE = "tidegate.toml"
MODELS_DIR = "models"
# a model is one file of these (a `.py` whose name starts with `_` is a helper module)
MODEL_SUFFIXES = (".sql", ".py", ".toml")
