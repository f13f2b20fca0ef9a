"""A program to check, from whatever the user has: a ``.pte`` path, its bytes, an
``ExecutorchProgramManager``, an edge program (lowered as ``to_executorch()`` does)
or an ``ExportedProgram`` (``to_edge`` first). The flatbuffer is read by exir's own
deserializer; this module checks what it can before and turns its failures into
``ProgramFileError`` naming the file."""

from __future__ import annotations

import os
import struct

from ..errors import ProgramFileError

#: bytes 4..8 of every ExecuTorch program (the flatbuffer file identifier)
FILE_IDENTIFIER_PREFIX = b"ET"
#: the optional extended header right after the identifier
EXTENDED_HEADER_MAGIC = b"eh00"


def program_bytes(program) -> tuple[str, bytes]:
    """(label for messages, the serialized program) for any source ``needs`` takes."""
    if isinstance(program, (str, os.PathLike)):
        path = os.fspath(program)
        if not os.path.isfile(path):
            raise ProgramFileError(f"program: no file {path!r}")
        with open(path, "rb") as f:
            return path, f.read()
    if isinstance(program, (bytes, bytearray, memoryview)):
        return "<bytes>", bytes(program)
    buffer = getattr(program, "buffer", None)
    if isinstance(buffer, (bytes, bytearray)):  # ExecutorchProgramManager
        return f"<{type(program).__name__}>", bytes(buffer)
    if hasattr(program, "to_executorch"):  # EdgeProgramManager
        return f"<{type(program).__name__}>", bytes(program.to_executorch().buffer)
    if hasattr(program, "graph_module") and hasattr(program, "graph_signature"):  # ExportedProgram
        from executorch.exir import to_edge

        return f"<{type(program).__name__}>", bytes(to_edge(program).to_executorch().buffer)
    raise TypeError(
        f"program: expected a .pte path, its bytes, an ExecutorchProgramManager, an edge program or an "
        f"ExportedProgram, got {type(program).__name__}"
    )


def _check_header(label: str, data: bytes) -> None:
    if len(data) < 8:
        raise ProgramFileError(f"{label}: {len(data)} bytes is too short for an ExecuTorch program (truncated or empty)")
    identifier = data[4:8]
    if not identifier.startswith(FILE_IDENTIFIER_PREFIX):
        raise ProgramFileError(f"{label}: not an ExecuTorch program (file identifier {identifier!r}, expected b'ET..')")
    if data[8:12] == EXTENDED_HEADER_MAGIC and len(data) >= 32:
        _magic, _length, program_size, segment_base, segment_size = struct.unpack_from("<4sIQQQ", data, 8)
        if program_size > len(data):
            raise ProgramFileError(f"{label}: truncated: the header gives a {program_size}-byte program, the file has {len(data)} bytes")
        if segment_base and segment_base + segment_size > len(data):
            raise ProgramFileError(
                f"{label}: truncated: the header gives segments up to byte {segment_base + segment_size}, the file has {len(data)} bytes"
            )


def read_program(program):
    """(label, exir ``Program`` dataclass) of `program`; raises ProgramFileError with
    the label when it cannot be read."""
    label, data = program_bytes(program)
    _check_header(label, data)
    from executorch.exir._serialize._program import deserialize_pte_binary

    try:
        return label, deserialize_pte_binary(data).program
    except Exception as exc:  # exir's reader raises struct.error, ValueError, IndexError ...
        raise ProgramFileError(f"{label}: cannot be read as an ExecuTorch program ({type(exc).__name__}: {exc})") from exc
