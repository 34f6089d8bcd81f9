"""The package as a user installs it: `python -m build` makes a wheel and an sdist, and the wheel,
installed into a fresh virtual environment with no source tree on the path, runs the demo."""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

import tidegate

REPO = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.packaging, pytest.mark.slow]


def run(*command: str | Path, cwd: Path, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        [str(part) for part in command],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert done.returncode == 0, f"{command}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout


def test_the_wheel_installs_into_a_fresh_environment_and_runs_the_demo(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    run(sys.executable, "-m", "build", "--outdir", dist, REPO, cwd=tmp_path)
    wheels = list(dist.glob("tidegate-*.whl"))
    sdists = list(dist.glob("tidegate-*.tar.gz"))
    assert len(wheels) == 1 and len(sdists) == 1, sorted(dist.iterdir())
    assert wheels[0].name.startswith(f"tidegate-{tidegate.__version__}-")

    with zipfile.ZipFile(wheels[0]) as wheel:
        names = set(wheel.namelist())
    # what the package reads at run time ships in the wheel; the tests do not
    assert "tidegate/schemas/status.v1.json" in names
    assert "tidegate/state/migrations/0001_initial.sql" in names
    assert any(name.startswith("tidegate/examples/orders/models/") for name in names)
    assert not any(name.startswith("tests/") for name in names)
    with tarfile.open(sdists[0]) as sdist:
        assert any(name.endswith("/src/tidegate/cli.py") for name in sdist.getnames())

    venv = tmp_path / "venv"
    run(sys.executable, "-m", "venv", venv, cwd=tmp_path)
    python = venv / "bin" / "python"
    run(python, "-m", "pip", "install", "--quiet", wheels[0], cwd=tmp_path)

    # no source tree on the path: a folder of its own, and no PYTHONPATH
    away = tmp_path / "elsewhere"
    away.mkdir()
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env['PATH']}"
    location = run(python, "-c", "import tidegate; print(tidegate.__file__)", cwd=away, env=env)
    assert Path(location.strip()).is_relative_to(venv), location

    version = run(venv / "bin" / "tidegate", "--version", cwd=away, env=env)
    assert version.startswith(f"tidegate {tidegate.__version__} (DuckDB "), version
    assert "sqlglot " in version and "not installed" not in version, version

    demo = run(venv / "bin" / "tidegate", "demo", "--rows-per-day", "50", cwd=away, env=env)
    assert "done in" in demo, demo
    assert not any(away.iterdir()), "the demo leaves nothing behind without --keep"
