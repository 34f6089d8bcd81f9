"""The folders a stream keeps: its checkpoints and savepoints (the declared location), each
version's code as it was built, the output the job commits, and output withdrawn by a rollback.

A version runs its own code: the job's module and the project modules it imports are copied
when the version is built (their digests are the version's), and the job is started from that
copy. A rollback to an older version runs the older code, whatever the project folder holds now.
"""

from __future__ import annotations

import csv
import json
import shutil
from collections.abc import Iterator, Sequence
from pathlib import Path

from tidegate.domain.errors import ModelError
from tidegate.domain.model import Version
from tidegate.domain.stream import StreamRecord, StreamSpec, StreamState
from tidegate.project.code_files import digest

MANIFEST = "tidegate-output.json"
CODE_FOLDER = Path(".tidegate") / "code"


def plain_path(uri: str) -> str:
    """`file:/a/b` (as Flink names a savepoint or checkpoint) as a plain path."""
    return uri.removeprefix("file://").removeprefix("file:")


def located(root: Path, path: str) -> Path:
    """A declared place: relative to the project, or absolute."""
    found = Path(path).expanduser()
    return found if found.is_absolute() else root / found


def checkpoints_of(root: Path, spec: StreamSpec) -> Path:
    return located(root, spec.checkpoints)


def output_of(root: Path, spec: StreamSpec) -> Path:
    return located(root, spec.output.path)


def savepoints_of(root: Path, spec: StreamSpec) -> Path:
    return checkpoints_of(root, spec) / "savepoints"


def shadow_of(root: Path, version: Version) -> Path:
    """Where validating `version` writes its output and checkpoints."""
    assert version.spec.stream is not None
    return checkpoints_of(root, version.spec.stream) / "shadow" / version.version_id


def withdrawn_of(root: Path, spec: StreamSpec) -> Path:
    """Where output files a rollback takes back are kept (outside the output folder)."""
    return checkpoints_of(root, spec) / "withdrawn"


def module_of(job_file: str) -> str:
    """`jobs/orders.py` as the dotted name the job's workers import."""
    return job_file.removesuffix(".py").replace("/", ".")


def code_of(root: Path, version: Version) -> Path:
    """The folder holding `version`'s code as it was built: copied from the project on first
    use while the project's files are still that code; ModelError when they are not and no
    copy was kept."""
    assert version.spec.program is not None
    folder = root.resolve() / CODE_FOLDER / version.version_id
    files = version.spec.program.files
    if all(_holds(folder / path, sha) for path, sha in files):
        return folder
    for path, sha in files:
        if not _holds(root / path, sha):
            raise ModelError(
                f"{version.model} v{version.seq}'s code is gone: {path} changed since it was "
                "built and no copy was kept (build it again)"
            )
    for path, _ in files:
        (folder / path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(root / path, folder / path)
    return folder


def _holds(file: Path, sha: str) -> bool:
    return file.is_file() and digest(file) == sha


def committed_output(output: Path) -> list[str]:
    """The files the job's sink committed, relative to the output folder: in-progress and
    pending files are hidden (their names start with a dot) and are not output yet."""
    if not output.is_dir():
        return []
    return sorted(
        path.relative_to(output).as_posix()
        for path in output.rglob("*")
        if path.is_file()
        and not any(part.startswith(".") for part in path.relative_to(output).parts)
    )


def keep_manifest(savepoint: str, files: Sequence[str]) -> None:
    """Record beside a savepoint the output committed when it was taken."""
    (Path(savepoint) / MANIFEST).write_text(json.dumps(list(files)))


def manifest_of(savepoint: str) -> list[str] | None:
    found = Path(savepoint) / MANIFEST
    return json.loads(found.read_text()) if found.is_file() else None


def newest_checkpoint(checkpoints: Path, job_id: str) -> str | None:
    """The newest completed checkpoint a job left (a `chk-N` folder holding `_metadata`)."""
    folder = checkpoints / job_id
    done = [
        (int(path.name.removeprefix("chk-")), path)
        for path in folder.glob("chk-*")
        if path.name.removeprefix("chk-").isdigit() and (path / "_metadata").is_file()
    ]
    return str(max(done)[1]) if done else None


def withdraw(output: Path, files: Sequence[str], into: Path) -> None:
    """Move output files out of the output folder, keeping their relative paths."""
    for name in files:
        target = into / name
        target.parent.mkdir(parents=True, exist_ok=True)
        (output / name).replace(target)


def count_rows(output: Path, files: Sequence[str]) -> int:
    """The rows (non-empty lines) of CSV output files."""
    total = 0
    for name in files:
        with (output / name).open("rb") as handle:
            total += sum(1 for line in handle if line.strip())
    return total


def committed_since(output: Path, since: float) -> list[str]:
    """Committed output files last written at or after `since` (epoch seconds)."""
    return [name for name in committed_output(output) if (output / name).stat().st_mtime >= since]


def csv_rows(output: Path, files: Sequence[str], width: int) -> Iterator[list[str]]:
    """The CSV rows of output files that hold `width` fields (others are another layout's)."""
    for name in files:
        with (output / name).open(newline="") as handle:
            for row in csv.reader(handle):
                if len(row) == width:
                    yield row


def restore_point(record: StreamRecord | None, checkpoints: Path) -> str | None:
    """Where a stream resumes: after a stop, the savepoint it took; otherwise (its job or its
    supervisor died) the last job's newest checkpoint in `checkpoints`, else the newest one it
    recorded, else the savepoint it was started from."""
    if record is None:
        return None
    if record.state is StreamState.STOPPED:
        return record.savepoint
    newest = newest_checkpoint(checkpoints, record.job_id) if record.job_id else None
    return newest or record.checkpoint or record.savepoint or record.restored_from
