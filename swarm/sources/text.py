"""One rule for a text, whatever its source (a file, a line of stdin): no NUL byte
(binary data, which a model cannot read and a gateway may refuse), UTF-8."""

from __future__ import annotations

from swarm.errors import InputError


def decode_text(data: bytes, where: str, *, noun: str = "file", offset: int = 0) -> str:
    """``data`` as text; InputError naming ``where`` for NUL bytes or bytes that are not
    UTF-8 (``byte N``: its position in the source, ``offset`` being where ``data`` starts)."""
    if b"\0" in data:
        raise InputError(f"{where}: binary {noun} (contains NUL bytes)")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{where}: not UTF-8 text (byte {offset + exc.start})") from None
