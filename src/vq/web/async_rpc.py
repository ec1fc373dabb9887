"""One daemon RPC call on the event loop (``asyncio.open_unix_connection``).

The same line-JSON framing as :mod:`vq.client` (:mod:`vq.protocol.framing`), without a
thread: a long-poll (``wait_change``) holds only a socket while it waits, so hundreds of
concurrent waiters cost no worker threads in the web process. Errors: no daemon
answering → :class:`~vq.errors.DaemonNotRunning`; a broken or silent connection →
:class:`~vq.errors.ProtocolError`; an error answer → the typed error the daemon sent.
Messages never name the socket's path.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from pathlib import Path
from typing import Any

from vq.errors import DaemonNotRunning, ProtocolError
from vq.protocol.framing import encode_message, result_of

__all__ = ["acall"]

#: Answers larger than this are refused (a status view is a few kB).
MAX_ANSWER_BYTES = 64 * 1024 * 1024

_ids = itertools.count(1)


async def acall(socket_path: Path, method: str, params: dict[str, Any], timeout: float) -> Any:
    """Send one request and await its answer for at most ``timeout`` seconds."""
    try:
        reader, writer = await asyncio.open_unix_connection(
            str(socket_path), limit=MAX_ANSWER_BYTES
        )
    except (FileNotFoundError, ConnectionRefusedError, NotADirectoryError) as exc:
        raise DaemonNotRunning("no vq daemon is answering") from exc
    try:
        writer.write(encode_message({"id": next(_ids), "method": method, "params": params}))
        await writer.drain()
        line = await asyncio.wait_for(reader.readline(), timeout)
    except (OSError, ValueError, TimeoutError) as exc:
        raise ProtocolError(
            f"the daemon did not answer {method!r} ({type(exc).__name__})",
            hint="retry; see daemon.log in the state root",
        ) from exc
    finally:
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()
    return result_of(line, method)
