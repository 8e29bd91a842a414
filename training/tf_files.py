"""Reads and writes files named by a local path or a URL (``gs://``, TensorFlow's ``ram://``).

Local paths use the standard library, so the command line can check a local dataset before TensorFlow
is imported (which costs seconds and prints log lines); URLs go through ``tf.io.gfile``.
"""
import os


def _is_url(path):
    return '://' in path


def _gfile():
    import tensorflow as tf  # only for URLs: local checks must not pay for TensorFlow
    return tf.io.gfile


def exists(path):
    return _gfile().exists(path) if _is_url(path) else os.path.exists(path)


def size(path):
    """Bytes in the file at ``path``, or None if there is no such file."""
    if not _is_url(path):
        return os.path.getsize(path) if os.path.isfile(path) else None
    gfile = _gfile()
    return gfile.stat(path).length if gfile.exists(path) else None


def open_file(path, mode='r'):
    return _gfile().GFile(path, mode) if _is_url(path) else open(path, mode)


def read_text(path):
    with open_file(path) as f:
        return f.read()


def write_text(path, text):
    directory = path.rpartition('/')[0]
    if _is_url(path):
        _gfile().makedirs(directory)
    elif directory:
        os.makedirs(directory, exist_ok=True)
    with open_file(path, 'w') as f:
        f.write(text)
