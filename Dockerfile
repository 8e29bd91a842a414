# One image for both ends of a Dataflow run (the pattern of Google's Flex Template samples):
#  - the Flex Template launcher: gcloud dataflow flex-template run starts it to build and submit the job;
#  - the workers' SDK container (sdk_container_image): the project and its worker requirements are
#    preinstalled, so workers start without pip. No TensorFlow: workers write Examples without it.
# Build and publish with `make template` (see README, "Run on Google Cloud").
ARG BEAM_VERSION=2.77.0
ARG LAUNCHER_IMAGE=gcr.io/dataflow-templates-base/python311-template-launcher-base:latest

FROM ${LAUNCHER_IMAGE} AS launcher

# Beam's SDK image for Python 3.11 (the Python the project pins) at the pinned Beam version.
FROM apache/beam_python3.11_sdk:${BEAM_VERSION}

COPY --from=launcher /opt/google/dataflow/python_template_launcher /opt/google/dataflow/python_template_launcher

WORKDIR /template
COPY setup.py MANIFEST.in constraints.txt ./
COPY requirements requirements
COPY imgrec imgrec
COPY contract contract
COPY imgrec.console imgrec.console
COPY imgrec.storage imgrec.storage
COPY imgrec.imaging imgrec.imaging
COPY imgrec.versions imgrec.versions
COPY pipelines pipelines
COPY transforms transforms
COPY samples samples
COPY templates templates

# The worker requirements only (no training package, no TensorFlow), at the tested versions; editable, so
# setup.py stays next to the code and the job also ships it to workers started from another image.
RUN pip install --no-cache-dir -c constraints.txt -e .

# The launcher runs this file with the launch parameters as --name=value arguments.
ENV FLEX_TEMPLATE_PYTHON_PY_FILE=/template/templates/launch.py

# As an SDK container image, start Beam's worker boot program.
ENTRYPOINT ["/opt/apache/beam/boot"]
