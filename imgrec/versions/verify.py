"""``verify-dataset OUT[/VERSION]``: re-reads every shard of a published version and checks it.

Each record's checksums, that TensorFlow's own parser reads it with the contract's features, its image
size, its label against labels.txt, the counts per shard, split and label and the bytes against
dataset.json, and that the record index holds one row per record, in the right part, framing exactly
it. A version with ArrayRecord shards has each read alongside its TFRecord shard: the same records, byte
for byte, in the same order, at the positions the index gives. Shards are read in parallel threads
(reads, CRCs and TensorFlow's parser release the GIL).
Bytes are read through the storage layer (``imgrec.storage.storage``); TensorFlow only parses.

Exit 0 with a one-line summary, 1 with one line per problem naming the shard and record (numbered from
0 in file order), 2 when no version is found. What follows from a shard that is missing or cannot be read
to its end (the counts of its split and classes, the index rows of its records) is not a fault of its own:
one line counts the records lost and names a file that holds every problem.
"""
import collections
import concurrent.futures
import io
import sys
import tempfile
import time
import typing

from PIL import Image

from imgrec.contract import features as F, index as I, layout, metadata
from imgrec.contract.tfrecord import FRAME_OVERHEAD
from imgrec.console.command import Command, run_command
from imgrec.console.errors import UserError
from imgrec.storage import array_records, storage as storage_lib
from imgrec.versions import command_line, shard_reader, version as version_lib
from imgrec.versions.units import human_bytes

DEFAULT_WORKERS = 8


class Problem(str):
    """A problem line; ``in_split`` or ``in_shard`` names what it counts or points into, so that what follows
    from a damaged shard can be told from a fault of its own (``follows``)."""
    in_split: str | None
    in_shard: str | None
    follows: bool

    def __new__(cls, text: str, split: str | None = None, shard: str | None = None) -> 'Problem':
        problem = super().__new__(cls, text)
        problem.in_split, problem.in_shard, problem.follows = split, shard, False
        return problem


class ShardResult:
    """What one shard held: records read, per-label counts, bytes on storage, and the problems found."""

    def __init__(self, split, shard):
        self.split, self.shard = split, shard
        self.records = 0
        self.labels: collections.Counter[int] = collections.Counter()
        self.size = None
        self.problems = []
        self.placed = {}  # source -> (offset, length) of its frame in the shard
        self.positions = {}  # source -> its record's number in the shard (from 0)
        self.complete = False  # every record of the shard was read

    def problem(self, message, record=None, file=None):
        file = file or self.shard['file']
        where = file if record is None else f'{file} record {record}'
        self.problems.append(f'{where}: {message}')


class _ArrayRecordTwin:
    """The ArrayRecord shard of one TFRecord shard, read alongside it: each record must be the same bytes."""

    def __init__(self, result, entry, path):
        self._result, self._entry, self._file = result, entry, entry['file']
        self._records: typing.Iterator[bytes] = iter(())
        self.read = 0
        self.differing = []  # numbers of the records that are not the TFRecord shard's
        self.broken = True
        storage = storage_lib.storage_for(path)
        found = storage.stat(path)
        if found is None:
            result.problem('missing', file=self._file)
            return
        if found.size != entry['bytes']:
            result.problem(f"{found.size} bytes, dataset.json says {entry['bytes']}", file=self._file)
        self._records = array_records.read_records(path, storage)
        self.broken = False

    def _next(self, number):
        try:
            return next(self._records, None)
        except Exception as error:  # the library's RuntimeError for a damaged file
            self._result.problem(f"cannot be read ({' '.join(str(error).split())[:200]})", number, self._file)
            self.broken = True
            return None

    def compare(self, serialized, number):
        """Checks that the twin's record ``number`` is ``serialized``."""
        if self.broken:
            return
        record = self._next(number)
        if self.broken:
            return
        if record is None:
            self._result.problem(f"holds {number} records, fewer than {self._result.shard['file']}", file=self._file)
            self.broken = True
        elif record != serialized:
            self.differing.append(number)
        self.read += 1

    def finish(self, complete):
        """After the whole TFRecord shard (``complete``): the twin must hold no more records than it."""
        if self.differing:
            more = f' (and {len(self.differing) - 1} more of its records)' if len(self.differing) > 1 else ''
            self._result.problem(f"differs from record {self.differing[0]} of {self._result.shard['file']}{more}",
                                 self.differing[0], self._file)
        if complete and not self.broken:
            extra = 0
            while not self.broken and self._next(self.read + extra) is not None:
                extra += 1
            if extra:
                self._result.problem(f"holds {self.read + extra} records, {self._result.shard['file']} holds "
                                     f'{self.read}', file=self._file)
            elif self.read != self._entry['records']:
                self._result.problem(f"{self.read} records, dataset.json says {self._entry['records']}",
                                     file=self._file)
        close = getattr(self._records, 'close', None)
        if close is not None:
            close()


def _names(folder, extension):
    """The names of the files directly in ``folder`` that end in ``.extension``."""
    return [entry.path.rsplit('/', 1)[-1] for entry in storage_lib.storage_for(folder).list_level(folder)
            if not entry.is_folder and entry.path.endswith('.' + extension)]


def check_record(serialized, parse, shape, labels):
    """The problems of one serialised record (a list of messages); [] when it is good."""
    try:
        values = {key: value.numpy() for key, value in parse(serialized).items()}
    except Exception as error:  # TensorFlow's InvalidArgumentError: not an Example of the contract's features
        return [f"does not parse with the contract's features: {' '.join(str(error).split())[:200]}"], None, None
    problems = []
    height, width, channels = shape
    if (values[F.IMAGE_HEIGHT], values[F.IMAGE_WIDTH], values[F.IMAGE_CHANNELS]) != (height, width, channels):
        problems.append(f'image/height, width, channels are {values[F.IMAGE_HEIGHT]}x{values[F.IMAGE_WIDTH]}x'
                        f'{values[F.IMAGE_CHANNELS]}, dataset.json says {height}x{width}x{channels}')
    try:
        with Image.open(io.BytesIO(values[F.IMAGE_ENCODED])) as image:
            if (image.format, image.size, image.mode) != ('JPEG', (width, height), 'RGB'):
                problems.append(f'image is a {image.format} {image.mode} of {image.size[1]}x{image.size[0]}, '
                                f'expected a JPEG RGB of {height}x{width}')
    except Exception as error:  # Pillow raises several types for bytes that are no image
        problems.append(f'image/encoded is not a readable image: {error}')
    label, text = int(values[F.LABEL]), values[F.LABEL_TEXT].decode('utf-8', 'replace')
    if not 0 <= label < len(labels):
        problems.append(f'label {label} is outside labels.txt (0..{len(labels) - 1})')
    elif labels[label] != text:
        problems.append(f'label {label} is {labels[label]!r} in labels.txt, but the record says {text!r}')
    return problems, label, values[F.SOURCE].decode('utf-8', 'replace')


def check_shard(split, shard, path, parse, shape, labels, sample=None, array_record=None):
    """Reads one shard (its first ``sample`` records only, if given) and returns its ShardResult.

    ``array_record`` = (its ArrayRecord shard's entry in dataset.json, path): read alongside, record for record.
    """
    result = ShardResult(split, shard)
    twin = _ArrayRecordTwin(result, *array_record) if array_record else None
    try:
        _check_tfrecord_shard(result, path, parse, shape, labels, sample, twin)
    finally:
        if twin is not None:
            twin.finish(result.complete)
    return result


def _check_tfrecord_shard(result, path, parse, shape, labels, sample, twin):
    shard = result.shard
    result.complete = False
    found = storage_lib.storage_for(path).stat(path)
    if found is None:
        result.problem('missing')
        return
    result.size = found.size
    if result.size != shard['bytes']:
        result.problem(f"{result.size} bytes, dataset.json says {shard['bytes']}")
    offset = 0
    try:
        for serialized in shard_reader.read_shard(path):
            if sample is not None and result.records >= sample:
                break
            problems, label, source = check_record(serialized, parse, shape, labels)
            result.placed[source] = (offset, len(serialized) + FRAME_OVERHEAD)
            result.positions[source] = result.records
            if twin is not None:
                twin.compare(serialized, result.records)
            offset += len(serialized) + FRAME_OVERHEAD
            for message in problems:
                result.problem(message, result.records)
            if label is not None:
                result.labels[label] += 1
            result.records += 1
        else:
            result.complete = sample is None
            if sample is None and result.records != shard['records']:
                result.problem(f"{result.records} records, dataset.json says {shard['records']}")
    except ValueError as error:  # a bad TFRecord frame: the rest of the shard cannot be read
        result.problem(f'{error}; the shard cannot be read past it', result.records)


def check_totals(version, results):
    """Problems of the counts per split and label, and of the shard files, against dataset.json."""
    problems = []
    document, labels = version.document, version.labels
    if labels != document['labels']:
        problems.append(f"{layout.LABELS_TXT}: {labels} differ from dataset.json's labels {document['labels']}")
    by_split = collections.defaultdict(list)
    for result in results:
        by_split[result.split].append(result)
    for split, info in document['splits'].items():
        got = by_split[split]
        total = sum(r.records for r in got)
        if total != info['num_examples']:
            problems.append(Problem(f"split {split}: {total} records, dataset.json says {info['num_examples']}",
                                    split=split))
        if sum(s['records'] for s in info['shards']) != info['num_examples']:
            problems.append(f"split {split}: its shards' records add up to {sum(s['records'] for s in info['shards'])}, "
                            f"dataset.json says num_examples {info['num_examples']}")
        if len(info['shards']) != info['num_shards']:
            problems.append(f"split {split}: {len(info['shards'])} shards listed, num_shards says {info['num_shards']}")
        counted: collections.Counter[int] = collections.Counter()
        for result in got:
            counted.update(result.labels)
        for index, label in enumerate(document['labels']):
            expected = info['class_counts'].get(label, 0)
            if counted[index] != expected:
                problems.append(Problem(f'split {split}: {counted[index]} records of class {label!r}, '
                                        f'dataset.json says {expected}', split=split))
    listed = {shard['file'] for info in document['splits'].values() for shard in info['shards']}
    for name in _names(version.path, layout.TFRECORD):
        if name not in listed and layout.parse_shard_file_name(name):
            problems.append(f'{name}: a shard file dataset.json does not list')
    return problems + check_array_record_listing(version)


def check_array_record_listing(version):
    """Problems of the ArrayRecord shards dataset.json lists: one a TFRecord shard, of its name, with its
    record count (the records themselves are compared by ``check_shard``), and none it does not list."""
    document, problems = version.document, []
    built = layout.ARRAY_RECORD in metadata.formats(document)
    for split, info in document['splits'].items():
        entries = metadata.array_record_shards(document, split)
        if not built:
            if entries:
                problems.append(f'split {split}: lists ArrayRecord shards, but formats says '
                                f'{metadata.formats(document)}')
            continue
        expected = [(layout.array_record_file_name(shard['file']), shard['records']) for shard in info['shards']]
        found = [(entry['file'], entry['records']) for entry in entries]
        if found != expected:
            problems.append(f'split {split}: dataset.json lists ArrayRecord shards {found}, expected one a TFRecord '
                            f'shard, of its name and record count: {expected}')
    listed = {entry['file'] for split in document['splits'] for entry in metadata.array_record_shards(document, split)}
    for name in _names(version.path, layout.ARRAY_RECORD):
        if name not in listed and layout.parse_shard_file_name(name[:-len(layout.ARRAY_RECORD)] + layout.TFRECORD):
            problems.append(f'{name}: a shard file dataset.json does not list')
    return problems


def check_index(version, results):
    """Problems of the record index: one row per record read, in its source's part, at its frame."""
    entry = version.document.get('index')
    if entry is None:
        return []
    import pyarrow.parquet as pq  # pylint: disable=import-outside-toplevel
    placed = {source: (result.shard['file'], *where) for result in results for source, where in result.placed.items()}
    with_array_record = layout.ARRAY_RECORD in metadata.formats(version.document)
    positions = {source: position if with_array_record else None
                 for result in results for source, position in result.positions.items()}
    problems, seen = [], set()
    files = entry['files']
    for part, name in enumerate(files):
        path = layout.join(version.path, name)
        storage = storage_lib.storage_for(path)
        if not storage.exists(path):
            problems.append(f'{name}: missing')
            continue
        rows = pq.read_table(io.BytesIO(storage.read(path))).to_pylist()
        for row in rows:
            source, where = row[I.SOURCE], (row[I.SHARD], row[I.OFFSET], row[I.LENGTH])
            seen.add(source)
            if I.index_part(source, len(files)) != part:
                problems.append(f'{name}: row of {source!r} belongs in part {I.index_part(source, len(files))}')
            if row.get(I.FACTS_CHECKSUM) is not None and row[I.FACTS_CHECKSUM] != I.facts_checksum(row):
                problems.append(f'{name}: row of {source!r} does not check against its {I.FACTS_CHECKSUM} (its '
                                f'facts were damaged or copied from another row): a refresh decodes its image again')
            if placed.get(source) != where:
                found = 'no record' if source not in placed else 'the record at {} offset {} length {}'.format(
                    *placed[source])
                problems.append(Problem(f'{name}: row of {source!r} says {where[0]} offset {where[1]} length '
                                        f'{where[2]}, but the shards hold {found}', shard=where[0]))
            elif row.get(I.ARRAY_RECORD_POSITION) != positions[source]:
                problems.append(f'{name}: row of {source!r} says {I.ARRAY_RECORD_POSITION} '
                                f'{row.get(I.ARRAY_RECORD_POSITION)}, but the record is number {positions[source]} '
                                f'of its ArrayRecord shard' if with_array_record else
                                f'{name}: row of {source!r} gives an {I.ARRAY_RECORD_POSITION}, but the version '
                                f'has no ArrayRecord shards')
    for source in sorted(set(placed) - seen)[:10]:
        problems.append(f'index: no row for the record of {source!r} in {placed[source][0]}')
    return problems


def verify(path, sample=None, workers=DEFAULT_WORKERS):
    """(problems, summary line) for the version at ``path`` (OUT or OUT/VERSION), read under a reader lease,
    so a build's --keep_versions does not delete it mid-check (``version_lib.reading``)."""
    with version_lib.reading(path) as version:
        return _verify(version, sample, workers)


def _verify(version, sample, workers):
    if version.labels is None:
        raise version_lib.InspectionError(f'{layout.join(version.path, layout.LABELS_TXT)} not found')
    import tensorflow as tf  # pylint: disable=import-outside-toplevel  # only once the arguments and the version are good

    from imgrec.versions.tf_features import feature_spec  # pylint: disable=import-outside-toplevel

    spec = feature_spec()
    parse = lambda serialized: tf.io.parse_single_example(serialized, spec)  # noqa: E731
    shape = metadata.image_shape(version.document)
    labels = version.labels
    shards = version_lib.shard_paths(version)
    twins = _array_record_twins(version)
    start = time.monotonic()
    def check(item):
        split, shard, path = item
        return check_shard(split, shard, path, parse, shape, labels, sample, twins.get(shard['file']))

    with concurrent.futures.ThreadPoolExecutor(max(1, min(workers, len(shards)))) as pool:
        results = list(pool.map(check, shards))
    seconds = max(time.monotonic() - start, 1e-9)
    problems = [p for result in results for p in result.problems]
    if sample is None:
        problems += mark_follow_on(check_totals(version, results) + check_index(version, results), results)
    checked = sum(r.records for r in results)
    size = sum(r.size or 0 for r in results)
    splits = ', '.join(f'{split} {sum(r.records for r in results if r.split == split)}'
                       for split in version.document['splits'])
    if sample is None:
        mode, speed = 'every record', f', {human_bytes(size / seconds)}/s'
    else:  # only the start of each shard was read
        mode, speed = f'{sample} records a shard sampled', ''
    twinned = ' (and their ArrayRecord shards, record for record)' if twins else ''
    summary = (f'{checked} records ({splits}) in {len(results)} shards{twinned}, {human_bytes(size)}, {mode}; '
               f'{seconds:.1f} s, {checked / seconds:.0f} records/s{speed}; {version.path}')
    return problems, summary


def mark_follow_on(problems, results):
    """``problems``, those that follow from a damaged shard marked ``follows``, then one line counting the
    records the damaged shards lost (when any shard is damaged)."""
    damaged = [result for result in results if not result.complete]
    if not damaged:
        return problems
    files, splits = {r.shard['file'] for r in damaged}, {r.split for r in damaged}
    for problem in problems:
        if isinstance(problem, Problem) and (problem.in_split in splits or problem.in_shard in files):
            problem.follows = True
    lost: collections.Counter[str] = collections.Counter()
    for result in damaged:
        lost[result.split] += max(0, result.shard['records'] - result.records)
    listed = sum(r.shard['records'] for r in results)
    by_split = ', '.join(f'{split} {count}' for split, count in lost.items() if count)
    shards = f"{len(damaged)} damaged shard{'s' if len(damaged) > 1 else ''}"
    return problems + [Problem(f'{shards}: {sum(lost.values())} of the {listed} records dataset.json lists '
                               f'cannot be read' + (f' ({by_split})' if by_split else ''))]


def write_details(problems):
    """Writes every problem, one a line, to a new file; returns its path."""
    with tempfile.NamedTemporaryFile('w', prefix='verify-dataset-', suffix='.txt', delete=False) as details:
        details.writelines(problem + '\n' for problem in problems)
    return details.name


def _array_record_twins(version):
    """{TFRecord shard file: (its ArrayRecord shard's dataset.json entry, path)}; {} without ArrayRecord shards.

    Paired by name (``layout.array_record_file_name``); a shard without its twin is ``check_totals``' to report.
    """
    if layout.ARRAY_RECORD not in metadata.formats(version.document):
        return {}
    entries = {entry['file']: entry for split in version.document['splits']
               for entry in metadata.array_record_shards(version.document, split)}
    twins = {}
    for _, shard, _ in version_lib.shard_paths(version):
        name = layout.array_record_file_name(shard['file'])
        entry = entries.get(name, {'file': name, 'records': shard['records'], 'bytes': None})
        twins[shard['file']] = (entry, layout.join(version.path, name))
    return twins


def _parser():
    parser = command_line.parser('verify-dataset', 'Re-read and check every shard of a version.')
    parser.add_argument('--sample', type=int, metavar='N', help='check only the first N records of each shard')
    parser.add_argument('--workers', type=int, default=DEFAULT_WORKERS, help='shards read at once')
    parser.add_switch('--verbose', help="show TensorFlow's own log lines")
    return parser


def main(argv=None):
    """Returns the exit status: 0 good, 1 problems found, 2 no version or a usage mistake."""
    with Command('verify-dataset') as command:
        args = _parser().parse_args(argv)
        if args.sample is not None and args.sample < 1 or args.workers < 1:
            raise UserError('--sample and --workers must be at least 1')
        command.begin(verbose=args.verbose)  # TensorFlow's start-up lines, shown only with --verbose
        try:
            problems, summary = verify(args.path, args.sample, args.workers)
        except version_lib.InspectionError as error:
            raise UserError(str(error)) from None
        command.release()
        shown = [problem for problem in problems if not getattr(problem, 'follows', False)]
        if len(shown) < len(problems):
            follows = len(problems) - len(shown)
            shown[-1] += (f'; {follows} more line{"s" if follows > 1 else ""} follow from that (counts of splits and '
                          f'classes, index rows): every problem is in {write_details(problems)}')
        for problem in shown:
            print(f'verify-dataset: {problem}', file=sys.stderr)
        if problems:
            return 1
        print(f'verify-dataset: OK: {summary}')
        return 0
    return command.status


def cli():
    """The ``verify-dataset`` command."""
    run_command(main)


if __name__ == '__main__':
    cli()
