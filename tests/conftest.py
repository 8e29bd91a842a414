"""Shared fixtures: small generated image folders and datasets built by the real pipeline."""
import os
import subprocess
import sys

import pytest

from imgrec.contract import layout, version_ref
from imgrec.pipelines import launcher
from imgrec.samples.generate import write_images

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Small images keep the suite fast; the pipeline does the same work on any size.
SMALL = dict(min_side=40, max_side=120)


def run_build(output, *args, mode='in_memory'):
    """Runs the real build job (DirectRunner) at 32x32 and returns the output folder."""
    launcher.run(['--output', str(output), '--image_size', '32', '--direct_running_mode', mode,
                       *map(str, args)])
    return str(output)


def build(input_root, output, *extra, mode='in_memory'):
    """``run_build`` of a class-folder input."""
    return run_build(output, '--input', input_root, *extra, mode=mode)


@pytest.fixture(scope='session')
def sample_images(tmp_path_factory):
    """Four classes of 15 images each (every 5th a PNG), plus a stray non-image file."""
    root = tmp_path_factory.mktemp('images')
    write_images(str(root), 15, png_every=5, **SMALL)
    (root / 'circle' / 'README.txt').write_text('not an image')
    return str(root)


@pytest.fixture(scope='session')
def built_dataset(sample_images, tmp_path_factory):
    """``sample_images`` built once with 3 train shards and 2 validation shards."""
    output = tmp_path_factory.mktemp('built')
    return build(sample_images, output, '--splits', 'train=75,validation=25',
                 '--num_shards', 'train=3,validation=2', '--version', 'v1')


def _tfds_views(folder):
    """Whether ``folder`` holds TFDS's views of versions (imgrec.versions.tfds_metadata.write_view) alone."""
    names = os.listdir(folder) if os.path.isdir(folder) else []
    return bool(names) and all(version_ref.is_semantic_version(name) and
                               os.path.isfile(os.path.join(folder, name, layout.TFDS_DATASET_INFO)) for name in names)


def listing(output):
    """The names in ``output``, but for the folder of TFDS's views: the versions, LATEST, staging folders..."""
    return sorted(name for name in os.listdir(output) if not _tfds_views(os.path.join(output, name)))


def versions(output):
    return [name for name in listing(output) if name != 'LATEST']


@pytest.fixture(scope='session')
def wheel(tmp_path_factory):
    """The project's wheel, built from this checkout as a release is (no build isolation: offline)."""
    out = tmp_path_factory.mktemp('wheel')
    subprocess.run([sys.executable, '-m', 'pip', 'wheel', '--quiet', '--no-deps', '--no-build-isolation',
                    '--wheel-dir', str(out), ROOT], check=True, capture_output=True, cwd=str(out))
    (path,) = out.glob('*.whl')
    return path


@pytest.fixture(scope='session')
def installed_wheel(wheel, tmp_path_factory):
    """A folder holding ``wheel`` installed, and nothing else: put it alone on a ``python -S`` process's path
    (with the venv's site-packages after it for the dependencies) to import what a user's install holds."""
    target = tmp_path_factory.mktemp('installed') / 'site'
    subprocess.run([sys.executable, '-m', 'pip', 'install', '--quiet', '--no-deps', '--target', str(target),
                    str(wheel)], check=True, capture_output=True)
    return target
