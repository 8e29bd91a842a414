"""Local runs default to one worker process per core, whichever way the user spells the flags."""
import os

import pytest
from apache_beam.options.pipeline_options import DirectOptions, WorkerOptions
from apache_beam.runners.portability.fn_api_runner import FnApiRunner

from pipelines.build_dataset import local_runner, pipeline_options


@pytest.mark.parametrize('args', [[], ['--direct_running_mode', 'multi_processing'],
                                  ['--direct_running_mode=multi_processing'], ['--runner', 'DirectRunner']])
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
