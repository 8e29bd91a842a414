"""Local worker processes: warm ones handed to Beam while they last, ended with the build; and workers that
cannot start fail the build in one line within seconds, not a hang."""
import os
import signal
import subprocess
import sys

import psutil
from apache_beam.runners.portability import local_job_service
from apache_beam.runners.worker import sdk_worker_main

from imgrec.pipelines.local import internals, workers
from tests import launcher

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _build_with_workers_that_cannot_start(images, tmp_path, **signal_states):
    # Only worker processes run these modules (Beam's harness, or the warm worker that runs it): they exit
    # at start, the job doesn't.
    (tmp_path / 'site').mkdir()
    (tmp_path / 'site' / 'sitecustomize.py').write_text(
        f"import sys\nif {{{sdk_worker_main.__name__!r}, {workers.WARM_WORKER_MODULE!r}}} & set(sys.orig_argv):\n"
        "    sys.exit(3)\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path / 'site'), ROOT]))
    return subprocess.run(
        launcher.command([sys.executable, '-m', 'imgrec.pipelines.build_dataset', '--input', images, '--output',
                          str(tmp_path / 'out'), '--image_size', '32', '--direct_running_mode', 'multi_processing',
                          '--direct_num_workers', '2'], **signal_states),
        cwd=ROOT, env=env, capture_output=True, text=True,
        timeout=300)  # a hang fails here; this is not a timing threshold


def _assert_one_line_failure(result, output):
    assert result.returncode == 1
    assert result.stderr.count('\n') == 1, result.stderr
    assert result.stderr.startswith('build-dataset: failed: a local Beam worker process could not start or died')
    assert not (output / 'LATEST').exists()


def test_workers_that_cannot_start_are_one_line_not_a_hang(sample_images, tmp_path):
    _assert_one_line_failure(_build_with_workers_that_cannot_start(sample_images, tmp_path), tmp_path / 'out')


def test_whatever_signals_the_parent_ignores_or_blocks(sample_images, tmp_path):
    """A parent that ignores SIGINT (nohup, some schedulers) or blocks signals passes that on to the build."""
    result = _build_with_workers_that_cannot_start(sample_images, tmp_path, ignore=[signal.SIGINT],
                                                  block=[signal.SIGINT, signal.SIGUSR1])
    _assert_one_line_failure(result, tmp_path / 'out')


def test_beam_gets_warm_workers_while_they_last_then_its_own():
    """Beam's worker command gets a process started before the graph, as many as there are; any other
    command, or the worker command once none is left, runs as Beam asked."""
    command = workers.beam_worker_command()
    env = dict(os.environ, CONTROL_API_SERVICE_DESCRIPTOR='unused')
    with internals.local_run(1, progress=False):
        start = local_job_service.subprocess.Popen  # where Beam starts a worker, as it looks it up
        other = start('exit 7', shell=True, env=env)
        warm = start(command, shell=True, env=env)
        handed = psutil.Process(warm.pid).environ()  # what the process started with
        cold = start(command, shell=True, env=env)
        for process in (warm, cold):
            process.kill()
            process.wait()
        assert other.wait() == 7
    assert warm.args == [sys.executable, '-m', workers.WARM_WORKER_MODULE]
    assert all(name in handed for name in workers.MALLOC_SETTINGS)
    assert cold.args == command


def test_warm_workers_no_job_asked_for_end_with_the_build():
    with internals.local_run(2, progress=False):
        warm = local_job_service.subprocess
        unused = list(warm._processes)  # pylint: disable=protected-access
        assert len(unused) == 2 and all(process.poll() is None for process in unused)
    assert all(process.poll() is not None for process in unused)
    assert warm._processes == []  # pylint: disable=protected-access
