"""imgrec.training.dataset and training.dataset_version: exact epochs, static shapes, resume position, refusals."""
import collections

import numpy as np
import pytest
import tensorflow as tf

from imgrec.console.errors import UserError
from tests import training_fixtures as fixtures
from imgrec.training import dataset, dataset_version

IMAGE = 32


@pytest.fixture(scope='module')
def published(tmp_path_factory):
    """48 train records in 4 shards, 21 validation records in 2 (not a multiple of any batch)."""
    root = str(tmp_path_factory.mktemp('published'))
    ids = fixtures.write_dataset(root, {'train': (48, 4), 'validation': (21, 2)}, image_size=IMAGE)
    return root, ids


def reader(root, split='train', batch=8, training=True, **options):
    config = dataset.InputConfig(split=split, global_batch_size=batch, is_training=training, **options)
    return dataset.InputReader(dataset_version.open_version(root), config)


def batches(data):
    """[(ids, labels)] of every batch, checking each batch's static and actual shapes."""
    assert data.element_spec[0].shape.is_fully_defined() and data.element_spec[1].shape.is_fully_defined()
    out = []
    for images, labels in data:
        assert images.shape == data.element_spec[0].shape
        out.append((fixtures.decode_ids(images.numpy()), labels.numpy()))
    return out


def test_training_epochs_yield_every_record_once_in_static_batches(published):
    root, ids = published
    train = reader(root, augment=True)
    assert train.steps_per_epoch() == 6
    assert train.dataset().element_spec[0].shape == (8, IMAGE, IMAGE, 3)
    epochs = [batches(train.dataset(epoch=epoch)) for epoch in range(2)]
    assert [len(result) for result in epochs] == [6, 6]
    seen = [np.concatenate([batch_ids for batch_ids, _ in result]) for result in epochs]
    assert sorted(seen[0]) == sorted(seen[1]) == ids['train']
    assert list(seen[0]) != list(seen[1]), 'each epoch should be reshuffled'
    for batch_ids, labels in epochs[0] + epochs[1]:
        assert list(labels) == list(batch_ids % 4)


def test_same_seed_same_order_other_seed_other_order(published):
    root, _ = published
    order = lambda **kw: np.concatenate([b for b, _ in batches(reader(root, **kw).dataset())])
    assert list(order(seed=3)) == list(order(seed=3))
    assert list(order(seed=3)) != list(order(seed=4))


def test_resumed_dataset_continues_exactly_where_the_step_says(published):
    root, _ = published
    train = reader(root)
    full = np.concatenate([b for b, _ in batches(train.dataset(epoch=1))])
    resumed = np.concatenate([b for b, _ in batches(train.dataset(epoch=1, start_step=2))])
    assert list(resumed) == list(full[2 * 8:])


def test_cache_keeps_every_record_once_per_epoch(published):
    root, ids = published
    cached = reader(root, cache=True)
    seen = [np.concatenate([b for b, _ in batches(cached.dataset(epoch=epoch))]) for epoch in range(2)]
    assert sorted(seen[0]) == sorted(seen[1]) == ids['train']
    assert list(seen[0]) != list(seen[1])


def test_training_drops_the_remainder_but_evaluation_pads_it(published):
    root, ids = published
    assert reader(root, 'validation', training=True).steps_per_epoch() == 2  # 21 // 8
    evaluation = reader(root, 'validation', training=False)
    assert evaluation.steps_per_epoch() == 3
    result = batches(evaluation.dataset())
    labels = np.concatenate([l for _, l in result])
    real = np.concatenate([b for b, _ in result])[labels != dataset.PAD_LABEL]
    assert sorted(real) == ids['validation']
    assert (labels == dataset.PAD_LABEL).sum() == 3


def test_input_pipelines_read_disjoint_shards_covering_the_split(published):
    root, ids = published
    train = reader(root, batch=8)
    seen = []
    for pipeline in range(2):
        context = tf.distribute.InputContext(num_input_pipelines=2, input_pipeline_id=pipeline, num_replicas_in_sync=4)
        data = train.dataset(context)
        assert data.element_spec[0].shape == (2, IMAGE, IMAGE, 3)  # per-replica batch: 8 / 4 replicas
        seen.append(set(np.concatenate([b for b, _ in batches(data)])))
    assert not seen[0] & seen[1]
    assert sorted(seen[0] | seen[1]) == ids['train']
    paths = [{path for path, _ in train.pipeline_shards(2, pipeline)} for pipeline in range(2)]
    assert not paths[0] & paths[1] and len(paths[0]) == len(paths[1]) == 2


def test_refuses_a_split_with_fewer_shards_than_input_pipelines(published):
    root, _ = published
    with pytest.raises(UserError, match=r"'validation' has 2 shard\(s\) but is read by 3 .*--num_shards validation=3"):
        reader(root, 'validation', batch=6, training=False).steps_per_epoch(num_input_pipelines=3)


def test_refuses_a_batch_larger_than_the_split(published):
    root, _ = published
    with pytest.raises(UserError, match='fewer than one batch of 64'):
        reader(root, batch=64).steps_per_epoch()


def test_images_leave_the_reader_as_uint8_and_augmentation_only_flips_them(tmp_path):
    root = str(tmp_path)
    fixtures.write_dataset(root, {'train': (16, 2)}, content='shapes')  # shapes are not mirror-symmetric
    plain, _ = next(iter(reader(root, augment=False).dataset()))
    augmented, _ = next(iter(reader(root, augment=True).dataset()))
    assert plain.dtype == augmented.dtype == tf.uint8
    flipped = [np.array_equal(a, p[:, ::-1]) for a, p in zip(augmented.numpy(), plain.numpy())]
    kept = [np.array_equal(a, p) for a, p in zip(augmented.numpy(), plain.numpy())]
    assert all(f or k for f, k in zip(flipped, kept)) and any(flipped) and any(kept)


def test_a_max_shift_moves_images_by_at_most_that_fraction_the_same_way_every_run(tmp_path):
    root = str(tmp_path)
    fixtures.write_dataset(root, {'train': (16, 2)}, content='shapes')
    plain, _ = next(iter(reader(root, augment=False).dataset()))
    first, _ = next(iter(reader(root, max_shift=0.125).dataset()))
    again, _ = next(iter(reader(root, max_shift=0.125).dataset()))
    assert first.dtype == tf.uint8 and first.shape == plain.shape
    np.testing.assert_array_equal(first.numpy(), again.numpy())
    pad = round(0.125 * IMAGE)

    def offset(shifted, image):
        """(dy, dx) that ``shifted`` (maybe flipped) is ``image`` moved by, where the two overlap."""
        for candidate in (image, image[:, ::-1]):
            padded = np.pad(candidate, ((pad, pad), (pad, pad), (0, 0)), mode='reflect')
            for dy in range(2 * pad + 1):
                for dx in range(2 * pad + 1):
                    if np.array_equal(padded[dy:dy + IMAGE, dx:dx + IMAGE], shifted):
                        return dy - pad, dx - pad
        return None

    offsets = [offset(a, p) for a, p in zip(first.numpy(), plain.numpy())]
    assert None not in offsets and any(o != (0, 0) for o in offsets)
    # A run resumed at step 1 of an epoch sees the images, shifts included, that an uninterrupted one would.
    shifted = reader(root, max_shift=0.125)
    whole = np.concatenate([images.numpy() for images, _ in shifted.dataset(epoch=1)])
    resumed = np.concatenate([images.numpy() for images, _ in shifted.dataset(epoch=1, start_step=1)])
    np.testing.assert_array_equal(resumed, whole[8:])


def test_opens_latest_or_a_named_version_and_explains_what_is_missing(tmp_path):
    root = str(tmp_path)
    fixtures.write_dataset(root, {'train': (8, 1)}, version='v1')
    fixtures.write_dataset(root, {'train': (12, 1)}, version='v2')
    assert dataset_version.open_version(root).version == 'v2'
    assert dataset_version.open_version(root, 'v1').num_examples('train') == 8
    with pytest.raises(UserError, match="version 'v3' not found"):
        dataset_version.open_version(root, 'v3')
    with pytest.raises(UserError, match='no dataset found at .*nothing: expected dataset.json or LATEST there'):
        dataset_version.open_version(str(tmp_path / 'nothing'))
    with pytest.raises(UserError, match=r"split 'test' is not in .* \(it has train\)"):
        dataset_version.open_version(root).shards('test')
    # A build's staging folder is never read, even one holding a dataset.json.
    fixtures.write_dataset(root, {'train': (4, 1)}, version='v4.incomplete-0123abcd')
    with pytest.raises(UserError, match=r'is a staging name \(the folder of a build that did not publish it\)'):
        dataset_version.open_version(root, 'v4.incomplete-0123abcd')


def test_reads_the_real_pipeline_output(built_dataset):
    """The lead's Beam build (conftest): every record decodes to dataset.json's size with a known label."""
    source = dataset_version.open_version(built_dataset)
    evaluation = dataset.InputReader(source, dataset.InputConfig('train', 4, is_training=False))
    labels = np.concatenate([l.numpy() for _, l in evaluation.dataset()])
    real = labels[labels != dataset.PAD_LABEL]
    assert len(real) == source.num_examples('train')
    counts = collections.Counter(source.labels[label] for label in real)
    assert counts == {k: v for k, v in source.metadata['splits']['train']['class_counts'].items() if v}
