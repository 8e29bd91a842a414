"""The Beam internals behind one gate (imgrec.pipelines.local): canaries against the Beam installed, nothing
applied at import, everything undone after a run, a feature whose check fails is off in one line while
the build goes on, a build with every feature off writes the same bytes, and no module outside
pipelines/local/ uses a non-public Beam name."""
import ast
import json
import os
import signal
import subprocess
import sys
import time

import apache_beam as beam
import pytest
from apache_beam.internal.gcp import auth
from apache_beam.metrics import Metrics
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.runners.portability import local_job_service
from apache_beam.runners.portability.fn_api_runner import fn_runner, worker_handlers

from imgrec.contract import counters, layout
from imgrec.pipelines import build_dataset, launcher
from imgrec.pipelines.local import internals, live_counters, workers
from imgrec.samples.generate import write_images
from tests.conftest import SMALL
from tests.test_determinism import _outputs

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MULTI_PROCESSING = ['--direct_running_mode', 'multi_processing', '--direct_num_workers', '2']
# For builds whose point is not how many workers there are (each worker more costs an interpreter's start): a
# simulated upgrade turns one feature off, whose check fails the same on one worker as on two. Two warm workers
# taken by Beam: test_beam_runs_its_bundles_on_the_warm_workers_...; a build on two, every feature applied and
# undone: test_every_feature_is_undone_...; stock Beam against every feature, on two:
# test_a_build_with_every_feature_off_writes_the_same_bytes.
ONE_WORKER = ['--direct_running_mode', 'multi_processing', '--direct_num_workers', '1']


@pytest.fixture(autouse=True)
def fresh_checks():
    """Each test checks the features anew: some change Beam in between."""
    internals.forget()
    yield
    internals.forget()


def _target(module, path):
    found = sys.modules[module]
    for part in path.split('.'):
        found = getattr(found, part)
    return found


def _beam_state():
    """Everything a feature replaces while applied, plus what the run's signal handling and workers' malloc touch."""
    state = {f'{module}:{path}': _target(module, path) for internal in internals.INTERNALS
             for module, path in internal.patches}
    state['SIGUSR1 handler'] = signal.getsignal(signal.SIGUSR1)
    state['signal mask'] = signal.pthread_sigmask(signal.SIG_BLOCK, set())
    state['malloc environment'] = {name: os.environ.get(name) for name in workers.MALLOC_SETTINGS}
    return state


def _assert_same(before, after):
    assert before.keys() == after.keys()
    changed = [name for name in before if not (before[name] is after[name] or before[name] == after[name])]
    assert not changed, changed


# --- canaries: our assumptions against Beam's own values -------------------------------------------------------


def test_every_feature_passes_its_check_on_the_pinned_beam():
    assert [internal.name for internal in internals.INTERNALS if not internals.usable(internal.name)] == []


def test_the_worker_command_is_the_one_beam_starts_its_workers_with(monkeypatch):
    """Stock Beam, one worker process: the command it hands to subprocess is read off the run itself."""
    started = []

    class Recording:
        def __getattr__(self, name):
            return getattr(subprocess, name)

        def Popen(self, command, *args, **kwargs):  # pylint: disable=invalid-name
            started.append(command)
            return subprocess.Popen(command, *args, **kwargs)

    monkeypatch.setattr(local_job_service, 'subprocess', Recording())
    options = PipelineOptions(['--direct_running_mode', 'multi_processing', '--direct_num_workers', '1'])
    with beam.Pipeline(runner=fn_runner.FnApiRunner(), options=options) as pipeline:
        _ = pipeline | beam.Create([1, 2, 3]) | beam.Map(lambda x: x + 1)
    assert started and set(started) == {workers.beam_worker_command()}


def test_beam_runs_its_bundles_on_the_warm_workers_and_stops_them_cleanly():
    options = PipelineOptions(MULTI_PROCESSING)
    with internals.local_run(2, progress=False) as run:
        warm = local_job_service.subprocess
        handed = list(warm._processes)  # pylint: disable=protected-access
        with beam.Pipeline(runner=run.runner, options=options) as pipeline:
            _ = pipeline | beam.Create(range(20)) | beam.Map(lambda x: x * 2)
        assert warm._processes == []  # pylint: disable=protected-access  # Beam took both
    assert [process.wait() for process in handed] == [0, 0]  # each ran Beam's harness to its end


def _credential_search_skipped(_):
    """In the worker process: whether Beam's credential cache already says "no credentials" (no search)."""
    return os.getpid(), auth._Credentials._credentials_init  # pylint: disable=protected-access


def test_worker_processes_skip_the_credential_search_against_an_emulator(monkeypatch):
    """The FnApiRunner hands its workers no job options of its own: the worker plugin must still reach them."""
    monkeypatch.setenv('STORAGE_EMULATOR_HOST', 'http://127.0.0.1:9')  # no GCS call is made
    one_worker = ['--direct_running_mode', 'multi_processing', '--direct_num_workers', '1']
    with internals.local_run(1, progress=False) as run, \
            beam.Pipeline(runner=run.runner, options=PipelineOptions(one_worker)) as pipeline:
        seen = pipeline | beam.Create(range(4)) | beam.Map(_credential_search_skipped)
        _ = seen | beam.combiners.ToList() | beam.Map(_assert_in_workers_and_skipped, os.getpid())


def _assert_in_workers_and_skipped(seen, launcher):
    assert seen and all(pid != launcher and skipped is True for pid, skipped in seen), seen


_TALLY = []  # the tally a running bundle's DoFn watches (multi-threading: the DoFn runs in this process)
_SAW_PROGRESS = []
CANARY = counters.Counter('canary', 'seen')


class _CountThenAwaitProgress(beam.DoFn):
    """Counts, then waits until the runner's tally shows the count while this bundle still runs: only a
    progress report (Beam's ProgressRequester) can bring it there."""

    def process(self, element):
        Metrics.counter(*CANARY).inc()
        deadline = time.monotonic() + 120  # only against a hang
        while not _TALLY[0].snapshot()[CANARY] and time.monotonic() < deadline:
            time.sleep(0.01)
        _SAW_PROGRESS.append(bool(_TALLY[0].snapshot()[CANARY]))
        yield element


def test_live_counters_see_running_bundles_and_agree_with_beams_own_metrics():
    runner = live_counters.CountingRunner(frequency=0.05)
    _TALLY[:] = [runner.tally]
    _SAW_PROGRESS.clear()
    options = PipelineOptions(['--direct_running_mode', 'multi_threading'])
    with internals.patched({internals.LIVE_COUNTERS}, internals.LocalRun(0, runner)):
        pipeline = beam.Pipeline(runner=runner, options=options)
        _ = (pipeline | beam.Create(['only']) | beam.ParDo(_CountThenAwaitProgress())
             | beam.Map(lambda x: Metrics.counter(*counters.RECORDS_WRITTEN).inc()))
        result = pipeline.run()
    assert _SAW_PROGRESS == [True]
    assert dict(runner.tally.snapshot()) == dict(counters.read(result)) == {CANARY: 1, counters.RECORDS_WRITTEN: 1}


# --- applied only around a local run ------------------------------------------------------------------------------

_IMPORT_AND_COMPARE = '''
import importlib, json, sys
targets = json.loads(sys.argv[1])
def state():
    found = {}
    for module, path in targets:
        value = importlib.import_module(module)
        for part in path.split('.'):
            value = getattr(value, part)
        found[module + ':' + path] = value if isinstance(value, (bool, type(None))) else id(value)
    return found
before = state()
import imgrec.pipelines.build_dataset, templates.launch, imgrec.pipelines.local.internals  # noqa
after = state()
print(json.dumps({'before': before, 'after': after,
                  'plugin imported': 'imgrec.pipelines.local.worker_plugin' in sys.modules}))
'''


def test_importing_the_launcher_changes_nothing_in_beam():
    """In a fresh process, even against an emulator (where the credential cache used to be set at import)."""
    targets = [target for internal in internals.INTERNALS for target in internal.patches]
    env = dict(os.environ, STORAGE_EMULATOR_HOST='http://127.0.0.1:9')
    run = subprocess.run([sys.executable, '-c', _IMPORT_AND_COMPARE, json.dumps(targets)], cwd=ROOT, env=env,
                         capture_output=True, text=True, check=True)
    found = json.loads(run.stdout)
    assert len(found['before']) == len(targets) and found['before'] == found['after']
    assert not found['plugin imported']


def test_every_feature_is_undone_after_a_run_that_went_well_and_one_that_failed(sample_images, tmp_path):
    before = _beam_state()
    launcher.run(['--input', sample_images, '--output', str(tmp_path / 'good'), '--image_size', '32',
                       *MULTI_PROCESSING])
    assert (tmp_path / 'good' / layout.LATEST).exists()
    _assert_same(before, _beam_state())
    broken = tmp_path / 'broken'
    write_images(str(broken), 3, **SMALL)
    (broken / 'circle' / 'truncated.jpg').write_bytes(b'\xff\xd8\xff\xe0 not an image')
    with pytest.raises(Exception):  # the runner wraps the build's BuildFailed in its own type
        launcher.run(['--input', str(broken), '--output', str(tmp_path / 'bad'), '--image_size', '32',
                           '--max_error_rate', '0', *MULTI_PROCESSING])
    assert not (tmp_path / 'bad' / layout.LATEST).exists()
    _assert_same(before, _beam_state())


# --- a Beam that no longer matches: the feature is off, the build goes on -----------------------------------------


def _stand_in_for(owner, name):
    """A wrapper that does what Beam's ``owner.name`` does, but no longer looks as a feature assumes."""
    original = owner.__dict__[name]
    if isinstance(original, classmethod):
        return classmethod(lambda cls, *args, **kwargs: original.__func__(cls, *args, **kwargs))
    return lambda *args, **kwargs: original(*args, **kwargs)


# What an upgraded Beam might have changed, one thing a feature relies on each.
UPGRADES = {
    internals.WARM_WORKERS: (fn_runner.FnApiRunner, 'run_pipeline'),  # the worker command built elsewhere
    internals.STOP_TOGETHER: (worker_handlers.WorkerHandlerManager, 'close_all'),
    internals.WORKER_DEATHS: (worker_handlers.SubprocessSdkWorkerHandler, 'start_worker'),
    internals.LIVE_COUNTERS: (fn_runner.ProgressRequester, '__init__'),
    internals.EMULATOR_CREDENTIALS: (auth._Credentials, 'get_service_credentials'),  # pylint: disable=protected-access
}


def test_every_feature_has_a_simulated_upgrade():
    assert set(UPGRADES) == set(internals.BY_NAME)


@pytest.mark.parametrize('feature', list(UPGRADES))
def test_a_feature_whose_check_fails_is_off_in_one_line_and_the_build_succeeds(
        feature, sample_images, tmp_path, monkeypatch, capsys):
    owner, name = UPGRADES[feature]
    monkeypatch.setattr(owner, name, _stand_in_for(owner, name))
    if feature == internals.EMULATOR_CREDENTIALS:  # needed only against an emulator; this build reads no gs://
        monkeypatch.setenv('STORAGE_EMULATOR_HOST', 'http://127.0.0.1:9')
    progress = [] if feature == internals.LIVE_COUNTERS else ['--progress', 'off']
    status = build_dataset.main(['--input', sample_images, '--output', str(tmp_path), '--image_size', '32',
                                 *progress, *ONE_WORKER])
    captured = capsys.readouterr()
    assert status == 0, captured.err
    assert captured.err.count('\n') == 1 and captured.err.startswith(f'build-dataset: {feature} off: '), captured.err
    assert captured.out.startswith('build-dataset: wrote ')
    assert (tmp_path / layout.LATEST).exists()


def test_an_unknown_feature_in_the_switch_is_a_one_line_usage_error(sample_images, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(internals.ENV, 'warm-workers,warp-drive')
    assert build_dataset.main(['--input', sample_images, '--output', str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count('\n') == 1 and err.startswith(f'build-dataset: error: {internals.ENV} names no feature warp-drive')


@pytest.mark.parametrize('value, on', [('', set(internals.BY_NAME)), ('on', set(internals.BY_NAME)), ('off', set()),
                                       ('Live-Counters, warm-workers', {'live-counters', 'warm-workers'})])
def test_the_switch_names_the_features_on(value, on):
    assert internals.selected({internals.ENV: value}) == on


# --- stock Beam writes the same bytes -----------------------------------------------------------------------------


def _build_as_users_do(images, output, switch):
    env = dict(os.environ, **{internals.ENV: switch})
    subprocess.run([sys.executable, '-m', 'imgrec.pipelines.build_dataset', '--input', images, '--output', str(output),
                    '--image_size', '32', '--version', 'v', *MULTI_PROCESSING],  # the features are for workers
                   cwd=ROOT, env=env, capture_output=True, check=True)
    return output


def _version_files(output):
    """{name: bytes} of every file of the version but dataset.json (``_outputs`` compares it less what names the
    run) and the report with its sidecar (they show the build's time, duration and path)."""
    version_dir = output / 'v'
    return {str(path.relative_to(version_dir)): path.read_bytes() for path in sorted(version_dir.rglob('*'))
            if path.is_file() and path.name not in (layout.DATASET_JSON, layout.REPORT_HTML, layout.REPORT_STATE_JSON)}


def test_a_build_with_every_feature_off_writes_the_same_bytes(tmp_path):
    images = tmp_path / 'images'
    write_images(str(images), 8, png_every=3, **SMALL)
    patched = _build_as_users_do(str(images), tmp_path / 'patched', 'on')
    stock = _build_as_users_do(str(images), tmp_path / 'stock', 'off')
    assert _outputs(str(patched)) == _outputs(str(stock))
    files = _version_files(patched)
    assert len(files) >= 8 and files == _version_files(stock)
    assert sorted(os.listdir(patched / 'v')) == sorted(os.listdir(stock / 'v'))


# --- nothing non-public of Beam outside pipelines/local/ ----------------------------------------------------------

# Beam's surface that is not its public API although no name in it starts with '_': its internal package, the
# runners' and workers' machinery, the runner-level element representation, the worker harness's options.
NON_PUBLIC = ('apache_beam.internal', 'apache_beam.runners.worker', 'apache_beam.runners.direct',
              'apache_beam.runners.portability.fn_api_runner', 'apache_beam.runners.portability.local_job_service',
              'apache_beam.runners.portability.portable_metrics', 'apache_beam.utils.windowed_value',
              'apache_beam.options.value_provider.RuntimeValueProvider.runtime_options')


def _non_public(dotted):
    private = any(part.startswith('_') and not part.startswith('__') for part in dotted.split('.'))
    return private or any(dotted == name or dotted.startswith(name + '.') for name in NON_PUBLIC)


def _dotted(node, bound):
    """The full Beam path an expression ``a.b.c`` names when ``a`` is bound to a Beam import, else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name) and node.id in bound:
        return '.'.join([bound[node.id], *reversed(parts)])
    return None


def beam_internals_used(source):
    """The non-public Beam names ``source`` imports or reaches through what it imported from Beam."""
    tree, bound, used = ast.parse(source), {}, set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split('.')[0] == 'apache_beam':
                    bound[alias.asname or alias.name.split('.')[0]] = alias.name if alias.asname else 'apache_beam'
                    used.add(alias.name)
        elif isinstance(node, ast.ImportFrom) and (node.module or '').split('.')[0] == 'apache_beam':
            for alias in node.names:
                bound[alias.asname or alias.name] = f'{node.module}.{alias.name}'
                used.add(f'{node.module}.{alias.name}')
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            dotted = _dotted(node, bound)
            if dotted:
                used.add(dotted)
    return {dotted for dotted in used if _non_public(dotted)}


def _project_modules():
    tracked = subprocess.run(['git', 'ls-files', '*.py'], cwd=ROOT, capture_output=True, text=True, check=True)
    return [path for path in tracked.stdout.split()
            if not path.startswith(('tests/', 'pipelines/local/')) and os.path.exists(os.path.join(ROOT, path))]


def test_no_module_outside_pipelines_local_uses_a_non_public_beam_name():
    modules = _project_modules()
    assert 'pipelines/progress.py' in modules and 'transforms/decode.py' in modules
    found = set()
    for path in modules:
        with open(os.path.join(ROOT, path), encoding='utf-8') as stream:
            found |= {(path, dotted) for dotted in beam_internals_used(stream.read())}
    assert found == set()


@pytest.mark.parametrize('source, found', [
    ('from apache_beam.metrics import Metrics\nMetrics.counter("a", "b")', set()),
    ('import apache_beam as beam\nbeam.io.filesystems.FileSystems.exists("x")', set()),
    ('from apache_beam.runners.portability.fn_api_runner import fn_runner',
     {'apache_beam.runners.portability.fn_api_runner.fn_runner'}),
    ('from apache_beam.io.filesystems import FileSystems\nFileSystems._get_filesystem("x")',
     {'apache_beam.io.filesystems.FileSystems._get_filesystem'}),
    ('import apache_beam as beam\nbeam.internal.gcp.auth', {'apache_beam.internal', 'apache_beam.internal.gcp',
                                                          'apache_beam.internal.gcp.auth'}),
    ('import apache_beam.utils.windowed_value as wv\nwv.WindowedValue(1, 0, ())',
     {'apache_beam.utils.windowed_value', 'apache_beam.utils.windowed_value.WindowedValue'}),
])
def test_the_gate_finds_imports_and_attributes_beam_keeps_private(source, found):
    assert beam_internals_used(source) == found
