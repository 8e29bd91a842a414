"""The runner is decided once, whatever its spelling; local runs default to one worker process per core; the
options module parses without touching the file system."""
import os

import pytest
from apache_beam.io.filesystems import FileSystems
from apache_beam.options.pipeline_options import (
    DirectOptions,
    PipelineOptions,
    StandardOptions,
    TypeOptions,
    WorkerOptions,
)
from apache_beam.runners.portability.fn_api_runner import FnApiRunner

from imgrec.console.errors import UserError
from imgrec.pipelines import beam_options, launcher, options as options_module
from imgrec.pipelines.beam_options import is_local, local_runner, local_worker_count, pipeline_options
from imgrec.pipelines.options import runner_name
from imgrec.samples.generate import write_images
from tests.conftest import SMALL
from tests.contract_checks import shard_files


@pytest.mark.parametrize('args', [[], ['--runner', 'DirectRunner']])
def test_the_default_is_a_worker_process_per_core_each_decoding_on_its_own_thread(args):
    _, facts, options = launcher.parse(['--input', 'in', '--output', 'out', *args])
    direct = options.view_as(DirectOptions)
    assert (direct.direct_running_mode, direct.direct_num_workers) == ('multi_processing', os.cpu_count())
    assert facts.decoders == 0 and local_worker_count(options) == os.cpu_count()
    assert options.view_as(TypeOptions).pipeline_type_check is False  # checked where Dataflow's graph is built
    assert isinstance(local_runner(options), FnApiRunner)


@pytest.mark.parametrize('args', [['--direct_running_mode', 'multi_threading'], ['--direct_running_mode=multi_threading',
                                                                                  '--direct_num_workers', '2']])
def test_beams_multi_threading_mode_is_refused_in_one_line(args):
    with pytest.raises(UserError, match='^--direct_running_mode multi_threading is refused: .* use multi_processing'):
        launcher.parse(['--input', 'in', '--output', 'out', *args])


def test_only_in_memory_decodes_on_a_thread_per_core():
    for args in (['--direct_running_mode', 'multi_processing'], ['--direct_num_workers', '3']):
        assert launcher.parse(['--input', 'in', '--output', 'out', *args])[1].decoders == 0
    in_memory = ['--input', 'in', '--output', 'out', '--direct_running_mode', 'in_memory']
    assert launcher.parse(in_memory)[1].decoders == os.cpu_count()
    assert launcher.parse(in_memory + ['--direct_num_workers', '1'])[1].decoders == 1


def test_views_of_the_options_are_made_once_and_stay_live():
    options = pipeline_options([])
    assert options.view_as(DirectOptions) is options.view_as(DirectOptions)
    options.view_as(DirectOptions).direct_num_workers = 5
    assert PipelineOptions.view_as(options, DirectOptions).direct_num_workers == 5  # a view made afresh
    assert options.get_all_options()['direct_num_workers'] == 5


@pytest.mark.parametrize('args', [['--direct_running_mode', 'multi_processing'],
                                  ['--direct_running_mode=multi_processing']])
def test_multi_processing_gets_a_worker_per_core_and_quiet_workers(args):
    options = pipeline_options(args)
    direct = options.view_as(DirectOptions)
    assert (direct.direct_running_mode, direct.direct_num_workers) == ('multi_processing', os.cpu_count())
    assert options.view_as(WorkerOptions).default_sdk_harness_log_level == 'CRITICAL'
    assert isinstance(local_runner(options), FnApiRunner)  # never Prism, which downloads a binary


def test_explicit_choices_are_kept():
    direct = pipeline_options(['--direct_running_mode=in_memory']).view_as(DirectOptions)
    assert direct.direct_running_mode == 'in_memory' and direct.direct_num_workers in (None, 1)
    direct = pipeline_options(['--direct_num_workers=3']).view_as(DirectOptions)
    assert (direct.direct_running_mode, direct.direct_num_workers) == ('multi_processing', 3)


@pytest.mark.parametrize('spelling, runner', [
    ('DirectRunner', 'DirectRunner'), ('directrunner', 'DirectRunner'), ('direct', 'DirectRunner'),
    ('DIRECT', 'DirectRunner'), ('DataflowRunner', 'DataflowRunner'), ('dataflow', 'DataflowRunner'),
    ('dataflowrunner', 'DataflowRunner'), ('PortableRunner', 'PortableRunner')])
@pytest.mark.parametrize('form', ['separate', 'joined'])
def test_one_runner_decision_whatever_the_spelling(spelling, runner, form):
    args = ['--runner', spelling] if form == 'separate' else [f'--runner={spelling}']
    assert runner_name(args) == runner
    if runner == 'DirectRunner':  # the local path: Beam never resolves the name itself
        options = pipeline_options(args + ['--direct_running_mode', 'in_memory'])
        assert options.view_as(StandardOptions).runner == 'DirectRunner' and is_local(options)
        assert isinstance(local_runner(options), FnApiRunner)


def test_no_runner_is_the_direct_runner():
    assert runner_name([]) == 'DirectRunner' and runner_name(['--project', 'p']) == 'DirectRunner'


def test_the_options_module_parses_without_touching_the_file_system(monkeypatch):
    """Any look at the paths it is given (argparse itself may look for its message catalogue)."""
    def guarded(function):
        def call(*args, **kwargs):
            if any(str(arg).startswith(('/no/', 'gs://')) for arg in args):
                raise AssertionError(f'file system access during parsing: {args}')
            return function(*args, **kwargs)
        return call
    with monkeypatch.context() as patched:
        for name in ('open', 'stat', 'lstat', 'listdir', 'scandir', 'walk', 'access'):
            patched.setattr(os, name, guarded(getattr(os, name)))
        for name in ('exists', 'isdir', 'isfile'):
            patched.setattr(os.path, name, guarded(getattr(os.path, name)))
        patched.setattr('builtins.open', guarded(open))
        for name in ('exists', 'open', 'match'):
            patched.setattr(FileSystems, name, guarded(getattr(FileSystems, name)))
        config, beam_args = options_module.parse_args(
            ['--input', '/no/such/input', '--output', 'gs://no-such-bucket/out', '--labels', '/no/labels.txt',
             '--num_shards', 'train=4', '--target_shard_mb', '50', '--runner', 'direct', '--direct_num_workers', '2'])
    assert config.labels_file == '/no/labels.txt' and config.labels is None  # read by the pre-flight checks
    assert beam_args == ['--runner', 'direct', '--direct_num_workers', '2']


def test_num_shards_and_target_size_together():
    config, _ = options_module.parse_args(['--input', 'in', '--output', 'out', '--splits', 'train=9,validation=1',
                                           '--num_shards', 'train=4', '--target_shard_mb', '0.001'])
    shards = config.shard_config()
    assert shards.num_shards('train', 1000, 10**6) == 4  # fixed
    assert shards.num_shards('validation', 1000, 10**6) == 1000  # 1 kB a shard, capped at one record each


def test_a_small_local_build_runs_in_memory_unless_a_running_mode_is_named(tmp_path):
    small = tmp_path / 'small'
    write_images(str(small), 3, **SMALL)
    large = tmp_path / 'large'
    (large / 'circle').mkdir(parents=True)
    for i in range(beam_options.SMALL_BUILD_IMAGES):  # counted by name: the files need no pixels
        (large / 'circle' / f'{i}.jpg').touch()

    def mode(images, *args):
        return launcher.parse(['--input', str(images), '--output', 'out', *args])[2].view_as(
            DirectOptions).direct_running_mode
    assert mode(small) == 'in_memory'
    assert mode(small, '--direct_running_mode', 'multi_processing') == 'multi_processing'
    assert mode(small, '--direct_running_mode=multi_processing') == 'multi_processing'
    assert mode(large) == 'multi_processing' and mode(large, '--direct_running_mode', 'in_memory') == 'in_memory'
    assert mode('gs://bucket/images') == 'multi_processing'  # no listing requests to decide the mode


def test_the_mode_chosen_for_a_small_build_writes_the_bytes_of_the_other_mode(tmp_path):
    images = tmp_path / 'images'
    write_images(str(images), 6, png_every=3, **SMALL)
    chosen = launcher.parse(['--input', str(images), '--output', 'out'])[2]
    assert chosen.view_as(DirectOptions).direct_running_mode == 'in_memory'
    shards = {}
    for name, extra in (('chosen', []), ('other', ['--direct_running_mode', 'multi_processing'])):
        config, _ = launcher.run(['--input', str(images), '--output', str(tmp_path / name), '--image_size', '32',
                                       '--num_shards', 'train=2,validation=1', '--version', 'v1', '--no_progress',
                                       *extra])
        shards[name] = shard_files(config.version_dir)
    assert len(shards['chosen']) == 3 and shards['chosen'] == shards['other']
