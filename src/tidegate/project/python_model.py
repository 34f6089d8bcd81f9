"""Python models: `models/NAME.py`, one function decorated with `@tidegate.model(...)`.

The module is imported from its file under a name of its own, with the project folder first on
the import path so it can import the project's helper modules. Its fingerprint covers its source
and the source of every project module it imports (found by reading the imports, transitively),
plus the versions of the packages it declares.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import sys
import threading
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from importlib import metadata
from pathlib import Path
from types import ModuleType
from typing import Any

from tidegate.api import DECLARATION
from tidegate.domain.errors import ConfigError, ModelError
from tidegate.domain.model import ModelKind, Program
from tidegate.project.code_files import digest, require_unchanged
from tidegate.project.model_file import ModelFile, PythonHeader, validate_header
from tidegate.project.text_files import read_python

# What a model module may hold at its top level: importing it must only define things.
DEFINITIONS = (
    ast.Import,
    ast.ImportFrom,
    ast.FunctionDef,
    ast.AsyncFunctionDef,
    ast.ClassDef,
    ast.Assign,
    ast.AnnAssign,
)

ModelFunction = Callable[[Any], Any]
_IMPORTING = threading.Lock()


def read_python_model(root: Path, file: Path) -> tuple[ModelFile, Program]:
    """The declaration and program of a Python model file; ConfigError (one line, with the
    file and line) for anything wrong with it."""
    path = _relative(root, file)
    _check_definitions_only(path, read_python(file, path))
    function, line = _import(root, file)
    header = validate_header(PythonHeader, getattr(function, DECLARATION), path, "", line, line)
    program = Program(
        kind=ModelKind.PYTHON,
        entry=(function.__name__,),
        files=code_files(root, file),
        packages=tuple((name, _installed(path, line, name)) for name in header.packages),
    )
    model = ModelFile(
        path=path,
        header=header,
        header_text="",
        header_first_line=line,
        sql="",
        sql_first_line=line,
        fixed_line=line,
    )
    return model, program


def load_function(root: Path, path: str, program: Program) -> ModelFunction:
    """The function of a Python model's version, imported from the project's files, which must
    be the very code the version was built from. Raises ModelError otherwise."""
    file = root / path
    try:
        current = code_files(root, file)
        function, _ = _import(root, file)
    except ConfigError as error:
        raise ModelError(str(error)) from None
    require_unchanged(program.files, current)
    if function.__name__ != program.entry[0]:
        raise ModelError(f"{path}: the model function is no longer {program.entry[0]}")
    return function


def code_files(root: Path, file: Path) -> tuple[tuple[str, str], ...]:
    """(project-relative path, sha256) of the module and of every project module it imports,
    directly or not, sorted by path."""
    found: dict[Path, str] = {}
    pending = [file]
    while pending:
        current = pending.pop()
        if current in found:
            continue
        found[current] = digest(current)
        text = read_python(current, _relative(root, current))
        pending += [m for m in _imported(root, current, text) if m not in found]
    return tuple(sorted((_relative(root, f), sha) for f, sha in found.items()))


def _imported(root: Path, file: Path, text: str) -> Iterator[Path]:
    """The project files a module's imports name (standard and installed modules are not in
    the project folder, so they are not found)."""
    try:
        tree = _parsed(text, str(file))
    except SyntaxError as error:
        path = _relative(root, file)
        raise ConfigError(path, f"Python does not parse: {error.msg}", error.lineno) from None
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
        for name in names:
            base = root.joinpath(*name.split("."))
            for candidate in (base.with_suffix(".py"), base / "__init__.py"):
                if candidate.is_file():
                    yield candidate


def _check_definitions_only(path: str, text: str) -> None:
    try:
        tree = _parsed(text, path)
    except SyntaxError as error:
        raise ConfigError(path, f"Python does not parse: {error.msg}", error.lineno) from None
    for node in tree.body:
        # a bare constant (a docstring) does nothing either
        constant = isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
        if not constant and not isinstance(node, DEFINITIONS):
            raise ConfigError(
                path,
                "a model module holds only imports, definitions and assignments at its top "
                "level (loading the project imports it); move other work into the function",
                node.lineno,
            )


def _parsed(text: str, filename: str) -> ast.Module:
    """ast.parse, its other failures on odd text told as a SyntaxError: a NUL byte (a ValueError
    before Python 3.12), nesting past its parser's stack (MemoryError, RecursionError)."""
    try:
        return ast.parse(text, filename=filename)
    except (ValueError, MemoryError, RecursionError) as error:
        problem = SyntaxError(str(error) or "too deeply nested for the Python parser")
        problem.lineno = 1
        raise problem from None


def _import(root: Path, file: Path) -> tuple[ModelFunction, int]:
    """The one decorated function of a model module, and the line of its decorator. One import
    at a time: worker threads share the import path and the modules they clean up."""
    with _IMPORTING:
        return _import_alone(root, file)


def _import_alone(root: Path, file: Path) -> tuple[ModelFunction, int]:
    path = _relative(root, file)
    unique = hashlib.sha256(str(file.resolve()).encode()).hexdigest()[:12]
    name = f"_tidegate_model_{file.stem}_{unique}"
    spec = importlib.util.spec_from_file_location(name, file)
    if spec is None or spec.loader is None:
        raise ConfigError(path, "cannot be imported as a Python module", 1)
    module = importlib.util.module_from_spec(spec)
    with _project_on_path(root):
        # registered while it runs, as an import would: decorators such as @dataclass look
        # their module up
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
        except Exception as error:  # the user's module: any error is theirs to see, in one line
            raise ConfigError(
                path, f"importing failed: {type(error).__name__}: {error}", _line_in(file, error)
            ) from None
    return _decorated(path, module)


def _decorated(path: str, module: ModuleType) -> tuple[ModelFunction, int]:
    found = [
        value
        for value in vars(module).values()
        if callable(value)
        and hasattr(value, DECLARATION)
        and getattr(value, "__module__", None) == module.__name__
    ]
    if not found:
        raise ConfigError(path, "no function is decorated with @tidegate.model(...)", 1)
    lines = sorted((f.__code__.co_firstlineno, f) for f in found)
    if len(lines) > 1:
        raise ConfigError(
            path,
            f"one model per file: {lines[1][1].__name__} is a second decorated function",
            lines[1][0],
        )
    line, function = lines[0]
    return function, line


@contextmanager
def _project_on_path(root: Path) -> Iterator[None]:
    """The project folder first on the import path while a model module is imported; the
    project modules imported meanwhile are forgotten afterwards, so that the next import (of
    another project, or after an edit) reads the files again. The model keeps what it bound."""
    folder = str(root.resolve())
    before = set(sys.modules)
    sys.path.insert(0, folder)
    try:
        yield
    finally:
        sys.path.remove(folder)
        for name in set(sys.modules) - before:
            origin = getattr(sys.modules[name], "__file__", None) or ""
            if origin.startswith(folder):
                del sys.modules[name]


def _line_in(file: Path, error: BaseException) -> int | None:
    """The line of `file` where an error was raised (its innermost frame in that file)."""
    if isinstance(error, SyntaxError) and error.filename == str(file):
        return error.lineno
    frames = [f for f in traceback.extract_tb(error.__traceback__) if f.filename == str(file)]
    return frames[-1].lineno if frames else None


def _installed(path: str, line: int, package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        raise ConfigError(path, f"packages: {package!r} is not installed", line) from None


def _relative(root: Path, file: Path) -> str:
    return file.relative_to(root).as_posix()
