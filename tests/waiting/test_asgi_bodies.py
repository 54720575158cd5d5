"""Bodies sent without a length (``Transfer-Encoding: chunked``) under uvicorn: read
as they are, and refused with 413 past ``MAX_BODY_BYTES``, as under gunicorn."""

import http.client
import json
from urllib.parse import urlsplit

import pytest

from agentstate.conf import agentstate_settings

pytestmark = pytest.mark.django_db(transaction=True)


def chunked(server, token: str, method: str, path: str, body: bytes) -> tuple[int, dict]:
    parts = urlsplit(server.url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    try:
        connection.request(
            method,
            path,
            body=iter([body[i : i + 65536] for i in range(0, len(body), 65536)]),
            headers={"Authorization": f"Token {token}", "Content-Type": "application/json"},
            encode_chunked=True,
        )
        response = connection.getresponse()
        return response.status, json.loads(response.read() or b"null")
    finally:
        connection.close()


def test_a_chunked_body_is_read_and_one_over_the_limit_is_413(server, agent):
    _, token = agent
    put = {"scope": "chunked", "name": "x", "value": "sent in chunks"}
    status, body = chunked(server, token, "PUT", "/api/context/", json.dumps(put).encode())
    assert status == 200 and body["value"] == "sent in chunks", body
    padding = "x" * agentstate_settings.MAX_BODY_BYTES
    large = json.dumps({**put, "value": padding}).encode()
    status, body = chunked(server, token, "PUT", "/api/context/", large)
    assert status == 413 and body["code"] == "body_too_large", body
    status, body = chunked(server, token, "GET", "/api/context/?scope=chunked", b"")
    assert status == 200 and body["values"] == {"x": "sent in chunks"}, body
