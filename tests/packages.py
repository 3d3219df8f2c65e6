"""Tiny real distributions written on the spot (wheels and an sdist), for uv tests that must
not depend on what an index holds today."""

from __future__ import annotations

import base64
import hashlib
import io
import tarfile
import zipfile
from pathlib import Path


def _record_line(path: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{path},sha256={digest},{len(data)}"


def make_wheel(folder: Path, name: str, version: str, files: dict[str, str], *,
               requires: tuple[str, ...] = (), scripts: dict[str, str] | None = None) -> Path:
    """A pure-Python wheel; ``scripts`` maps console-script names to ``module:function``."""
    stem = f"{name.replace('-', '_')}-{version}"
    dist_info = f"{stem}.dist-info"
    metadata = "".join([f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
                        *(f"Requires-Dist: {r}\n" for r in requires)])
    contents = {**files, f"{dist_info}/METADATA": metadata,
                f"{dist_info}/WHEEL": "Wheel-Version: 1.0\nGenerator: tests\n"
                                      "Root-Is-Purelib: true\nTag: py3-none-any\n"}
    if scripts:
        contents[f"{dist_info}/entry_points.txt"] = "[console_scripts]\n" + "".join(
            f"{k} = {v}\n" for k, v in scripts.items())
    record = [_record_line(p, t.encode()) for p, t in contents.items()]
    record.append(f"{dist_info}/RECORD,,")
    contents[f"{dist_info}/RECORD"] = "\n".join(record) + "\n"
    path = folder / f"{stem}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as zf:
        for member, text in contents.items():
            zf.writestr(member, text)
    return path


def make_sdist(folder: Path, name: str, version: str, files: dict[str, str]) -> Path:
    """A legacy setuptools sdist (``setup.py`` among ``files``), as TE and flash-attn ship."""
    base = f"{name}-{version}"
    contents = {**files, "PKG-INFO": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"}
    path = folder / f"{base}.tar.gz"
    with tarfile.open(path, "w:gz") as tar:
        for member, text in contents.items():
            data = text.encode()
            info = tarfile.TarInfo(f"{base}/{member}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path
