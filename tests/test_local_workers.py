"""Local worker processes that cannot start fail the build in one line within seconds, not a hang."""
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_workers_that_cannot_start_are_one_line_not_a_hang(sample_images, tmp_path):
    # Only Beam's worker processes have CONTROL_API_SERVICE_DESCRIPTOR: they exit at start, the job doesn't.
    (tmp_path / 'site').mkdir()
    (tmp_path / 'site' / 'sitecustomize.py').write_text(
        "import os, sys\nif 'CONTROL_API_SERVICE_DESCRIPTOR' in os.environ:\n    sys.exit(3)\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path / 'site'), ROOT]))
    result = subprocess.run(
        [sys.executable, '-m', 'pipelines.build_dataset', '--input', sample_images, '--output', str(tmp_path / 'out'),
         '--image_size', '32', '--direct_running_mode', 'multi_processing', '--direct_num_workers', '2'],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)  # a hang fails here, not a threshold
    assert result.returncode == 1
    assert result.stderr.count('\n') == 1, result.stderr
    assert result.stderr.startswith('build-dataset: failed: a local Beam worker process could not start or died')
    assert not (tmp_path / 'out' / 'LATEST').exists()


def test_workers_that_cannot_start_are_caught_even_with_sigint_ignored(sample_images, tmp_path):
    """A parent that ignores SIGINT (nohup, some schedulers) passes that on: the watch must not rely on it."""
    import signal
    (tmp_path / 'site').mkdir()
    (tmp_path / 'site' / 'sitecustomize.py').write_text(
        "import os, sys\nif 'CONTROL_API_SERVICE_DESCRIPTOR' in os.environ:\n    sys.exit(3)\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path / 'site'), ROOT]))
    result = subprocess.run(
        [sys.executable, '-m', 'pipelines.build_dataset', '--input', sample_images, '--output', str(tmp_path / 'out'),
         '--image_size', '32', '--direct_running_mode', 'multi_processing', '--direct_num_workers', '2'],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    assert result.returncode == 1 and result.stderr.count('\n') == 1, result.stderr
    assert 'a local Beam worker process could not start or died' in result.stderr
