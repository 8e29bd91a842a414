"""The real gs:// build through the fault-injecting proxy: faults are retried and never change the output;
faults that outlast the retry deadline fail the build in one line, publish nothing and quarantine nothing.
"""
import pytest
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.testing.test_pipeline import TestPipeline

from imgrec.contract import layout
from imgrec.console.errors import build_failure_message
from imgrec.storage import retries, storage
from imgrec.pipelines import build_dataset, launcher
from imgrec.samples.generate import write_images
from tests.conftest import SMALL
from tests.fault_proxy import LATEST, LIST, READ, WRITE, faulty_gcs, gcs_emulator  # noqa: F401  (fixtures)
from imgrec.transforms.listing import ListImages

OPTIONS = ['--image_size', '32', '--version', 'v1', '--num_shards', 'train=2,validation=1',
           '--direct_running_mode', 'in_memory']


@pytest.fixture(scope='module')
def images(gcs_emulator, tmp_path_factory):
    """12 images in 3 classes on the emulator, and one fault-free build of them (its shards by name)."""
    local = tmp_path_factory.mktemp('fault-images')
    write_images(str(local), 4, classes=('circle', 'square', 'cross'), **SMALL)
    bucket = gcs_emulator.create_bucket('faults')
    gcs_emulator.upload_folder(local, f'{bucket}/images')
    output = f'{bucket}/clean'
    launcher.run(['--input', f'{bucket}/images', '--output', output, *OPTIONS])
    return bucket, _shards(gcs_emulator, f'{output}/v1')


def _shards(emulator, version_dir):
    """{file name: bytes} of the version's TFRecord shards."""
    names = {url: url.rsplit('/', 1)[-1] for url in emulator.list(version_dir + '/')}
    return {name: emulator.read_bytes(url) for url, name in names.items() if layout.parse_shard_file_name(name)}


@pytest.fixture
def quick_retries(monkeypatch):
    """Retries a few times a second, so faults cost the tests little time; the deadline stays long."""
    monkeypatch.setattr(retries, 'INITIAL_DELAY_S', 0.05)
    monkeypatch.setattr(retries, 'MAX_DELAY_S', 0.2)
    monkeypatch.setattr(retries, 'DEFAULT_DEADLINE_S', 30.0)


@pytest.mark.parametrize('rate, seed', [(0.05, 4), (0.2, 2)])
def test_faults_are_retried_and_the_shards_are_byte_identical(images, faulty_gcs, gcs_emulator, quick_retries,
                                                              rate, seed):
    bucket, clean = images
    faulty_gcs.configure(rate=rate, seed=seed, slow_s=0.2)
    output = f'{bucket}/faulty-{seed}'
    _, result = launcher.run(['--input', f'{bucket}/images', '--output', output, *OPTIONS])

    assert faulty_gcs.injected, 'the seed gave no fault: choose another'
    assert _shards(gcs_emulator, f'{output}/v1') == clean
    assert gcs_emulator.read_bytes(f'{output}/{layout.LATEST}') == b'v1\n'
    assert gcs_emulator.read_bytes(f'{output}/v1/{layout.QUARANTINE_JSONL}') == b''
    # The input's names are fixed, so which image reads the seed faults is too (other names hold the
    # run's random staging id, and a few calls, like the report's, go through Beam's own retrying client).
    faulted_inputs = [name for kind, fault, name in faulty_gcs.faulted if kind == READ and name.startswith('images/')]
    assert faulted_inputs, 'the seed gave no fault on an input image: choose another'
    line = retries.summary_line(result)
    assert line.startswith('retried ') and int(line.split()[1]) >= 1


def test_an_outage_longer_than_the_deadline_fails_the_build_and_publishes_nothing(
        images, faulty_gcs, gcs_emulator, monkeypatch, capsys):
    bucket, _ = images
    output = f'{bucket}/outage'  # no previous version: its dataset.json would be the first read to fail
    monkeypatch.setattr(retries, 'INITIAL_DELAY_S', 0.05)
    monkeypatch.setattr(retries, 'DEFAULT_DEADLINE_S', 1.0)
    faulty_gcs.outage(600, kinds=[READ])

    status = build_dataset.main(['--input', f'{bucket}/images', '--output', output, *OPTIONS])

    err = capsys.readouterr().err
    assert status == 1
    assert len(err.splitlines()) == 1, err
    assert err.startswith(f'build-dataset: failed: cannot read {bucket}/images/')
    assert 'ServiceUnavailable (HTTP 503): injected 503 on a read request' in err and 'still failing after' in err
    assert f'{output}/{layout.LATEST}' not in gcs_emulator.list(output + '/')
    quarantines = [url for url in gcs_emulator.list(output + '/') if url.endswith(layout.QUARANTINE_JSONL)]
    assert all(b'read_error' not in gcs_emulator.read_bytes(url) for url in quarantines)


@pytest.mark.parametrize('kinds, faults, what', [
    ([WRITE], ['503'], 'failed: cannot write '),
    ([WRITE], ['reset'], 'failed: cannot write '),
    # Promoted, LATEST not written: readers can see v1 by name, so never 'failed' (docs/publication.md).
    ([LATEST], ['429'], f'incomplete: version v1 is whole in {{output}}, but LATEST still names nothing: cannot '
                        f'write {{output}}/{layout.LATEST}: TooManyRequests (HTTP 429)'),
])
def test_persistent_write_failures_end_in_one_line(images, faulty_gcs, gcs_emulator, monkeypatch, capsys,
                                                   kinds, faults, what):
    bucket, _ = images
    output = f'{bucket}/unwritable-{kinds[0]}-{faults[0]}'
    monkeypatch.setattr(retries, 'INITIAL_DELAY_S', 0.05)
    monkeypatch.setattr(retries, 'DEFAULT_DEADLINE_S', 1.0)
    faulty_gcs.configure(rate=1.0, kinds=kinds, faults=faults)

    status = build_dataset.main(['--input', f'{bucket}/images', '--output', output, *OPTIONS])

    err = capsys.readouterr().err
    assert status == 1
    assert len(err.splitlines()) == 1, err
    assert err.startswith('build-dataset: ' + what.format(output=output)), err
    assert output in err and 'still failing after' in err
    assert f'{output}/{layout.LATEST}' not in gcs_emulator.list(output + '/')



def test_a_listing_outage_fails_the_listing_in_one_line(images, faulty_gcs):
    """(The build's pre-flight lists the input too; this is the listing inside the pipeline.)"""
    bucket, _ = images
    faulty_gcs.outage(600, kinds=[LIST])
    p = TestPipeline(options=PipelineOptions(['--direct_running_mode', 'in_memory']))
    _ = p | ListImages(input_root=f'{bucket}/images',
                       storage=storage.storage_for(bucket, retries.RetryPolicy(1.0, 0.05, 0.1)))
    with pytest.raises(Exception) as failure:
        p.run().wait_until_finish()
    message = build_failure_message(failure.value)
    assert message.startswith(f'cannot list {bucket}/images: ServiceUnavailable (HTTP 503): injected 503 on a list')
    assert message.endswith('(retried until the deadline)')
    assert faulty_gcs.injected[LIST, '503'] > 1
