"""Download one release's source archive from the package index, checked against its sha256.

`pip download --no-binary :all:` builds the archive's metadata to resolve it, and with that
flag builds its build backend from source too (for jsonschema: hatchling and its plugins,
about a minute and a half here). Only the file is wanted, so it is fetched as the index lists
it. The index is pip's (``PIP_INDEX_URL``), PyPI's by default.

    python requirements/sdist.py jsonschema 4.26.0 DEST_DIR
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import urllib.request
from pathlib import Path


def main(name: str, version: str, dest: str) -> None:
    index = os.environ.get("PIP_INDEX_URL", "https://pypi.org/simple").rstrip("/")
    accept = {"Accept": "application/vnd.pypi.simple.v1+json"}
    request = urllib.request.Request(f"{index}/{name}/", headers=accept)
    with urllib.request.urlopen(request, timeout=60) as answer:
        files = json.load(answer)["files"]
    wanted = {f"{name}-{version}.tar.gz".lower(), f"{name.replace('-', '_')}-{version}.tar.gz"}
    found = [f for f in files if f["filename"].lower() in wanted]
    if not found:
        sys.exit(f"{index}/{name}/: no source archive of {name} {version}")
    with urllib.request.urlopen(found[0]["url"], timeout=120) as answer:
        data = answer.read()
    expected = found[0]["hashes"].get("sha256")
    if expected is None or hashlib.sha256(data).hexdigest() != expected:
        sys.exit(f"{found[0]['url']}: its sha256 is not the index's")
    Path(dest).mkdir(parents=True, exist_ok=True)
    (Path(dest) / found[0]["filename"]).write_bytes(data)


if __name__ == "__main__":
    main(*sys.argv[1:])
