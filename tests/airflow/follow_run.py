"""Run by the Airflow venv's interpreter: TidegateRunTrigger across a triggerer restart. A first
trigger polls the run for `--before` seconds and is cancelled (the triggerer stops); a second is
built from what the first serialized (the class path and keyword arguments the metadata DB keeps)
and polls to the end. Prints two JSON lines after MARK: what the first fired (null: nothing, the
run was running), then the second's event."""

from __future__ import annotations

import asyncio
import importlib
import json
import sys
from typing import Any

from tidegate.airflow.trigger import TidegateRunTrigger

MARK = "followed:"  # the lines of ours, among Airflow's log lines on stdout


async def first_event(trigger: Any) -> dict[str, Any]:
    async for event in trigger.run():
        return dict(event.payload)
    raise AssertionError("the trigger ended without an event")


def main(run_id: str, project: str, before: float, program: list[str]) -> None:
    first = TidegateRunTrigger(run_id, project, program, poll_interval=0.2)
    try:
        early = asyncio.run(asyncio.wait_for(first_event(first), before))
    except TimeoutError:
        early = None
    classpath, kwargs = first.serialize()
    print(MARK, json.dumps({"early": early, "classpath": classpath}), flush=True)
    module, name = classpath.rsplit(".", 1)
    again = getattr(importlib.import_module(module), name)(**json.loads(json.dumps(kwargs)))
    print(MARK, json.dumps({"event": asyncio.run(first_event(again))}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4:])
