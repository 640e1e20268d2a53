"""A stand-in ``certifi`` package whose CA bundle also trusts the emulator's development CA.

Why it exists: azure-servicebus's AMQP client verifies TLS against ``certifi.where()`` only (its
``connection_verify`` defaults to that file, and pyamqp loads just that file into its SSL context), so
``SSL_CERT_FILE`` and ``REQUESTS_CA_BUNDLE``, which cover the admin client, do not reach it: code that
connects to a fully qualified namespace without passing ``connection_verify`` (the SDK's samples) cannot
trust the emulator through the environment alone. A directory holding this package, put first on
``PYTHONPATH``, makes ``certifi.where()`` name a bundle of certifi's own roots plus the emulator's CA, for
that shell only, without touching any installed package. Removing it from ``PYTHONPATH`` undoes it.

The package mirrors certifi's whole public API (``where``, ``contents``, ``certifi.core``,
``python -m certifi``) and reports the installed certifi's version."""

from __future__ import annotations

from pathlib import Path

DIRECTORY_NAME = "python-trust"

_INIT = '''"""Written by Busbar's emulator (emulator/arm/certifi_trust.py): certifi's CA bundle plus
the emulator's development CA ({ca_file}), for clients that verify TLS against certifi.where()
only, as azure-servicebus's AMQP client does. Used while its directory is first on PYTHONPATH."""

from certifi.core import contents, where

__all__ = ["contents", "where"]
__version__ = {version!r}
'''

_CORE = '''"""certifi.where() / certifi.contents(): the bundle beside this file."""

import os


def where() -> str:
    return os.path.join(os.path.dirname(__file__), "cacert.pem")


def contents() -> str:
    with open(where(), encoding="ascii") as handle:
        return handle.read()
'''

_MAIN = """import argparse

from certifi import contents, where

parser = argparse.ArgumentParser()
parser.add_argument("-c", "--contents", action="store_true")
args = parser.parse_args()
print(contents() if args.contents else where())
"""


def write_certifi_trust(directory: Path, ca_file: Path) -> Path:
    """Write the stand-in package under ``directory / DIRECTORY_NAME`` (rewritten at every start, so it
    holds the current CA) and return that directory, the ``PYTHONPATH`` entry."""
    try:
        import certifi

        roots, version = certifi.contents(), str(certifi.__version__)
    except ImportError:  # pragma: no cover - certifi comes with requests, a dependency of the SDKs
        roots, version = "", "0"
    root = directory / DIRECTORY_NAME
    package = root / "certifi"
    package.mkdir(parents=True, exist_ok=True)
    bundle = roots.rstrip("\n") + "\n\n# Busbar emulator development CA\n" + ca_file.read_text("ascii")
    (package / "cacert.pem").write_text(bundle, encoding="ascii")
    (package / "__init__.py").write_text(_INIT.format(ca_file=ca_file, version=version), encoding="utf-8")
    (package / "core.py").write_text(_CORE, encoding="utf-8")
    (package / "__main__.py").write_text(_MAIN, encoding="utf-8")
    return root
