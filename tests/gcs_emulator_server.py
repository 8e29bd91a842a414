"""gcp-storage-emulator with the one Cloud Storage behaviour this project relies on that it lacks: a write
with ``ifGenerationMatch`` lands only while the object is still that generation (0: while there is none),
else the service answers 412 Precondition Failed. Leases, LATEST and every create-only write are
compare-and-swaps on it; without it, a test on gs:// could not see one fail.

Run as the emulator's own command is (``start --host ... --port ...``): ``tests.gcs_emulator`` starts it.
"""
import threading
from http import HTTPStatus

from gcp_storage_emulator.exceptions import NotFound
from gcp_storage_emulator.handlers import objects

_insert = objects.insert
_lock = threading.Lock()  # the check and the write are one step, as on the service
_NOT_MET = 'At least one of the pre-conditions you specified did not hold.'
_CONDITION_NOT_MET = {'error': {'code': 412, 'message': _NOT_MET,
                                'errors': [{'reason': 'conditionNotMet', 'domain': 'global', 'message': _NOT_MET}]}}


def _object_name(request):
    if 'name' in request.query:
        return request.query['name'][0]
    data = request.data if isinstance(request.data, dict) else {}
    return (data.get('meta') or {}).get('name') or data.get('name')


def insert(request, response, storage, *args, **kwargs):
    """The emulator's upload, refused with 412 when its ``ifGenerationMatch`` does not hold."""
    wanted = request.query.get('ifGenerationMatch')
    if not wanted:
        return _insert(request, response, storage, *args, **kwargs)
    with _lock:
        try:
            found = int(storage.get_file_obj(request.params['bucket_name'], _object_name(request))['generation'])
        except NotFound:
            found = 0
        if found != int(wanted[0]):
            response.status = HTTPStatus.PRECONDITION_FAILED
            response.json(_CONDITION_NOT_MET)
            return None
        return _insert(request, response, storage, *args, **kwargs)


objects.insert = insert  # before the server module binds its routes

from gcp_storage_emulator.__main__ import main  # noqa: E402  pylint: disable=wrong-import-position

if __name__ == '__main__':
    main()
