"""The scheduled-refresh recipes (docs/operations.md "Scheduled refresh", examples/) against what the template accepts.

Cloud Scheduler, Dataflow and Airflow cannot run here. The launch bodies are checked with the Dataflow
API's own types, the DAG is read with ``ast`` (Airflow is not installed), and the page's commands are
split as a shell splits them.
"""
import ast
import datetime
import json
import pathlib
import re
import shlex
import string

import pytest
from google.cloud.dataflow_v1beta3.types import LaunchFlexTemplateRequest

from imgrec.contract import layout
from imgrec.pipelines import options

REPO = pathlib.Path(__file__).resolve().parents[1]
BODY_FILE = REPO / 'examples' / 'cloud_scheduler_body.json'
DAG_FILE = REPO / 'examples' / 'airflow_refresh_dag.py'
OPERATIONS = REPO / 'docs' / 'operations.md'  # the page with the recipes (the README links to it)
OPERATOR = 'DataflowStartFlexTemplateOperator'
OPERATOR_MODULE = 'airflow.providers.google.cloud.operators.dataflow'
# The operator's arguments (apache-airflow-providers-google), and the one BaseOperator argument the DAG uses.
OPERATOR_ARGUMENTS = {'body', 'location', 'project_id', 'gcp_conn_id', 'drain_pipeline', 'cancel_timeout',
                      'wait_until_finished', 'impersonation_chain', 'deferrable', 'append_job_name',
                      'expected_terminal_state', 'poll_sleep', 'task_id'}
LAUNCH_URI = 'https://dataflow.googleapis.com/v1b3/projects/{project}/locations/{location}/flexTemplates:launch'
JOB_NAME = re.compile(r'^[a-z]([-a-z0-9]*[a-z0-9])?$')  # Dataflow's rule for job names
JINJA_VARIABLE = re.compile(r'\{\{\s*var\.value\.(\w+)\s*\}\}')
# Values for the README's shell variables, as a user's set-up would export them.
SHELL = {'PROJECT': 'my-project', 'REGION': 'europe-west4', 'BUCKET': 'my-project-datasets',
         'SA': 'dataset-builder@my-project.iam.gserviceaccount.com',
         'IMAGE': 'europe-west4-docker.pkg.dev/my-project/dataflow/build-dataset:20261130t030000z'}


def _metadata():
    return {p['name']: p for p in json.loads((REPO / 'templates' / 'metadata.json').read_text())['parameters']}


def _readme_blocks(language):
    return re.findall(rf'^```{language}\n(.*?)^```', OPERATIONS.read_text(), re.MULTILINE | re.DOTALL)


def _scheduled_refresh_section():
    page = OPERATIONS.read_text()
    return page[page.index('\n## Scheduled refresh\n'):]


def _commands(block):
    """The block's commands, continuation lines joined and comments dropped, each split as a shell would."""
    joined = re.sub(r'\\\n\s*', ' ', block)
    return [shlex.split(line, comments=True) for line in joined.splitlines() if shlex.split(line, comments=True)]


def _command(start):
    """The one command of the Scheduled refresh section's sh blocks whose words begin with ``start``."""
    section = _scheduled_refresh_section()
    found = [words for block in re.findall(r'```sh\n(.*?)```', section, re.DOTALL) for words in _commands(block)
             if words[:len(start)] == start]
    assert len(found) == 1, start
    return found[0]


def _flags(words):
    """{'--flag': value} of a gcloud command written as --flag value."""
    flags = {}
    for index, word in enumerate(words):
        if word.startswith('--'):
            assert '=' not in word and not words[index + 1].startswith('--'), word
            flags[word] = words[index + 1]
    return flags


def _scheduler_body():
    """The Cloud Scheduler body with the README's variables filled in, as envsubst fills them."""
    return json.loads(string.Template(BODY_FILE.read_text()).substitute(SHELL))


def _dag():
    return ast.parse(DAG_FILE.read_text(), filename=str(DAG_FILE))


def _calls(tree, name):
    return [node for node in ast.walk(tree) if isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name) and node.func.id == name]


def _keywords(call):
    return {keyword.arg: keyword.value for keyword in call.keywords}


def _airflow_variables():
    """Airflow Variable -> the README's shell variable, from the README's `variables set` loop."""
    pairs = re.findall(r'\b(dataset_\w+)=\$(\w+)', _scheduled_refresh_section())
    assert pairs
    return dict(pairs)


def _render_jinja(value):
    """The DAG's templated strings as Airflow renders them with the Variables the README sets."""
    variables = _airflow_variables()
    if isinstance(value, dict):
        return {key: _render_jinja(item) for key, item in value.items()}
    if isinstance(value, str):
        return JINJA_VARIABLE.sub(lambda match: SHELL[variables[match[1]]], value)
    return value


def _dag_body():
    (call,) = _calls(_dag(), OPERATOR)
    return _render_jinja(ast.literal_eval(_keywords(call)['body']))


def _launcher_argv(parameters):
    """The arguments the Flex Template launcher gives build_dataset.main through templates/launch.py."""
    dockerfile = (REPO / 'Dockerfile').read_text()
    assert re.search(r'^ENV FLEX_TEMPLATE_PYTHON_PY_FILE=/template/templates/launch\.py$', dockerfile, re.MULTILINE)
    launch = ast.parse((REPO / 'templates' / 'launch.py').read_text())
    (call,) = [node for node in ast.walk(launch) if isinstance(node, ast.Call)
               and isinstance(node.func, ast.Attribute) and node.func.attr == 'main']
    (argv,) = call.args
    fixed = [ast.literal_eval(item) for item in argv.elts if not isinstance(item, ast.Starred)]
    return fixed + [f'--{name}={value}' for name, value in parameters.items()]


RECIPES = {'cloud scheduler': _scheduler_body, 'airflow dag': _dag_body}


def test_the_scheduler_body_is_a_flex_template_launch_request():
    text = BODY_FILE.read_text()
    json.loads(text)  # valid JSON before the variables are filled in
    body = _scheduler_body()
    assert set(body) == {'launchParameter'}  # project and region are in the URI
    # The Dataflow API's own schema: an unknown or mistyped field would raise.
    request = LaunchFlexTemplateRequest.from_json(json.dumps(body))
    launch = request.launch_parameter
    assert JOB_NAME.match(launch.job_name)
    assert launch.container_spec_gcs_path.startswith('gs://') and launch.parameters
    assert launch.environment.service_account_email == SHELL['SA']
    assert launch.environment.sdk_container_image == SHELL['IMAGE']
    assert launch.environment.temp_location.startswith('gs://')
    with pytest.raises(Exception, match='launchParameters'):  # the same check refuses a mistyped field
        LaunchFlexTemplateRequest.from_json(json.dumps({'launchParameters': body['launchParameter']}))


@pytest.mark.parametrize('recipe', sorted(RECIPES))
def test_every_launch_parameter_is_a_template_parameter(recipe):
    parameters = RECIPES[recipe]()['launchParameter']['parameters']
    metadata = _metadata()
    assert set(parameters) <= set(metadata), set(parameters) - set(metadata)
    assert {name for name, p in metadata.items() if not p.get('isOptional')} <= set(parameters)
    assert len({'input', 'manifest'} & set(parameters)) == 1
    for name, value in parameters.items():
        assert isinstance(value, str), name  # the launch API takes strings only
        assert all(re.fullmatch(regex, value) for regex in metadata[name]['regexes']), (name, value)
    config, _ = options.parse_args(_launcher_argv(parameters))  # the job accepts them too
    assert config.output == parameters['output']


def test_the_dag_launches_the_flex_template_with_the_operator():
    tree = _dag()
    imports = [node for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module == OPERATOR_MODULE]
    assert [alias.name for node in imports for alias in node.names] == [OPERATOR]
    (call,) = _calls(tree, OPERATOR)
    arguments = _keywords(call)
    assert not call.args and set(arguments) <= OPERATOR_ARGUMENTS, set(arguments) - OPERATOR_ARGUMENTS
    assert {'task_id', 'body', 'location', 'project_id'} <= set(arguments)
    assert ast.literal_eval(arguments['wait_until_finished']) is True
    LaunchFlexTemplateRequest.from_json(json.dumps(_dag_body()))
    (dag,) = _calls(tree, 'DAG')
    settings = _keywords(dag)
    assert ast.literal_eval(settings['catchup']) is False and ast.literal_eval(settings['max_active_runs']) == 1
    assert len(ast.literal_eval(settings['schedule']).split()) == 5
    # Every Airflow Variable the DAG reads is one the README sets.
    used = set(JINJA_VARIABLE.findall(DAG_FILE.read_text()))
    assert used and used <= set(_airflow_variables()), used - set(_airflow_variables())


def test_both_cloud_recipes_send_the_same_launch():
    scheduler, dag = _scheduler_body(), _dag_body()
    assert dag == scheduler


def test_a_launch_without_version_writes_a_new_version_per_run():
    version = _metadata()['version']
    assert version.get('isOptional') and 'defaultValue' not in version  # the template fixes no version
    for recipe in RECIPES.values():
        assert 'version' not in recipe()['launchParameter']['parameters']
    argv = _launcher_argv(_scheduler_body()['launchParameter']['parameters'])
    assert not [arg for arg in argv if arg.startswith('--version')]  # launch.py adds none either

    before = datetime.datetime.now(datetime.timezone.utc).strftime(layout.VERSION_FORMAT)
    config, _ = options.parse_args(argv)
    after = datetime.datetime.now(datetime.timezone.utc).strftime(layout.VERSION_FORMAT)
    assert before <= config.version <= after  # the UTC time when the launcher parses the options
    assert all(re.fullmatch(regex, config.version) for regex in version['regexes'])

    tonight = datetime.datetime(2026, 11, 30, 3, 0, 7, tzinfo=datetime.timezone.utc)
    tomorrow = tonight + datetime.timedelta(days=1)
    first = options.parse_args(argv, now=tonight)[0].version
    second = options.parse_args(argv, now=tomorrow)[0].version
    assert (first, second) == ('20261130T030007Z', '20261201T030007Z')


def test_the_readme_command_sends_the_body_file():
    envsubst = _command(['envsubst'])
    assert envsubst[2] == '<' and envsubst[4] == '>' and len(envsubst) == 6
    assert REPO / envsubst[3] == BODY_FILE
    # envsubst fills in exactly the body's variables, and the README exports each of them.
    body_variables = {match['named'] or match['braced']
                      for match in string.Template.pattern.finditer(BODY_FILE.read_text())}
    assert set(re.findall(r'\$\{(\w+)\}', envsubst[1])) == body_variables
    page = OPERATIONS.read_text()
    for name in body_variables:
        assert re.search(rf'^export\b[^\n]*\b{name}=', page, re.MULTILINE), name

    create = _command(['gcloud', 'scheduler', 'jobs', 'create', 'http'])
    flags = _flags(create)
    assert flags['--message-body-from-file'] == envsubst[5]
    assert flags['--uri'] == LAUNCH_URI.format(project=flags['--project'], location=flags['--location'])
    assert flags['--http-method'].upper() == 'POST'
    assert flags['--headers'] == 'Content-Type=application/json'
    # Google APIs take OAuth access tokens, not OIDC identity tokens.
    assert flags['--oauth-service-account-email'] and not [f for f in flags if f.startswith('--oidc')]
    assert flags['--oauth-token-scope'] == 'https://www.googleapis.com/auth/cloud-platform'
    assert len(flags['--schedule'].split()) == 5
    # The body launches the template `make template` writes.
    template = re.search(r'^TEMPLATE = (\S+)$', (REPO / 'Makefile').read_text(), re.MULTILINE)[1]
    body = json.loads(BODY_FILE.read_text())
    assert body['launchParameter']['containerSpecGcsPath'] == template.replace('$(BUCKET)', '${BUCKET}')


def _build_argv(words):
    """The build-dataset arguments of a command line, up to its first redirection."""
    start = next(index for index, word in enumerate(words) if word.endswith('/build-dataset')) + 1
    end = next((index for index, word in enumerate(words) if word.startswith(('>', '2>'))), len(words))
    return words[start:end]


def test_the_local_recipes_run_a_valid_build_without_a_version():
    cron = [line for block in _readme_blocks('sh') for line in block.splitlines()
            if re.match(r'^[0-9*]\S* \S+ \S+ \S+ \S+ .*build-dataset', line)]
    assert len(cron) == 1
    units = {block.split('\n', 1)[0].rsplit('/', 1)[-1]: block for block in _readme_blocks('ini')}
    service, timer = units['refresh-flowers.service'], units['refresh-flowers.timer']
    assert 'Type=oneshot' in service.splitlines()
    assert re.search(r'^OnCalendar=\S', timer, re.MULTILINE) and 'Persistent=true' in timer.splitlines()
    exec_start = re.search(r'^ExecStart=(.*)$', service, re.MULTILINE)[1]
    for words in (shlex.split(cron[0])[5:], shlex.split(exec_start)):
        argv = _build_argv(words)
        assert not [arg for arg in argv if arg.startswith('--version')]
        config, beam_args = options.parse_args(argv)
        assert config.input and config.output and not beam_args
