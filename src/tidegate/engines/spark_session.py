"""The SparkSession of a Spark warehouse: one per process, built from `[warehouse]` (a master URL
or a Spark Connect URL, and extra settings), shared by every engine handle of the process."""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from pyspark.sql import SparkSession

from tidegate.domain.errors import UsageError

# What tidegate's statements rely on; a user's `conf` cannot change them. Timestamps are read
# and bucketed in UTC like the other engines'; ANSI mode makes a bad cast an error, not a NULL.
REQUIRED = {
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.ansi.enabled": "true",
}
# Defaults a user's `conf` may override: Parquet timestamps that other readers understand, and
# for a local master no web UI and few shuffle partitions (the data of one process is small).
DEFAULTS = {"spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS"}
# A driver in this process (not over Spark Connect): no progress bars in tidegate's output
DRIVER_DEFAULTS = {"spark.ui.showConsoleProgress": "false"}
# The JVM's own logging: errors only, so that a command's output stays tidegate's.
LOG_SETTINGS = "spark_log4j2.properties"
LOCAL_DEFAULTS = {"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "4"}


@dataclass(frozen=True)
class SessionSettings:
    """Where Spark runs: a master URL (`local[2]`, `spark://…`, `yarn`) or a Spark Connect
    server (`sc://host:port`)."""

    master: str | None = "local[2]"
    remote: str | None = None
    conf: Mapping[str, str] = field(default_factory=dict)

    @property
    def label(self) -> str:
        return str(self.remote or self.master)


# The process's sessions by where they run: every engine handle of the process shares one.
_SESSIONS: dict[str, Any] = {}


def spark_session(settings: SessionSettings) -> Any:
    """The process's session, started on first use; raises UsageError (one line) when Spark
    cannot start (no Java, an unreachable cluster or Connect server)."""
    session = _SESSIONS.get(settings.label)
    if session is None:
        session = _SESSIONS[settings.label] = _build(settings)
    return session


def _build(settings: SessionSettings) -> Any:
    builder = SparkSession.builder.appName("tidegate")
    if settings.remote is not None:
        builder = builder.remote(settings.remote)
    else:
        builder = builder.master(str(settings.master))
    local = settings.remote is None and str(settings.master).startswith("local")
    logging = resources.files("tidegate.engines") / LOG_SETTINGS
    driver = {
        **DRIVER_DEFAULTS,
        "spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile={logging}",
    }
    options = {
        **DEFAULTS,
        **(driver if settings.remote is None else {}),
        **(LOCAL_DEFAULTS if local else {}),
        **settings.conf,
        **REQUIRED,
    }
    for key, value in options.items():
        builder = builder.config(key, value)
    with warnings.catch_warnings():
        # PySpark warns about the pandas it finds at import; tidegate uses no pandas
        warnings.simplefilter("ignore", FutureWarning)
        session = _start(builder, settings)
    # a session made earlier in the process keeps its own settings: these are runtime ones
    for key, value in REQUIRED.items():
        session.conf.set(key, value)
    return session


def _start(builder: Any, settings: SessionSettings) -> Any:
    try:
        return builder.getOrCreate()
    except Exception as error:
        raise UsageError(
            f"cannot start Spark ({settings.label}): {_first_line(error)}; "
            "a local master needs Java 17 or newer (java on PATH or JAVA_HOME)"
        ) from None


def is_remote(session: Any) -> bool:
    """A Spark Connect session (no SparkContext: jobs are tagged, not grouped)."""
    return type(session).__module__.startswith("pyspark.sql.connect")


def tag_jobs(session: Any, tag: str) -> None:
    """Mark the jobs this thread starts from now on, so that `cancel_jobs` finds them."""
    if is_remote(session):
        session.clearTags()
        session.addTag(tag)
    else:
        session.sparkContext.setJobGroup(tag, "tidegate", interruptOnCancel=True)


def cancel_jobs(session: Any, tag: str) -> None:
    if is_remote(session):
        session.interruptTag(tag)
    else:
        session.sparkContext.cancelJobGroup(tag)


def _first_line(error: Exception) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__
