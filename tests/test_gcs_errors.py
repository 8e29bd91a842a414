"""gs:// mistakes end with one line naming the problem and exit status 2, before any worker starts."""
import pytest
from google.api_core import exceptions

from imgrec.storage import gcs_storage
from imgrec.pipelines import build_dataset
from tests.gcs_emulator import gcs_emulator  # noqa: F401  (the fixture)


@pytest.fixture(scope='module')
def buckets(gcs_emulator):
    """A bucket with one image, and one whose only class folder holds no image."""
    good = gcs_emulator.create_bucket('errors-good')
    gcs_emulator.upload_bytes(f'{good}/images/cat/a.jpg', b'not decoded: the run stops before')
    empty = gcs_emulator.create_bucket('errors-empty')
    gcs_emulator.upload_bytes(f'{empty}/images/cat/notes.txt', b'no image here')
    gcs_emulator.upload_bytes(f'{empty}/images/top.jpg', b'outside any class folder')
    return good, empty


@pytest.mark.parametrize('args, message', [
    (['--input', 'gs://no-such-bucket/images', '--output', '{good}/out'],
     'bucket gs://no-such-bucket not found (for gs://no-such-bucket/images)'),
    (['--input', '{good}/images', '--output', 'gs://no-such-output/datasets'],
     'bucket gs://no-such-output not found (for gs://no-such-output/datasets)'),
    (['--manifest', 'gs://no-such-bucket/list.csv', '--output', '{good}/out'],
     'bucket gs://no-such-bucket not found (for gs://no-such-bucket/list.csv)'),
    (['--manifest', '{good}/lists/missing.csv', '--output', '{good}/out'],
     'manifest not found: gs://errors-good/lists/missing.csv'),
    (['--input', '{empty}/images', '--output', '{good}/out'],
     'no images found under gs://errors-empty/images'),
    (['--input', '{good}/no/such/prefix', '--output', '{good}/out'],
     'no images found under gs://errors-good/no/such/prefix'),
])
def test_gcs_mistakes_are_one_line(buckets, capsys, args, message):
    good, empty = buckets
    status = build_dataset.main([a.format(good=good, empty=empty) for a in args] +
                                ['--direct_running_mode', 'in_memory'])
    err = capsys.readouterr().err.strip()
    assert status == 2
    assert err.startswith('build-dataset: error: ') and message in err and '\n' not in err


def test_a_permission_error_names_the_roles_to_grant():
    """The emulator has no permissions to refuse, so the 403 message is checked on the API's own error."""
    error = exceptions.Forbidden('GET https://storage.googleapis.com/...: caller does not have '
                                 'storage.objects.list access to the Google Cloud Storage bucket.')
    message = gcs_storage.describe_error('gs://private-bucket/images', error)
    assert message.startswith('permission denied on gs://private-bucket/images: ')
    assert 'Storage Object Admin' in message and '\n' not in message
