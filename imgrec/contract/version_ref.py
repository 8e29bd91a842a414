"""The one reader of ``OUT[/VERSION]``: which version folder a path names, and its ``dataset.json``.

Every tool (the builder, refresh, verify-dataset, dataset-report, training) resolves a version here,
so the same mistake gets the same one-line message everywhere. The caller passes the I/O in
(``read_text(path)``, returning str or bytes, and ``exists(path)``), which keeps this module free of any filesystem library:
local disks, ``gs://`` through Beam and ``gs://`` through TensorFlow are the caller's business.

The rules (docs/versions.md):
- a path holding ``dataset.json`` is a version folder; else its ``LATEST`` names one;
- LATEST must name a plain folder directly inside the output: not empty, not ``.``/``..``, no ``/`` or
  ``\\``, no line break or other control character, not ``LATEST``, not a staging name. A LATEST that
  points elsewhere (``../other/v9``) is refused, never followed;
- the version folder must hold ``dataset.json`` (a version without it was never published, or is being
  pruned: docs/publication.md);
- a version is never named ``_leases`` (the output's lease folder, in any case);
- ``dataset.json`` must be of a ``format_version`` this code reads; it is handed on as the current format
  has its fields (``metadata.current``).

Each version published into a local output also gets a semantic version, for TFDS
(``tfds.load(NAME, data_dir=OUT)`` picks the highest): one patch above the highest given in the output
before, ``1.0.0`` for the first.
"""
import json
import re
import typing
import unicodedata

from imgrec.contract import layout, metadata

# Unicode categories a folder name may not hold: control characters (line breaks, tabs, NUL...) and
# the line and paragraph separators that text tools also split lines on.
_FORBIDDEN_CATEGORIES = ('Cc', 'Zl', 'Zp')


FIRST_SEMANTIC_VERSION = '1.0.0'
_SEMANTIC_VERSION = re.compile(r'^(\d+)\.(\d+)\.(\d+)$')


def is_semantic_version(name):
    """Whether ``name`` is a semantic version as ``next_semantic_version`` writes them (``1.0.3``)."""
    return bool(_SEMANTIC_VERSION.match(name))


def next_semantic_version(taken):
    """The semantic version after the highest of ``taken`` (folder names; others are skipped), or
    ``FIRST_SEMANTIC_VERSION`` when none of them is one."""
    numbers = [tuple(int(part) for part in match.groups())
               for match in map(_SEMANTIC_VERSION.match, taken) if match]
    if not numbers:
        return FIRST_SEMANTIC_VERSION
    major, minor, patch = max(numbers)
    return f'{major}.{minor}.{patch + 1}'
# The I/O a caller hands in: read a file's text (str or bytes), and whether a path exists.
ReadText = typing.Callable[[str], typing.Union[str, bytes]]
Exists = typing.Callable[[str], bool]


class VersionError(ValueError):
    """A path or LATEST that names no readable version; ``str()`` is the one-line message."""


class FormatVersionError(VersionError):
    """A ``dataset.json`` of a format this code does not read (a build with ``--full`` may replace it)."""


class VersionRef(typing.NamedTuple):
    output: str      # the folder that holds the version (and LATEST)
    name: str        # the version's folder name
    directory: str   # the version folder
    document: dict   # its dataset.json
    via_latest: bool  # found through LATEST (not named by the caller)


def version_name_problem(name: str) -> str | None:
    """Why ``name`` cannot be a version's folder name (a phrase to follow the name), or None."""
    if not name:
        return 'is empty'
    if any(unicodedata.category(char) in _FORBIDDEN_CATEGORIES for char in name):
        return 'holds a line break or another control character'
    if name in ('.', '..') or '/' in name or '\\' in name:
        return r'is not a plain folder name (it may not be . or .. or hold / or \)'
    if name.upper() == layout.LATEST:  # any case: on a case-insensitive disk 'latest' is the LATEST file
        return f'is the name of the {layout.LATEST} file, not a version'
    if layout.is_staging_name(name):
        return 'is a staging name (the folder of a build that did not publish it), not a version'
    if name.lower() == layout.LEASES_DIR:  # any case, as LATEST
        return 'is the name of the lease folder, not a version'
    return None


def check_version_name(name: str, what: str = 'version') -> None:
    """Raises VersionError(``<what> '<name>' <why>``) unless ``name`` can be a version's folder name."""
    problem = version_name_problem(name)
    if problem:
        raise VersionError(f'{what} {name!r} {problem}')


def latest_name(content: str | bytes, latest_path: str) -> str:
    """The version name in the LATEST file ``latest_path`` holding ``content`` (str or bytes).

    Surrounding whitespace (the trailing line break) is not part of the name.
    """
    name = _text(content, latest_path).strip()
    if not name:
        raise VersionError(f'{latest_path} is empty: it should name a published version')
    problem = version_name_problem(name)
    if problem:
        raise VersionError(f'{latest_path} names {name!r}, which {problem}')
    return name


def parse_document(content: str | bytes, path: str) -> dict:
    """The ``dataset.json`` document in ``content`` (read from ``path``), if this code reads its format, with
    its fields as the current format has them."""
    try:
        document = json.loads(_text(content, path))
    except ValueError as error:
        raise VersionError(f'{path} is not a valid {layout.DATASET_JSON}: {error}') from None
    if not isinstance(document, dict):
        raise VersionError(f'{path} is not a valid {layout.DATASET_JSON}: it holds no JSON object')
    found = document.get('format_version')
    if found not in metadata.READABLE_FORMATS:
        raise FormatVersionError(f'{path} has format_version {found!r}, but this code reads '
                                 f'{metadata.readable_formats()} (use the release that wrote it, or rebuild with '
                                 f'build-dataset --full)')
    return metadata.current(document)


def _text(content, path):
    """``content`` as str; bytes are decoded as UTF-8."""
    if isinstance(content, bytes):
        try:
            return content.decode('utf-8')
        except UnicodeDecodeError:
            raise VersionError(f'{path} is not UTF-8 text') from None
    return content


def _split(path):
    """(parent, last part) of a path or URL; the parent of a bare name is '.'."""
    parent, _, name = path.rpartition('/')
    return parent or '.', name


def unreadable(path, error):
    """The VersionError for a LATEST or dataset.json that exists but cannot be read (``error``: an OSError)."""
    if isinstance(error, IsADirectoryError):
        return VersionError(f'{path} is a folder, not a file')
    return VersionError(f'{path} cannot be read: {getattr(error, "strerror", None) or error}')


def _read(path, read_text):
    try:
        return read_text(path)
    except OSError as error:  # a folder where a file should be, no permission...
        raise unreadable(path, error) from None
    except UnicodeDecodeError:  # a reader that decodes as it reads
        raise VersionError(f'{path} is not UTF-8 text') from None


def _loaded(output, name, directory, read_text, via_latest):
    path = layout.join(directory, layout.DATASET_JSON)
    document = parse_document(_read(path, read_text), path)
    return VersionRef(output, name, directory, document, via_latest)


def resolve(path: str, read_text: ReadText, exists: Exists, version: str | None = None) -> VersionRef:
    """The VersionRef ``path`` names; raises VersionError with a one-line message.

    ``path`` is a version folder (it holds dataset.json) or an output folder (its LATEST names one);
    with ``version``, the version of that name in the output folder ``path``.
    """
    path = path.rstrip('/') or path
    if version is not None:
        check_version_name(version, 'dataset version')
        directory = layout.join(path, version)
        if not exists(layout.join(directory, layout.DATASET_JSON)):
            raise VersionError(f'dataset version {version!r} not found: '
                               f'{layout.join(directory, layout.DATASET_JSON)} does not exist')
        return _loaded(path, version, directory, read_text, via_latest=False)
    if exists(layout.join(path, layout.DATASET_JSON)):
        output, name = _split(path)
        if layout.is_staging_name(name):
            raise VersionError(f'{path} is a staging folder (of a build that did not publish it), not a version')
        return _loaded(output, name, path, read_text, via_latest=False)
    latest = layout.join(path, layout.LATEST)
    if not exists(latest):
        parent, name = _split(path)
        # A folder inside an output that still holds a version's files, but not its dataset.json.
        if (exists(layout.join(parent, layout.LATEST)) and not version_name_problem(name)
                and any(exists(candidate) for candidate in (path, layout.join(path, layout.LABELS_TXT),
                                                            layout.join(path, layout.QUARANTINE_JSONL)))):
            raise VersionError(f'{path} is not a published version: it has no {layout.DATASET_JSON} (a '
                               f'publication or a pruning that did not finish)')
        raise VersionError(f'no dataset found at {path}: expected {layout.DATASET_JSON} or {layout.LATEST} there')
    return read_version(path, latest_name(_read(latest, read_text), latest), read_text, exists)


def read_version(output: str, name: str, read_text: ReadText, exists: Exists) -> VersionRef:
    """The VersionRef of version ``name`` that LATEST of ``output`` names (checked by ``latest_name``)."""
    directory = layout.join(output, name)
    if not exists(layout.join(directory, layout.DATASET_JSON)):
        raise VersionError(f'{layout.join(output, layout.LATEST)} names version {name!r}, '
                           f'which has no {layout.DATASET_JSON}')
    return _loaded(output, name, directory, read_text, via_latest=True)
