"""One distribution holding the build job, its transforms, the training package and the contract.

Also Dataflow's ``--setup_file``: workers install it with the worker requirements only.
"""
import pathlib

import setuptools

HERE = pathlib.Path(__file__).parent


def _requirements(name):
    lines = (HERE / 'requirements' / f'{name}.txt').read_text().splitlines()
    return [line.strip() for line in lines if line.strip() and not line.startswith('#')]


# Packages named with common words install under ``imgrec`` (``imgrec.training``, not ``training``), where
# no other project's modules can collide with them; the source tree keeps them at the top (imgrec/__init__.py
# reaches them in a checkout). Folders absent from a partial copy (the worker image has no training/) are
# left out.
NAMESPACED = [name for name in ('contract', 'pipelines', 'transforms', 'training', 'samples')
              if (HERE / name / '__init__.py').is_file()]
PACKAGE_DIR = {f'imgrec.{name}': name for name in NAMESPACED}
PACKAGES = ['imgrec'] + setuptools.find_packages(include=['imgrec_*']) + [
    f'imgrec.{package}' for package in setuptools.find_packages(include=[f'{name}*' for name in NAMESPACED])]


setuptools.setup(
    name='image-tfrecords',
    version='0.1.0',
    license='Apache-2.0',
    description='Build labelled image folders into balanced TFRecord shards with Apache Beam, '
    'and train from them on TPU, GPU or CPU.',
    python_requires='>=3.11',
    packages=PACKAGES,
    package_dir=PACKAGE_DIR,
    install_requires=_requirements('worker'),
    extras_require={'train': _requirements('train'), 'test': _requirements('test')},
    entry_points={
        'console_scripts': [
            'build-dataset=imgrec.pipelines.command_line:cli',
            'train-model=imgrec.training.train:cli',
            'make-sample-images=imgrec.samples.generate:main',
            'dataset-report=imgrec_versions.report:cli',
            'verify-dataset=imgrec_versions.verify:cli',
        ],
    },
)
