"""The peer the benchmarks measure the build against (``benchmarks/pool_script.py``) runs, with and without the
build's per-image guarantee work: a renamed function of the project fails its ``--guarantees`` run here, not in
a benchmark hours later. TensorFlow's own parser reads what it wrote."""
import glob
import os
import subprocess
import sys

import tensorflow as tf

from imgrec.samples.generate import write_images

SCRIPT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), 'benchmarks', 'pool_script.py')


def test_the_pool_script_writes_every_image_with_and_without_the_guarantee_work(tmp_path):
    images = tmp_path / 'images'
    write_images(str(images), 2, classes=('circle', 'square'), min_side=48, max_side=64)
    for extra in ([], ['--guarantees']):
        out = tmp_path / ('out' + ''.join(extra))
        run = subprocess.run([sys.executable, SCRIPT, str(images), str(out), '--size', '32',
                              '--processes', '1', '--shards', '2', *extra], capture_output=True, text=True, check=False)
        assert run.returncode == 0, run.stderr
        assert run.stdout.strip() == '4 images'
        records = [record for path in sorted(glob.glob(str(out / '*.tfrecord')))
                   for record in tf.data.TFRecordDataset(path)]
        labels = sorted(int(tf.train.Example.FromString(record.numpy()).features.feature['image/class/label']
                            .int64_list.value[0]) for record in records)
        assert labels == [0, 0, 1, 1]
