"""A gs:// build with every storage request held back a fixed time, against the same build without: where
does the build wait on one request at a time?

    python -m benchmarks.remote_storage [--images 200] [--delay_ms 30] [--image_size 224] [--corpus DIR]

Runs the build from gs:// to gs:// on the tests' GCS emulator, through ``tests.fault_proxy`` with
``delay_s``: each request waits ``--delay_ms`` before it is forwarded, as a round trip to a distant
service would, while requests in flight wait side by side. The same images are built with no delay and
with the delay, alternately (``--rounds`` pairs). It prints, for each: wall time from process start to
exit and throughput, requests per image, and one line a stage (sorted from the proxy's record of each
request by what it names): its requests, the time during which at least one of them was outstanding
("waiting"), and how many were outstanding on average while any was ("in flight"). A stage whose
requests wait one at a time shows 1.0 in flight, and waits its requests times the delay.
"""
import argparse
import collections
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks import storage_runs  # noqa: E402
from benchmarks.harness import corpus  # noqa: E402
from imgrec.contract import layout  # noqa: E402

LAUNCHER = 'pre-flight, leases, LATEST'


def object_name(timed):
    """The object a request names; from the path when the client left its slashes unescaped (Beam's reads)."""
    if '/' in timed.name or '/o/' not in timed.path:
        return timed.name
    return timed.path.split('/o/', 1)[1].split('?', 1)[0]


def stage(timed, input_prefix):
    """Which part of the build a request served, from what it names."""
    name = object_name(timed)
    if timed.kind == 'list':
        return 'list input' if f'prefix={input_prefix}' in timed.path else 'list output (checks, publication)'
    if timed.kind == 'metadata' and not name:
        return "bucket look-ups (Beam's file system)"
    if name.startswith(f'{input_prefix}/'):
        return 'read sources' if timed.kind == 'read' else 'source metadata'
    if f'/{layout.SPILL_DIR}/' in name:
        if timed.method == 'DELETE':
            return 'delete spill files'
        return 'read frames' if timed.ranged else 'write spill files'
    if '/rewriteTo/' in timed.path:
        return 'publish: copy'
    if timed.method == 'DELETE':
        return 'publish: delete staging' if layout.STAGING_MARK in name else LAUNCHER
    if name.endswith(f'.{layout.TFRECORD}') or layout.ARRAY_RECORD in name:
        return 'write shards' if timed.method != 'GET' else 'read shards back (checks)'
    if f'/{layout.INDEX_DIR}/' in name:
        return 'write index'
    if layout.LEASES_DIR in name or name.endswith(layout.LATEST) or '.probe-' in name:
        return LAUNCHER
    return 'write metadata files' if timed.method != 'GET' else 'read metadata files'


def waiting(requests):
    """(seconds during which at least one of ``requests`` was outstanding, their summed durations)."""
    covered, end, total = 0.0, None, 0.0
    for timed in sorted(requests, key=lambda t: t.start):
        total += timed.end - timed.start
        if end is None or timed.start > end:
            covered += timed.end - timed.start
            end = timed.end
        elif timed.end > end:
            covered += timed.end - end
            end = timed.end
    return covered, total


def stages(run, input_prefix):
    """{stage: (requests, waiting seconds, mean in flight)}."""
    grouped = collections.defaultdict(list)
    for timed in run['timeline']:
        grouped[stage(timed, input_prefix)].append(timed)
    found = {}
    for name, requests in grouped.items():
        covered, total = waiting(requests)
        found[name] = (len(requests), covered, total / covered if covered else 0.0)
    return found


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--images', type=int, default=200)
    parser.add_argument('--delay_ms', type=float, default=30.0)
    parser.add_argument('--rounds', type=int, default=1, help='pairs of runs (no delay, delay), alternated')
    parser.add_argument('--image_size', default='224')
    parser.add_argument('--workers', type=int, default=2)
    parser.add_argument('--shards', type=int, default=32,
                        help='train shards (validation: an eighth): publication copies and deletes each file')
    parser.add_argument('--corpus', help='a labelled image folder to take the images from (default: generated photos)')
    args = parser.parse_args(argv)
    root = args.corpus or corpus(args.images)
    files = storage_runs.image_files(root, args.images)
    results = collections.defaultdict(list)
    with storage_runs.Service() as service:
        source = service.create_bucket('remote-in')
        service.upload_files(files, f'{source}/images')
        for round_ in range(args.rounds):
            for delay_ms in (0.0, args.delay_ms):
                service.proxy.configure(delay_s=delay_ms / 1000)
                output = service.create_bucket(f'remote-out-{round_}-{int(delay_ms)}')
                results[delay_ms].append(storage_runs.run_build(service, [
                    '--input', f'{source}/images', '--output', f'{output}/ds', '--image_size', args.image_size,
                    '--version', 'v1', '--direct_running_mode', 'multi_processing',
                    '--direct_num_workers', str(args.workers),
                    '--num_shards', f'train={args.shards},validation={max(1, args.shards // 8)}']))
    print(f'{args.images} images ({root}) built at {args.image_size} from gs:// to gs:// on the GCS emulator, '
          f'{args.workers} local worker processes; every request held back {args.delay_ms:.0f} ms or not at all')
    medians = {}
    for delay_ms, runs in results.items():
        seconds = statistics.median(run['seconds'] for run in runs)
        medians[delay_ms] = seconds
        requests = statistics.median(len(run['timeline']) for run in runs)
        print(f'\ndelay {delay_ms:.0f} ms: {seconds:.1f} s wall (median of {len(runs)}), '
              f'{args.images / seconds:.1f} images/s, {requests / args.images:.2f} requests per image '
              f'({requests:.0f})')
        print(f'  {"stage":38} {"requests":>8} {"waiting s":>9} {"in flight":>9}')
        last = stages(runs[-1], 'images')
        for name, (count, covered, in_flight) in sorted(last.items(), key=lambda item: -item[1][1]):
            print(f'  {name:38} {count:8} {covered:9.2f} {in_flight:9.1f}')
    if args.delay_ms in medians and 0.0 in medians:
        print(f'\nthroughput with the delay: {medians[0.0] / medians[args.delay_ms]:.2f} of the throughput without')


if __name__ == '__main__':
    main()
