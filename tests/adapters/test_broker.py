"""The demo's file-system broker hands a worker whole messages only."""

import pytest
from kombu import Connection


def folders(tmp_path):
    """Every folder the transport writes, in ``tmp_path`` (kombu's default
    ``control_folder`` is ``control/`` in the working directory)."""
    (tmp_path / "control").mkdir()
    return {
        "data_folder_in": str(tmp_path),
        "data_folder_out": str(tmp_path),
        "control_folder": str(tmp_path / "control"),
        "processed_folder": str(tmp_path / "processed"),
    }


def test_a_message_still_being_written_is_not_taken(tmp_path):
    options = folders(tmp_path)
    with Connection(transport="project.broker:Transport", transport_options=options) as conn:
        queue = conn.SimpleQueue("agentstate")
        (tmp_path / "1_writing.agentstate.msg.partial").write_bytes(b'{"half')
        queue.put({"n": 1})
        message = queue.get(timeout=1)
        assert message.payload == {"n": 1}
        message.ack()
        with pytest.raises(queue.Empty):
            queue.get(timeout=0.2)
        queue.close()
    files = sorted(p.name for p in tmp_path.iterdir() if p.is_file())
    assert files == ["1_writing.agentstate.msg.partial"]


def test_kombus_own_transport_would_take_it_and_fail(tmp_path):
    """Why project/broker.py exists: kombu's reader takes any file named for the queue."""
    options = folders(tmp_path)
    with Connection(transport="filesystem", transport_options=options) as conn:
        queue = conn.SimpleQueue("agentstate")
        (tmp_path / "1_writing.agentstate.msg").write_bytes(b"")
        with pytest.raises(ValueError):  # json's JSONDecodeError
            queue.get(timeout=1)
        queue.close()
