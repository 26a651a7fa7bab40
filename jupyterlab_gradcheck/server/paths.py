"""API paths: the `work/lab1.ipynb` a client names, turned into a file inside the server root.

A request may only reach files under the root the server was started in. A path with `..`,
an absolute path, or one that a symbolic link carries out of the root is refused before any
file is opened, so nothing outside the root is read or written.
"""

from __future__ import annotations

import os
import re
from pathlib import Path, PurePosixPath

from .errors import BadPath, NotFound, PathForbidden

_DRIVE = re.compile(r"^[A-Za-z]:")
#: The longest file or folder name, in bytes, the common filesystems accept.
NAME_MAX = 255
#: The longest whole path, in bytes, the system calls accept (Linux's PATH_MAX).
PATH_MAX = 4096


def resolve(
    root: str | os.PathLike, api_path, *, field: str, must_exist: bool = True, suffix: str | None = None
) -> Path:
    """The real file an API path names, checked to lie inside `root`."""
    if not isinstance(api_path, str) or not api_path.strip():
        raise BadPath(
            "{name} must be a path relative to the server root, like work/lab1.ipynb", name=field, field=field
        )
    if "\x00" in api_path:
        raise BadPath("{name} contains a NUL character", name=field, field=field)
    text = api_path.replace("\\", "/")
    if text.startswith("/") or _DRIVE.match(text):
        raise BadPath(
            "{name} {path!r} is absolute: give a path relative to the server root",
            name=field,
            path=api_path,
            field=field,
        )
    parts = PurePosixPath(text).parts
    if ".." in parts:
        raise BadPath(
            "{name} {path!r} contains '..': paths may not leave the server root", name=field, path=api_path, field=field
        )
    for part in parts:  # the filesystem would answer ENAMETOOLONG; the request is bad input
        if len(part.encode("utf-8", "surrogatepass")) > NAME_MAX:
            raise BadPath(
                "{name} has a path component of {size} bytes; the limit is {limit}",
                name=field,
                size=len(part.encode("utf-8", "surrogatepass")),
                limit=NAME_MAX,
                field=field,
            )
    if suffix is not None and not text.endswith(suffix):
        raise BadPath("{name} {path!r} does not end in {suffix}", name=field, path=api_path, suffix=suffix, field=field)
    real_root = Path(os.path.realpath(root))
    size = len(str(real_root.joinpath(*parts)).encode("utf-8", "surrogatepass"))
    if size >= PATH_MAX:  # the system calls would answer ENAMETOOLONG as well
        raise BadPath(
            "{name} is too long: {size} bytes under the server root; the limit is {limit}",
            field=field,
            name=field,
            size=size - len(str(real_root).encode("utf-8", "surrogatepass")) - 1,
            limit=PATH_MAX - 1 - len(str(real_root).encode("utf-8", "surrogatepass")),
        )
    target = ensure_inside(real_root, real_root.joinpath(*parts), field=field, shown=api_path)
    if must_exist and not target.exists():
        raise NotFound("{name} {path!r} does not exist under the server root", name=field, path=api_path, field=field)
    return target


def ensure_inside(root: str | os.PathLike, path: str | os.PathLike, *, field: str, shown: str | None = None) -> Path:
    """`path` with its links resolved; PathForbidden when that leaves `root`."""
    real_root = Path(os.path.realpath(root))
    real = Path(os.path.realpath(path))
    if real != real_root and real_root not in real.parents:
        raise PathForbidden(
            "{name} {path!r} leads outside the server root through a symbolic link",
            name=field,
            path=shown or to_api_path(real_root, path),
            field=field,
        )
    return real


def to_api_path(root: str | os.PathLike, path: str | os.PathLike) -> str:
    """The API path (relative, with `/`) of a file inside `root`."""
    relative = os.path.relpath(os.path.abspath(path), os.path.realpath(root))
    return PurePosixPath(*Path(relative).parts).as_posix()


def without_root(value, root: str | os.PathLike):
    """`value` (JSON-shaped) with the server root's absolute prefix taken out of every string.

    A report made from files under the root names them by absolute path; a client only ever
    sees API paths, and learns nothing of where the server keeps its files.
    """
    prefix = os.path.realpath(root).rstrip(os.sep) + os.sep
    if isinstance(value, str):
        return value.replace(prefix, "")
    if isinstance(value, list):
        return [without_root(item, root) for item in value]
    if isinstance(value, dict):
        return {key: without_root(item, root) for key, item in value.items()}
    return value
