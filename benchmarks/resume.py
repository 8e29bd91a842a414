"""A build killed part way, then the same command again, against a build that never stopped, in the same run.

    python benchmarks/resume.py [--images 20000] [--at 0.7] [--whole]
    python benchmarks/resume.py --images 2000 --moments 10     # killed at 10 random moments, each rerun checked

Builds the corpus (``harness.corpus``) once without stopping (the baseline), then the same command into another
output, killed (SIGKILL to its whole process group) once its spill files hold ``--at`` of the images whole (their
frames counted by their headers), then the same command again: the rerun takes up what the
killed build spilled and decodes the rest. With ``--whole``, also a build killed just before promotion (every
image spilled) and its rerun: what a rerun costs when it decodes nothing (start-up, the scan of the spill files
and the checks, the steps after decoding). Every build runs as a user runs it (``python -m
imgrec.pipelines.build_dataset``, DirectRunner with a worker per core), timed from process start to exit, with the
peak memory of the process tree; the rerun's shards and index are compared byte for byte with the baseline's.
With ``--moments N``, the build is killed at N random moments instead (a share of the images spilled, drawn from
2% to 95% with a fixed seed), and each rerun is checked: the same bytes, ``verify-dataset`` passes, no staging
folder and no lease left.
"""
import argparse
import json
import os
import random
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import ROOT, corpus, job  # noqa: E402
from imgrec.contract import layout  # noqa: E402
from imgrec.storage import crash_points  # noqa: E402


def _records_in(path):
    """The records (an Example frame and its facts frame) written whole in spill file ``path``, by their headers."""
    frames, offset = 0, 0
    with open(path, 'rb') as stream:
        end = os.fstat(stream.fileno()).st_size
        while offset + 12 <= end:
            stream.seek(offset)
            (length,) = struct.unpack('<Q', stream.read(8))
            if offset + length + 16 > end:
                break
            frames, offset = frames + 1, offset + length + 16
    return frames // 2


def spilled(output):
    """The records the spill files of the staging folders in ``output`` hold whole now."""
    if not os.path.isdir(output):
        return 0
    total = 0
    for name in os.listdir(output):
        if layout.is_staging_name(name):
            for where, _, files in os.walk(os.path.join(output, name, layout.SPILL_DIR)):
                total += sum(_records_in(os.path.join(where, file)) for file in files)
    return total


def killed_at(options, output, records):
    """Runs the build, and kills its process group once its spill files hold ``records`` whole; returns (the
    seconds it ran, the records spilled when it was killed)."""
    start = time.perf_counter()
    build = subprocess.Popen([sys.executable, '-m', 'imgrec.pipelines.build_dataset', *options], cwd=ROOT,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    while spilled(output) < records:
        if build.poll() is not None:
            raise SystemExit(f'the build ended (status {build.returncode}) before it spilled {records} records')
        time.sleep(0.1)
    os.killpg(build.pid, signal.SIGKILL)
    build.wait()
    return time.perf_counter() - start, spilled(output)


def published(version_dir):
    """{name: bytes} of the shards and the index of a version."""
    found = {}
    for where, _, files in os.walk(version_dir):
        for name in files:
            relative = os.path.relpath(os.path.join(where, name), version_dir)
            if relative.endswith('.tfrecord') or relative.startswith(layout.INDEX_DIR + '/'):
                with open(os.path.join(where, name), 'rb') as stream:
                    found[relative] = stream.read()
    return found


def resumed(output):
    with open(os.path.join(output, 'v1', layout.DATASET_JSON), encoding='utf-8') as stream:
        return json.load(stream)['refresh']['resumed']


def moments(options, baseline_out, images, count, work):
    """Kills a build at ``count`` random moments; checks each rerun; returns the lines to print."""
    from imgrec.versions import verify  # pylint: disable=import-outside-toplevel  # TensorFlow: only here
    lines, draw = [], random.Random(49)
    expected = published(os.path.join(baseline_out, 'v1'))
    for moment in range(count):
        share = draw.uniform(0.02, 0.95)  # the build ends before it spills its last images
        output = os.path.join(work, f'moment-{moment}')
        ran, _ = killed_at(options(output), output, share * images)
        rerun = job(options(output))
        same = published(os.path.join(output, 'v1')) == expected
        verified = verify.main([output]) == 0
        left = [name for name in os.listdir(output) if layout.is_staging_name(name) or name == layout.LEASES_DIR]
        taken = resumed(output)
        lines.append(f'killed at {share:4.0%} of the images spilled ({ran:5.1f} s): rerun {rerun["seconds"]:5.1f} s, took up '
                     f"{taken['images']}, refused {taken['refused'] or 'none'}; same bytes {same}, verify-dataset "
                     f"{'passes' if verified else 'FAILS'}, left {left or 'nothing'}")
        if not (same and verified and not left):
            raise SystemExit('\n'.join(lines))
        shutil.rmtree(output)
    return lines


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--images', type=int, default=20000)
    parser.add_argument('--at', type=float, default=0.7, help='share of the images encoded when the build is killed')
    parser.add_argument('--image_size', default='224')
    parser.add_argument('--whole', action='store_true', help='also a rerun after a kill just before promotion')
    parser.add_argument('--moments', type=int, help='kill at this many random moments, each rerun checked')
    args = parser.parse_args()
    images = corpus(args.images)
    work = tempfile.mkdtemp(prefix='resume-bench-')
    try:
        def options(output):
            return ['--input', images, '--output', output, '--image_size', args.image_size, '--version', 'v1']

        baseline_out, stopped_out, whole_out = (os.path.join(work, name) for name in ('baseline', 'stopped', 'whole'))
        baseline = job(options(baseline_out))
        if args.moments:
            print(f"{args.images} photos -> {args.image_size}; uninterrupted: {baseline['seconds']:.1f} s")
            print('\n'.join(moments(options, baseline_out, args.images, args.moments, work)))
            return
        ran, at_kill = killed_at(options(stopped_out), stopped_out, args.at * args.images)
        rerun = job(options(stopped_out))
        taken = resumed(stopped_out)
        same = published(os.path.join(stopped_out, 'v1')) == published(os.path.join(baseline_out, 'v1'))
        print(f'{args.images} photos -> {args.image_size}; killed after {ran:.1f} s with {at_kill} records spilled '
              f'whole ({at_kill / args.images:.0%})')
        print(f"uninterrupted: {baseline['seconds']:7.1f} s, peak memory {baseline['peak_tree'] / 2**20:.0f} MB")
        print(f"rerun:         {rerun['seconds']:7.1f} s = {rerun['seconds'] / baseline['seconds']:.2f} of the "
              f"uninterrupted build, peak memory {rerun['peak_tree'] / 2**20:.0f} MB; took up {taken['images']} of "
              f"{args.images} images, refused {taken['refused'] or 'none'}")
        print(f'same shards and index as the uninterrupted build: {same}')
        if args.whole:
            status = subprocess.run([sys.executable, '-m', 'imgrec.pipelines.build_dataset', *options(whole_out)],
                                    cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False,
                                    env=dict(os.environ, **{crash_points.CRASH_AT: 'publish:before_promote'}))
            # Locally the step runs in a worker process (its end fails the build, 1) or in this one (137).
            assert status.returncode in (1, 137), status
            nothing_left = job(options(whole_out))
            print(f"rerun with every image spilled (decodes none): {nothing_left['seconds']:7.1f} s = "
                  f"{nothing_left['seconds'] / baseline['seconds']:.2f} of the uninterrupted build; took up "
                  f"{resumed(whole_out)['images']}")
        if not same:
            raise SystemExit('the rerun published other shards or another index than the uninterrupted build')
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == '__main__':
    main()
