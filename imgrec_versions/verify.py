"""``verify-dataset OUT[/VERSION]``: re-reads every shard of a published version and checks it.

Each record's checksums, that TensorFlow's own parser reads it with the contract's features, its image
size, its label against labels.txt, the counts per shard, split and label and the bytes against
dataset.json, and that the record index holds one row per record, in the right part, framing exactly
it. Shards are read in parallel threads (reads, CRCs and TensorFlow's parser release the GIL).
Bytes are read through Beam's FileSystems, which honours a GCS emulator; TensorFlow only parses.

Exit 0 with a one-line summary, 1 with one line per problem naming the shard and record (numbered from
0 in file order), 2 when no version is found.
"""
import collections
import concurrent.futures
import io
import os
import sys
import time

from apache_beam.io.filesystems import FileSystems
from PIL import Image

from contract import features as F, index as I, layout, metadata
from contract.tfrecord import FRAME_OVERHEAD
from imgrec_storage import fileio, gcs
from imgrec_versions import cli, shard_reader, version as version_lib
from imgrec_versions.units import human_bytes
from pipelines import console

DEFAULT_WORKERS = 8


class ShardResult:
    """What one shard held: records read, per-label counts, bytes on storage, and the problems found."""

    def __init__(self, split, shard):
        self.split, self.shard = split, shard
        self.records = 0
        self.labels = collections.Counter()
        self.size = None
        self.problems = []
        self.placed = {}  # source -> (offset, length) of its frame in the shard

    def problem(self, message, record=None):
        where = self.shard['file'] if record is None else f"{self.shard['file']} record {record}"
        self.problems.append(f'{where}: {message}')


def _file_size(path):
    return FileSystems.match([path])[0].metadata_list[0].size_in_bytes


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


def check_shard(split, shard, path, parse, shape, labels, sample=None):
    """Reads one shard (its first ``sample`` records only, if given) and returns its ShardResult."""
    result = ShardResult(split, shard)
    if not FileSystems.exists(path):
        result.problem('missing')
        return result
    result.size = _file_size(path)
    if result.size != shard['bytes']:
        result.problem(f"{result.size} bytes, dataset.json says {shard['bytes']}")
    offset = 0
    try:
        for serialized in shard_reader.read_shard(path):
            if sample is not None and result.records >= sample:
                break
            problems, label, source = check_record(serialized, parse, shape, labels)
            result.placed[source] = (offset, len(serialized) + FRAME_OVERHEAD)
            offset += len(serialized) + FRAME_OVERHEAD
            for message in problems:
                result.problem(message, result.records)
            if label is not None:
                result.labels[label] += 1
            result.records += 1
        else:
            if sample is None and result.records != shard['records']:
                result.problem(f"{result.records} records, dataset.json says {shard['records']}")
    except ValueError as error:  # a bad TFRecord frame: the rest of the shard cannot be read
        result.problem(f'{error}; the shard cannot be read past it', result.records)
    return result


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
            problems.append(f"split {split}: {total} records, dataset.json says {info['num_examples']}")
        if sum(s['records'] for s in info['shards']) != info['num_examples']:
            problems.append(f"split {split}: its shards' records add up to {sum(s['records'] for s in info['shards'])}, "
                            f"dataset.json says num_examples {info['num_examples']}")
        if len(info['shards']) != info['num_shards']:
            problems.append(f"split {split}: {len(info['shards'])} shards listed, num_shards says {info['num_shards']}")
        counted = collections.Counter()
        for result in got:
            counted.update(result.labels)
        for index, label in enumerate(document['labels']):
            expected = info['class_counts'].get(label, 0)
            if counted[index] != expected:
                problems.append(f'split {split}: {counted[index]} records of class {label!r}, '
                                f'dataset.json says {expected}')
    listed = {shard['file'] for info in document['splits'].values() for shard in info['shards']}
    for match in FileSystems.match([layout.join(version.path, '*.tfrecord')])[0].metadata_list:
        name = match.path.rsplit('/', 1)[-1]
        if name not in listed and layout.parse_shard_file_name(name):
            problems.append(f'{name}: a shard file dataset.json does not list')
    return problems


def check_index(version, results):
    """Problems of the record index: one row per record read, in its source's part, at its frame."""
    entry = version.document.get('index')
    if entry is None:
        return []
    import pyarrow.parquet as pq  # pylint: disable=import-outside-toplevel
    placed = {source: (result.shard['file'], *where) for result in results for source, where in result.placed.items()}
    problems, seen = [], set()
    files = entry['files']
    for part, name in enumerate(files):
        path = layout.join(version.path, name)
        if not FileSystems.exists(path):
            problems.append(f'{name}: missing')
            continue
        rows = pq.read_table(io.BytesIO(fileio.read_bytes(path))).to_pylist()
        for row in rows:
            source, where = row[I.SOURCE], (row[I.SHARD], row[I.OFFSET], row[I.LENGTH])
            seen.add(source)
            if I.index_part(source, len(files)) != part:
                problems.append(f'{name}: row of {source!r} belongs in part {I.index_part(source, len(files))}')
            if placed.get(source) != where:
                found = 'no record' if source not in placed else 'the record at {} offset {} length {}'.format(
                    *placed[source])
                problems.append(f'{name}: row of {source!r} says {where[0]} offset {where[1]} length {where[2]}, '
                                f'but the shards hold {found}')
    for source in sorted(set(placed) - seen)[:10]:
        problems.append(f'index: no row for the record of {source!r} in {placed[source][0]}')
    return problems


def verify(path, sample=None, workers=DEFAULT_WORKERS):
    """(problems, summary line) for the version at ``path`` (OUT or OUT/VERSION)."""
    version = version_lib.load(path)
    if version.labels is None:
        raise version_lib.InspectionError(f'{layout.join(version.path, layout.LABELS_TXT)} not found')
    import tensorflow as tf

    from training.example_parsing import feature_spec  # TensorFlow: only once the arguments and the version are good

    spec = feature_spec()
    parse = lambda serialized: tf.io.parse_single_example(serialized, spec)  # noqa: E731
    shape = metadata.image_shape(version.document)
    labels = version.labels
    shards = version_lib.shard_paths(version)
    start = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(max(1, min(workers, len(shards)))) as pool:
        results = list(pool.map(lambda item: check_shard(*item, parse, shape, labels, sample), shards))
    seconds = max(time.monotonic() - start, 1e-9)
    problems = [p for result in results for p in result.problems]
    if sample is None:
        problems += check_totals(version, results) + check_index(version, results)
    checked = sum(r.records for r in results)
    size = sum(r.size or 0 for r in results)
    splits = ', '.join(f'{split} {sum(r.records for r in results if r.split == split)}'
                       for split in version.document['splits'])
    if sample is None:
        mode, speed = 'every record', f', {human_bytes(size / seconds)}/s'
    else:  # only the start of each shard was read
        mode, speed = f'{sample} records a shard sampled', ''
    summary = (f'{checked} records ({splits}) in {len(results)} shards, {human_bytes(size)}, {mode}; '
               f'{seconds:.1f} s, {checked / seconds:.0f} records/s{speed}; {version.path}')
    return problems, summary


def _parser():
    parser = cli.parser('verify-dataset', 'Re-read and check every shard of a version.')
    parser.add_argument('--sample', type=int, metavar='N', help='check only the first N records of each shard')
    parser.add_argument('--workers', type=int, default=DEFAULT_WORKERS, help='shards read at once')
    parser.add_argument('--verbose', action='store_true', help="show TensorFlow's own log lines")
    return parser


def main(argv=None):
    parser = _parser()
    args = parser.parse_args(argv)
    if args.sample is not None and args.sample < 1 or args.workers < 1:
        parser.error('--sample and --workers must be at least 1')
    os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '3')
    gcs.connect_anonymously_to_emulator()
    with console.held_stderr() as replay:  # TensorFlow's start-up lines, shown only with --verbose
        try:
            problems, summary = verify(args.path, args.sample, args.workers)
        except version_lib.InspectionError as error:
            problems, summary = None, str(error)
        if args.verbose:
            replay()
    if problems is None:
        print(f'verify-dataset: error: {summary}', file=sys.stderr)
        return 2
    for problem in problems:
        print(f'verify-dataset: {problem}', file=sys.stderr)
    if problems:
        return 1
    print(f'verify-dataset: OK: {summary}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
