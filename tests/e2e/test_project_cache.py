"""The project cache: what loading a project made, reused while its files are unchanged, never
while one of them (or the code a program runs) changed."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.kit import result_document
from tests.programs.kit import PYTHON_MODEL, add_python_model
from tidegate.project import cache, declarations
from tidegate.project.cache import INDEX_FILE, inputs_of, read_view
from tidegate.project.loader import load_project


def status(project: Path) -> dict[str, dict[str, object]]:
    return {m["model"]: m for m in result_document(project, "status")["models"]}


def parsed_files(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The model files loading reads from here on, by name."""
    read: list[str] = []
    original = declarations.read_model

    def counting(root: Path, file: Path) -> object:
        read.append(file.name)
        return original(root, file)

    monkeypatch.setattr(declarations, "read_model", counting)
    return read


def test_unchanged_models_are_taken_from_the_cache(
    undeployed_project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = load_project(undeployed_project)
    read = parsed_files(monkeypatch)
    again = load_project(undeployed_project)
    assert read == []
    assert again.models == first.models and again.order == first.order
    monthly = undeployed_project / "models" / "monthly_revenue.sql"
    monthly.write_text(monthly.read_text().replace('start = "2025-01"', 'start = "2025-02"'))
    changed = load_project(undeployed_project)
    assert read == ["monthly_revenue.sql"]
    assert changed.models["monthly_revenue"].start == "2025-02"
    assert changed.models["daily_revenue"] == first.models["daily_revenue"]


def test_a_new_model_or_a_changed_project_file_reads_every_model_again(
    undeployed_project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    load_project(undeployed_project)
    read = parsed_files(monkeypatch)
    models = undeployed_project / "models"
    (models / "daily_copy.sql").write_text((models / "daily_revenue.sql").read_text())
    assert "daily_copy" in load_project(undeployed_project).models
    assert sorted(read) == sorted(f.name for f in models.iterdir())
    read.clear()
    settings = undeployed_project / "tidegate.toml"
    settings.write_text(settings.read_text() + "\n# a comment changes the file\n")
    load_project(undeployed_project)
    assert sorted(read) == sorted(f.name for f in models.iterdir())


def test_status_sees_models_added_changed_and_removed(undeployed_project: Path) -> None:
    assert set(status(undeployed_project)) == {
        "daily_revenue",
        "monthly_revenue",
        "revenue_report",
    }
    assert read_view(undeployed_project) is not None  # status kept the view
    models = undeployed_project / "models"
    (models / "daily_copy.sql").write_text((models / "daily_revenue.sql").read_text())
    (models / "revenue_report.sql").unlink()
    monthly = models / "monthly_revenue.sql"
    daily = monthly.read_text().replace('grain = "month"', 'grain = "day"')
    monthly.write_text(daily.replace('start = "2025-01"', 'start = "2025-01-01"'))
    shown = status(undeployed_project)
    assert set(shown) == {"daily_revenue", "monthly_revenue", "daily_copy"}
    assert shown["monthly_revenue"]["grain"] == "day"


def test_a_change_of_the_code_a_program_runs_is_seen(undeployed_project: Path) -> None:
    (undeployed_project / "shared.py").write_text('GRAIN = "day"\nSTART = "2025-01-01"\n')
    source = PYTHON_MODEL.replace("import tidegate\n", "import shared\nimport tidegate\n", 1)
    source = source.replace('grain="day"', "grain=shared.GRAIN").replace(
        'start="2025-01-01"', "start=shared.START"
    )
    add_python_model(undeployed_project, "daily_python", source)
    assert status(undeployed_project)["daily_python"]["grain"] == "day"
    (undeployed_project / "shared.py").write_text('GRAIN = "month"\nSTART = "2025-01"\n')
    assert read_view(undeployed_project) is None
    assert status(undeployed_project)["daily_python"]["grain"] == "month"


def test_a_foreign_or_broken_cache_is_ignored_and_written_anew(
    undeployed_project: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    kept = undeployed_project / INDEX_FILE
    load_project(undeployed_project)
    good = json.loads(kept.read_text())
    for broken in (
        "not json",
        json.dumps([1, 2]),
        json.dumps({**good, "format": cache.FORMAT + 1}),
        json.dumps({**good, "release": "made by other code"}),
        json.dumps({**good, "models": {"daily_revenue": {"spec": "{}"}}}),
    ):
        kept.write_text(broken)
        assert read_view(undeployed_project) is None
        assert set(status(undeployed_project)) == {
            "daily_revenue",
            "monthly_revenue",
            "revenue_report",
        }
        assert fields(json.loads(kept.read_text())) == fields(good)


def fields(index: dict[str, object]) -> dict[str, object]:
    """A cache's index without the moments its digests were taken."""
    return {key: value for key, value in index.items() if key != "files"}


def test_a_file_rewritten_at_once_with_as_many_bytes_is_read_again(
    undeployed_project: Path,
) -> None:
    model = undeployed_project / "models" / "monthly_revenue.sql"
    first = inputs_of(undeployed_project)
    assert first is not None
    # the same size, and quite possibly the same modification time (the clock's resolution)
    model.write_text(model.read_text().replace('start = "2025-01"', 'start = "2025-02"'))
    again = inputs_of(undeployed_project, {"files": first.stats})
    assert again is not None
    assert again.files["models/monthly_revenue.sql"] != first.files["models/monthly_revenue.sql"]
    assert again.files["models/daily_revenue.sql"] == first.files["models/daily_revenue.sql"]


def test_files_unchanged_since_well_before_their_digests_are_not_read_again(
    undeployed_project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    now = time.time_ns()
    # the digests taken long after the files last changed
    monkeypatch.setattr(cache.time, "time_ns", lambda: now + 10 * cache.RACY_NS)
    first = inputs_of(undeployed_project)
    assert first is not None
    read: list[str] = []
    digest = cache.file_digest

    def reading(path: Path) -> str:
        read.append(path.name)
        return digest(path)

    monkeypatch.setattr(cache, "file_digest", reading)
    again = inputs_of(undeployed_project, {"files": first.stats})
    assert again is not None and again.files == first.files and read == []
    model = undeployed_project / "models" / "daily_revenue.sql"
    model.write_text(model.read_text() + "\n")
    changed = inputs_of(undeployed_project, {"files": first.stats})
    assert read == ["daily_revenue.sql"]
    assert changed is not None and changed.digest != first.digest


def test_a_project_that_cannot_keep_its_cache_still_answers(undeployed_project: Path) -> None:
    # a file where the cache's folder would be: nothing can be written there
    (undeployed_project / INDEX_FILE.parent).parent.mkdir(parents=True, exist_ok=True)
    (undeployed_project / INDEX_FILE.parent).write_text("not a folder")
    assert "daily_revenue" in status(undeployed_project)
    assert read_view(undeployed_project) is None
    assert (undeployed_project / INDEX_FILE.parent).read_text() == "not a folder"
