"""What the build's CPU per image is made of, against the pool script's, from a sampling profiler.

    python benchmarks/profile_build.py [--images 2400] [--rate 200] [--keep DIR] [--args '--near_duplicates off']

Needs py-spy (``.venv/bin/pip install py-spy``; a benchmark tool, not a dependency of the project or its
tests). Each command runs twice: once plain, for its CPU (its whole process tree, ``harness.measure``), and
once under ``py-spy record --subprocesses --nonblocking --threads -r RATE --format raw``, which samples
every thread of every process, while this script reads each thread's CPU (psutil) every 20 ms.
Each sample is filed under the first component of ``RULES`` that knows a frame of its stack (Pillow's
decode, resize and JPEG encode, sha256, the perceptual hash, the Example and its framing, spill files,
Beam's runner and coders...); samples of a thread waiting on a lock or a queue are left out. A thread's
CPU is split by its samples, so the table is CPU, not samples: py-spy counts a thread that waits for a
core as busy, and its blocking mode slowed the build 2.5x, hence ``--nonblocking``. The table's total
is the profiled run's; the plain run's is printed beside it. ``--keep`` keeps the raw profiles (a line a
stack; ``flamegraph.pl`` reads them). docs/benchmarks.md has a run's table and what it means.
"""
import argparse
import collections
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time

import psutil

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import ROOT, corpus, measure

POOL_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'pool_script.py')
PY_SPY = os.path.join(os.path.dirname(sys.executable), 'py-spy')

# (component, pattern, innermost): a sample belongs to the first component whose ``pattern`` matches a
# frame of its stack, or whose ``innermost`` matches its innermost frame (the function's own work, or a
# call into C), so the more specific come first. Frames read 'function (path:line)'.
RULES = [
    ('perceptual hash', r'^(?:perceptual_hashes|perceptual_hash|_reduced_rgb_or_grey|_colour_grid|_hashes_of) '
     r'\(imgrec/imaging/perceptual_hash\.py', None),
    ('pillow: JPEG encode', r'^(?:encode_jpeg|Image\.save) \(', None),
    ('pillow: resize', r'^resize \(\S*image_ops\.py|^fit \(\S*PIL/ImageOps\.py', None),
    ('pillow: open and decode (draft)',
     r'^(?:decode \(\S*image_ops\.py|open \(\S*PIL/Image\.py|Image\.(?:draft|convert) |ImageFile\.load )', None),
    ('sha256 of the source', None, r'^encoded \(imgrec/imaging/decoder_pool\.py:30\)'),  # its first line
    ('reading the source', r'^(?:read_once|read_local|will_read) \(', None),
    ('Example encoding', r'^(?:encode_example|to_example) \(|^example \(\S*pool_script', None),
    ('TFRecord framing (crc32c)', r'^(?:frame|masked_crc) \(', None),
    ('spill files: write', r'\(imgrec/storage/spill\.py', None),
    ('spill files: read back (shard writing)', r'\(imgrec/storage/(?:frames|byte_ranges)\.py', None),
    ('writing shards', r'\((?:transforms/(?:write|sharding)\.py|imgrec/storage/array_records\.py)',
     r'^write_shard \('),
    ('listing', r'\(transforms/listing\.py', None),
    ('near-duplicate grouping', r'\(transforms/near_duplicate(?:s|_groups)\.py', None),
    ('dedupe, splits, labels, index',
     r'\(transforms/(?:dedupe|splits|labels|write_index|quarantine|previous)\.py', None),
    ('report and publication', r'\((?:imgrec/versions/|transforms/publish\.py)|/matplotlib/', None),
    ('decode threads: hand-off (futures)', r'\(\S*concurrent/futures/', None),
    ('our DoFns (per element)', r'\(transforms/\w+\.py', None),
    ('Python start-up and imports', r'^(?:_find_and_load|_call_with_frames_removed|_compile_bytecode) ', None),
    ('Beam: shuffles (GroupByKey, Reshuffle)',
     r'\(\S*apache_beam/runners/portability/fn_api_runner/execution\.py|^GroupingBuffer', None),
    ('Beam: coders and pickling', r'\(\S*apache_beam/(?:coders|internal/)|\(\S*(?:dill|cloudpickle)/', None),
    ('Beam: runner and its workers (FnApi, operations, metrics)', r'\(\S*apache_beam/', None),
    ('pool script: process pool', r'\(\S*multiprocessing/', None),
]
# Innermost frames of a thread that waits (py-spy counts some of them as working).
_WAITING = re.compile(r'^(?:Condition\.wait|Event\.wait|Thread\._wait_for_tstate_lock|Queue\.get|_worker|'
                      r'_run_channel_spin_thread\.<locals>\.channel_spin|_serve|select|poll|Connection\._recv|'
                      r'Connection\._poll|wait) \(')
_COMPILED = [(name, pattern and re.compile(pattern), innermost and re.compile(innermost))
             for name, pattern, innermost in RULES]
OTHER = 'other'


def classify(frames):
    """The component of one sampled stack (frames from the outermost in)."""
    for name, pattern, innermost in _COMPILED:
        if pattern and any(pattern.search(frame) for frame in frames):
            return name
        if innermost and frames and innermost.search(frames[-1]):
            return name
    return OTHER


def read_profile(path):
    """{(pid, tid): {component: samples}}, {innermost frame: samples} and {(pid, tid): thread name} of a py-spy
    raw profile (with ``--threads``); samples whose innermost frame waits (``WAITING``) are left out."""
    threads, leaves, names = collections.defaultdict(collections.Counter), collections.Counter(), {}
    with open(path, encoding='utf-8', errors='replace') as lines:
        for line in lines:
            stack, _, count = line.rstrip('\n').rpartition(' ')
            if not count.isdigit():
                continue
            frames = stack.split(';')
            heads = [frame for frame in frames if frame.startswith(('process ', 'thread ('))]
            pid = int(re.match(r'process (\d+)', heads[-2]).group(1))  # a child's stack begins with its parent
            tid = int(re.match(r'thread \((\d+)\)', heads[-1]).group(1))
            names[pid, tid] = heads[-1].partition(': ')[2]
            frames = [frame.replace(f'({ROOT}/', '(') for frame in frames[len(heads):]]  # ours: '(transforms/...'
            if frames and _WAITING.search(frames[-1]):
                continue
            threads[pid, tid][classify(frames)] += int(count)
            leaves[_short(frames[-1]) if frames else '(no Python frame)'] += int(count)
    return threads, leaves, names


def _short(frame):
    return re.sub(r'\(\S*/(?:site-packages|python3\.\d+)/', '(', frame)


def attribute(samples, threads, processes):
    """{component: CPU seconds}: each thread's CPU split by its samples; the CPU of threads that ended
    between readings (their process's total less its threads') split by all its threads' samples."""
    spent = collections.Counter()
    for pid, total in processes.items():
        pooled = collections.Counter()
        known = 0.0
        for (owner, tid), seconds in threads.items():
            if owner != pid:
                continue
            counts = samples.get((pid, tid))
            if counts:
                known += seconds
                pooled.update(counts)
                for component, count in counts.items():
                    spent[component] += seconds * count / sum(counts.values())
        for (owner, tid), counts in samples.items():
            if owner == pid and (pid, tid) not in threads:
                pooled.update(counts)
        rest = max(0.0, total - known)
        for component, count in pooled.items():
            spent[component] += rest * count / sum(pooled.values())
        if not pooled:
            spent['(threads never sampled)'] += rest
    return spent


def _thread_cpu(process):
    """{(pid, tid): CPU seconds so far} of the threads of ``process`` (psutil), and the process's own total
    (which keeps the time of threads that have ended)."""
    try:
        times, threads = process.cpu_times(), process.threads()
    except psutil.Error:  # it ended meanwhile
        return {}, 0.0
    return ({(process.pid, thread.id): thread.user_time + thread.system_time for thread in threads},
            times.user + times.system)


def profiled(command, output, rate):
    """Runs ``command`` under py-spy (its raw profile to ``output``) and returns the CPU seconds of each
    of its threads, {(pid, tid): seconds}, and of each of its processes, {pid: seconds}, read every 20 ms
    (a thread's time after its last reading is missed; its process's is not, until it ends)."""
    spy = subprocess.Popen([PY_SPY, 'record', '--nonblocking', '--subprocesses', '--full-filenames', '--threads',
                            '-r', str(rate), '--format', 'raw', '-o', output, '--', *command],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    threads, processes = {}, {}
    spied = psutil.Process(spy.pid)
    while spy.poll() is None:
        try:
            children = spied.children(recursive=True)
        except psutil.Error:
            children = []
        for child in children:
            found, total = _thread_cpu(child)
            threads.update(found)
            processes[child.pid] = max(processes.get(child.pid, 0.0), total)
        time.sleep(0.02)
    if spy.returncode:
        raise SystemExit(f'py-spy failed with status {spy.returncode}')
    return threads, processes


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--images', type=int, default=2400)
    parser.add_argument('--rate', type=int, default=200)
    parser.add_argument('--keep', help='folder to keep the raw profiles in')
    parser.add_argument('--args', default='', help='more build-dataset arguments, quoted')
    parser.add_argument('--leaves', type=int, default=20, help='innermost frames to list for each command')
    parser.add_argument('--per_thread', type=int, default=0, help='list this many threads, by CPU')
    parser.add_argument('--only', choices=('build', 'pool script'), help='profile only this one')
    args = parser.parse_args()
    if not os.path.exists(PY_SPY):
        raise SystemExit(f'profile_build: no py-spy at {PY_SPY}; '
                         f'install it with {sys.executable} -m pip install py-spy')
    images = corpus(args.images)
    work = tempfile.mkdtemp(prefix='profile-build-')
    keep = args.keep or work
    os.makedirs(keep, exist_ok=True)
    commands = {
        'build': [sys.executable, '-m', 'imgrec.pipelines.build_dataset', '--input', images, '--image_size', '224',
                  '--progress', 'off', *shlex.split(args.args), '--output'],
        'pool script': [sys.executable, POOL_SCRIPT, images, '--processes', '2', '--size', '224'],
    }
    table = {}
    try:
        for name, command in commands.items():
            if args.only and name != args.only:
                continue
            label = name.replace(' ', '-')
            _, measured = measure(command + [os.path.join(work, f'{label}-plain')])
            raw = os.path.join(keep, f'{label}.raw')
            threads, processes = profiled(command + [os.path.join(work, f'{label}-profiled')], raw, args.rate)
            samples, leaves, names = read_profile(raw)
            spent = attribute(samples, threads, processes)
            table[name] = spent
            print(f'\n{name}: {1000 * measured["cpu_seconds"] / args.images:.2f} ms CPU an image '
                  f'({measured["seconds"]:.1f} s wall), {1000 * sum(spent.values()) / args.images:.2f} ms under '
                  f'the profiler; innermost frames of the samples that did not wait:')
            if args.per_thread:
                print('  threads, by CPU: seconds, name, its main components by share of its samples')
                for key, seconds in sorted(threads.items(), key=lambda item: -item[1])[:args.per_thread]:
                    counts = samples.get(key, collections.Counter())
                    shares = ', '.join(f'{c} {100 * n / sum(counts.values()):.0f}%' for c, n in counts.most_common(4))
                    print(f'  {seconds:6.2f} s  {names.get(key, "?")[:30]:30s} {shares}')
            total = sum(leaves.values())
            for leaf, count in leaves.most_common(args.leaves):
                print(f'  {100 * count / total:5.1f}%  {leaf}')
    finally:
        shutil.rmtree(work, ignore_errors=True)
    names = sorted({c for spent in table.values() for c in spent},
                   key=lambda c: -max(s.get(c, 0) for s in table.values()))
    print(f'\n| ms of CPU an image ({args.images} images, under the profiler) | {" | ".join(table)} |')
    print('| --- |' + ' --- |' * len(table))
    for component in names + ['total']:
        cells = [1000 * (sum(spent.values()) if component == 'total' else spent.get(component, 0)) / args.images
                 for spent in table.values()]
        print(f'| {component} | {" | ".join(f"{cell:.2f}" for cell in cells)} |')


if __name__ == '__main__':
    main()
