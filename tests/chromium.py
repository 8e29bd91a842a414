"""Opens a page in Debian's headless Chromium and reports what a user would see, over the DevTools protocol.

Pure Python: Chromium's own ``--remote-debugging-port`` and the ``websockets`` client (a Beam dependency).
``open_page`` returns a screenshot, the result of a JavaScript expression, the console errors and any
request the page made that was not for a file:// or data: URL (the report must fetch nothing).
"""
import base64
import json
import os
import shutil
import signal
import subprocess
import time
import typing
import urllib.request

import pytest
from websockets.sync.client import connect

EXECUTABLE = shutil.which('chromium') or shutil.which('chromium-browser')
FLAGS = ('--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking',
         '--disable-component-update', '--no-first-run', '--disable-sync', '--remote-debugging-port=0',
         '--remote-allow-origins=*', '--window-size=1200,1600')
_START_DEADLINE_S = 60
_LOAD_DEADLINE_S = 60

requires_chromium = pytest.mark.skipif(
    EXECUTABLE is None, reason="Debian's chromium is not installed (`make test` installs it with apt-get when run "
                               "as root; otherwise `apt-get install chromium`)")


class Page(typing.NamedTuple):
    screenshot: bytes  # PNG of the whole page
    evaluated: object  # the JSON value of the expression
    errors: list  # console errors, uncaught exceptions, failed loads
    requests: list  # URLs requested other than file:// and data:


def _devtools_port(user_data_dir, browser):
    port_file = os.path.join(user_data_dir, 'DevToolsActivePort')
    deadline = time.monotonic() + _START_DEADLINE_S
    while time.monotonic() < deadline:
        if browser.poll() is not None:
            raise RuntimeError(f'chromium exited with status {browser.returncode}')
        if os.path.exists(port_file):
            lines = open(port_file).read().split()
            if lines:
                return int(lines[0])
        time.sleep(0.1)
    raise RuntimeError(f'chromium did not open its DevTools port within {_START_DEADLINE_S} s')


class _Session:
    def __init__(self, socket):
        self._socket = socket
        self._next_id = 0
        self.events = []

    def call(self, method, **params):
        self._next_id += 1
        self._socket.send(json.dumps({'id': self._next_id, 'method': method, 'params': params}))
        while True:
            message = json.loads(self._socket.recv(timeout=_LOAD_DEADLINE_S))
            if message.get('id') == self._next_id:
                if 'error' in message:
                    raise RuntimeError(f'{method}: {message["error"]}')
                return message['result']
            self.events.append(message)

    def wait_for(self, method):
        deadline = time.monotonic() + _LOAD_DEADLINE_S
        while not any(event.get('method') == method for event in self.events):
            self.events.append(json.loads(self._socket.recv(timeout=max(0.1, deadline - time.monotonic()))))


def _errors(events):
    found = []
    for event in events:
        method, params = event.get('method'), event.get('params', {})
        if method == 'Runtime.consoleAPICalled' and params.get('type') in ('error', 'assert'):
            found.append(' '.join(str(arg.get('value', arg.get('description'))) for arg in params.get('args', [])))
        elif method == 'Runtime.exceptionThrown':
            found.append(params['exceptionDetails'].get('text', 'exception'))
        elif method == 'Log.entryAdded' and params['entry'].get('level') == 'error':
            found.append(params['entry'].get('text', ''))
        elif method == 'Network.loadingFailed':
            found.append(f"load failed: {params.get('errorText')}")
    return found


def open_page(path, expression, user_data_dir):
    """Loads the local file ``path``; returns a Page once its load event fired."""
    browser = subprocess.Popen([EXECUTABLE, *FLAGS, f'--user-data-dir={user_data_dir}', 'about:blank'],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        port = _devtools_port(user_data_dir, browser)
        with urllib.request.urlopen(f'http://127.0.0.1:{port}/json/list', timeout=10) as response:
            target = next(t for t in json.load(response) if t['type'] == 'page')
        with connect(target['webSocketDebuggerUrl'], max_size=None, open_timeout=10) as socket:
            session = _Session(socket)
            for domain in ('Page', 'Runtime', 'Log', 'Network'):
                session.call(f'{domain}.enable')
            session.call('Page.navigate', url=f'file://{os.path.abspath(path)}')
            session.wait_for('Page.loadEventFired')
            evaluated = session.call('Runtime.evaluate', expression=expression, returnByValue=True)
            shot = session.call('Page.captureScreenshot', format='png', captureBeyondViewport=True)
            requests = [e['params']['request']['url'] for e in session.events
                        if e.get('method') == 'Network.requestWillBeSent'
                        and not e['params']['request']['url'].startswith(('file:', 'data:'))]
            return Page(base64.b64decode(shot['data']), evaluated['result'].get('value'), _errors(session.events),
                        requests)
    finally:
        os.killpg(browser.pid, signal.SIGTERM)  # the browser and its renderer and zygote processes
        try:
            browser.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(browser.pid, signal.SIGKILL)
            browser.wait()
        shutil.rmtree(user_data_dir, ignore_errors=True)
