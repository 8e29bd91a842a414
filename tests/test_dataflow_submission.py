"""Submitting to Dataflow without a network: a classic template written to the GCS emulator.

``--template_location`` makes the DataflowRunner stage the package and write the job description
instead of calling the Dataflow API, so everything a submission would send can be inspected.
"""
import io
import json
import pathlib
import re
import tarfile

import pytest
from apache_beam.portability.api import beam_runner_api_pb2
from google.cloud.dataflow_v1beta3.types import TemplateMetadata

from imgrec.pipelines import beam_options, build_dataset, options
from imgrec.samples.generate import write_images
from tests.conftest import SMALL
from tests.gcs_emulator import gcs_emulator  # noqa: F401  (the fixture)

REPO = pathlib.Path(__file__).resolve().parents[1]
DATAFLOW = ['--runner', 'DataflowRunner', '--project', 'my-project', '--region', 'europe-west4']


def _gcs_url(location):
    """Staged-file locations in a job description read storage.googleapis.com/BUCKET/NAME."""
    return 'gs://' + location.split('storage.googleapis.com/', 1)[-1]


@pytest.fixture(scope='module')
def template(gcs_emulator, tmp_path_factory):
    """Writes a classic template of a gs:// build; returns (template JSON, pipeline proto, staged files)."""
    local = tmp_path_factory.mktemp('dataflow-images')
    write_images(str(local), 2, **SMALL)
    bucket = gcs_emulator.create_bucket('dataflow-job')
    gcs_emulator.upload_folder(local, f'{bucket}/images')
    location = f'{bucket}/templates/build.json'
    status = build_dataset.main([
        '--input', f'{bucket}/images', '--output', f'{bucket}/datasets', '--image_size', '48x64',
        '--num_shards', 'train=8', '--version', 'v7', *DATAFLOW, '--temp_location', f'{bucket}/tmp',
        '--template_location', location, '--max_num_workers', '7', '--machine_type', 'n2-standard-4',
        '--service_account_email', 'builder@my-project.iam.gserviceaccount.com',
        '--experiments', 'shuffle_mode=service'])
    assert status == 0
    job = json.loads(gcs_emulator.read_bytes(location))
    sdk_options = job['environment']['sdkPipelineOptions']['options']
    pipeline = beam_runner_api_pb2.Pipeline.FromString(gcs_emulator.read_bytes(sdk_options['pipelineUrl']))
    staged = {package['name']: gcs_emulator.read_bytes(_gcs_url(package['location']))
              for package in job['environment']['workerPools'][0]['packages']}
    return job, pipeline, staged


def test_the_project_package_is_staged_with_worker_requirements_only(template):
    _, _, staged = template
    with tarfile.open(fileobj=io.BytesIO(staged['workflow.tar.gz'])) as sdist:
        names = {name.split('/', 1)[-1] for name in sdist.getnames()}
        requires = next(sdist.extractfile(n) for n in sdist.getnames() if n.endswith('egg-info/requires.txt'))
        install_requires = requires.read().decode().split('\n[', 1)[0].split()
    assert {'setup.py', 'requirements/worker.txt', 'imgrec/pipelines/build_dataset.py', 'imgrec/transforms/listing.py',
            'imgrec/storage/gcs_storage.py', 'imgrec/contract/example.py', 'imgrec/versions/report/page.py'} <= names
    assert sorted(r.split('==')[0] for r in install_requires) == ['apache-beam[gcp]', 'array_record',
                                                                  'google-cloud-storage', 'matplotlib', 'pillow',
                                                                  'pillow-heif', 'pillow-jxl-plugin']


def test_the_job_graph_holds_the_build_steps(template):
    _, pipeline, _ = template
    names = {transform.unique_name for transform in pipeline.components.transforms.values()}
    for step in ('ListImages/ListClassFolders', 'ListImages/SpreadFolders', 'ListImages/ListFolders',
                 'Encode/Reshuffle', 'Encode/DecodeResize/Decode', 'Encode/ToExample/SerialiseAndSpill',
                 'Dedupe/ResolveCopies', 'AssignShards/Rank', 'WriteShards/Write', 'WriteIndex/WritePart',
                 'Publish/WriteMetadata'):
        assert step in names


def test_the_job_carries_the_users_options(template):
    job, _, _ = template
    environment = job['environment']
    sdk_options = environment['sdkPipelineOptions']['options']
    assert job['type'] == 'JOB_TYPE_BATCH'
    assert (sdk_options['project'], sdk_options['region']) == ('my-project', 'europe-west4')
    assert sdk_options['setup_file'] == beam_options.SETUP_FILE
    assert 'shuffle_mode=service' in sdk_options['experiments']
    assert environment['serviceAccountEmail'] == 'builder@my-project.iam.gserviceaccount.com'
    pool = environment['workerPools'][0]
    assert (pool['machineType'], pool['autoscalingSettings']['maxNumWorkers']) == ('n2-standard-4', 7)
    assert pool['workerHarnessContainerImage'].endswith('beam_python3.11_sdk:2.77.0')


def test_a_custom_worker_image_is_trusted_to_hold_the_project():
    chosen = beam_options.pipeline_options(
        [*DATAFLOW, '--temp_location', 'gs://b/tmp', '--sdk_container_image', 'europe-docker.pkg.dev/p/r/i:1'])
    assert chosen.get_all_options()['setup_file'] is None


@pytest.mark.parametrize('args, message', [
    (DATAFLOW, '--temp_location gs://BUCKET/PATH is required with --runner DataflowRunner'),
    (['--runner', 'DataflowRunner', '--region', 'r', '--temp_location', 'gs://b/t'],
     '--project is required with --runner DataflowRunner'),
    (['--runner', 'DataflowRunner', '--project', 'p', '--temp_location', 'gs://b/t'],
     '--region is required with --runner DataflowRunner'),
    ([*DATAFLOW, '--temp_location', '/tmp/local'], '--temp_location must be a gs:// path'),
])
def test_dataflow_mistakes_are_one_line(sample_images, capsys, args, message):
    status = build_dataset.main(['--input', sample_images, '--output', 'gs://b/out', *args])
    err = capsys.readouterr().err.strip()
    assert status == 2
    assert err.startswith('build-dataset: error: ') and message in err and '\n' not in err


@pytest.mark.parametrize('args, message', [
    (['--temp_location', 'gs://no-such-temp/tmp'], 'bucket gs://no-such-temp not found (for gs://no-such-temp/tmp)'),
    (['--temp_location', '{bucket}/tmp', '--staging_location', 'gs://no-such-staging/s'],
     'bucket gs://no-such-staging not found'),
    (['--temp_location', '{bucket}/tmp', '--project', 'p'], 'Invalid Project ID (p)'),
])
def test_dataflow_mistakes_found_before_staging_are_one_line(template, capsys, args, message):
    """Found before anything is staged: Beam would retry staging to a missing bucket for minutes."""
    bucket = 'gs://dataflow-job'  # made by the ``template`` fixture
    status = build_dataset.main(['--input', f'{bucket}/images', '--output', f'{bucket}/elsewhere', *DATAFLOW,
                                 *(a.format(bucket=bucket) for a in args)])
    err = capsys.readouterr().err.strip()
    assert status == 2 and 'Traceback' not in err
    assert err.splitlines()[-1].startswith('build-dataset: error: ') and message in err.splitlines()[-1]


def test_flex_template_metadata_describes_every_option():
    text = (REPO / 'templates' / 'metadata.json').read_text()
    TemplateMetadata.from_json(text)  # the Dataflow API's own schema: no unknown or mistyped field
    parameters = {p['name']: p for p in json.loads(text)['parameters']}
    parser = options._parser()  # pylint: disable=protected-access
    flags = {a.option_strings[0][2:]: a for a in parser.actions if a.option_strings[0] != '-h'}
    assert sorted(parameters) == sorted(flags)
    for name, action in flags.items():
        parameter = parameters[name]
        assert parameter['helpText'] and parameter['label'] and parameter['regexes']
        assert parameter.get('isOptional', False) == (not action.required)
        if action.default is not None:  # the regexes accept every default
            assert all(re.fullmatch(r, str(action.default)) for r in parameter['regexes']), name
    for name, example in [('input', 'gs://flowers-public'), ('output', 'gs://my-bucket/datasets/flowers'),
                          ('image_size', '192x256'), ('splits', 'train=80,validation=10,test=10'),
                          ('manifest', 'gs://my-bucket/lists/train.csv')]:
        assert all(re.fullmatch(r, example) for r in parameters[name]['regexes']), name
    for name, bad in [('input', '/local/folder'), ('image_size', '0'), ('resize', 'squash'), ('jpeg_quality', '101')]:
        assert not all(re.fullmatch(r, bad) for r in parameters[name]['regexes']), name


def test_the_image_pins_the_tested_beam_and_python():
    dockerfile = (REPO / 'Dockerfile').read_text()
    beam_pin = re.search(r'^apache-beam==(\S+)$', (REPO / 'constraints.txt').read_text(), re.MULTILINE)[1]
    assert re.search(r'^ARG BEAM_VERSION=(\S+)$', dockerfile, re.MULTILINE)[1] == beam_pin
    assert 'FROM apache/beam_python3.11_sdk:${BEAM_VERSION}' in dockerfile
    assert 'FLEX_TEMPLATE_PYTHON_PY_FILE=/template/templates/launch.py' in dockerfile
