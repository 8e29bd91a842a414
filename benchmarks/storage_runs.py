"""What the storage benchmarks share (``cost_model``, ``remote_storage``): a GCS server behind the fault
proxy, a corpus uploaded to it, and builds from gs:// to gs:// run as a user runs them, each measured.

- The server is ``gcp-storage-emulator`` (in memory), the one the tests use; ``tests.fault_proxy`` sits in
  front of it, so every request of the build is seen, timed (``FaultProxy.timeline``) and, with
  ``delay_s``, held back as a distant service would hold it.
- A build runs in a process of its own (``build-dataset``, DirectRunner, a worker process per core). Its
  process tree is sampled every 0.2 s: peak memory and CPU of the launching process and of each worker.
- Each GroupByKey's input is tapped (``tap_shuffles``): every element entering a shuffle is encoded with
  the coder Beam gives that input, and its bytes counted, ``imgrec.contract.counters.SHUFFLED_BYTES/<label>``.
  The taps cost a little CPU of their own (one encoding an element a shuffle).
- The storage layer counts its own requests (``imgrec.storage.request_counts``): the workers' reach the
  job's counters; the launcher's own are printed by the job process itself.
"""
import collections
import json
import os
import sys

import apache_beam as beam
from apache_beam.metrics import Metrics
from apache_beam.pipeline import PipelineVisitor
from apache_beam.typehints import typehints

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from benchmarks.harness import measure  # noqa: E402
from imgrec.contract import counters  # noqa: E402
from tests.gcs_emulator import Emulator, start_server  # noqa: E402


class Service(Emulator):
    """The emulator (the tests' ``gcs_emulator.Emulator``), and the fault proxy in front of it (``proxy``):
    a context manager. Its own client talks to the emulator directly (setting up and checking, not
    counted by the proxy)."""

    def __init__(self, delay_s=0.0):  # pylint: disable=super-init-not-called  # the server starts on __enter__
        self._delay_s = delay_s
        self._server = self.proxy = self.client = self.url = None

    def __enter__(self):
        from tests.fault_proxy import FaultProxy  # pylint: disable=import-outside-toplevel
        url, self._server = start_server()
        os.environ['STORAGE_EMULATOR_HOST'] = url  # this process's clients: anonymous, to the emulator
        super().__init__(url)
        self.proxy = FaultProxy(self.url, delay_s=self._delay_s).start()
        return self

    def __exit__(self, *exc_info):
        self.proxy.stop()
        self._server.terminate()
        self._server.wait()


def image_files(root, count):
    """{relative name: path} of ``count`` images of the labelled folder ``root``, taken from its classes in
    turn (so any ``count`` has every class), each class's files in name order."""
    classes = sorted(name for name in os.listdir(root) if os.path.isdir(os.path.join(root, name)))
    queues = [collections.deque(sorted(f'{kind}/{name}' for name in os.listdir(os.path.join(root, kind))))
              for kind in classes]
    chosen = {}
    while len(chosen) < count and any(queues):
        for queue in queues:
            if queue and len(chosen) < count:
                name = queue.popleft()
                chosen[name] = os.path.join(root, name)
    if len(chosen) < count:
        raise SystemExit(f'{root} holds {len(chosen)} images, fewer than {count}')
    return chosen


def changed_copy(data, i):
    """The bytes of an image changed in place: its pixels as they were, its bytes not (decoders stop at the
    end-of-image marker)."""
    return data + f'changed {i}'.encode()


def run_build(service, args):
    """Runs ``build-dataset ARGS`` (with ``--progress off``) in a process of its own, its storage through
    ``service.proxy``; returns what it measured (a dict):

    seconds, cpu_seconds (whole tree), launcher_peak, launcher_cpu, workers ([(peak rss, CPU s)]),
    peak_tree, counters ({'namespace/name': value}: the workers'), launcher_requests (the launching
    process's own storage requests, same keys), shuffles ([{'label', 'lifted'}]), timeline (the proxy's
    ``Timed`` requests of this run).
    """
    environment = dict(STORAGE_EMULATOR_HOST=service.proxy.url, NO_GCE_CHECK='true',
                       PYTHONPATH=os.pathsep.join(filter(None, (ROOT, os.environ.get('PYTHONPATH')))))
    first = len(service.proxy.timeline)
    stdout, measured = measure([sys.executable, '-m', 'benchmarks.storage_runs', '--_job', *args], environment)
    return dict(json.loads(stdout.strip().splitlines()[-1]), seconds=measured['seconds'],
                cpu_seconds=measured['cpu_seconds'], launcher_peak=measured['peak_root'],
                launcher_cpu=measured['root_cpu'], workers=measured['workers'], peak_tree=measured['peak_tree'],
                timeline=service.proxy.timeline[first:])


def requests_of(run):
    """{Counter: count} of a run's storage requests and bytes: the workers' and the launcher's."""
    found = collections.Counter()
    for source in (run['counters'], run['launcher_requests']):
        for kind in (*counters.REQUEST_KINDS, counters.BYTES_DOWNLOADED, counters.BYTES_UPLOADED):
            found[kind] += source.get(str(kind), 0)
    return found


def shuffled(run):
    """(bytes, elements) entering the run's shuffles, and (bytes, elements) entering the combines that
    Beam lifts (partial results before the shuffle: an upper bound of what crosses it)."""
    totals = {False: [0, 0], True: [0, 0]}
    for shuffle in run['shuffles']:
        total = totals[shuffle['lifted']]
        total[0] += run['counters'].get(f"{counters.SHUFFLED_BYTES}/{shuffle['label']}", 0)
        total[1] += run['counters'].get(f"{counters.SHUFFLED_ELEMENTS}/{shuffle['label']}", 0)
    return tuple(totals[False]), tuple(totals[True])


# ---- Inside the job's process -------------------------------------------------------------------------

def tap_shuffles(pipeline):
    """Adds to ``pipeline`` a counter of the bytes (as Beam encodes them) entering each GroupByKey; returns
    [{'label', 'lifted'}], ``lifted`` for those inside a CombinePerKey (Beam combines before shuffling)."""
    class Shuffles(PipelineVisitor):
        def __init__(self):
            self.found, self._combines = [], 0

        def enter_composite_transform(self, node):
            self._combines += isinstance(node.transform, beam.CombinePerKey)

        def leave_composite_transform(self, node):
            self._combines -= isinstance(node.transform, beam.CombinePerKey)

        def visit_transform(self, node):
            if isinstance(node.transform, beam.GroupByKey):
                self.found.append((node.full_label, node.inputs[0], self._combines > 0))

    visitor = Shuffles()
    pipeline.visit(visitor)
    tapped = []
    for label, pcoll, lifted in visitor.found:
        try:  # the runner encodes a shuffle's input as key-value pairs
            element_type = typehints.coerce_to_kv_type(pcoll.element_type, label)
        except ValueError:
            element_type = pcoll.element_type
        coder = beam.coders.registry.get_coder(element_type)
        _ = pcoll | f"ShuffledBytes[{label.replace('/', '|')}]" >> beam.ParDo(_CountShuffled(label, coder))
        tapped.append({'label': label, 'lifted': lifted})
    return tapped


class _CountShuffled(beam.DoFn):
    """Counts the encoded bytes and the elements of what enters one shuffle."""

    def __init__(self, label, coder):
        self._coder = coder
        self._bytes = Metrics.counter(counters.SHUFFLED_BYTES, label)
        self._elements = Metrics.counter(counters.SHUFFLED_ELEMENTS, label)

    def process(self, element):
        self._bytes.inc(len(self._coder.encode(element)))
        self._elements.inc()


def _run_job(args):
    """The build as ``build-dataset`` runs it, its shuffles tapped; then its counters as one JSON line."""
    import logging  # pylint: disable=import-outside-toplevel
    logging.basicConfig(level=logging.ERROR)
    from imgrec.storage import request_counts  # pylint: disable=import-outside-toplevel
    from imgrec.pipelines import launcher  # pylint: disable=import-outside-toplevel
    from imgrec.pipelines.local import workers  # pylint: disable=import-outside-toplevel
    workers.tune_malloc()
    shuffles = []
    build_pipeline = launcher.build_pipeline

    def tapped(pipeline, config, facts):
        published = build_pipeline(pipeline, config, facts)
        shuffles.extend(tap_shuffles(pipeline))
        return published

    launcher.build_pipeline = tapped
    config, result = launcher.run(['--progress', 'off', *args])
    print(json.dumps({
        'version_dir': config.version_dir,
        'counters': {str(counter): value for counter, value in counters.read(result).items()},
        'launcher_requests': {str(counter): value for counter, value in request_counts.made().items()},
        'shuffles': shuffles,
    }), flush=True)
    os._exit(0)  # as build-dataset ends: no interpreter teardown


if __name__ == '__main__' and sys.argv[1:2] == ['--_job']:
    _run_job(sys.argv[2:])
