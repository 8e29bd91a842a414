"""The build job against its peers, in the same run: a hand-written 2-process Pillow script (the bar), the
naive one-process Pillow loop and, with ``--peers``, a Ray Data script and the TF codelab's loop. Throughput,
CPU per image and peak memory of each, as whole processes.

    python benchmarks/build_throughput.py                   # 3 rounds at 2,400 photos, 1 at 20,000 and at 100,000
    python benchmarks/build_throughput.py --plan 2400x3,20000x1 [--modes default,in_memory] [--startup]
    python benchmarks/build_throughput.py --images 2400 --rounds 3   # one size (above 2,400: pixel variants of 2,400)
    python benchmarks/build_throughput.py --plan 2400x3,20000x1 --peers ray,codelab   # also Ray Data, the codelab loop

The bar is ``benchmarks/pool_script.py``: a ``multiprocessing.Pool`` of 2 processes that decodes with
Pillow's ``draft``, fits to the size, encodes JPEG and frames TFRecords by hand into 16 shards (no dedupe,
checks, splits, index or atomic publication). The build runs as a user runs it (``build-dataset`` with its
defaults and progress lines on, in a process of its own), once per round for each mode ``--modes`` names,
alternating with the pool script (A, B, A, B...), so a machine whose speed drifts (these are shared) moves
both alike. Each is timed from process start to exit; its CPU is that of its whole process tree, and its
memory is sampled every 0.2 s over the process and all its descendants. The ratios are medians of the
rounds' paired ratios. Three 40-image builds per mode, interleaved too, measure the fixed start-up cost.
Beside them: the data-plane crossings an image makes (``crossings``: the elements entering each shuffle,
counted in a build of 400 of the photos), and the cost of the perceptual fingerprint and the sha256 an
image.
``--startup`` then runs ``benchmarks/startup.py`` (the 40-image build, ``--help``, the no-op refresh).

Once a round, the pool script also runs with ``--guarantees``: the same, plus each image's sha256 and
perceptual fingerprint, with the build's own functions. What no build that keeps exact- and
near-duplicate detection can beat on these cores: its ratio is the ceiling of the build's.

With ``--peers ray,codelab`` (either or both) two more peers a user would pick instead run every round, each
timed and measured as the pool script is, paired with the round's last pool script run, and checked: every
record of its files read back (both checksums), as many a label as the folders hold, the first image of each
file decoded at the size. Each runs on the pool's 2 cores, alone as ``python benchmarks/X.py INPUT OUTPUT
--size 224 --workers 2``:

- ``benchmarks/ray_data_script.py``: Ray Data as a Ray user writes it: ``ray.init(num_cpus=2)`` (its start-up
  counts), ``ray.data.read_images`` (a full Pillow decode; the class from the folder by a ``dir``
  partitioning), a ``map`` fitting to the size with Pillow and encoding a JPEG at quality 90, and Ray's
  ``write_tfrecords`` into about 16 files. Ray's writer builds ``tf.train.Example`` with TensorFlow, so it runs
  in a venv of its own, ``.venv-peers`` (``make bench-peers``: Ray Data, TensorFlow, crc32c, aiohttp), never
  the project's; ``--ray_python`` names another interpreter. Ray's worker processes are killed, not reaped,
  so a peer's CPU is the sampled CPU of its process tree where that is more than its reaped children's; its
  memory, RSS summed over the tree, counts the object store's shared pages in each process mapping them.
- ``benchmarks/codelab_loop.py``: the loop of the "TFRecords for TPU" codelab style, in TF ops: ``tf.data``
  over the paths, ``tf.io.read_file`` -> ``tf.image.decode_jpeg`` -> ``tf.image.resize`` (the shorter side
  to the size) -> centre crop -> ``tf.image.encode_jpeg`` (quality 90) on 2 parallel calls, ``.batch(shard
  size)``, one file a batch written by ``tf.io.TFRecordWriter``: 16 files. It runs in this venv.

The naive loop does, for each file: Image.open -> convert('RGB') -> ImageOps.fit(size, BILINEAR) -> JPEG
save at quality 90 (a full decode), in this process, on up to ``--naive_images`` of the images, once before
the rounds and once after; its rate is the mean of the two. The build's images are compared with its
(PSNR).

    python benchmarks/build_throughput.py --formats_ratio [--images 2400]

measures only what ArrayRecord shards cost (``formats_ratio``): the same build with ``--formats tfrecord``
and with ``--formats tfrecord,array_record``, run alternately, twice each, in the same run.
"""
import argparse
import io
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
from PIL import Image, ImageOps

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import MAX_GENERATED, corpus, counter, job, listed, measure  # noqa: E402

from imgrec.contract import counters, features as F, index as I, layout  # noqa: E402
from imgrec.contract.example import decode_example  # noqa: E402
from imgrec.contract.tfrecord import read_records  # noqa: E402
from imgrec.imaging.image_ops import parse_image_size  # noqa: E402

SMALL_RUN = 40
SMALL_RUNS = 3
# Each record's reference crosses three shuffles: to its rank bucket, its shard, and into the ranking's stage.
SHUFFLES_PER_RECORD = 3
DEFAULT_PLAN = '2400x3,20000x1,100000x1'
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
POOL_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'pool_script.py')
POOL_PROCESSES = 2
HERE = os.path.dirname(os.path.abspath(__file__))
# The optional peers (--peers): name -> (script, its row's label). Each runs on POOL_PROCESSES cores.
PEERS = {'ray': (os.path.join(HERE, 'ray_data_script.py'), 'Ray Data script'),
         'codelab': (os.path.join(HERE, 'codelab_loop.py'), 'TF codelab loop, tf.data ops')}
PEERS_PYTHON = os.path.join(ROOT, '.venv-peers', 'bin', 'python')  # made by `make bench-peers`
PATCHES_OFF = {'IMGREC_BEAM_PATCHES': 'off'}  # stock Beam: no warm workers, no live progress (docs/beam-internals.md)


def modes(workers):
    """The ways of running the build the benchmark knows: name -> (extra arguments, extra environment).

    default: as build-dataset runs with no runner option (a worker process per core); multi_processing:
    the same with ``workers`` processes; in_memory: one process, decoding on a thread per core (Beam's
    multi_threading mode is refused: pipelines.beam_options.REFUSED_MODE). ``_patches_off``: with
    IMGREC_BEAM_PATCHES=off (no warm workers, no live progress counters).
    """
    given = ['--direct_num_workers', str(workers)]
    found = {'default': [], 'multi_processing': ['--direct_running_mode', 'multi_processing', *given],
             'in_memory': ['--direct_running_mode', 'in_memory']}
    return {**{name: (args, {}) for name, args in found.items()},
            **{f'{name}_patches_off': (args, PATCHES_OFF) for name, args in found.items()}}


def baseline(root, names, size):
    """The naive loop; returns ({source: jpeg bytes}, seconds, CPU seconds)."""
    height, width = size
    outputs, start, cpu = {}, time.perf_counter(), time.process_time()
    for name in names:
        image = Image.open(os.path.join(root, name)).convert('RGB')
        image = ImageOps.fit(image, (width, height), Image.Resampling.BILINEAR)
        out = io.BytesIO()
        image.save(out, 'JPEG', quality=90)
        outputs[name] = out.getvalue()
    return outputs, time.perf_counter() - start, time.process_time() - cpu


def build(root, size_text, output, mode):
    args, env = mode
    return job(['--input', root, '--output', output, '--image_size', size_text, '--version', 'bench',
                '--progress', 'on', *args], env)


def pool_script(root, size, output, guarantees=False):
    """The peer, as a user runs it; its measurements (``harness.measure``). ``guarantees``: with the per-image
    work the build's guarantees need (``pool_script.py --guarantees``): the ceiling of any build keeping them."""
    stdout, measured = measure([sys.executable, POOL_SCRIPT, root, output, '--size', str(size),
                                '--processes', str(POOL_PROCESSES), *(['--guarantees'] if guarantees else [])])
    measured['written'] = int(stdout.split()[0])
    return measured


def peer(name, root, size, output, ray_python):
    """One run of peer ``name`` (``PEERS``) as a user runs it, its output checked; its measurements
    (``harness.measure``) with ``written`` (records in its TFRecord files), ``files`` and ``labels``
    ({label: records}). The Ray script runs on ``ray_python`` (the peers' venv), the codelab loop on this one."""
    script, _ = PEERS[name]
    python = ray_python if name == 'ray' else sys.executable
    _, measured = measure([python, script, root, output, '--size', str(size), '--workers', str(POOL_PROCESSES)])
    # Ray's worker processes end killed, not waited for, so the CPU of the reaped children misses theirs: the
    # sampled CPU of every process of the tree, when more.
    sampled = measured['root_cpu'] + sum(cpu for _, cpu in measured['workers'])
    return dict(measured, cpu_seconds=max(measured['cpu_seconds'], sampled), **peer_output(output, size))


def peer_output(folder, size):
    """What a peer wrote: the records of every file in ``folder`` (both checksums checked), by label; the
    first image of each file must decode at ``size`` x ``size``."""
    written, labels, files = 0, {}, sorted(os.listdir(folder))
    for name in files:
        with open(os.path.join(folder, name), 'rb') as stream:
            for index, record in enumerate(read_records(stream)):
                example = decode_example(record)
                label = example['image/class/label']
                labels[label] = labels.get(label, 0) + 1
                written += 1
                if index == 0:
                    with Image.open(io.BytesIO(example['image/encoded'])) as image:
                        image.load()
                        assert image.size == (size, size), f'{name}: an image of {image.size}, not {size}'
    return dict(written=written, files=len(files), labels=labels)


def written_images(version_dir, sources):
    """{source: JPEG bytes} of ``sources``, each found through the record index and read by offset."""
    import pyarrow.parquet as pq  # pylint: disable=import-outside-toplevel
    document = json.load(open(os.path.join(version_dir, layout.DATASET_JSON)))
    wanted, images = set(sources), {}
    for name in document['index']['files']:
        for row in pq.read_table(os.path.join(version_dir, name)).to_pylist():
            if row[I.SOURCE] in wanted:
                with open(os.path.join(version_dir, row[I.SHARD]), 'rb') as stream:
                    stream.seek(row[I.OFFSET])
                    (record,) = read_records(io.BytesIO(stream.read(row[I.LENGTH])))
                images[row[I.SOURCE]] = decode_example(record)[F.IMAGE_ENCODED]
    return images, document


def psnr(a, b):
    a = np.asarray(Image.open(io.BytesIO(a)), dtype=np.float64)
    b = np.asarray(Image.open(io.BytesIO(b)), dtype=np.float64)
    mse = np.mean((a - b) ** 2)
    return float('inf') if mse == 0 else 10 * np.log10(255 ** 2 / mse)


def spread(names, count):
    """``count`` of ``names``, spread evenly over them (and so over the classes)."""
    return names[::max(1, len(names) // count)][:count]


def subset(root, names):
    folder = tempfile.mkdtemp(prefix='build-bench-subset-')
    for name in names:
        os.makedirs(os.path.join(folder, os.path.dirname(name)), exist_ok=True)
        os.symlink(os.path.join(root, name), os.path.join(folder, name))
    return folder


def formats_ratio(root, size_text, workers, count):
    """Throughput of the build with both formats against TFRecord alone, as one ratio measured here: the
    builds alternate (alone, both, both, alone), so a machine that drifts moves both sides alike."""
    output = tempfile.mkdtemp(prefix='build-bench-formats-')
    seconds = {'tfrecord': [], 'tfrecord,array_record': []}
    sizes = {}
    try:
        for run, formats in enumerate(('tfrecord', 'tfrecord,array_record', 'tfrecord,array_record', 'tfrecord')):
            folder = os.path.join(output, str(run))
            done = job(['--input', root, '--output', folder, '--image_size', size_text, '--version', 'bench',
                        '--direct_running_mode', 'multi_processing', '--direct_num_workers', str(workers),
                        '--formats', formats])
            seconds[formats].append(done['seconds'])
            document = json.load(open(os.path.join(done['version_dir'], layout.DATASET_JSON)))
            sizes[formats] = {name: sum(s['bytes'] for split in document['splits'].values()
                                        for s in split.get(key, [])) for name, key in
                              (('tfrecord', 'shards'), ('array_record', 'array_record_shards'))}
            shutil.rmtree(folder)
    finally:
        shutil.rmtree(output)
    alone, both = (count / statistics.mean(seconds[key]) for key in ('tfrecord', 'tfrecord,array_record'))
    bytes_ = sizes['tfrecord,array_record']
    print(f'{count} photos -> {size_text}, {workers} worker(s); whole process, mean of 2 runs each, alternated')
    runs = {key: ', '.join(f'{s:.1f}' for s in values) for key, values in seconds.items()}
    print(f"TFRecord alone:              {alone:8.1f} images/s  (runs {runs['tfrecord']} s)")
    print(f"TFRecord + ArrayRecord:      {both:8.1f} images/s  (runs {runs['tfrecord,array_record']} s)")
    print(f"both formats / TFRecord alone: {both / alone:.2f}x the throughput; ArrayRecord shards "
          f"{bytes_['array_record'] / 2**20:.1f} MB = {bytes_['array_record'] / bytes_['tfrecord']:.3f}x the "
          f'TFRecord shards')
    return both / alone


def distinct_photos(count):
    """A folder of ``count`` distinct generated photos (links into the cached corpus when there are that many),
    and whether it is a temporary folder of links, for the caller to remove. The small build and the memory
    reference take these at every size: a sample of a larger corpus's copies would hold fewer distinct
    pictures, and near-duplicate groups a folder of distinct photos does not have."""
    if count > MAX_GENERATED:
        return corpus(count), False
    root = corpus(MAX_GENERATED)
    return subset(root, spread(listed(root), count)), True


def complete(run, listed_count):
    """Says so when a build did not write every photo (a benchmark of a build that dropped some would
    flatter it), keeping its quarantine list for a look."""
    with open(os.path.join(run['version_dir'], layout.DATASET_JSON)) as file:
        document = json.load(file)
    if document['counts']['written'] != listed_count:
        kept = tempfile.mkdtemp(prefix='build-bench-short-')
        shutil.copy(os.path.join(run['version_dir'], layout.QUARANTINE_JSONL), kept)
        print(f"  the build wrote {document['counts']['written']} of {listed_count} photos: {document['counts']}, "
              f"{document['quarantine']['by_reason']}; its quarantine list is in {kept}", flush=True)


def median(values):
    return statistics.median(values) if values else float('nan')


def describe(name, runs, images, pool_runs):
    """One row of the table: medians of the runs, and the medians of their paired ratios to the pool script."""
    wall = median([run['seconds'] for run in runs])
    cpu_ms = median([run['cpu_seconds'] for run in runs]) / images * 1e3
    peak = median([run['peak_tree'] for run in runs]) / 2**20
    speed = median([pool['seconds'] / run['seconds'] for run, pool in zip(runs, pool_runs)])
    cpu = median([run['cpu_seconds'] / pool['cpu_seconds'] for run, pool in zip(runs, pool_runs)])
    memory = median([run['peak_tree'] / pool['peak_tree'] for run, pool in zip(runs, pool_runs)])
    return (f"{name:40s} {wall:7.1f} {images / wall:9.1f} {cpu_ms:8.2f} {peak:8.0f}   "
            f"{speed:6.2f}x {cpu:8.2f}x {memory:7.2f}x")


def crossings(root, size_text, tree=ROOT):
    """Elements entering each shuffle of one build of ``root``, per image: {shuffle: elements an image}.

    Measured, through Beam's public API: ``storage_runs.tap_shuffles`` visits the build's graph and counts
    every element entering each GroupByKey (a Reshuffle's, a CoGroupByKey's, a combine's: for a lifted
    combine, what enters its partial combining, an upper bound of what crosses). Each such element is
    encoded in one process and decoded in another: a crossing of the data plane. A batch is one element.
    ``tree``: the source tree whose build runs (another checkout measures another version of the graph).
    """
    output = tempfile.mkdtemp(prefix='build-bench-crossings-')
    try:
        done = subprocess.run([sys.executable, '-m', 'benchmarks.storage_runs', '--_job', '--input', root,
                               '--output', output, '--image_size', size_text, '--version', 'bench'],
                              cwd=tree, env=dict(os.environ, PYTHONPATH=tree), capture_output=True, text=True,
                              check=True)
    finally:
        shutil.rmtree(output, ignore_errors=True)
    run = json.loads(done.stdout.strip().splitlines()[-1])
    images = len(listed(root))
    return {(shuffle['label'], shuffle['lifted']):
            run['counters'].get(f"{counters.SHUFFLED_ELEMENTS}/{shuffle['label']}", 0) / images
            for shuffle in run['shuffles']}


def print_crossings(root, names, size_text, before_tree=None, count=400):
    """The crossings an image makes in a build of ``count`` of the photos, by shuffle; with ``before_tree``,
    those of the build in that source tree beside them."""
    subset_root = subset(root, spread(names, count))
    try:
        after = crossings(subset_root, size_text)
        before = crossings(subset_root, size_text, before_tree) if before_tree else {}
    finally:
        shutil.rmtree(subset_root)
    def total(found, lifted=None):
        return sum(value for (_, is_lifted), value in found.items() if lifted is None or is_lifted == lifted)
    print(f'data-plane crossings an image (elements entering shuffles, measured on {count} photos): '
          f'{total(after):.2f}, {total(after, False):.2f} of them outside lifted combines'
          + (f'; before ({before_tree}): {total(before):.2f}, {total(before, False):.2f}' if before else ''))
    for (label, lifted), value in sorted(after.items(), key=lambda item: -item[1]):
        if value >= 0.005:
            print(f"  {value:6.2f}  {label}{' (lifted: partial results)' if lifted else ''}")
    if before:
        print('  before:')
        for (label, lifted), value in sorted(before.items(), key=lambda item: -item[1]):
            if value >= 0.005:
                print(f"  {value:6.2f}  {label}{' (lifted: partial results)' if lifted else ''}")


def guarantee_parts(root, names, size, count=200):
    """CPU ms an image of the sha256 of the source's bytes and of the perceptual fingerprint of the image
    decoding holds (draft-decoded, before resizing), on ``count`` of the photos, one thread (CPU time, so a
    busy machine does not inflate it)."""
    import hashlib  # pylint: disable=import-outside-toplevel
    from imgrec.imaging import image_ops, perceptual_hash  # pylint: disable=import-outside-toplevel
    sample = spread(names, count)
    datas = [open(os.path.join(root, name), 'rb').read() for name in sample]
    images = [image_ops.decode(data, size)[0] for data in datas]
    start = time.thread_time()
    for data in datas:
        hashlib.sha256(data).hexdigest()
    sha_ms = (time.thread_time() - start) / len(datas) * 1e3
    start = time.thread_time()
    for image in images:
        perceptual_hash.perceptual_hashes(image)
    fingerprint_ms = (time.thread_time() - start) / len(images) * 1e3
    print(f'guarantee work an image (CPU, one thread, {len(sample)} photos): sha256 of the source {sha_ms:.2f} ms, '
          f'perceptual hashes, whole and centre (from the draft-decoded image) {fingerprint_ms:.2f} ms')


def startup_section(images, runs):
    """The start-up figures (benchmarks/startup.py: the 40-image build, --help, the no-op refresh of ``images``
    photos), ``runs`` of each."""
    import startup  # pylint: disable=import-outside-toplevel  (a sibling script, found beside this one)
    print('start-up and small jobs (benchmarks/startup.py):', flush=True)
    startup.main(['--images', str(images), '--runs', str(runs)])


def parse_plan(text):
    """'2400x3,20000x1' -> [(2400, 3), (20000, 1)]."""
    plan = []
    for item in text.split(','):
        images, _, rounds = item.strip().partition('x')
        plan.append((int(images), int(rounds or 1)))
    return plan


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--plan', default=None,
                        help=f'sizes and rounds, IMAGESxROUNDS comma-separated (default {DEFAULT_PLAN}, '
                        'unless --images is given)')
    parser.add_argument('--images', type=int, help='one size: this many photos, --rounds rounds')
    parser.add_argument('--crossings', type=int, default=1, help='0: leave out the crossings an image makes')
    parser.add_argument('--crossings_before', help='a source tree (an older checkout) whose crossings to show beside')
    parser.add_argument('--startup', action='store_true', help='also the start-up figures (benchmarks/startup.py)')
    parser.add_argument('--startup_images', type=int, default=2400, help='photos of the no-op refresh (--startup)')
    parser.add_argument('--startup_runs', type=int, default=3, help='runs of each start-up figure (--startup)')
    parser.add_argument('--image_size', default='224')
    parser.add_argument('--workers', type=int, default=os.cpu_count(),
                        help='--direct_num_workers of the modes that name a running mode')
    parser.add_argument('--modes', default='default,default_patches_off,in_memory',
                        help=f"comma-separated modes of the build, each run every round: {', '.join(modes(1))}")
    parser.add_argument('--rounds', type=int, default=3, help='rounds of (each mode, the pool script)')
    parser.add_argument('--naive_images', type=int, default=1200, help='images the naive loop runs on')
    parser.add_argument('--memory_reference', type=int,
                        help='at sizes of 5x this and more, also build this many photos once (the first mode) and '
                        'compare the peak memory')
    parser.add_argument('--peers', default='',
                        help=f"comma-separated peers also run every round: {', '.join(PEERS)} (none by default)")
    parser.add_argument('--ray_python', default=PEERS_PYTHON,
                        help='the Python that runs the Ray script, with Ray Data and TensorFlow (default '
                        '.venv-peers/bin/python: make bench-peers)')
    parser.add_argument('--formats_ratio', action='store_true',
                        help='measure only the cost of --formats tfrecord,array_record against tfrecord alone')
    args = parser.parse_args()
    if args.formats_ratio:
        root = corpus(args.images or MAX_GENERATED)
        formats_ratio(root, args.image_size, args.workers, len(listed(root)))
        return
    known = modes(args.workers)
    chosen = [name.strip() for name in args.modes.split(',') if name.strip()]
    if not chosen or any(name not in known for name in chosen):
        parser.error(f"--modes: choose from {', '.join(known)}")
    args.peers = [name.strip() for name in args.peers.split(',') if name.strip()]
    if any(name not in PEERS for name in args.peers):
        parser.error(f"--peers: choose from {', '.join(PEERS)}")
    if 'ray' in args.peers and not os.access(args.ray_python, os.X_OK):
        parser.error(f'--peers ray: no Python at {args.ray_python}; make bench-peers makes the peers\' venv '
                     '(or name one with Ray Data and TensorFlow: --ray_python)')
    size = parse_image_size(args.image_size)
    if size[0] != size[1]:
        parser.error('--image_size: the pool script makes square images; give one number')
    plan = [(args.images, args.rounds)] if args.images and not args.plan else parse_plan(args.plan or DEFAULT_PLAN)
    for images, rounds in plan:
        one_size(args, known, chosen, size, images, rounds)
        print(flush=True)
    # Measured once, on a few hundred of the distinct photos, whatever the sizes.
    distinct = corpus(MAX_GENERATED)
    if args.crossings:
        print_crossings(distinct, listed(distinct), args.image_size, args.crossings_before)
    guarantee_parts(distinct, listed(distinct), size)
    if args.startup:
        startup_section(args.startup_images, args.startup_runs)


def one_size(args, known, chosen, size, images, rounds):
    """The interleaved rounds at one size, and their table."""
    root = corpus(images)
    names = listed(root)
    args = argparse.Namespace(**{**vars(args), 'rounds': rounds})
    cores = os.cpu_count()
    print(f"{len(names)} photos (640x480 to 1600x1200) -> {size[0]}x{size[1]}, {cores} core(s); build modes: "
          f"{', '.join(chosen)}; {args.rounds} round(s), each mode and the pool script alternating"
          + (f", then the ceiling and the peers ({', '.join(args.peers)})" if args.peers else ''))
    sample = spread(names, args.naive_images)
    naive, naive_before, naive_cpu_before = baseline(root, sample, size)
    output = tempfile.mkdtemp(prefix='build-bench-')
    small_root, _ = distinct_photos(SMALL_RUN)
    runs, pool_runs, small = {name: [] for name in chosen}, [], {name: [] for name in chosen}
    ceiling_runs = []  # the pool script with the guarantee work, once a round, paired with the pool run before it
    peers = args.peers
    peer_runs = {name: [] for name in peers}  # likewise
    classes = sorted({os.path.dirname(name) for name in names})
    per_label = {label: sum(os.path.dirname(name) == kind for name in names) for label, kind in enumerate(classes)}
    try:
        checked = None
        for round_ in range(args.rounds):
            for name in chosen:
                folder = os.path.join(output, f'{name}-{round_}')
                run = build(root, args.image_size, folder, known[name])
                if checked is None:  # the first build is read back and compared; the others only counted
                    checked = run, written_images(run['version_dir'], sample)
                complete(run, len(names))
                runs[name].append(run)
                pool = pool_script(root, size[0], os.path.join(output, f'pool-{round_}'))
                assert pool['written'] == len(names), f"the pool script wrote {pool['written']} of {len(names)}"
                pool_runs.append(pool)
                print(f"  round {round_ + 1}: {name} {run['seconds']:.1f} s, pool script {pool['seconds']:.1f} s",
                      flush=True)
                shutil.rmtree(folder)
                shutil.rmtree(os.path.join(output, f'pool-{round_}'))
            ceiling = pool_script(root, size[0], os.path.join(output, f'ceiling-{round_}'), guarantees=True)
            assert ceiling['written'] == len(names), f"the ceiling wrote {ceiling['written']} of {len(names)}"
            ceiling_runs.append(ceiling)
            print(f"  round {round_ + 1}: pool script with the guarantee work {ceiling['seconds']:.1f} s", flush=True)
            shutil.rmtree(os.path.join(output, f'ceiling-{round_}'))
            for name in peers:  # each paired, as the ceiling is, with the round's last pool script run
                folder = os.path.join(output, f'{name}-{round_}')
                done = peer(name, root, size[0], folder, args.ray_python)
                assert done['written'] == len(names), f"{name} wrote {done['written']} of {len(names)} images"
                assert done['labels'] == per_label, f"{name} wrote {done['labels']} images a label, not {per_label}"
                peer_runs[name].append(done)
                print(f"  round {round_ + 1}: {PEERS[name][1]} {done['seconds']:.1f} s ({done['written']} "
                      f"records in {done['files']} files, checked)", flush=True)
                shutil.rmtree(folder)
        for i in range(SMALL_RUNS):
            for name in chosen:
                small[name].append(build(small_root, args.image_size, os.path.join(output, f'small-{name}-{i}'),
                                         known[name]))
        _, naive_after, naive_cpu_after = baseline(root, sample, size)
        reference = None
        if args.memory_reference and images >= 5 * args.memory_reference:  # the large sizes only
            reference_root, linked = distinct_photos(args.memory_reference)
            reference = build(reference_root, args.image_size, os.path.join(output, 'reference'), known[chosen[0]])
            if linked:
                shutil.rmtree(reference_root)
    finally:
        shutil.rmtree(small_root)
        shutil.rmtree(output, ignore_errors=True)
    run, (built, document) = checked
    naive_rate = 2 * len(naive) / (naive_before + naive_after)
    naive_cpu_ms = (naive_cpu_before + naive_cpu_after) / (2 * len(naive)) * 1e3
    pool_rate = len(names) / median([pool['seconds'] for pool in pool_runs])
    scores = [psnr(built[name], naive[name]) for name in sample if name in built]  # not the quarantined
    ref_bytes = counter(run, counters.RECORD_REF_BYTES) / max(1, counter(run, counters.EXAMPLES_BUILT))
    shard_bytes = sum(s['bytes'] for split in document['splits'].values() for s in split['shards'])
    print(f"\n{'':40s} {'wall s':>7s} {'images/s':>9s} {'CPU ms':>8s} {'peak MB':>8s}   {'against the pool script':s}")
    print(f"{'':40s} {'median':>7s} {'':9s} {'an image':>8s} {'(tree)':>8s}   "
          f"{'speed':>7s} {'CPU':>9s} {'memory':>8s}")
    print(describe(f'pool script ({POOL_PROCESSES} processes)', pool_runs, len(names), pool_runs))
    print(describe('pool script + guarantee work (ceiling)', ceiling_runs, len(names),
                   pool_runs[len(chosen) - 1::len(chosen)]))
    for index, name in enumerate(chosen):  # each build is paired with the pool script run right after it
        print(describe(f'build-dataset, {name}', runs[name], len(names), pool_runs[index::len(chosen)]))
    for name in peers:
        print(describe(f'{PEERS[name][1]}, {POOL_PROCESSES} cores', peer_runs[name], len(names),
                       pool_runs[len(chosen) - 1::len(chosen)]))
    print(f"{f'naive loop (1 process, {len(naive)} images)':40s} {len(names) / naive_rate:7.1f} {naive_rate:9.1f} "
          f"{naive_cpu_ms:8.2f} {'':8s}   {naive_rate / pool_rate:6.2f}x   (before the rounds "
          f"{len(naive) / naive_before:.1f} images/s, after {len(naive) / naive_after:.1f}; wall scaled to "
          f"{len(names)})")
    for name in chosen:
        seconds = [r['seconds'] for r in small[name]]
        start_cpu = median([r['cpu_seconds'] for r in small[name]])
        beyond = (len(names) - SMALL_RUN) / (median([r['seconds'] for r in runs[name]]) - median(seconds))
        marginal_cpu = (median([r['cpu_seconds'] for r in runs[name]]) - start_cpu) / (len(names) - SMALL_RUN)
        print(f"{name}: a {SMALL_RUN}-image build {median(seconds):.2f} s, {start_cpu:.2f} CPU s (median of "
              f"{SMALL_RUNS}: {', '.join(f'{s:.2f}' for s in seconds)} s); beyond it {beyond:.1f} images/s = "
              f"{beyond / pool_rate:.2f}x the pool script's whole-process rate, "
              f"{marginal_cpu * 1e3:.2f} ms CPU an image")
    print(f"CPU utilisation of the first build:   {run['cpu_seconds'] / (run['seconds'] * cores):.0%} of {cores} "
          f"cores; runner process peak {run['peak_root'] / 2**20:.0f} MB; shards {shard_bytes / 2**20:.0f} MB")
    if reference is not None:
        peak = median([r['peak_tree'] for r in runs[chosen[0]]])
        print(f"peak memory, {chosen[0]}: {peak / 2**20:.0f} MB at {len(names)} photos, "
              f"{reference['peak_tree'] / 2**20:.0f} MB at {args.memory_reference}: "
              f"{peak / reference['peak_tree']:.2f}x")
    print(f"bytes through shuffles per image:     {ref_bytes * SHUFFLES_PER_RECORD:.0f} "
          f"({ref_bytes:.0f} B a reference x {SHUFFLES_PER_RECORD} shuffles)")
    print("shards: " + ', '.join(f"{name} {split['num_shards']}" for name, split in document['splits'].items()))
    print(f'PSNR of the build vs the naive loop: mean {np.mean(scores):.1f} dB, min {np.min(scores):.1f} dB')


if __name__ == '__main__':
    main()
