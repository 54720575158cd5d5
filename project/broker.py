"""kombu's file-system transport with messages written atomically.

kombu's own ``_put`` creates the message file under its final name and then
writes it; a worker polling the folder can take the file in between, read
it empty and die on the JSON (seen: ``JSONDecodeError`` in
``test_celery.py``). Here the message is written under a name no reader
takes (``.partial`` after the queue's ``.msg``) and renamed into place, so a
reader sees a whole message or none.
"""

import os
import uuid
from time import monotonic

from kombu.transport import filesystem
from kombu.utils.encoding import str_to_bytes
from kombu.utils.json import dumps


class Channel(filesystem.Channel):
    def _put(self, queue, payload, **kwargs):
        name = f"{round(monotonic() * 1000)}_{uuid.uuid4()}.{queue}.msg"
        final = os.path.join(self.data_folder_out, name)
        partial = f"{final}.partial"
        with open(partial, "wb") as file:
            file.write(str_to_bytes(dumps(payload)))
        os.replace(partial, final)


class Transport(filesystem.Transport):
    Channel = Channel
