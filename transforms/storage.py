"""Whole-file reads and writes through Beam's FileSystems, so local paths and gs:// behave alike."""
import os

from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems


def read_bytes(path):
    with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as stream:
        return stream.read()


def write_bytes(path, data):
    """Writes ``data`` to ``path``, creating local parent folders as needed."""
    if FileSystems.get_scheme(path) is None:
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with FileSystems.create(path, compression_type=CompressionTypes.UNCOMPRESSED) as stream:
        stream.write(data)


def replace(path, data):
    """Writes ``data`` under a temporary name, then renames it over ``path``.

    Readers see the old content or the new, never a partial file (a local rename is atomic and a
    GCS object appears whole).
    """
    temporary = path + '.tmp'
    write_bytes(temporary, data)
    FileSystems.rename([temporary], [path])
