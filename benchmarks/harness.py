"""What the benchmarks share: generated photo corpora, and running the build as a user runs it while
measuring its whole process tree (wall time, CPU, peak memory) and reading back its counters (by
``imgrec.contract.counters.read``, the rule the build's summary uses; ``counter`` picks one out)."""
import collections
import contextlib
import json
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time

import psutil

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

BASE_CORPUS = 2000
MAX_GENERATED = 2400
# Generated corpora, kept between runs: benchmarks/out, or IMGREC_BENCH_CACHE (a folder elsewhere, say /tmp).
CACHE = os.environ.get('IMGREC_BENCH_CACHE') or os.path.join(os.path.dirname(os.path.abspath(__file__)), 'out')


def corpus(count):
    """``count`` distinct photo files: a generated corpus, or ``distinct_copies`` of 2,000 generated photos."""
    from imgrec.samples.generate import photo_corpus  # pylint: disable=import-outside-toplevel  # not in the job's process
    if count <= MAX_GENERATED:
        return photo_corpus(CACHE, count)
    return distinct_copies(photo_corpus(CACHE, BASE_CORPUS), os.path.join(CACHE, f'copies-{count}'), count)


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
    from imgrec.pipelines import build_dataset  # pylint: disable=import-outside-toplevel
    from imgrec.pipelines.local import workers  # pylint: disable=import-outside-toplevel
    workers.tune_malloc()  # as build-dataset does (imgrec.pipelines.build_dataset.cli)
    config, result = build_dataset.run(['--progress', 'off', *args])
    values = {str(counter): value for counter, value in counters.read(result).items()}
    print(json.dumps({'version_dir': config.version_dir, 'counters': values}), flush=True)
    os._exit(0)  # as build-dataset ends (imgrec.pipelines.build_dataset.cli): no interpreter teardown


if __name__ == '__main__' and sys.argv[1:2] == ['--_job']:
    _run_job(sys.argv[2:])
