"""One distribution holding the build job, its transforms, the training package and the contract.

Also Dataflow's ``--setup_file``: workers install it with the worker requirements only.
"""
import pathlib

import setuptools

HERE = pathlib.Path(__file__).parent


def _requirements(name):
    lines = (HERE / 'requirements' / f'{name}.txt').read_text().splitlines()
    return [line.strip() for line in lines if line.strip() and not line.startswith('#')]


# One import root: every package is a folder under imgrec/, and the design card's top-level pipelines/,
# transforms/ and training/ are reached through the directory links imgrec/{pipelines,transforms,training}
# (docs/architecture.md, "One import root"). No package_dir: an editable install then maps only ``imgrec``,
# so a user's own ``import training`` never reaches ours. A link whose folder is absent from a partial copy
# (the worker image has no training/) finds no package and is left out.
PACKAGES = setuptools.find_packages(include=['imgrec', 'imgrec.*'])

setuptools.setup(
    name='image-tfrecords',
    version='0.1.0',
    license='Apache-2.0',
    description='Build labelled image folders into balanced TFRecord shards with Apache Beam, '
    'and train from them on TPU, GPU or CPU.',
    python_requires='>=3.11',
    packages=PACKAGES,
    install_requires=_requirements('worker'),
    extras_require={'train': _requirements('train'), 'test': _requirements('test')},
    entry_points={
        'console_scripts': [
            'build-dataset=imgrec.pipelines.build_dataset:cli',
            'train-model=imgrec.training.train:cli',
            'make-sample-images=imgrec.samples.generate:main',
            'dataset-report=imgrec.versions.report.command:cli',
            'verify-dataset=imgrec.versions.verify:cli',
        ],
    },
)
