"""The rules about paths that need no I/O and no import beyond the standard library (the command line checks
``--output`` with them before anything heavy loads): the one place, with the chooser in
``imgrec.storage.storage``, that reads a path's scheme. A local path has none; a URL's (``gs://``, ``ram://``)
picks its storage.
"""
from __future__ import annotations

import os
import posixpath

GCS_SCHEME = 'gs://'


def scheme_key(path: str) -> str:
    """What of ``path`` picks its storage (its scheme), so that one storage serves every path of a scheme."""
    scheme, found, _ = path.partition('://')
    return f'{scheme}://' if found else ''


def is_relative(path: str) -> bool:
    """Whether ``path`` is a relative local path (a manifest's lines are relative to the manifest)."""
    return not scheme_key(path) and not os.path.isabs(path)


def folder_of(path: str) -> str:
    """The folder ``path`` lies in (a local one made absolute)."""
    return posixpath.dirname(path) if scheme_key(path) else os.path.dirname(os.path.abspath(path))


def is_inside(folder: str, root: str) -> bool:
    """Whether ``folder`` is ``root`` or below it, on a folder boundary: local paths compared with symlinks
    and relative parts resolved, URLs by prefix; paths of two schemes never are."""
    if scheme_key(folder) != scheme_key(root):
        return False
    if scheme_key(folder):
        return (folder.rstrip('/') + '/').startswith(root.rstrip('/') + '/')
    folder, root = os.path.realpath(folder), os.path.realpath(root)
    return os.path.commonpath([folder, root]) == root


def relative_name(root: str, path: str) -> str:
    """``path`` below ``root`` (as a listing of ``root`` names it), relative to it, with '/' separators."""
    return path[len(root.rstrip('/')) + 1:].rstrip('/').replace(os.sep, '/')


def is_local_root(path: str) -> bool:
    """Whether ``path`` is this machine's root folder, which no build may write into."""
    return not scheme_key(path) and os.path.abspath(path) == '/'
