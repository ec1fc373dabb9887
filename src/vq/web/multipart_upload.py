"""The file of a ``multipart/form-data`` upload, streamed (``curl -F file=@inputs.tar.gz``).

:class:`FilePartStream` is fed the request body chunk by chunk and hands back only the
bytes of its one file part (the part whose ``Content-Disposition`` has a ``filename``),
so a form upload is stored exactly like a raw-body one: in chunks, never whole in
memory, under the same caps. Other (non-file) fields are ignored, up to a small bound.

Refusals (:class:`~vq.web.errors.ApiError`, 400 ``invalid-upload``): no boundary, a
malformed body, no file part, or more than one file part.
"""

from __future__ import annotations

from python_multipart.exceptions import MultipartParseError
from python_multipart.multipart import MultipartParser, parse_options_header

from vq.web.errors import ApiError

__all__ = ["FilePartStream", "is_multipart"]

#: Bytes of non-file form fields tolerated (they are read and dropped).
MAX_FIELD_BYTES = 64 * 1024


def is_multipart(content_type: str) -> bool:
    return content_type.split(";", 1)[0].strip().lower() == "multipart/form-data"


def _refuse(message: str) -> ApiError:
    return ApiError(
        400,
        "invalid-upload",
        message,
        hint="send one file: curl -F file=@inputs.tar.gz ... (or the raw tar.gz body)",
    )


class FilePartStream:
    """Feed body chunks with :meth:`feed`; call :meth:`finish` after the last one."""

    def __init__(self, content_type: str) -> None:
        _, options = parse_options_header(content_type)
        boundary = options.get(b"boundary")
        if not boundary:
            raise _refuse("the multipart upload has no boundary")
        self._out = bytearray()
        self._header_field = bytearray()
        self._header_value = bytearray()
        self._disposition = b""
        self._in_file = False
        self._files = 0
        self._field_bytes = 0
        self._parser = MultipartParser(
            boundary,
            callbacks={
                "on_part_begin": self._part_begin,
                "on_part_data": self._part_data,
                "on_header_field": self._on_field,
                "on_header_value": self._on_value,
                "on_header_end": self._header_end,
                "on_headers_finished": self._headers_finished,
            },
        )

    # --- parser callbacks ----------------------------------------------------------------
    def _part_begin(self) -> None:
        self._disposition = b""
        self._in_file = False

    def _on_field(self, data: bytes, start: int, end: int) -> None:
        self._header_field += data[start:end]

    def _on_value(self, data: bytes, start: int, end: int) -> None:
        self._header_value += data[start:end]

    def _header_end(self) -> None:
        if bytes(self._header_field).lower() == b"content-disposition":
            self._disposition = bytes(self._header_value)
        self._header_field.clear()
        self._header_value.clear()

    def _headers_finished(self) -> None:
        _, options = parse_options_header(self._disposition)
        self._in_file = b"filename" in options
        if self._in_file:
            self._files += 1
            if self._files > 1:
                raise _refuse("the upload carries more than one file; send one tar.gz")

    def _part_data(self, data: bytes, start: int, end: int) -> None:
        if self._in_file:
            self._out += data[start:end]
            return
        self._field_bytes += end - start
        if self._field_bytes > MAX_FIELD_BYTES:
            raise _refuse("the upload's form fields are too large; send only the file")

    # --- use -----------------------------------------------------------------------------
    def feed(self, chunk: bytes) -> bytes:
        """The file bytes found in ``chunk`` (possibly none)."""
        try:
            self._parser.write(chunk)
        except MultipartParseError:
            raise _refuse("the multipart body is malformed") from None
        data = bytes(self._out)
        self._out.clear()
        return data

    def finish(self) -> None:
        """Check the body ended with exactly one file part."""
        try:
            self._parser.finalize()
        except MultipartParseError:
            raise _refuse("the multipart body is malformed") from None
        if self._files == 0:
            raise _refuse("the multipart upload has no file part")
