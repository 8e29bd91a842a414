"""Builds corpora of the zoo (imgrec.samples.zoo) and prints issue 39's targets, one row per style.

    python benchmarks/zoo_builds.py [--half tuning|check|all] [--styles digits,pages] [--per_class 100]
        [--seed 0] [--image_size 64] [-- BUILD OPTIONS...]

For tuning thresholds: build the TUNING half, change the check, build again; then build the CHECK half,
which the tuning never saw (and ``--seed 1`` for other images of the same styles). Each corpus is made
once and kept in ``harness.CACHE`` ($IMGREC_BENCH_CACHE or ~/.cache/imgrec-bench) with its ground truth; each build runs in
this process (DirectRunner, ``--direct_running_mode in_memory`` unless given), with default options but
``--image_size`` (64, as issue 39 measured). A failed build is scored from its staging folder, as
failed. ``build_and_score`` is the same as a function, for a benchmark or a notebook.
"""
import argparse
import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import CACHE  # noqa: E402

from imgrec.console.errors import BuildFailed  # noqa: E402
from imgrec.contract import layout  # noqa: E402
from imgrec.samples import zoo, zoo_edits, zoo_scores  # noqa: E402

VERSION = 'zoo'
# Distinct images a class by default: about 1,000 a style (photos: as many as their tiles allow).
PER_CLASS = {'photos': 120, 'photos_check': 90}


def default_per_class(style: str) -> int:
    return PER_CLASS.get(style, -(-1000 // len(zoo.STYLES[style].classes)))


def zoo_corpus(style: str, per_class: int, seed: int = 0) -> zoo.Corpus:
    """The cached corpus of ``style``: ``per_class`` distinct images a class, 5% of them planted copies
    by one edit and 2.5% by two (at least every edit once), written on every core the first time."""
    root = os.path.join(CACHE, f'zoo{zoo.DRAWING}-{style}-{per_class}-{seed}')
    truth = root + '.truth.json'
    if not os.path.exists(truth):
        images = per_class * len(zoo.STYLES[style].classes)
        shutil.rmtree(root + '.partial', ignore_errors=True)
        corpus = zoo.write_corpus(style, root + '.partial', per_class=per_class, seed=seed,
                                  planted=max(len(zoo_edits.SINGLE_EDITS), images // 20),
                                  combined=max(len(zoo_edits.COMBINED_EDITS), images // 40),
                                  truth='', processes=os.cpu_count() or 1)
        shutil.rmtree(root, ignore_errors=True)
        os.rename(root + '.partial', root)
        corpus.folder = root
        corpus.write_json(truth)
    return zoo.Corpus.load(truth)


def build_and_score(corpus: zoo.Corpus, *build_args: str, image_size: int = 64,
                    output: str | None = None) -> tuple[zoo_scores.Score, float]:
    """(score, seconds) of one build of ``corpus`` with ``build_args`` besides the defaults, into
    ``output`` (a temporary folder, removed after, if None)."""
    from imgrec.pipelines import launcher  # pylint: disable=import-outside-toplevel
    folder = output or tempfile.mkdtemp(prefix=f'zoo-{corpus.style}-')
    args = ['--input', corpus.folder, '--output', folder, '--image_size', str(image_size), '--version', VERSION,
            '--progress', 'off', *build_args]
    if not any(arg.startswith('--direct_running_mode') for arg in build_args):
        args += ['--direct_running_mode', 'in_memory']
    start = time.perf_counter()
    try:
        launcher.run(args)
        succeeded, version_dir = True, os.path.join(folder, VERSION)
    except BuildFailed:
        succeeded = False
        staging = [name for name in os.listdir(folder) if layout.is_staging_name(name)]
        version_dir = os.path.join(folder, staging[0]) if staging else folder
    seconds = time.perf_counter() - start
    try:
        return zoo_scores.score(corpus, version_dir, succeeded), seconds
    finally:
        if output is None:
            shutil.rmtree(folder, ignore_errors=True)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    build_args = argv[argv.index('--') + 1:] if '--' in argv else []
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--half', choices=('tuning', 'check', 'all'), default='tuning')
    parser.add_argument('--styles', default='', help='comma-separated styles (instead of --half)')
    parser.add_argument('--per_class', type=int, default=None, help='distinct images a class (default: ~1,000 a style)')
    parser.add_argument('--seed', type=int, default=0)
    parser.add_argument('--image_size', type=int, default=64)
    args = parser.parse_args(argv[:argv.index('--')] if '--' in argv else argv)
    styles = (args.styles.split(',') if args.styles else
              {'tuning': zoo.TUNING_STYLES, 'check': zoo.CHECK_STYLES, 'all': tuple(zoo.STYLES)}[args.half])
    results = []
    for style in styles:
        corpus = zoo_corpus(style, args.per_class or default_per_class(style), args.seed)
        result, seconds = build_and_score(corpus, *build_args, image_size=args.image_size)
        results.append(result)
        print(f'{style}: built in {seconds:.1f} s; ' + ('; '.join(result.failures()) or 'every target met')
              + (f'; missed by edit: {result.missed}' if result.missed else ''), flush=True)
    print(zoo_scores.format_table(results))


if __name__ == '__main__':
    main()
