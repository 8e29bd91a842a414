"""What a build costs on Dataflow, from the counters of builds run here: per image, then for a million.

    python -m benchmarks.cost_model [--images 200] [--changed 0.01] [--image_size 224] [--corpus DIR]

Builds ``--images`` photos, and a tenth as many (at least 4), from gs:// to gs:// on a local GCS server (the tests'
emulator, behind ``tests.fault_proxy``), each as a user runs ``build-dataset`` (DirectRunner, a worker
process per core); then changes ``--changed`` of each input in place and refreshes it. From each run it
reads:

- CPU seconds of the whole process tree, and the peak memory of each worker process and the launcher;
- the storage requests by kind and the bytes they moved, as the storage layer counted them
  (``imgrec.storage.request_counts``; the workers' through Beam counters, the launcher's printed by
  its process), and the requests the proxy saw that Beam's own file system made (``FileSystems``:
  bucket look-ups, ``exists``, ``match``, reading shards back), which that layer does not count;
- the bytes entering each shuffle: every element entering a GroupByKey is encoded with the coder Beam
  gives the GroupByKey's input and counted (``storage_runs.tap_shuffles``); combines Beam lifts (they
  shuffle partial results only) are shown apart, but for those that gather their inputs into lists
  (``GATHERING_COMBINES``), whose bytes all cross.

What one image costs is the difference between the two sizes divided by the images between them, so
the fixed cost of a run (Beam's start, the checks, publishing) drops out. Those figures, times the list
prices of ``benchmarks.prices``, give the cost of a million images, of an ImageNet-sized build (1.28 M)
and of its refresh. A Dataflow worker is billed for the vCPUs and memory it is given, busy or not:
vCPU-hours are the CPU seconds divided by ``--utilisation`` (how busy workers are kept, an assumption;
the local run's own figure is printed beside it), GB-hours the vCPU-hours times the memory of a vCPU of
the machine type. Dataflow's own start (minutes of workers booting) and its staging files are not in it.
"""
import argparse
import collections
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks import prices, storage_runs  # noqa: E402
from benchmarks.harness import corpus  # noqa: E402
from imgrec.contract import counters  # noqa: E402

MIN_SMALL = 4
MILLION = 1_000_000
IMAGENET = 1_281_167
CLASS_A = (counters.WRITES, counters.LISTS, counters.COPIES)
CLASS_B = (counters.OBJECT_READS, counters.RANGED_READS, counters.METADATA_READS)
KIND_NAMES = {counters.OBJECT_READS: 'object reads', counters.RANGED_READS: 'ranged reads',
              counters.METADATA_READS: 'metadata reads', counters.WRITES: 'writes', counters.LISTS: 'lists',
              counters.COPIES: 'copies', counters.DELETES: 'deletes'}
BEAMS_OWN_A, BEAMS_OWN_B, BEAMS_OWN_FREE = "Beam's own, class A", "Beam's own, class B", "Beam's own, free"


def smaller(images):
    """The images of the smaller build, whose cost the larger one's less gives the cost of the rest."""
    return max(MIN_SMALL, images // 10)


def billing_class(timed):
    """'A', 'B' or 'free': the Cloud Storage operation class of one request the proxy saw."""
    if timed.method == 'DELETE':
        return 'free'
    return 'B' if timed.method in ('GET', 'HEAD') else 'A'


# Lifted combines whose accumulator keeps every input (the near-duplicate search's band lists): lifting
# makes their elements fewer, not their bytes, so what enters them crosses the shuffle whole and is priced.
GATHERING_COMBINES = ('NearDuplicates/FindGroups/Candidates/GroupBands/',)


def gathered_bytes(run):
    """The bytes entering the run's GATHERING_COMBINES."""
    return sum(run['counters'].get(f"{counters.SHUFFLED_BYTES}/{shuffle['label']}", 0)
               for shuffle in run['shuffles'] if shuffle['label'].startswith(GATHERING_COMBINES))


def figures(run):
    """{name: value} of one run, the quantities the model scales."""
    requests = storage_runs.requests_of(run)
    (shuffle_bytes, shuffle_elements), (lifted_bytes, _) = storage_runs.shuffled(run)
    gathered = gathered_bytes(run)
    shuffle_bytes, lifted_bytes = shuffle_bytes + gathered, lifted_bytes - gathered
    seen = collections.Counter(billing_class(timed) for timed in run['timeline'])
    counted = {'A': sum(requests[kind] for kind in CLASS_A), 'B': sum(requests[kind] for kind in CLASS_B),
               'free': requests[counters.DELETES]}
    found = {'cpu_seconds': run['cpu_seconds'], 'worker_cpu_seconds': sum(cpu for _, cpu in run['workers']),
             'shuffle_bytes': shuffle_bytes, 'shuffle_elements': shuffle_elements, 'lifted_bytes': lifted_bytes,
             'downloaded': requests[counters.BYTES_DOWNLOADED], 'uploaded': requests[counters.BYTES_UPLOADED],
             BEAMS_OWN_A: seen['A'] - counted['A'], BEAMS_OWN_B: seen['B'] - counted['B'],
             BEAMS_OWN_FREE: seen['free'] - counted['free']}
    found.update({KIND_NAMES[kind]: requests[kind] for kind in counters.REQUEST_KINDS})
    return found


def per_image(small, large, images_between):
    """{name: the marginal value of one image}: (large - small) / images_between."""
    return {name: (large[name] - small[name]) / images_between for name in large}


def dataflow_cost(unit, images, utilisation):
    """{column: value} of ``images`` images at ``unit`` (per_image figures), at the list prices."""
    cpu_seconds = max(0.0, unit['cpu_seconds']) * images
    vcpu_hours = cpu_seconds / 3600 / utilisation
    gb_hours = vcpu_hours / prices.WORKER_VCPUS * prices.WORKER_GB
    disk_gb_hours = vcpu_hours / prices.WORKER_VCPUS * prices.WORKER_DISK_GB
    shuffle_gb = max(0.0, unit['shuffle_bytes']) * images * prices.SHUFFLE_PASSES / prices.GIB
    billable = prices.billable_shuffle_gb(shuffle_gb)
    class_a = max(0.0, sum(unit[KIND_NAMES[kind]] for kind in CLASS_A) + unit[BEAMS_OWN_A]) * images
    class_b = max(0.0, sum(unit[KIND_NAMES[kind]] for kind in CLASS_B) + unit[BEAMS_OWN_B]) * images
    usd = {'vCPU': vcpu_hours * prices.DATAFLOW_VCPU_HOUR.usd, 'memory': gb_hours * prices.DATAFLOW_GB_HOUR.usd,
           'disk': disk_gb_hours * prices.DATAFLOW_PD_GB_HOUR.usd, 'shuffle': billable * prices.DATAFLOW_SHUFFLE_GB.usd,
           'class A': class_a * prices.STORAGE_CLASS_A.usd, 'class B': class_b * prices.STORAGE_CLASS_B.usd}
    return {'vcpu_hours': vcpu_hours, 'gb_hours': gb_hours, 'disk_gb_hours': disk_gb_hours, 'shuffle_gb': shuffle_gb,
            'billable_shuffle_gb': billable, 'class_a': class_a, 'class_b': class_b,
            'deletes': max(0.0, unit['deletes'] + unit[BEAMS_OWN_FREE]) * images, 'usd': usd}


def _build_args(bucket, output, version, args):
    return ['--input', f'{bucket}/images', '--output', f'{output}/ds', '--image_size', args.image_size,
            '--version', version, '--direct_running_mode', 'multi_processing',
            '--direct_num_workers', str(args.workers)]


def change_in_place(service, bucket, names, count):
    """Rewrites ``count`` of the uploaded images (spread over ``names``) with new bytes; returns how many."""
    step = max(1, len(names) // count)
    for i, name in enumerate(names[::step][:count]):
        url = f'{bucket}/images/{name}'
        service.upload_bytes(url, storage_runs.changed_copy(service.read_bytes(url), i))
    return min(count, len(names[::step]))


def measure(service, root, images, args):
    """The full build and the refresh of ``images`` images: (build run, refresh run, images changed)."""
    files = storage_runs.image_files(root, images)
    bucket = service.create_bucket(f'cost-in-{images}')
    output = service.create_bucket(f'cost-out-{images}')
    service.upload_files(files, f'{bucket}/images')
    build = storage_runs.run_build(service, _build_args(bucket, output, 'v1', args))
    changed = change_in_place(service, bucket, sorted(files), max(1, round(images * args.changed)))
    refresh = storage_runs.run_build(service, _build_args(bucket, output, 'v2', args))
    decoded = refresh['counters'].get(str(counters.IMAGES_DECODED), 0)
    if decoded != changed:
        print(f'note: the refresh of {images} images decoded {decoded}, not the {changed} changed', file=sys.stderr)
    return build, refresh, changed


def _number(value):
    if value == 0:
        return '0'
    if abs(value) >= 100:
        return f'{value:,.0f}'
    if abs(value) >= 1:
        return f'{value:,.2f}'
    return f'{value:.4g}'


def report(args, root, runs, units):
    """The whole printout, as lines."""
    small, large = smaller(args.images), args.images
    (build_small, refresh_small, _), (build_large, refresh_large, changed_large) = runs
    lines = [f'cost model: {large} images ({root}) built at {args.image_size} from gs:// to gs:// on the GCS '
             f'emulator, {args.workers} local worker processes; refreshed after {changed_large} changed in place',
             '', 'runs (whole process tree):']
    for name, images, run in (('build', small, build_small), ('build', large, build_large),
                              ('refresh', small, refresh_small), ('refresh', large, refresh_large)):
        worker_peak = max((peak for peak, _ in run['workers']), default=0)
        busy = sum(cpu for _, cpu in run['workers']) / max(1e-9, run['seconds'] * max(1, len(run['workers'])))
        lines.append(f'  {name:8} {images:6} images: {run["seconds"]:6.1f} s, {run["cpu_seconds"]:6.1f} CPU s '
                     f'(workers busy {busy:.0%} of the run); peak memory: largest worker '
                     f'{worker_peak / 2**20:.0f} MB, launcher {run["launcher_peak"] / 2**20:.0f} MB, '
                     f'tree {run["peak_tree"] / 2**20:.0f} MB')
    build_unit, refresh_unit = units
    lines += ['', f'per image (the {large}-image run less the {small}-image run, over {large - small} images):',
              f'  {"":34} {"build":>12} {"refresh":>12}']
    rows = [('CPU seconds (whole tree)', 'cpu_seconds'), ('CPU seconds (workers)', 'worker_cpu_seconds'),
            ('bytes into shuffles', 'shuffle_bytes'), ('elements into shuffles', 'shuffle_elements'),
            ('bytes into lifted combines', 'lifted_bytes'), ('bytes downloaded', 'downloaded'),
            ('bytes uploaded', 'uploaded')]
    rows += [(f'requests: {KIND_NAMES[kind]}', KIND_NAMES[kind]) for kind in counters.REQUEST_KINDS]
    rows += [(f'requests: {name}', name) for name in (BEAMS_OWN_A, BEAMS_OWN_B, BEAMS_OWN_FREE)]
    for title, key in rows:
        lines.append(f'  {title:34} {_number(build_unit[key]):>12} {_number(refresh_unit[key]):>12}')
    lines += ['', f'Dataflow batch, {prices.REGION} list prices read {prices.READ_ON} (benchmarks/prices.py: '
                  f're-check them), n1-standard-{prices.WORKER_VCPUS} workers busy {args.utilisation:.0%} of the '
                  f'time they are billed:',
              f'  {"images":>10} {"case":12} {"vCPU-h":>8} {"GB-h":>8} {"PD GB-h":>8} {"shuffle GB":>10} '
              f'{"billable":>8} {"class A":>10} {"class B":>10} {"deletes":>9} {"USD":>8}']
    cases = [(MILLION, 'build', build_unit), (IMAGENET, 'build', build_unit),
             (IMAGENET, f'refresh {args.changed:.0%}', refresh_unit)]
    for images, case, unit in cases:
        cost = dataflow_cost(unit, images, args.utilisation)
        lines.append(f'  {images:>10,} {case:12} {cost["vcpu_hours"]:8.1f} {cost["gb_hours"]:8.1f} '
                     f'{cost["disk_gb_hours"]:8.0f} {cost["shuffle_gb"]:10.2f} {cost["billable_shuffle_gb"]:8.2f} '
                     f'{cost["class_a"]:10,.0f} {cost["class_b"]:10,.0f} {cost["deletes"]:9,.0f} '
                     f'{sum(cost["usd"].values()):8.2f}')
    cost = dataflow_cost(build_unit, MILLION, args.utilisation)
    lines.append('  USD of 1,000,000 images by line: '
                 + ', '.join(f'{name} {usd:.2f}' for name, usd in cost['usd'].items()))
    if min(build_unit['cpu_seconds'], refresh_unit['cpu_seconds']) <= 0:
        lines.append('  note: a CPU difference between the runs is within their noise (counted as 0 above); '
                     'run with more --images for CPU figures')
    return lines


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--images', type=int, default=200,
                        help='images of the larger build (the smaller has a tenth, at least 4)')
    parser.add_argument('--changed', type=float, default=0.01, help='share of the images changed before the refresh')
    parser.add_argument('--image_size', default='224')
    parser.add_argument('--workers', type=int, default=2, help='local worker processes')
    parser.add_argument('--utilisation', type=float, default=0.85,
                        help='how busy Dataflow workers are kept (an assumption; the local figure is printed)')
    parser.add_argument('--corpus', help='a labelled image folder to take the images from (default: generated photos)')
    args = parser.parse_args(argv)
    if args.images < 2 * MIN_SMALL:
        parser.error(f'--images must be at least {2 * MIN_SMALL}')
    if not 0 < args.changed < 1:
        parser.error('--changed must be between 0 and 1')
    root = args.corpus or corpus(args.images)
    with storage_runs.Service() as service:
        runs = [measure(service, root, images, args) for images in (smaller(args.images), args.images)]
    between = args.images - smaller(args.images)
    units = [per_image(figures(small), figures(large), between)
             for small, large in ((runs[0][0], runs[1][0]), (runs[0][1], runs[1][1]))]
    print('\n'.join(report(args, root, runs, units)))


if __name__ == '__main__':
    main()
