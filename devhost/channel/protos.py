"""FunctionRpc's protobuf classes, compiled from the vendored ``.proto`` files on first use.

The classes are built here rather than checked in: they must match the protobuf runtime installed beside
the Service Bus binding extension (which pins its own range), and grpcio-tools, which that extension
requires, is always there to build them. The generated modules import each other as top-level ``shared``
and ``identity`` packages; as in the Python worker (which rewrites them the same way), those imports are
made package-relative, because a top-level ``shared`` would collide with the app's own package of that
name (Busbar's, for one).

:func:`load` returns a namespace shaped like ``azure_functions_worker.protos``: every message and enum of
``FunctionRpc.proto`` and the nullable wrappers, by name.
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib
import os
import re
import shutil
import sys
import tempfile
import threading
from functools import cache
from pathlib import Path
from types import ModuleType, SimpleNamespace

PROTO_DIR = Path(__file__).resolve().parent / "proto"
PROTO_FILES = ("FunctionRpc.proto", "identity/ClaimsIdentityRpc.proto", "shared/NullableTypes.proto")
GENERATED_PACKAGE = "devhost.channel._generated"
GENERATED_DIR = Path(__file__).resolve().parent / "_generated"
_STAMP = "source.sha256"
_TOP_LEVEL_IMPORT = re.compile(r"^from (identity|shared) import ", re.MULTILINE)
_lock = threading.Lock()


class ProtoBuildError(RuntimeError):
    """grpcio-tools could not compile the vendored protocol files."""


def _fingerprint() -> str:
    """The sources and the toolchain the generated modules were built from."""
    from google.protobuf import __version__ as protobuf_version  # type: ignore[import-untyped]

    digest = hashlib.sha256(protobuf_version.encode())
    for name in PROTO_FILES:
        digest.update(name.encode() + b"\0" + (PROTO_DIR / name).read_bytes())
    return digest.hexdigest()


def _compile(target: Path) -> None:
    from grpc_tools import protoc

    well_known = Path(protoc.__file__).resolve().parent / "_proto"
    args = ["protoc", f"-I{PROTO_DIR}", f"-I{well_known}", f"--python_out={target}"]
    if protoc.main([*args, *(str(PROTO_DIR / name) for name in PROTO_FILES)]) != 0:
        raise ProtoBuildError(f"grpc_tools.protoc failed on {', '.join(PROTO_FILES)} in {PROTO_DIR}")
    for package in (target, target / "identity", target / "shared"):
        (package / "__init__.py").touch()
        for module in package.glob("*_pb2.py"):
            source = module.read_text()
            module.write_text(_TOP_LEVEL_IMPORT.sub(rf"from {GENERATED_PACKAGE}.\1 import ", source))


def _ensure_generated() -> None:
    # Processes started together (test workers, a host and its worker) take turns: the first builds, the
    # others find the stamp. Built beside the target and renamed into place.
    with open(GENERATED_DIR.parent / ".generated.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        fingerprint = _fingerprint()
        stamp = GENERATED_DIR / _STAMP
        if stamp.is_file() and stamp.read_text() == fingerprint:
            return
        staging = Path(tempfile.mkdtemp(prefix="_generated-", dir=GENERATED_DIR.parent))
        try:
            _compile(staging)
            (staging / _STAMP).write_text(fingerprint)
            shutil.rmtree(GENERATED_DIR, ignore_errors=True)
            os.replace(staging, GENERATED_DIR)
        finally:
            shutil.rmtree(staging, ignore_errors=True)


@cache
def load() -> SimpleNamespace:
    """The FunctionRpc classes (``StreamingMessage``, ``InvocationRequest``, ``TypedData``, ``RpcHttp``,
    ``NullableString``...), building them first if the vendored sources or protobuf changed."""
    with _lock:
        _ensure_generated()
    modules: list[ModuleType] = [
        importlib.import_module(f"{GENERATED_PACKAGE}.FunctionRpc_pb2"),
        importlib.import_module(f"{GENERATED_PACKAGE}.shared.NullableTypes_pb2"),
    ]
    names = {
        name: getattr(module, name)
        for module in modules
        for name in dir(module)
        if not name.startswith("_") and name[0].isupper()
    }
    return SimpleNamespace(**names)


if __name__ == "__main__":  # python -m devhost.channel.protos: build them now (make install does)
    print(f"{len(vars(load()))} FunctionRpc types in {GENERATED_DIR}", file=sys.stderr)
