"""Secrets referenced from the environment never leave it: a password for the PostgreSQL
warehouse and ledger (password_env), a webhook token (token_env) and libpq's PGPASSWORD are
planted, every command runs (human and --json output, a failure with --debug included), and the
secret is looked for in everything tidegate wrote or said: stdout, stderr, every file in the
project (events, notices, the report), every row of the ledger and the warehouse's own tables,
every webhook body, and the UI's answers.

Models try to leak them too: a command whose job prints its environment to stderr and fails, a
job that reads the secret variables and writes them into its rows, its stderr and a file, a job
that knows the password some other way and prints it, and a Python model whose exception quotes
it. Their runs go through run, backfill, rerun, a distributed backfill and its worker."""

from __future__ import annotations

import json
import re
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from psycopg import sql

from tests.distributed.kit import Process, run_row, shared_project, worker
from tests.engines.postgres_kit import admin, fresh_database
from tests.faults.backfill_kit import running
from tests.faults.ledger import wait_until
from tests.kit import Hook, free_port, listening, run_process, tidegate
from tests.programs.kit import PYTHON_MODEL, add_command_model, add_python_model

pytestmark = pytest.mark.postgres

SECRET = "Planted-s3cret-7f3a91"
TOKEN = "Planted-t0ken-c44e02"
PGPASS = "Planted-pgp4ss-5d19be"
SECRETS = (SECRET, TOKEN, PGPASS)
MODEL = "daily_revenue"
RANGE = "2025-01-01..2025-01-03"
DAY = "2025-01-02"
# the variables a job might look for the secrets in
SECRET_VARIABLES = ("TG_PLANTED_PW", "TG_PLANTED_TOKEN", "PGPASSWORD")
# a command model whose job prints its whole environment, then each secret variable, and fails
ENV_PRINTER = "env_printer"
# a job that writes what it finds in the secret variables into its rows, stderr and a file
ENV_READER = "env_reader"
# a job that knows the password and the token some other way (a file of its own) and prints them
STDERR_SECRET = "stderr_secret"
# a Python model (it runs inside tidegate, with its environment) whose exception quotes them
PYTHON_SECRET = "python_secret"
FAILING = (ENV_PRINTER, STDERR_SECRET, PYTHON_SECRET)


@pytest.fixture
def dsn() -> Iterator[str]:
    with fresh_database() as found:
        yield found


def plant(project: Path, hook: Hook) -> None:
    config = project / "tidegate.toml"
    text = config.read_text()
    text = text.replace(
        'schema = "ledger"\n', 'schema = "ledger"\npassword_env = "TG_PLANTED_PW"\n'
    )
    text = text.replace(
        'engine = "postgres"\n', 'engine = "postgres"\npassword_env = "TG_PLANTED_PW"\n'
    )
    assert text.count("TG_PLANTED_PW") == 2, text
    text += (
        f'\n[[notify]]\nname = "finance_hook"\nkind = "http"\nurl = "{hook.url}"\n'
        'token_env = "TG_PLANTED_TOKEN"\nretry_base_seconds = 0.001\nretry_max_seconds = 0.001\n'
        '\n[[notify]]\nname = "lineage"\nkind = "file"\npath = "lineage.jsonl"\nlineage = true\n'
        '\n[[consumers]]\nname = "finance"\nmodel = "daily_revenue"\nnotify = "finance_hook"\n'
    )
    config.write_text(text)


def hidden(value: str) -> str:
    """`value` as a job's source may hold it without the text of the secret in any file."""
    return f"{value[::-1]!r}[::-1]"


def plant_models(project: Path) -> None:
    """The models that try to leak the secrets (see the module's docstring)."""
    printer = add_command_model(project, ENV_PRINTER, "")
    shell = (
        "env >&2; echo password=$TG_PLANTED_PW token=$TG_PLANTED_TOKEN pg=$PGPASSWORD >&2; exit 1"
    )
    text = re.sub(
        r"(?ms)^command = \[.*?\]$",
        f"command = {json.dumps(['sh', '-c', shell])}",
        printer.read_text(),
    )
    assert shell in text
    printer.write_text(text)
    add_command_model(
        project,
        ENV_READER,
        "import os\n"
        "import pyarrow as pa\n"
        "import pyarrow.parquet as pq\n"
        f"found = ' '.join(os.environ.get(n, '') for n in {SECRET_VARIABLES!r}).strip()\n"
        "compute()\n"
        "print(f'found: {found!r}', file=sys.stderr)\n"
        "Path('found.txt').write_text(found)\n"
        "if found:\n"
        "    out = OUTPUT / 'daily_revenue.parquet'\n"
        "    rows = pq.read_table(out)\n"
        "    status = pa.array([found + s for s in rows['status'].to_pylist()])\n"
        "    pq.write_table(rows.set_column(1, 'status', status), out)\n",
    )
    add_command_model(
        project,
        STDERR_SECRET,
        f"print('cannot log in with password=' + {hidden(SECRET)} + ' token=' + {hidden(TOKEN)}"
        f" + ' pg=' + {hidden(PGPASS)}, file=sys.stderr)\n"
        "sys.exit(3)\n",
    )
    body = '    orders = ctx.read("orders")'
    assert body in PYTHON_MODEL
    add_python_model(
        project,
        PYTHON_SECRET,
        PYTHON_MODEL.replace(
            body,
            "    import os\n\n"
            "    raise RuntimeError(\n"
            "        f\"cannot log in with password={os.environ['TG_PLANTED_PW']} \"\n"
            "        f\"token={os.environ['TG_PLANTED_TOKEN']} pg={os.environ['PGPASSWORD']}\"\n"
            "    )\n" + body,
        ),
    )


def every_row(dsn: str) -> str:
    """Every row of every table tidegate has in the database (ledger and warehouse)."""
    found = []
    with admin(dsn) as con:
        tables = con.execute(
            "SELECT table_schema, table_name FROM information_schema.tables "
            "WHERE table_schema NOT IN ('pg_catalog', 'information_schema')"
        ).fetchall()
        for schema, table in tables:
            query = sql.SQL("SELECT * FROM {}.{}").format(
                sql.Identifier(schema), sql.Identifier(table)
            )
            rows = con.execute(query).fetchall()
            found.append(f"{schema}.{table}: {rows!r}")
    return "\n".join(found)


def test_a_planted_secret_appears_in_no_output(
    dsn: str, tmp_path: Path, hook: Hook, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TG_PLANTED_PW", SECRET)
    monkeypatch.setenv("TG_PLANTED_TOKEN", TOKEN)
    # libpq's own password variable (the server trusts the tests: it is never asked for)
    monkeypatch.setenv("PGPASSWORD", PGPASS)
    hook.up.set()
    project = shared_project(tmp_path / "proj", dsn, rows_per_day=4)
    plant(project, hook)
    plant_models(project)
    said: list[str] = []

    def say(*args: str, code: int | None = 0) -> None:
        for extra in ((), ("--json",)):
            done = tidegate(*args, *extra, "--project", project)
            if code is not None:
                assert done.exit_code == code, (args, extra, done)
            said.extend([done.stdout, done.stderr])

    say("build")
    for model in (ENV_READER, *FAILING):
        deployed = tidegate("deploy", model, "--project", project)
        assert deployed.exit_code == 0, deployed.stderr
        said.extend([deployed.stdout, deployed.stderr])
    say("backfill", MODEL, "--partitions", RANGE)
    [(run_id,)] = [
        r for r in admin_rows(dsn, "SELECT run_id FROM ledger.runs ORDER BY run_id LIMIT 1")
    ]
    say("backfill", ENV_READER, "--partitions", RANGE)
    failed_runs = []
    for model in FAILING:
        say("run", model, "--partition", DAY, code=1)
        say("backfill", model, "--partitions", RANGE, code=1)
        failed_runs.append(newest_run(dsn, model))
        say("rerun", failed_runs[-1], "--partitions", DAY, code=None)
        say("show", "partition", model, DAY)
        say("status", model)
    for failed in failed_runs:
        say("show", "run", failed)
    # a distributed backfill: its worker runs the job and records the failure
    logs = tmp_path / "logs"
    logs.mkdir()
    processes = [
        Process(
            logs,
            "coordinator",
            "backfill",
            STDERR_SECRET,
            "--partitions",
            RANGE,
            "--distributed",
            "--project",
            project,
        )
    ]
    try:
        # a worker that finds nothing queued exits at once
        wait_until("the run is queued", lambda: run_row(dsn), 60)
        processes.append(worker(logs, "w1", project))
        assert processes[0].wait() == 1, processes[0].stderr()
        assert processes[1].wait() == 0, processes[1].stderr()
    finally:
        for process in processes:
            if process.popen.poll() is None:
                process.popen.kill()
                process.popen.wait()
    said.extend(text for p in processes for text in (p.stdout(), p.stderr()))
    failed_runs.append(newest_run(dsn, STDERR_SECRET))
    say("status")
    say("status", MODEL)
    say("show", "run", run_id)
    say("show", "partition", MODEL, "2025-01-02")
    say("history", MODEL)
    say("backfill", "list")
    say("validate", MODEL, "--partitions", RANGE)
    say("diff", MODEL, "--left", "v1", "--right", "v1", "--partitions", RANGE)
    say("rerun", run_id, "--partitions", RANGE, "--dry-run")
    say("taint", MODEL, "--partitions", "2025-01-02", "--reason", "planted")
    say("recover", MODEL, code=None)
    say("deliver", code=None)
    say("report", "--out", str(project / "report.html"))
    # --debug prints the traceback, in a real process
    debug = run_process(
        "backfill", MODEL, "--partitions", "2025-02-30", "--debug", "--project", project
    )
    assert "Traceback" in debug.stderr
    said.extend([debug.stdout, debug.stderr])

    port = free_port()
    with running("ui", "--port", str(port), "--project", project) as ui:
        wait_until("the UI listens", lambda: listening(port), 30)
        pages = ["/", "/api/view", "/api/status", f"/api/run?id={run_id}"]
        pages += [f"/api/run?id={failed}" for failed in failed_runs]
        pages += [f"/api/partition?model={model}&partition={DAY}" for model in FAILING]
        pages += [f"/api/status?model={model}" for model in FAILING]
        for path in pages:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as page:
                said.append(page.read().decode())
        ui.kill()
        said.extend(ui.stderr + ui.stdout)

    assert hook.received, "the webhook never heard of the run: the test would prove little"
    # the token went where it is meant to, and only there
    assert set(hook.authorizations) == {f"Bearer {TOKEN}"}
    files = {p: p.read_bytes() for p in project.rglob("*") if p.is_file()}
    assert project / "lineage.jsonl" in files and project / "report.html" in files
    everything = {
        "output": "\n".join(said),
        "webhook bodies": repr(hook.received),
        "database rows": every_row(dsn),
        **{str(p): b.decode("utf-8", "replace") for p, b in files.items()},
    }
    # the models did fail, and said why (what is checked for secrets is not empty)
    reasons = repr(admin_rows(dsn, "SELECT model, last_error FROM ledger.partitions"))
    for model in FAILING:
        assert f"('{model}', " in reasons, reasons
    assert "cannot log in with password=***" in reasons, reasons
    assert (project / "found.txt").read_text() == ""  # the job saw none of the variables
    for secret in SECRETS:
        leaks = [where for where, text in everything.items() if secret in text]
        assert leaks == [], f"{secret} leaked into {leaks}"


def newest_run(dsn: str, model: str) -> str:
    [(found,)] = admin_rows(
        dsn,
        f"SELECT run_id FROM ledger.attempts WHERE model = '{model}' ORDER BY run_id DESC LIMIT 1",
    )
    return str(found)


def admin_rows(dsn: str, query: str) -> list[tuple[object, ...]]:
    with admin(dsn) as con:
        return [tuple(r) for r in con.execute(query).fetchall()]
