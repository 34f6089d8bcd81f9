"""Start-up time of tidegate commands against a bare interpreter, median of N runs."""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RUNS = 7


def median_seconds(command: list[str]) -> float:
    samples = []
    for _ in range(RUNS):
        began = time.perf_counter()
        subprocess.run(command, check=True, capture_output=True)
        samples.append(time.perf_counter() - began)
    return statistics.median(samples)


def main() -> None:
    tidegate = [sys.executable, "-m", "tidegate"]
    with tempfile.TemporaryDirectory() as folder:
        project = Path(folder) / "p"
        subprocess.run([*tidegate, "init", str(project)], check=True, capture_output=True)
        bare = median_seconds([sys.executable, "-c", "pass"])
        print(f"python -c pass        {bare * 1000:7.1f} ms")
        for name, args in (
            ("tidegate --help", ["--help"]),
            ("tidegate status", ["status", "--project", str(project)]),
        ):
            seconds = median_seconds([*tidegate, *args])
            print(f"{name:<21} {seconds * 1000:7.1f} ms  ({seconds / bare:.1f}x bare python)")


if __name__ == "__main__":
    main()
