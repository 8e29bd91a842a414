"""What the benchmarks share: generated photo corpora, and running the build as a user runs it while
measuring its whole process tree (wall time, CPU, peak memory) and reading back its counters (by
``imgrec.contract.counters.read``, the rule the build's summary uses; ``counter`` picks one out)."""
import collections
import contextlib
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time

import psutil

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

MAX_GENERATED = 2400
# Generated corpora, kept between runs and shared by every checkout (a work tree may be laid anew):
# ~/.cache/imgrec-bench, or IMGREC_BENCH_CACHE (a folder elsewhere, say /tmp).
CACHE = os.environ.get('IMGREC_BENCH_CACHE') or os.path.join(os.path.expanduser('~'), '.cache', 'imgrec-bench')
# The pixel variants of a photo that are no near-duplicates of each other: each of Pillow's 7 flips and
# rotations and none, of the photo and of its negative. A flip negates half of the perceptual hash's
# DCT signs (32 bits apart), the negative all of them (64). A transpose or a rotation of a symmetric
# picture can come within the hash threshold (26 of 3,600 variant pairs of 30 photos), and the colour
# thumbnails refuse every such candidate: no group forms, at the cost of a check.
VARIANTS = 16


def corpus(count):
    """``count`` distinct photo files: a generated corpus, or ``pixel_variants`` of the 2,400 generated photos."""
    from imgrec.samples.generate import photo_corpus  # pylint: disable=import-outside-toplevel  # not in the job's process
    if count <= MAX_GENERATED:
        return photo_corpus(CACHE, count)
    return pixel_variants(photo_corpus(CACHE, MAX_GENERATED), os.path.join(CACHE, f'variants-{count}'), count)


def distinct_copies(base, root, count):
    """``root``, made once: ``count`` copies of the images under ``base``, in turn, each with distinct trailing
    bytes (JPEG decoders stop at the end-of-image marker: the same pixels, distinct files and sha256s)."""
    if os.path.isdir(root):
        return root
    files = listed(base)
    for i in range(count):
        name = files[i % len(files)]
        target = os.path.join(root + '.partial', os.path.dirname(name), f'{i:06d}.jpg')
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(os.path.join(base, name), 'rb') as source, open(target, 'wb') as out:
            out.write(source.read() + f'copy {i}'.encode())
    os.rename(root + '.partial', root)
    return root


def _variant(image, variant):
    """Pixel variant ``variant`` (0 to VARIANTS - 1) of an RGB image."""
    from PIL import Image, ImageOps  # pylint: disable=import-outside-toplevel
    flip = variant % 8
    image = image.transpose(list(Image.Transpose)[flip - 1]) if flip else image
    return ImageOps.invert(image) if variant >= 8 else image


def _write_copies(job):
    """Every copy of one photo: copy c is pixel variant c % VARIANTS, its file ending in distinct bytes."""
    import io  # pylint: disable=import-outside-toplevel
    from PIL import Image  # pylint: disable=import-outside-toplevel
    source, targets = job
    image = Image.open(source).convert('RGB')
    encoded = {}
    for copy, (index, target) in enumerate(targets):
        variant = copy % VARIANTS
        if variant not in encoded:
            out = io.BytesIO()
            _variant(image, variant).save(out, 'JPEG', quality=90)
            encoded[variant] = out.getvalue()
        with open(target, 'wb') as file:
            file.write(encoded[variant] + f'copy {index}'.encode())


def pixel_variants(base, root, count):
    """``root``, made once: ``count`` files, copy ``i`` of image ``i mod n`` of the ``n`` under ``base``, in its
    class. Up to VARIANTS copies of a photo differ in pixels (``_variant``); beyond that they repeat a variant's
    pixels with distinct trailing bytes (JPEG decoders stop at the end-of-image marker), so past
    n x VARIANTS images a photo's copies form near-duplicate groups of count / (n x VARIANTS)."""
    import multiprocessing  # pylint: disable=import-outside-toplevel
    if os.path.isdir(root):
        return root
    files, partial = listed(base), root + '.partial'
    shutil.rmtree(partial, ignore_errors=True)
    jobs = {name: [] for name in files}
    for i in range(count):
        name = files[i % len(files)]
        os.makedirs(os.path.join(partial, os.path.dirname(name)), exist_ok=True)
        jobs[name].append((i, os.path.join(partial, os.path.dirname(name), f'{i:06d}.jpg')))
    with multiprocessing.Pool() as pool:
        pool.map(_write_copies, [(os.path.join(base, name), targets) for name, targets in jobs.items()], chunksize=4)
    os.rename(partial, root)
    return root


def listed(root):
    """Relative paths of the images under ``root``, sorted."""
    return [os.path.join(kind, name) for kind in sorted(os.listdir(root))
            for name in sorted(os.listdir(os.path.join(root, kind)))]


_HELD = object()  # measure's default: stderr held, shown if the command fails


class TreeSampler(threading.Thread):
    """Peak RSS of a process and of it plus every descendant, summed (``peak_tree``), and each process's
    own peak RSS and CPU seconds as last seen (``peak_rss``, ``cpu``, by pid), sampled every ``interval`` s."""

    def __init__(self, pid, interval=0.2):
        super().__init__(daemon=True)
        self._root = psutil.Process(pid)
        self._interval = interval
        self._done = threading.Event()
        self.peak_rss = collections.Counter()
        self.cpu = {}
        self.peak_tree = 0

    def _sample(self):
        tree = 0
        for process in [self._root, *self._root.children(recursive=True)]:
            try:
                rss, times = process.memory_info().rss, process.cpu_times()
            except psutil.Error:
                continue
            tree += rss
            self.peak_rss[process.pid] = max(self.peak_rss[process.pid], rss)
            self.cpu[process.pid] = times.user + times.system
        self.peak_tree = max(self.peak_tree, tree)

    def run(self):
        while not self._done.is_set():
            with contextlib.suppress(psutil.Error):
                self._sample()
            self._done.wait(self._interval)

    def stop(self):
        self._done.set()
        self.join()

    @property
    def peak_root(self):
        return self.peak_rss[self._root.pid]

    def workers(self):
        """[(peak rss, CPU seconds)] of every process but the root."""
        return [(self.peak_rss[pid], self.cpu.get(pid, 0.0)) for pid in self.peak_rss if pid != self._root.pid]


def measure(command, env=None, stderr=_HELD):
    """Runs ``command`` (a list) in a process of its own, as a user would; returns its stdout and
    measurements: seconds (process start to exit), cpu_seconds (the whole tree), peak_tree and peak_root
    (bytes), root_cpu (CPU seconds of the process itself) and workers (``TreeSampler.workers``). ``env``:
    variables added to this environment. Its stderr is shown only if it fails (``stderr``: where it goes
    instead, say None for the terminal)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    with tempfile.TemporaryFile('w+') as held:
        start = time.perf_counter()
        process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, text=True,
                                   stderr=held if stderr is _HELD else stderr, env=dict(os.environ, **(env or {})))
        sampler = TreeSampler(process.pid)
        sampler.start()
        stdout, _ = process.communicate()
        seconds = time.perf_counter() - start
        sampler.stop()
        if process.returncode:
            held.seek(0)
            sys.stderr.write(held.read()[-4000:])
            raise SystemExit(f'{" ".join(map(os.path.basename, command[:4]))} failed with status {process.returncode}')
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return stdout, dict(seconds=seconds, cpu_seconds=cpu, peak_tree=sampler.peak_tree, peak_root=sampler.peak_root,
                        root_cpu=sampler.cpu.get(process.pid, 0.0), workers=sampler.workers())


def job(args, env=None):
    """Runs ``build-dataset ARGS`` in a process of its own (``measure``); returns its counters and
    measurements. The counters are keyed 'namespace/name' (``counter`` reads one)."""
    stdout, measured = measure([sys.executable, os.path.abspath(__file__), '--_job', *args], env)
    return dict(json.loads(stdout.strip().splitlines()[-1]), **measured)


def counter(run, which):
    """The value of counter ``which`` (a ``imgrec.contract.counters.Counter``) in what ``job`` returned."""
    return run['counters'].get(str(which), 0)


def _run_job(args):
    """Inside the job's own process: the build as ``build-dataset`` runs it, then its counters as JSON."""
    import logging  # pylint: disable=import-outside-toplevel
    logging.basicConfig(level=logging.ERROR)
    from imgrec.contract import counters  # pylint: disable=import-outside-toplevel
    from imgrec.pipelines import launcher  # pylint: disable=import-outside-toplevel
    from imgrec.pipelines.local import workers  # pylint: disable=import-outside-toplevel
    workers.tune_malloc()  # as build-dataset does (imgrec.pipelines.build_dataset.cli)
    config, result = launcher.run(['--progress', 'off', *args])
    values = {str(counter): value for counter, value in counters.read(result).items()}
    print(json.dumps({'version_dir': config.version_dir, 'counters': values}), flush=True)
    os._exit(0)  # as build-dataset ends (imgrec.pipelines.build_dataset.cli): no interpreter teardown


if __name__ == '__main__' and sys.argv[1:2] == ['--_job']:
    _run_job(sys.argv[2:])
