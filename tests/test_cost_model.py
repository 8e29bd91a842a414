"""The Dataflow cost model: its arithmetic at the list prices, and a run end to end on a few images."""
import os
import subprocess
import sys

import pytest

from benchmarks import cost_model, prices
from imgrec.samples.generate import write_images
from tests.conftest import SMALL

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_billable_shuffle_follows_the_per_job_adjustments():
    assert prices.billable_shuffle_gb(0) == 0
    assert prices.billable_shuffle_gb(100) == pytest.approx(25)
    assert prices.billable_shuffle_gb(250) == pytest.approx(62.5)
    assert prices.billable_shuffle_gb(1250) == pytest.approx(62.5 + 500)
    assert prices.billable_shuffle_gb(6120) == pytest.approx(62.5 + 0.5 * (5120 - 250) + 1000)


def test_a_million_images_cost_what_one_image_costs_a_million_times():
    unit = dict.fromkeys(cost_model.KIND_NAMES.values(), 0.0)
    unit.update({'cpu_seconds': 0.0085, 'shuffle_bytes': 3000, cost_model.BEAMS_OWN_A: 0.001,
                 cost_model.BEAMS_OWN_B: 0.002, cost_model.BEAMS_OWN_FREE: 0.0,
                 'writes': 0.01, 'lists': 0.001, 'copies': 0.01, 'object reads': 1.0, 'ranged reads': 0.02,
                 'metadata reads': 0.0, 'deletes': 0.02})
    cost = cost_model.dataflow_cost(unit, 1_000_000, utilisation=0.5)
    assert cost['vcpu_hours'] == pytest.approx(8500 / 3600 / 0.5)
    assert cost['gb_hours'] == pytest.approx(cost['vcpu_hours'] * prices.WORKER_GB / prices.WORKER_VCPUS)
    assert cost['shuffle_gb'] == pytest.approx(3e9 * prices.SHUFFLE_PASSES / prices.GIB)
    assert cost['class_a'] == pytest.approx(21_000 + 1000)
    assert cost['class_b'] == pytest.approx(1_020_000 + 2000)
    assert cost['deletes'] == pytest.approx(20_000)
    assert cost['usd']['class B'] == pytest.approx(1_022_000 * prices.STORAGE_CLASS_B.usd)
    assert cost['usd']['vCPU'] == pytest.approx(cost['vcpu_hours'] * prices.DATAFLOW_VCPU_HOUR.usd)


def test_the_model_runs_builds_and_prints_the_cost_of_a_million_images(tmp_path):
    write_images(str(tmp_path / 'images'), 2, **SMALL)
    # The smallest run the model takes (8 and 4 images), on one worker process: it reads counters, which
    # count the same on any number of workers.
    done = subprocess.run([sys.executable, '-m', 'benchmarks.cost_model', '--images', '8', '--image_size', '32',
                           '--workers', '1', '--corpus', str(tmp_path / 'images')], cwd=ROOT, capture_output=True,
                          text=True, timeout=1800, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.splitlines()
    million = [line.split() for line in lines if line.split()[:2] == ['1,000,000', 'build']]
    assert len(million) == 1
    numbers = [float(field.replace(',', '')) for field in million[0][2:]]
    assert len(numbers) == 9 and all(number >= 0 for number in numbers)
    assert numbers[-1] > 0  # USD: a million images cost something
    assert [line.split()[1] for line in lines if line.split()[:1] == ['1,281,167']] == ['build', 'refresh']
    reads = [line.split() for line in lines if line.strip().startswith('requests: object reads')]
    assert len(reads) == 1 and float(reads[0][3]) == 1  # the build reads its sources, each once
    shuffled = [line.split() for line in lines if line.strip().startswith('bytes into shuffles')]
    assert len(shuffled) == 1 and float(shuffled[0][3].replace(',', '')) > 0  # each image crosses a shuffle
