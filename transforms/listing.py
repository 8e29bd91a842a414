"""Lists the input images: class folders under ``--input``, or the lines of a ``--manifest`` CSV.

Folder listing fans out: the input's class folders are listed first, then a Reshuffle spreads the
folders over the workers and each lists its own. A gs:// listing goes one level at a time and one page
at a time (``Storage.list_level``, ``Storage.list``), so no worker holds the whole listing, even of millions of objects.
Each page is retried on transient errors (``imgrec.storage.retries``); a listing that still fails, fails
the build in one line, since images it did not list would be silently missing.

A class folder with no image in it (locally, a folder without image files; on gs://, where folders are
only names, the placeholder object ``<class>/`` that the Cloud console makes) is listed as a ClassFolder,
so its class is kept, with no image, and named, instead of vanishing from the labels.

A file is an image by its name, or else by its first bytes (``imgrec.imaging.file_types``): an image
extension lists it unread, a known other extension (``.txt``, ``.json``, ``.mov``...) ignores it unread, and only
a name that says nothing (no extension, or one in neither list) costs a ranged read of its first bytes, made
``SNIFF_THREADS`` at a time on gs://. A file whose head cannot be read is listed, so that its read quarantines
it with the reason. Ignored files are counted by extension, with an example each (``IgnoredByExtension``).

A local file's size and stamp (modification time, inode change time, inode number: what a refresh
compares, docs/reuse.md) come from one ``os.stat``, symlinks followed. An entry that is no regular file
(a FIFO, a link to a device) or cannot be stat'ed (a symlink loop) is listed all the same: its read
quarantines it at once, without opening it (``local_storage.read_local``).

A manifest may come from Excel: a UTF-8 byte-order mark before the first line and CRLF or CR-only line
ends are read as plain line ends. It is read line by line with its line numbers (``manifest_records``), by
one worker, as a stream: a line that is not UTF-8, holds a NUL, or is not ``path,label`` quarantines that
entry as ``bad_manifest_line``, and a label holding a line break (a quoted field spanning lines, as a
spreadsheet writes it) or another control character as ``bad_label``, each with its line number; the rest
is built. A label is never cut at a line break.
"""
import collections
import concurrent.futures
import csv
import itertools
import typing
import unicodedata
from collections.abc import Iterable, Iterator

import apache_beam as beam
from apache_beam.metrics import Metrics

from imgrec.contract import counters, layout
from imgrec.contract.reasons import BAD_LABEL, BAD_MANIFEST_LINE
from imgrec.console.errors import BuildFailed
from imgrec.imaging import file_types
from imgrec.storage import retries, storage as storage_lib
from imgrec.transforms.elements import ClassFolder, ImageRef, Rejected

IGNORED = 'ignored'
REJECTED = 'rejected'
# Ranged reads of files whose name says nothing, made at once on gs:// (each a round trip), out of this many
# files listed in a row.
SNIFF_THREADS = 16
SNIFF_WINDOW = 256


def is_image_name(path):
    """By extension, case-insensitively; macOS '._name' resource forks beside real images are not images."""
    return file_types.kind_by_name(path) == file_types.IMAGE


def may_be_image(path):
    """Whether a file may be an image before its bytes are read: named as one, or named as nothing known."""
    return file_types.kind_by_name(path) != file_types.OTHER


class ListedFile(typing.NamedTuple):
    """A file as the listing saw it, without reading it: what a refresh compares with the index."""
    path: str
    size: int
    mtime_ns: int | None = None     # local files: the stamp git's index keeps too (docs/reuse.md)
    generation: int | None = None   # gs:// objects
    ctime_ns: int | None = None     # local files
    inode: int | None = None        # local files


def listed_file(entry):
    """The ListedFile of a storage ``Entry``: a local file's stamp, or an object's generation."""
    if entry.local_stamp is None:
        return ListedFile(entry.path, entry.size, generation=entry.generation or None)
    mtime_ns, ctime_ns, inode = entry.local_stamp
    return ListedFile(entry.path, entry.size, mtime_ns=mtime_ns, ctime_ns=ctime_ns, inode=inode)


def list_top_level(root, storage):
    """Yields the storage ``Entry`` of each class folder (``is_folder``) and file lying directly in ``root``,
    one page (or one local folder) in memory at a time."""
    yield from storage.list_level(root)


def iter_files(folder, storage):
    """Yields a ListedFile for every file below ``folder``, at any depth, without holding the listing."""
    for entry in storage.list(folder):
        yield listed_file(entry)


def relative_source(root, path):
    """``path`` relative to ``root`` with '/' separators: the image's name in the dataset."""
    return storage_lib.relative_name(root, path)


def _shows_an_image(listed, storage):
    """Whether the first bytes of a file whose name says nothing show an image format; True when they cannot
    be read (its read will quarantine it with the reason); False for an empty file."""
    if listed.size <= 0:
        return False
    try:
        head = storage.read_range(listed.path, 0, min(listed.size, file_types.SNIFF_BYTES))
    except retries.RetriesExhausted:
        raise
    except Exception:  # pylint: disable=broad-except  # permanent (gone, forbidden, shorter now): read again later
        return True
    return file_types.sniffed_format(head) is not None


def _images_among(files, storage):
    """(ListedFile, whether it is an image) of ``files``, in order: by name, else by its first bytes, read
    ``SNIFF_THREADS`` at a time where each read is a round trip (``storage.remote``)."""
    with concurrent.futures.ThreadPoolExecutor(SNIFF_THREADS if storage.remote else 1,
                                               thread_name_prefix='sniff') as pool:
        for window in iter(lambda: list(itertools.islice(files, SNIFF_WINDOW)), []):
            kinds = [file_types.kind_by_name(listed.path) for listed in window]
            unknown = [listed for listed, kind in zip(window, kinds) if kind == file_types.UNKNOWN]
            if storage.remote and len(unknown) > 1:
                shown = iter(retries.counted_map(pool, lambda listed: _shows_an_image(listed, storage), unknown))
            else:
                shown = (_shows_an_image(listed, storage) for listed in unknown)
            for listed, kind in zip(window, kinds):
                yield listed, kind == file_types.IMAGE or (kind == file_types.UNKNOWN and next(shown))


def class_folder_listing(root, folder, storage):
    """Yields an ImageRef for each image below the class folder ``folder`` and the source name (a str) of each
    other file: the one walk the job's listing and a refresh's check before the job share."""
    label = relative_source(root, folder)
    for listed, image in _images_among(iter_files(folder, storage), storage):
        source = relative_source(root, listed.path)
        if image:
            yield ImageRef(path=listed.path, source=source, label=label, size=listed.size, mtime_ns=listed.mtime_ns,
                           generation=listed.generation, ctime_ns=listed.ctime_ns, inode=listed.inode)
        else:
            yield source


class _ListingFn(beam.DoFn):
    """Lists the input root through its ``storage``."""

    def __init__(self, root, storage):
        self._root = root
        self._storage = storage
        self.listed = Metrics.counter(*counters.IMAGES_LISTED)
        self.ignored = Metrics.counter(*counters.FILES_IGNORED)

    def listing(self, folder, entries):
        """``entries`` of ``folder``; a listing error fails the build in one line."""
        try:
            yield from entries
        except Exception as error:  # whatever stopped the listing, images would go missing
            raise BuildFailed(f'cannot list {folder}: {retries.describe(error)}') from error


class _ListTopLevel(_ListingFn):
    """The impulse -> each class folder keyed by itself, for a GroupByKey to spread them over workers."""

    def process(self, _):
        root = self._root
        for entry in self.listing(root, list_top_level(root, self._storage)):
            if entry.is_folder:
                yield entry.path, None
            else:  # a file outside any class folder has no label
                self.ignored.inc()
                yield beam.pvalue.TaggedOutput(IGNORED, relative_source(root, entry.path))


class _ListClassFolder(_ListingFn):
    def process(self, keyed):
        folder, _ = keyed
        images = 0
        for found in self.listing(folder, class_folder_listing(self._root, folder, self._storage)):
            if isinstance(found, ImageRef):
                self.listed.inc()
                images += 1
                yield found
            else:
                self.ignored.inc()
                yield beam.pvalue.TaggedOutput(IGNORED, found)
        if not images:  # an empty class is still a class (as Keras keeps it): ResolveLabels names it
            yield ClassFolder(label=relative_source(self._root, folder), path=folder)


BYTE_ORDER_MARK = '\ufeff'


def manifest_lines(text_line):
    """The manifest lines in one line as ReadFromText gives it (split at LF or CRLF): split again at
    a lone CR (old Mac line ends), with a leading byte-order mark dropped."""
    return text_line.removeprefix(BYTE_ORDER_MARK).split('\r')


def parse_manifest_line(line, manifest_dir):
    """Returns the ImageRef of one ``path,label`` line, None for a blank or header line.

    Raises ValueError for a malformed line. Relative local paths are relative to the manifest. A
    leading byte-order mark and a trailing CR or LF are not part of the line.
    """
    line = line.removeprefix(BYTE_ORDER_MARK).rstrip('\r\n')
    if not line.strip():
        return None
    try:
        fields = [field.strip() for field in next(csv.reader([line]))]
    except csv.Error as error:  # a NUL, or a line break inside the line
        raise ValueError(f'not a CSV line: {error}') from None
    if len(fields) != 2 or not fields[0] or not fields[1]:
        raise ValueError(f'expected "path,label", got {len(fields)} field(s)')
    path, label = fields
    if (path.lower(), label.lower()) == ('path', 'label'):
        return None
    full = layout.join(manifest_dir, path) if storage_lib.is_relative(path) else path
    return ImageRef(path=full, source=path, label=label)


def stat_file(path, storage):
    """The ListedFile of one path named by a manifest: one stat, or one metadata request on gs://."""
    try:
        found = storage.for_path(path).stat(path)
    except OSError:  # unreadable: the read will quarantine it with the reason
        found = None
    return ListedFile(path, -1) if found is None else listed_file(found)


# A quoted field may span lines (a spreadsheet's label with a line break): at most this many are joined
# while its quotes stay open; past it (or at the end) the first line is an unterminated quote on its own.
MAX_QUOTED_LINES = 20


def _raw_lines(stream: Iterable[bytes]) -> Iterator[bytes]:
    """The lines of a manifest's bytes, split at LF, CRLF or a lone CR, without the line ends and without a
    leading byte-order mark."""
    first = True
    for chunk in stream:
        body = chunk[:-1] if chunk.endswith(b'\n') else chunk
        body = body[:-1] if body.endswith(b'\r') else body
        if first:
            body, first = body.removeprefix(BYTE_ORDER_MARK.encode('utf-8')), False
        yield from body.split(b'\r')


def _decoded(raw: bytes) -> tuple[str, str | None]:
    """(text, problem) of one raw line: the problem when it is not UTF-8 or holds a NUL."""
    try:
        text = raw.decode('utf-8')
    except UnicodeDecodeError as error:
        return raw.decode('utf-8', 'replace'), f'not UTF-8 text (byte {error.start + 1} of the line)'
    if '\0' in text:
        return text, 'holds a NUL byte'
    return text, None


def manifest_records(stream: Iterable[bytes]) -> Iterator[tuple[int, str, str | None]]:
    """(line number, text, problem) of each record of a manifest (its bytes, as a binary stream gives them), one
    line in memory at a time (a few more while a quote is open): a record is one line, or the lines a quoted
    field with line breaks spans (numbered by its first). ``problem`` names why the line cannot be read (not
    UTF-8, a NUL, an unterminated quote); None when it can."""
    numbered = enumerate(_raw_lines(stream), 1)
    put_back: collections.deque[tuple[int, bytes]] = collections.deque()

    def take() -> tuple[int, bytes] | None:
        return put_back.popleft() if put_back else next(numbered, None)

    while (item := take()) is not None:
        number, raw = item
        text, problem = _decoded(raw)
        if problem is None and text.count('"') % 2:  # a quote left open: the field goes on on the next line
            joined = text
            used: list[tuple[int, bytes]] = []
            while joined.count('"') % 2 and len(used) < MAX_QUOTED_LINES - 1 and (more := take()) is not None:
                used.append(more)
                more_text, more_problem = _decoded(more[1])
                if more_problem:
                    break
                joined += '\n' + more_text
            if joined.count('"') % 2:  # never closed: this line alone is bad, the others are lines of their own
                put_back.extendleft(reversed(used))
                problem = 'an unterminated quote'
            else:
                text = joined
        yield number, text, problem


def label_problem(label: str) -> str | None:
    """Why ``label`` cannot be a class name (one line of labels.txt, no control character); None when it can."""
    if label.splitlines() != [label]:
        return 'holds a line break'
    if any(unicodedata.category(char) == 'Cc' for char in label):
        return 'holds a control character'
    return None


def manifest_entry(number: int, text: str, problem: str | None, manifest_dir: str, storage):
    """The ImageRef, stat'ed, of one manifest record (``manifest_records``), a Rejected naming its line number
    and why, or None for a blank or header line."""
    where = f'line {number}'
    if problem is None:
        try:
            ref = parse_manifest_line(text, manifest_dir)
        except ValueError as error:
            problem = str(error)
        else:
            if ref is None:
                return None
            wrong = label_problem(ref.label)
            if wrong:
                return Rejected(source=ref.source, reason=BAD_LABEL,
                                message=f'{where}: the label {ref.label!r} {wrong}, which labels.txt cannot hold')
            listed = stat_file(ref.path, storage)
            return ref._replace(size=listed.size, mtime_ns=listed.mtime_ns, generation=listed.generation,
                                ctime_ns=listed.ctime_ns, inode=listed.inode)
    return Rejected(source=f'{where}: {text[:200]}', reason=BAD_MANIFEST_LINE, message=f'{where}: {problem}')


def read_manifest(manifest: str, storage) -> Iterator[tuple[int, str, str | None]]:
    """Every record of ``manifest`` (``manifest_records``), read as a stream through ``storage``; a manifest
    that cannot be read fails the build in one line."""
    try:
        with storage.for_path(manifest).open_read(manifest) as stream:
            yield from manifest_records(stream)
    except Exception as error:  # pylint: disable=broad-except  # every entry would go missing
        raise BuildFailed(f'cannot read the manifest {manifest}: {retries.describe(error)}') from error


def manifest_entries(manifest: str, storage) -> Iterator[ImageRef | Rejected]:
    """What the job's listing gives of a manifest, in order, without a pipeline (a refresh's check before
    the job): an ImageRef or a Rejected per record."""
    manifest_dir = storage_lib.folder_of(manifest)
    for record in read_manifest(manifest, storage):
        found = manifest_entry(*record, manifest_dir, storage)
        if found is not None:
            yield found


class _ParseManifestRecord(beam.DoFn):
    def __init__(self, manifest_dir, storage):
        self._manifest_dir = manifest_dir
        self._storage = storage
        self.listed = Metrics.counter(*counters.IMAGES_LISTED)
        self.bad_lines = Metrics.counter(*counters.BAD_MANIFEST_LINES)

    def process(self, record):
        number, text, problem = record
        found = manifest_entry(number, text, problem, self._manifest_dir, self._storage)
        if isinstance(found, Rejected):
            self.bad_lines.inc()
            yield beam.pvalue.TaggedOutput(REJECTED, found)
        elif found is not None:
            self.listed.inc()
            yield found


class ListImages(beam.PTransform):
    """PBegin -> {'images': ImageRef, 'ignored': source names, 'rejected': Rejected}.

    ``images`` carry no split yet; beside them, a ClassFolder for each class folder that holds no image
    (none from a manifest), which ``ResolveLabels`` keeps as a class and drops. ``ignored`` are non-image
    files under ``--input``; ``rejected`` are manifest lines that name no image. ``storage`` hands on the
    storage of the input (``Storage.for_path``), with the job's options for its workers' clients.
    """

    def __init__(self, input_root=None, manifest=None, storage=None):
        super().__init__()
        if (input_root is None) == (manifest is None):
            raise ValueError('give exactly one of input_root and manifest')
        self._storage = storage_lib.given_or_default(input_root or manifest, storage)
        self._input_root = input_root
        self._manifest = manifest

    def expand(self, pbegin):
        if self._manifest is not None:
            manifest_dir = storage_lib.folder_of(self._manifest)
            # One worker reads the lines with their numbers; the stats of the paths they name spread out.
            records = (pbegin
                       | 'Manifest' >> beam.Create([self._manifest])
                       | 'ReadManifest' >> beam.FlatMap(read_manifest, self._storage)
                       | 'SpreadLines' >> beam.Reshuffle())
            parsed = records | 'ParseLines' >> beam.ParDo(
                _ParseManifestRecord(manifest_dir, self._storage)).with_outputs(REJECTED, main='images')
            ignored = pbegin | 'NoIgnoredFiles' >> beam.Create([])
            return {'images': parsed.images, IGNORED: ignored, REJECTED: parsed[REJECTED]}
        root = self._input_root
        storage = self._storage.for_path(root)
        # The class folders, keyed by themselves, cross a GroupByKey to be listed on many workers: a
        # Reshuffle's fusion break without its four steps. The REJECTED output is never yielded: a
        # listing has no manifest line to reject, and an empty PCollection costs no step this way.
        top = (pbegin
               | 'Root' >> beam.Impulse()
               | 'ListClassFolders' >> beam.ParDo(_ListTopLevel(root, storage)).with_output_types(
                   typing.Tuple[str, None]).with_outputs(IGNORED, REJECTED, main='folders'))
        listed = (top.folders
                  | 'SpreadFolders' >> beam.GroupByKey()
                  | 'ListFolders' >> beam.ParDo(_ListClassFolder(root, storage)).with_outputs(
                      IGNORED, main='images'))
        ignored = (top[IGNORED], listed[IGNORED]) | 'AllIgnored' >> beam.Flatten()
        return {'images': listed.images, IGNORED: ignored, REJECTED: top[REJECTED]}


class _ByExtension(beam.CombineFn):
    """Ignored source names -> {extension: {'count': n, 'example': the smallest source name}}."""

    def create_accumulator(self):
        return {}

    def add_input(self, table, source):
        key = file_types.extension(source)
        count, example = table.get(key, (0, source))
        table[key] = (count + 1, min(example, source))
        return table

    def merge_accumulators(self, tables):
        merged: dict[str, tuple[int, str]] = {}
        for table in tables:
            for key, (count, example) in table.items():
                had, smallest = merged.get(key, (0, example))
                merged[key] = (had + count, min(smallest, example))
        return merged

    def extract_output(self, table):
        return {key: {'count': count, 'example': example}
                for key, (count, example) in sorted(table.items(), key=lambda item: (-item[1][0], item[0]))}


class IgnoredByExtension(beam.PTransform):
    """Ignored source names -> one dict, the most frequent extension first (``file_types.extension``): what
    the summary, the report and dataset.json ('ignored_files') name of the files a build left out."""

    def expand(self, ignored):
        return ignored | 'ByExtension' >> beam.CombineGlobally(_ByExtension())
