"""Nightly dataset refresh on Airflow or Cloud Composer: launches the build's Flex Template.

Copy this file to the DAGs folder and set the Airflow Variables it reads at run time: dataset_project,
dataset_region, dataset_bucket, dataset_service_account and dataset_image (README, "Scheduled refresh").
The body passes no ``version``: each launch writes a new version named by its UTC launch time, and
LATEST moves to it once it is complete.
"""
import datetime

from airflow import DAG
from airflow.providers.google.cloud.operators.dataflow import DataflowStartFlexTemplateOperator

with DAG(
    dag_id='refresh_flowers_dataset',
    schedule='0 3 * * *',
    start_date=datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc),
    catchup=False,  # a refresh builds the bucket as it is now: a missed night needs no run of its own
    max_active_runs=1,  # with wait_until_finished, the next refresh starts after this one's job ends
    tags=['image-tfrecords'],
):
    DataflowStartFlexTemplateOperator(
        task_id='build_dataset',
        project_id='{{ var.value.dataset_project }}',
        location='{{ var.value.dataset_region }}',
        wait_until_finished=True,
        append_job_name=True,  # the job is named refresh-flowers-<8 random characters>
        body={
            'launchParameter': {
                'jobName': 'refresh-flowers',
                'containerSpecGcsPath': 'gs://{{ var.value.dataset_bucket }}/templates/build-dataset.json',
                'parameters': {
                    'input': 'gs://flowers-public',
                    'output': 'gs://{{ var.value.dataset_bucket }}/datasets/flowers',
                    'image_size': '192',
                    'splits': 'train=90,validation=10',
                    'keep_versions': '7',
                },
                'environment': {
                    'serviceAccountEmail': '{{ var.value.dataset_service_account }}',
                    'sdkContainerImage': '{{ var.value.dataset_image }}',
                    'tempLocation': 'gs://{{ var.value.dataset_bucket }}/tmp',
                    'stagingLocation': 'gs://{{ var.value.dataset_bucket }}/staging',
                    'maxWorkers': 10,
                    'machineType': 'n2-standard-4',
                },
            },
        },
    )
