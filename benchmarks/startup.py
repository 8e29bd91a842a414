"""Start-up and small jobs, as a new user meets them: ``build-dataset --help``, a 40-image build, and a refresh
of 2,400 photos that changes nothing against the full build of them. Whole processes, several runs each,
interleaved; medians printed.

    python benchmarks/startup.py [--runs 3] [--images 2400] [--small 40]
    python benchmarks/startup.py --threshold [--sizes 40,100,200,400,800] [--runs 2]

The command is run as its console script runs it (``python -m imgrec.pipelines.build_dataset``: ``build-dataset``),
with the build's defaults at 224x224 and progress lines off. The 40-image build runs in the mode the
build picks for its size, and beside it with each local running mode named (``--direct_running_mode
in_memory`` and ``multi_processing``). The no-op refresh is the same command into the output of the full
build, with another ``--version``: its time is printed as a ratio to the full build's (both with the
defaults: at 224x224 the corpus holds a near-duplicate pair across two classes, quarantined, which the
check before the job takes as unchanged, ``imgrec.pipelines.refresh``).

``--threshold`` measures where in_memory stops being the faster local mode: builds of each size in both
modes, alternating, ``--runs`` of each; ``imgrec.pipelines.beam_options.SMALL_BUILD_IMAGES`` was set from it.

``main(argv)`` returns the figures (a dict), for ``benchmarks/build_throughput.py`` to print beside its own.
"""
import argparse
import os
import shutil
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import corpus, listed, measure  # noqa: E402

COMMAND = [sys.executable, '-m', 'imgrec.pipelines.build_dataset']
MODES = ('in_memory', 'multi_processing')


def subset(root, count, folder):
    """``folder`` holding links to ``count`` images of ``root``, spread over its classes."""
    names = listed(root)
    for name in names[::max(1, len(names) // count)][:count]:
        os.makedirs(os.path.join(folder, os.path.dirname(name)), exist_ok=True)
        os.symlink(os.path.join(root, name), os.path.join(folder, name))
    return folder


class Run(float):
    """Seconds of one whole ``build-dataset ARGS`` process (a float), with ``cpu``: its process tree's CPU
    seconds, which a shared machine moves less than the wall time."""

    def __new__(cls, seconds, cpu):
        run = super().__new__(cls, seconds)
        run.cpu = cpu
        return run


def timed(args):
    measured = measure([*COMMAND, *args])[1]
    return Run(measured['seconds'], measured['cpu_seconds'])


def build_args(images, output, version, *extra):
    return ['--input', images, '--output', output, '--version', version, '--image_size', '224', '--no_progress',
            *extra]


def help_seconds(runs):
    return [timed(['--help']) for _ in range(runs)]


def small_builds(images, work, runs):
    """{'auto' | mode: [seconds]} of builds of ``images``, each run into a fresh output, interleaved."""
    seconds = {name: [] for name in ('auto', *MODES)}
    for run in range(runs):
        for name in seconds:
            extra = [] if name == 'auto' else ['--direct_running_mode', name]
            output = os.path.join(work, f'small-{name}-{run}')
            seconds[name].append(timed(build_args(images, output, 'v1', *extra)))
            shutil.rmtree(output)
    return seconds


def full_and_no_op(root, work, runs):
    """([seconds of full builds], [seconds of refreshes of each that changed nothing]), alternating, of a copy
    of ``root``: another benchmark may hard-link the shared corpus meanwhile, which changes its files' inode
    change time, and a refresh rightly takes that as a change."""
    images = os.path.join(work, 'images')
    shutil.copytree(root, images)
    full, no_op = [], []
    for run in range(runs):
        output = os.path.join(work, f'full-{run}')
        full.append(timed(build_args(images, output, 'v1')))
        no_op.append(timed(build_args(images, output, 'v2')))
        if os.path.exists(os.path.join(output, 'v2')):
            raise SystemExit('the refresh of an unchanged input published a version')
        shutil.rmtree(output)
    return full, no_op


def threshold(sizes, runs, work):
    """{size: {mode: [seconds]}} of builds of each size in both modes, alternating."""
    found = {}
    for size in sizes:
        images = subset(corpus(max(sizes) if max(sizes) > 2400 else 2400), size, os.path.join(work, f'images-{size}'))
        found[size] = {mode: [] for mode in MODES}
        for run in range(runs):
            for mode in MODES:
                output = os.path.join(work, f'out-{size}-{mode}-{run}')
                found[size][mode].append(timed(build_args(images, output, 'v1', '--direct_running_mode', mode)))
                shutil.rmtree(output)
        print(f"{size:6d} images: " + '; '.join(f"{mode} {_shown(found[size][mode])}" for mode in MODES), flush=True)
    return found


def _shown(values):
    return (f"{statistics.median(values):.2f} s, {statistics.median(v.cpu for v in values):.2f} CPU s "
            f"(median of {len(values)}: {', '.join(f'{v:.2f}' for v in values)} s)")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--runs', type=int, default=3)
    parser.add_argument('--images', type=int, default=2400, help='photos of the full build and the no-op refresh')
    parser.add_argument('--small', type=int, default=40, help='images of the small build')
    parser.add_argument('--threshold', action='store_true', help='measure the small-build threshold instead')
    parser.add_argument('--sizes', default='40,100,200,400,800')
    args = parser.parse_args(argv)
    work = tempfile.mkdtemp(prefix='startup-bench-')
    try:
        if args.threshold:
            return {'threshold': threshold([int(size) for size in args.sizes.split(',')], args.runs, work)}
        root = corpus(args.images)
        figures = {'help': help_seconds(args.runs)}
        print(f'build-dataset --help: {_shown(figures["help"])}', flush=True)
        figures['small'] = small_builds(subset(root, args.small, os.path.join(work, 'small')), work, args.runs)
        for name, seconds in figures['small'].items():
            print(f'a {args.small}-image build, {"the mode chosen for its size" if name == "auto" else name}: '
                  f'{_shown(seconds)}', flush=True)
        figures['full'], figures['no_op'] = full_and_no_op(root, work, args.runs)
        ratio = statistics.median(n / f for n, f in zip(figures['no_op'], figures['full']))
        figures['no_op_ratio'] = ratio
        cpu_ratio = statistics.median(n.cpu / f.cpu for n, f in zip(figures['no_op'], figures['full']))
        print(f'a full build of {args.images} photos: {_shown(figures["full"])}')
        print(f'a refresh of it that changes nothing: {_shown(figures["no_op"])} = {ratio:.1%} of the full build '
              f'({cpu_ratio:.1%} of its CPU; medians of the paired ratios)', flush=True)
        return figures
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == '__main__':
    main()
