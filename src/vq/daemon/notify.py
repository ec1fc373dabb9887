"""Terminal webhook notifications (§6.2): one fire-and-forget POST per ended job.

Contract:

* :func:`resolve_webhook_url` turns ``[notifications] webhook_url`` into the URL when the
  daemon starts: a literal ``http(s)://`` URL, ``env:NAME`` (read from the daemon's
  environment), ``file:/abs/path`` (a regular file that group and others cannot access,
  i.e. mode 0600 or stricter; its stripped content is the URL) or ``credential:NAME``
  (that file in systemd's ``$CREDENTIALS_DIRECTORY``), see :mod:`vq.config.secrets`. Anything
  unusable raises :class:`~vq.errors.ConfigError` (exit 9), with ``chmod 600 PATH`` as
  the hint for a file that is too open. The value is copied once: a config change needs
  a daemon restart.
* The resolved URL is a secret (incoming-webhook URLs embed their token). It is never
  logged, printed or put in an error message; logs name only ``scheme://host``.
* :meth:`Notifier.notify` runs on the daemon's main loop, once per job that has fully
  ended (``Daemon.ended_listeners``). It never blocks and never raises: it applies the
  ``notify_on_states`` filter (empty = no filter), builds the payload and puts it on a
  bounded queue; when the queue is full the notification is dropped with a warning.
* One daemon thread delivers, in order: ``POST`` of JSON with :mod:`urllib.request` and a
  :data:`POST_TIMEOUT_SECONDS` socket timeout. URL errors, timeouts, HTTP status >= 400
  and any other exception are logged at warning level and dropped: no retry, no buffer
  on disk, no delivery record. The terminal JobSpec is written before ``notify`` is
  called, so a failing or slow receiver can never block or roll it back.
* :meth:`Notifier.stop` (daemon shutdown) lets the thread finish what is queued but waits
  at most :data:`STOP_WAIT_SECONDS`; anything still undelivered then is abandoned.

Payload (for Slack, Discord and Mattermost incoming webhooks and custom receivers)::

    {"text": SUMMARY, "content": SUMMARY,
     "job": {"id", "name", "state", "exit_code", "failure_reason", "submitted_at",
             "started_at", "finished_at", "command", "host"}}

``SUMMARY`` is one line, e.g. ``vq job 3f9c0a1b2c3d (scf) FAILED: exited with code 3 on
node7``; a 128+N exit code names its signal (``killed by SIGKILL (exit code 137)``).
"""

from __future__ import annotations

import json
import logging
import queue
import socket
import threading
import urllib.error
import urllib.request
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import urlsplit

from vq import __version__
from vq.config.notifications import NotificationSettings
from vq.config.secrets import parse_reference, read_secret
from vq.domain.lifecycle import describe_exit
from vq.domain.spec import JobSpec
from vq.domain.states import JobState
from vq.errors import ConfigError

__all__ = [
    "MAX_PENDING",
    "POST_TIMEOUT_SECONDS",
    "STOP_WAIT_SECONDS",
    "Notifier",
    "display_url",
    "resolve_webhook_url",
    "summary_line",
    "webhook_payload",
]

log = logging.getLogger("vq.daemon.notify")

#: Socket timeout of one POST (connect, send, each read).
POST_TIMEOUT_SECONDS = 5.0
#: Notifications waiting for the delivery thread before new ones are dropped.
MAX_PENDING = 256
#: The longest :meth:`Notifier.stop` waits for the delivery thread.
STOP_WAIT_SECONDS = 1.0
#: Longest ``failure_reason`` text put into the one-line summary.
_REASON_CHARS = 300

_KEY = "notifications.webhook_url"

#: One queued notification: (job id, payload); None tells the thread to stop.
_Item = tuple[str, dict[str, Any]] | None


def display_url(url: str) -> str:
    """The loggable form of a webhook URL: ``scheme://host`` (no port, path or token)."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.hostname or '?'}"


def _check_url(url: str, origin: str) -> str:
    parts = urlsplit(url)
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        raise ConfigError(
            f"{_KEY}: the value of {origin} is not an http(s):// URL",
            hint="store only the webhook URL, e.g. https://hooks.example.org/…",
        )
    return url


def resolve_webhook_url(settings: NotificationSettings, env: Mapping[str, str]) -> str:
    """The webhook URL to POST to, or ``""`` when notifications are disabled.

    A reference (``env:``, ``file:``, ``credential:``) is read through
    :mod:`vq.config.secrets`. Raises :class:`ConfigError` for an unset variable, an unreadable
    or too-open file, or a value that is not an http(s) URL. Messages name the
    reference, never the value.
    """
    ref_text = settings.webhook_url
    if not ref_text:
        return ""
    try:
        ref = parse_reference(ref_text)
        if ref is None:
            return _check_url(ref_text, "the configured URL")
        value = read_secret(ref, env)
    except ConfigError as exc:
        raise ConfigError(f"{_KEY}: {exc.message}", hint=exc.hint) from None
    return _check_url(value, ref.text)


def _iso(value: Any) -> str | None:
    return value.isoformat() if value is not None else None


def summary_line(spec: JobSpec, host: str) -> str:
    """One line: ``vq job ID (NAME) STATE: what happened on HOST``."""
    head = f"vq job {spec.id}" + (f" ({spec.job_name})" if spec.job_name else "")
    words = " ".join((spec.failure_reason or "").split())
    if len(words) > _REASON_CHARS:
        words = words[: _REASON_CHARS - 1] + "…"
    if spec.exit_code not in (None, 0):
        exit_words = describe_exit(int(spec.exit_code))
        if exit_words not in words:
            words = f"{words}; {exit_words}" if words else exit_words
    if spec.state is JobState.COMPLETED and not words:
        return f"{head} COMPLETED on {host}"
    return f"{head} {spec.state.value}" + (f": {words}" if words else "") + f" on {host}"


def webhook_payload(spec: JobSpec, host: str) -> dict[str, Any]:
    """The JSON body POSTed for one terminal job (derived from the JobSpec alone)."""
    summary = summary_line(spec, host)
    return {
        "text": summary,
        "content": summary,
        "job": {
            "id": spec.id,
            "name": spec.job_name,
            "state": spec.state.value,
            "exit_code": spec.exit_code,
            "failure_reason": spec.failure_reason,
            "submitted_at": _iso(spec.submitted_at),
            "started_at": _iso(spec.started_at),
            "finished_at": _iso(spec.finished_at),
            "command": list(spec.command),
            "host": host,
        },
    }


class Notifier:
    """Owns the bounded queue and the one delivery thread (started on first use)."""

    def __init__(
        self,
        url: str,
        states: Iterable[str] = (),
        *,
        host: str | None = None,
        timeout: float = POST_TIMEOUT_SECONDS,
        max_pending: int = MAX_PENDING,
    ) -> None:
        self._url = url
        self.states = frozenset(state.lower() for state in states)
        self.host = host or socket.gethostname()
        self.timeout = timeout
        self.target = display_url(url) if url else None
        self._queue: queue.Queue[_Item] = queue.Queue(maxsize=max_pending)
        self._thread: threading.Thread | None = None
        self._closed = False
        self._opener = urllib.request.build_opener()
        if url:
            log.info(
                "webhook notifications to %s for %s",
                self.target,
                ", ".join(sorted(self.states)) if self.states else "every terminal state",
            )

    @classmethod
    def from_settings(cls, settings: NotificationSettings, env: Mapping[str, str]) -> Notifier:
        """Resolve the URL now (daemon start). Raises :class:`ConfigError`."""
        return cls(resolve_webhook_url(settings, env), settings.notify_on_states)

    @property
    def enabled(self) -> bool:
        return bool(self._url)

    def wanted(self, spec: JobSpec) -> bool:
        """Whether ``spec`` passes the state filter (terminal states only)."""
        if not spec.state.is_terminal:
            return False
        return not self.states or spec.state.value.lower() in self.states

    def notify(self, spec: JobSpec) -> None:
        """Queue the notification for one ended job. Never blocks, never raises."""
        if not self._url or self._closed or not self.wanted(spec):
            return
        try:
            item = (spec.id, webhook_payload(spec, self.host))
            self._ensure_thread()
            self._queue.put_nowait(item)
        except queue.Full:
            log.warning(
                "webhook queue full (%d waiting): dropped the notification for job %s",
                self._queue.maxsize,
                spec.id,
            )
        except Exception as exc:
            log.warning("webhook notification for job %s not queued: %r", spec.id, exc)

    def stop(self, wait: float = STOP_WAIT_SECONDS) -> None:
        """Stop accepting work; give the thread up to ``wait`` seconds to drain."""
        self._closed = True
        thread = self._thread
        if thread is None:
            return
        try:
            self._queue.put_nowait(None)
            queued_stop = 1
        except queue.Full:
            queued_stop = 0
        thread.join(wait)
        if thread.is_alive():  # one POST in flight, the rest still queued
            log.warning(
                "webhook: abandoning %d undelivered notification(s) at shutdown",
                self._queue.qsize() - queued_stop + 1,
            )

    # --- the delivery thread ---------------------------------------------------------
    def _ensure_thread(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="vq-notify", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            job_id, payload = item
            try:
                self._deliver(job_id, payload)
            except Exception as exc:  # the thread must survive anything
                self._failed(job_id, f"{type(exc).__name__}: {exc}")

    def _failed(self, job_id: str, reason: str) -> None:
        log.warning(
            "webhook to %s failed for job %s: %s", self.target, job_id, self._redact(reason)
        )

    def _redact(self, text: str) -> str:
        parts = urlsplit(self._url)
        for secret in (self._url, parts.path, parts.query, parts.netloc):
            if secret and len(secret) > 1:
                text = text.replace(secret, "…")
        return text

    def _deliver(self, job_id: str, payload: dict[str, Any]) -> None:
        request = urllib.request.Request(  # noqa: S310 - the scheme is checked at start
            self._url,
            data=json.dumps(payload).encode(),
            headers={"Content-Type": "application/json", "User-Agent": f"vq/{__version__}"},
            method="POST",
        )
        try:
            with self._opener.open(request, timeout=self.timeout) as response:
                status = int(response.status)
        except urllib.error.HTTPError as exc:
            status = exc.code
            exc.close()
        except urllib.error.URLError as exc:
            self._failed(job_id, str(exc.reason))
            return
        except Exception as exc:  # timeouts, resets, malformed answers...
            self._failed(job_id, f"{type(exc).__name__}: {exc}")
            return
        if status >= 400:
            log.warning("webhook to %s for job %s answered HTTP %d", self.target, job_id, status)
        else:
            log.debug("webhook to %s for job %s answered HTTP %d", self.target, job_id, status)
