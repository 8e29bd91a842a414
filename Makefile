# The two commands the README leads with, and what they need. Everything installs into .venv from the
# pinned set (requirements/*.txt + constraints.txt), so a fresh machine with Python 3.11 is enough.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
DEMO_DIR ?= data/demo

.PHONY: demo test install clean chromium icc-profiles

install: $(STAMP)

# An editable install that maps only the import root (imgrec) into the venv, nothing else of the checkout
# (docs/architecture.md, "One import root"). setuptools announces every editable install with a UserWarning
# box (its "InformationOnly"): a notice about folders that shadow the package, which here are the package.

$(STAMP): setup.py requirements/worker.txt requirements/train.txt requirements/test.txt constraints.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	PYTHONWARNINGS=ignore::UserWarning $(PY) -m pip install --quiet -c constraints.txt -e '.[train,test]'
	touch $(STAMP)

demo: $(STAMP)
	rm -rf $(DEMO_DIR)
	$(PY) -m imgrec.samples.generate --output $(DEMO_DIR)/images --per_class 160
	$(PY) -m imgrec.pipelines.build_dataset --input $(DEMO_DIR)/images --output $(DEMO_DIR)/records \
		--image_size 64 --splits train=80,validation=20 --num_shards train=4,validation=2
	$(PY) -m imgrec.training.train --data $(DEMO_DIR)/records --epochs 6 --batch_size 32 \
		--model_dir $(DEMO_DIR)/model

# The suite runs on TEST_WORKERS processes (pytest-xdist), each taking whole test files, so a file's
# fixtures are built once: about 12 minutes on 2 cores against 20 on one process.
TEST_WORKERS ?= 2

# First the type checker over the public API, the configs and the modules mypy.ini lists (mypy is pinned in
# requirements/test.txt, so the install above brings it), then the suite.
test: $(STAMP) chromium icc-profiles
	$(PY) -m mypy
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile tests

# The report tests open report.html in Debian's headless chromium: installed here when absent and run as
# root with apt-get; otherwise those tests are skipped, saying why.
chromium:
	@command -v chromium >/dev/null || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; } || \
		echo 'make test: chromium is not installed (needs root and apt-get): the report tests will be skipped' >&2

# The colour tests convert wide-gamut photos (Adobe RGB, ProPhoto) with the profiles of Debian's colord-data:
# installed here when absent, as for chromium; otherwise those tests are skipped, saying why.
icc-profiles:
	@test -f /usr/share/color/icc/colord/AdobeRGB1998.icc || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq colord-data >/dev/null; } || \
		echo 'make test: colord-data is not installed (needs root and apt-get): the colour profile tests will be skipped' >&2

clean:
	rm -rf $(VENV) data *.egg-info

# The Ray Data peer of benchmarks/build_throughput.py --peers ray (docs/benchmarks.md), in a venv of its own,
# .venv-peers: Ray Data (pinned: the measured version), TensorFlow for its write_tfrecords, crc32c, and aiohttp,
# without which ray[data]'s fsspec cannot resolve a local path. Ray fits Beam's pins (pyarrow, protobuf, grpcio),
# but brings pandas and more: none of it goes into .venv, nor is a dependency of the project or its tests.
PEERS_VENV ?= .venv-peers

.PHONY: bench-peers
bench-peers: $(PEERS_VENV)/.installed

$(PEERS_VENV)/.installed: constraints.txt
	test -x $(PEERS_VENV)/bin/python || $(PYTHON) -m venv $(PEERS_VENV)
	$(PEERS_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(PEERS_VENV)/bin/python -m pip install --quiet -c constraints.txt 'ray[data]==2.60.0' tensorflow-cpu crc32c aiohttp pillow
	touch $@

# Flex Template: builds the image (launcher + workers' SDK container, Dockerfile) with Cloud Build and
# writes the template spec with templates/metadata.json. Needs gcloud and an Artifact Registry Docker
# repository: make template PROJECT=my-project REGION=europe-west4 BUCKET=my-bucket REPOSITORY=dataflow
TAG := $(shell date -u +%Y%m%dt%H%M%Sz)
IMAGE = $(REGION)-docker.pkg.dev/$(PROJECT)/$(REPOSITORY)/build-dataset:$(TAG)
TEMPLATE = gs://$(BUCKET)/templates/build-dataset.json

.PHONY: template
template:
	@test -n "$(PROJECT)" -a -n "$(REGION)" -a -n "$(BUCKET)" -a -n "$(REPOSITORY)" || \
		{ echo 'make template: set PROJECT=... REGION=... BUCKET=... REPOSITORY=...' >&2; exit 2; }
	gcloud builds submit --project $(PROJECT) --tag $(IMAGE) .
	gcloud dataflow flex-template build $(TEMPLATE) --project $(PROJECT) --image $(IMAGE) \
		--sdk-language PYTHON --metadata-file templates/metadata.json
	@echo "template: $(TEMPLATE)"
	@echo "image:    $(IMAGE)  (pass it as sdk_container_image so workers start with no pip install)"
