from __future__ import annotations

import json

import pytest

from tests.chaos.harness import KILLS, SUMMARY, summarize


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    # on the controller only: xdist workers append their chains to KILLS and end first
    if hasattr(terminalreporter.config, "workerinput") or not KILLS.exists():
        return
    done = summarize()
    KILLS.unlink()
    SUMMARY.write_text(json.dumps(done, indent=2) + "\n")
    terminalreporter.write_line(
        f"chaos: {done['kills']} kill points survived in {done['chains']} chains; "
        f"by command {done['by_command']}; by point {done['by_point']} (in {SUMMARY})"
    )
