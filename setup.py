"""One distribution holding the build job, its transforms, the training package and the contract.

Also Dataflow's ``--setup_file``: workers install it with the worker requirements only.
"""
import pathlib

import setuptools

HERE = pathlib.Path(__file__).parent


def _requirements(name):
    lines = (HERE / 'requirements' / f'{name}.txt').read_text().splitlines()
    return [line.strip() for line in lines if line.strip() and not line.startswith('#')]


setuptools.setup(
    name='image-tfrecords',
    version='0.1.0',
    license='Apache-2.0',
    description='Build labelled image folders into balanced TFRecord shards with Apache Beam, '
    'and train from them on TPU, GPU or CPU.',
    python_requires='>=3.11',
    packages=setuptools.find_packages(include=['contract', 'imgrec_*', 'pipelines', 'pipelines.*', 'transforms', 'training', 'samples']),
    install_requires=_requirements('worker'),
    extras_require={'train': _requirements('train'), 'test': _requirements('test')},
    entry_points={
        'console_scripts': [
            'build-dataset=pipelines.command_line:cli',
            'train-model=training.train:cli',
            'make-sample-images=samples.generate:main',
            'dataset-report=imgrec_versions.report:cli',
            'verify-dataset=imgrec_versions.verify:cli',
        ],
    },
)
