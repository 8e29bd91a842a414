"""The portable path: the build through Beam's Job API (proto translation, SDK workers over the Fn API), as
Dataflow Runner v2, Flink and Spark run it, writes the bytes the default run writes; an endpoint that
does not answer is a one-line mistake."""
import json
import socket
import time

import pytest
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.runners.portability import local_job_service

from imgrec.contract import layout
from imgrec.console.errors import UserError
from imgrec.pipelines import build_dataset, job_endpoint
from imgrec.samples.generate import write_images
from tests.conftest import SMALL

OPTIONS = ('--image_size', '32', '--splits', 'train=80,validation=20', '--num_shards', 'train=2,validation=1',
           '--version', 'v', '--progress', 'off')
# The DirectRunner in one process: the bytes of its default, a worker process per core (tests/test_determinism.py).
DEFAULT = ('--direct_running_mode', 'in_memory')
PORTABLE = ('--runner', 'PortableRunner', '--job_endpoint', 'embed', '--environment_type', 'LOOPBACK')
RUN_SPECIFIC = (layout.REPORT_HTML, layout.REPORT_STATE_JSON)  # they show the build's time, duration and output path


def _version_files(output):
    """{path in the version: bytes} of every file but the report, with dataset.json less what names the run."""
    version_dir = output / 'v'
    files = {str(path.relative_to(version_dir)): path.read_bytes() for path in sorted(version_dir.rglob('*'))
             if path.is_file() and path.name not in RUN_SPECIFIC}
    document = json.loads(files.pop(layout.DATASET_JSON))
    document.pop('created')
    document['options'].pop('output')
    return files, document


@pytest.fixture(scope='module')
def images(tmp_path_factory):
    root = tmp_path_factory.mktemp('images')
    write_images(str(root), 8, png_every=3, **SMALL)
    return str(root)


def test_the_portable_runner_writes_the_bytes_of_the_default_run(images, tmp_path, capsys):
    assert build_dataset.main(['--input', images, '--output', str(tmp_path / 'default'), *OPTIONS, *DEFAULT]) == 0
    capsys.readouterr()
    assert build_dataset.main(['--input', images, '--output', str(tmp_path / 'portable'), *OPTIONS, *PORTABLE,
                               '--progress', 'on', '--progress_interval', '0.05']) == 0
    out, err = capsys.readouterr()
    assert err == ''  # no progress lines: a portable job's counters come only once it is done
    assert out.startswith('build-dataset: wrote 32 of 32 images'), out
    default, portable = _version_files(tmp_path / 'default'), _version_files(tmp_path / 'portable')
    shards = [name for name in default[0] if name.endswith('.tfrecord')]
    assert len(shards) == 3 and any(name.startswith('index/') for name in default[0])
    assert default == portable


def _closed_port():
    """A port nothing listens on: one the kernel handed out, closed again."""
    with socket.socket() as probe:
        probe.bind(('localhost', 0))
        return probe.getsockname()[1]


def test_an_unreachable_job_endpoint_is_one_line_naming_it(images, tmp_path, capsys):
    endpoint = f'localhost:{_closed_port()}'
    status = build_dataset.main(['--input', images, '--output', str(tmp_path), *OPTIONS, '--runner', 'PortableRunner',
                                 '--job_endpoint', endpoint, '--environment_type', 'LOOPBACK'])
    err = capsys.readouterr().err
    assert status == 2
    assert err.count('\n') == 1 and err.startswith(f'build-dataset: error: --job_endpoint {endpoint}: '), err
    assert not (tmp_path / layout.LATEST).exists()


def _refused(port, seconds=30.0):
    """Waits until ``port`` refuses connections: a gRPC server's stop only starts its shutdown, and until the socket
    closes a connection is taken and never answered (the check would wait its whole --job_server_timeout)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        with socket.socket() as probe:
            if probe.connect_ex(('localhost', port)) != 0:
                return
        time.sleep(0.05)
    raise AssertionError(f'port {port} still takes connections {seconds} s after its server stopped')


def test_a_job_endpoint_that_answers_passes_the_check_and_one_stopped_since_does_not():
    service = local_job_service.LocalJobServicer()  # Beam's own Job API server, on a port of its own
    port = service.start_grpc_server()
    endpoint = f'localhost:{port}'
    options = PipelineOptions(['--runner', 'PortableRunner', '--job_endpoint', endpoint])
    try:
        job_endpoint.check(options)
    finally:
        service.stop()
    _refused(port)
    with pytest.raises(UserError, match=f'^--job_endpoint {endpoint}: no job service answers there'):
        job_endpoint.check(options)
