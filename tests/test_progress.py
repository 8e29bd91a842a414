"""Live progress: lines from a real multi-process build, none with --progress off, and a Dataflow job's
URL and counters from its metrics (only the Dataflow API is faked)."""
import io
import json
import os
import re
import subprocess
import sys
import time

import pytest
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.runners.dataflow import dataflow_runner
from apache_beam.runners.dataflow.dataflow_metrics import DataflowMetrics
from apache_beam.runners.runner import PipelineState
from google.cloud.dataflow_v1beta3 import types as dataflow

from contract import layout
from pipelines import build_dataset, progress

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LINE = re.compile(r'^build-dataset: \[(?P<stage>\w+)\] \d+ s: listed (?P<listed>\d+), decoded (?P<decoded>\d+), '
                  r'quarantined (?P<quarantined>\d+), written (?P<written>\d+)')


def _build(sample_images, output, *extra):
    return subprocess.run(
        [sys.executable, '-m', 'pipelines.build_dataset', '--input', sample_images, '--output', str(output),
         '--image_size', '32', '--version', 'v1', '--direct_running_mode', 'multi_processing',
         '--direct_num_workers', '2', *extra],
        cwd=ROOT, capture_output=True, text=True, check=True)


def test_a_multi_process_build_prints_progress_lines_with_the_final_counts(sample_images, tmp_path):
    # Starting the worker processes alone takes longer than this interval.
    run = _build(sample_images, tmp_path, '--progress_interval', '0.2')
    lines = run.stderr.splitlines()
    assert lines and all(LINE.match(line) for line in lines), run.stderr
    document = json.loads((tmp_path / 'v1' / layout.DATASET_JSON).read_text())
    final = LINE.match(lines[-1])
    assert final['stage'] == 'done'
    # The counters come from the worker processes: the final line holds the build's own accounting.
    assert int(final['listed']) == document['counts']['inputs']
    assert int(final['decoded']) == int(final['written']) == document['counts']['written']
    assert int(final['quarantined']) == document['counts']['quarantined']
    assert run.stdout.startswith('build-dataset: wrote ')


def test_progress_off_prints_nothing(sample_images, tmp_path):
    run = _build(sample_images, tmp_path, '--progress_interval', '0.2', '--progress', 'off')
    assert run.stderr == ''
    assert run.stdout.startswith('build-dataset: wrote ')


@pytest.mark.parametrize('flags', [['--progress', 'sometimes'], ['--progress_interval', '0']])
def test_a_bad_progress_flag_is_a_one_line_usage_error(sample_images, tmp_path, capsys, flags):
    assert build_dataset.main(['--input', sample_images, '--output', str(tmp_path), *flags]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and err.startswith(('build-dataset: error: --progress',
                                                          'build-dataset: error: argument --progress')), err


def test_describe_gives_rate_and_eta_once_decoding_started():
    values = {progress.LISTED: 100, progress.DECODED: 30, progress.DECODE_REJECTED: 10, progress.WRITTEN: 0,
              ('quarantine', 'truncated'): 10, ('quarantine', 'label_conflict'): 2}
    assert progress.describe(values, 12, 'DecodeResize', decoding_seconds=4) == (
        'build-dataset: [DecodeResize] 12 s: listed 100, decoded 30, quarantined 12, written 0; '
        '10.0 images/s, ETA 6 s')
    assert 'ETA' not in progress.describe({progress.LISTED: 100}, 3, 'ListImages')


class _Terminal(io.StringIO):
    def isatty(self):
        return True


def test_on_a_terminal_the_line_updates_in_place(tmp_path):
    class Pipeline:
        runner = progress.CountingRunner()

    tally = Pipeline.runner.tally
    tally.finished({progress.LISTED: 7})
    terminal = _Terminal()
    with progress.Progress(Pipeline(), PipelineOptions([]), True, 0.01, stream=terminal):
        deadline = time.monotonic() + 60
        while terminal.getvalue().count('\r') < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        tally.finished({progress.DECODED: 5, progress.WRITTEN: 5})
    text = terminal.getvalue()
    updates = text.split('\r\x1b[K')
    assert updates[0] == '' and len(updates) >= 3 and text.endswith('\n') and text.count('\n') == 1
    assert LINE.match(updates[1])['listed'] == '7'
    done = LINE.match(updates[-1])
    assert [done[key] for key in ('stage', 'listed', 'decoded', 'written')] == ['done', '7', '5', '5']


class _FakeDataflowApi:
    """The Dataflow API calls a waiting DataflowPipelineResult makes: a job running for a few polls, then done."""

    def __init__(self, running_polls):
        self.running_polls = running_polls
        self.calls = 0

    def get_job(self, job_id):
        self.calls += 1
        state = (dataflow.JobState.JOB_STATE_RUNNING if self.calls <= self.running_polls
                 else dataflow.JobState.JOB_STATE_DONE)
        return dataflow.Job(id=job_id, current_state=state)

    def list_messages(self, job_id, page_token=None, start_time=None, minimum_importance=None):
        return [], None

    def get_job_metrics(self, job_id):
        values = {('listing', 'images_listed'): 50, ('decode', 'images_decoded'): 20,
                  ('decode', 'images_rejected'): 5, ('quarantine', 'truncated'): 5, ('write', 'records_written'): 0}
        return dataflow.JobMetrics(metrics=[
            dataflow.MetricUpdate(
                name=dataflow.MetricStructuredName(
                    origin='user', name=name, context={'namespace': namespace, 'step': 's2',
                                                       **({'tentative': 'true'} if tentative else {})}),
                scalar=value if tentative else 0)
            for (namespace, name), value in values.items() for tentative in (True, False)])


class _FakeRunner:
    def __init__(self, api):
        self.dataflow_client = api


def test_dataflow_job_url_then_counters_from_its_metrics(monkeypatch, tmp_path):
    monkeypatch.setattr(dataflow_runner.time, 'sleep', lambda seconds: None)  # Beam's poll waits 5 s a step
    api = _FakeDataflowApi(running_polls=6)
    options = PipelineOptions(['--project', 'my-project', '--region', 'europe-west4'])
    result = dataflow_runner.DataflowPipelineResult(
        dataflow.Job(id='2026-11-30_01', current_state=dataflow.JobState.JOB_STATE_RUNNING), _FakeRunner(api), options)
    result.metric_results = DataflowMetrics(api, result)

    class Pipeline:
        runner = None

    with open(tmp_path / 'progress.log', 'w') as stream:
        with progress.Progress(Pipeline(), options, True, 0.001, stream=stream) as watch:
            assert watch.wait(result) == PipelineState.DONE
    lines = (tmp_path / 'progress.log').read_text().splitlines()
    assert lines[0] == ('build-dataset: Dataflow job 2026-11-30_01: https://console.cloud.google.com/dataflow/jobs/'
                        'europe-west4/2026-11-30_01?project=my-project')
    counters = [LINE.match(line) for line in lines[1:]]
    assert counters and all(counters), lines
    assert [counters[0][key] for key in ('listed', 'decoded', 'quarantined', 'written')] == ['50', '20', '5', '0']
