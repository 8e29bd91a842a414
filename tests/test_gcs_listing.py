"""Listing gs:// inputs on a real GCS server: class prefixes one level at a time, then each class lazily."""
import os
import subprocess
import sys

import apache_beam as beam
import pytest
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to

from imgrec.storage import storage
from imgrec.pipelines.local import internals
from tests.gcs_emulator import gcs_emulator  # noqa: F401  (the fixture)
from imgrec.transforms.elements import ImageRef
from imgrec.transforms.listing import ListImages

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope='module')
def listed_bucket(gcs_emulator):
    """A bucket with nested images, stray and non-image files, folder placeholders and a look-alike prefix."""
    bucket = gcs_emulator.create_bucket('listing-cases')
    for name in ('photos/cats/a.jpg', 'photos/cats/b.PNG', 'photos/cats/deep/er/c.jpeg', 'photos/dogs/d.webp',
                 'photos/cats/notes.txt', 'photos/stray.jpg', 'photos-old/cats/x.jpg'):
        gcs_emulator.upload_bytes(f'{bucket}/{name}', b'bytes of ' + name.encode())
    for placeholder in ('photos/', 'photos/cats/', 'photos/empty/'):  # "folders" made in the Cloud console
        gcs_emulator.upload_bytes(f'{bucket}/{placeholder}', b'')
    return bucket


@pytest.mark.parametrize('suffix', ['', '/'])
def test_list_images_fans_out_by_class_prefix(listed_bucket, suffix):
    root = f'{listed_bucket}/photos{suffix}'
    with TestPipeline() as pipeline:
        listed = pipeline | ListImages(input_root=root)
        refs = listed['images'] | 'AsTuples' >> beam.Map(
            lambda ref: (ref.path, ref.source, ref.label) if isinstance(ref, ImageRef) else (ref.path, ref.label))
        assert_that(refs, equal_to([
            (f'{listed_bucket}/photos/cats/a.jpg', 'cats/a.jpg', 'cats'),
            (f'{listed_bucket}/photos/cats/b.PNG', 'cats/b.PNG', 'cats'),
            (f'{listed_bucket}/photos/cats/deep/er/c.jpeg', 'cats/deep/er/c.jpeg', 'cats'),
            (f'{listed_bucket}/photos/dogs/d.webp', 'dogs/d.webp', 'dogs'),
            (f'{listed_bucket}/photos/empty', 'empty'),  # the placeholder: an empty class folder
        ]), label='Images')
        assert_that(listed['ignored'], equal_to(['cats/notes.txt', 'stray.jpg']), label='Ignored')


def test_a_level_listing_yields_the_folders_and_objects_of_one_level(listed_bucket):
    level = storage.storage_for(listed_bucket).list_level(f'{listed_bucket}/photos')
    assert sorted((entry.path, entry.is_folder) for entry in level) == [
        (f'{listed_bucket}/photos/cats', True),
        (f'{listed_bucket}/photos/dogs', True),
        (f'{listed_bucket}/photos/empty', True),
        (f'{listed_bucket}/photos/stray.jpg', False),
    ]


def test_a_process_importing_the_plugin_connects_without_a_credential_search(gcs_emulator):
    """What a worker does first (it imports --beam_plugins), then a read through Beam's FileSystems."""
    bucket = gcs_emulator.create_bucket('plugin-bootstrap')
    gcs_emulator.upload_bytes(f'{bucket}/hello.txt', b'hello')
    code = (f'import logging; logging.basicConfig(level=logging.INFO); import {internals.WORKER_PLUGIN}; '
            'from apache_beam.io.filesystems import FileSystems; '
            f"print(FileSystems.open('{bucket}/hello.txt').read().decode())")
    result = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, cwd=REPO, check=True)
    assert result.stdout.strip() == 'hello'
    # Beam logs this when it searched for Application Default Credentials (with ~20 s of retries).
    assert 'default credentials' not in result.stderr.lower()
