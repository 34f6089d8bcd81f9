"""Destinations: append to a file, or POST to an HTTP endpoint. Standard library only."""

from __future__ import annotations

import http.client
import os
import urllib.error
import urllib.request
from collections.abc import Mapping
from pathlib import Path

from tidegate import __version__
from tidegate.notify.config import NotifyTarget
from tidegate.notify.outbox import DeliveryFailed

REASON_CHARS = 200


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    # urllib would re-send the Authorization header to wherever a redirect points; a redirect
    # is a failure instead (anything but 2xx is)
    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None


_OPENER = urllib.request.build_opener(_NoRedirect)


class Dispatcher:
    """Sends one payload to one target. Relative file paths are taken from `root` (the project);
    tokens are read from `env` at each send, so none is held in configuration or the outbox."""

    def __init__(self, root: Path, env: Mapping[str, str] | None = None) -> None:
        self.root = root
        self.env = os.environ if env is None else env

    def __call__(self, target: NotifyTarget, payload: str) -> None:
        if target.kind == "file":
            assert target.path is not None  # NotifyTarget checks kind file has a path
            append_line(self.root / target.path, payload)
        else:
            assert target.url is not None  # NotifyTarget checks kind http has a url
            token = None
            if target.token_env is not None:
                token = self.env.get(target.token_env)
                if not token:
                    raise DeliveryFailed(f"environment variable {target.token_env} is not set")
            post_json(target.url, payload, token, target.timeout_seconds)


def append_line(path: Path, payload: str) -> None:
    """Append `payload` and a newline, durably: fsync before the row is marked delivered."""
    data = (payload + "\n").encode()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            while data:
                data = data[os.write(fd, data) :]
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as error:
        raise DeliveryFailed(f"cannot append to {path}: {error.strerror or error}") from None


def post_json(url: str, payload: str, token: str | None, timeout: float) -> None:
    """POST `payload`; 2xx is delivered, anything else raises DeliveryFailed. The URL is not in
    the message (it may carry a query credential) and the token is redacted from what the server
    said."""
    headers = {"Content-Type": "application/json", "User-Agent": f"tidegate/{__version__}"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    request = urllib.request.Request(url, data=payload.encode(), headers=headers, method="POST")
    try:
        with _OPENER.open(request, timeout=timeout):
            return
    except urllib.error.HTTPError as error:
        error.close()
        reason = f"HTTP {error.code} {error.reason}"
    except urllib.error.URLError as error:
        reason = f"cannot reach the endpoint: {error.reason}"
    except (OSError, http.client.HTTPException) as error:
        reason = f"cannot reach the endpoint: {type(error).__name__}: {error}"
    raise DeliveryFailed(_one_line(reason, token))


def _one_line(text: str, secret: str | None) -> str:
    if secret:
        text = text.replace(secret, "***")
    return " ".join(text.split())[:REASON_CHARS]
