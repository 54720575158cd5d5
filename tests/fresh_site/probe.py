"""Run inside the fresh site: migrate, then call the API as a REST client would."""

import base64
import json

import django

django.setup()

from django.contrib.auth import get_user_model  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.test import Client  # noqa: E402

call_command("migrate", verbosity=0)
get_user_model().objects.create_user("carol", password="pw")
auth = "Basic " + base64.b64encode(b"carol:pw").decode()
client = Client(HTTP_AUTHORIZATION=auth)
out = {}


def call(name, method, path, body=None):
    kwargs = {"content_type": "application/json"} if body is not None else {}
    data = json.dumps(body) if body is not None else None
    response = (
        getattr(client, method)(path, data, **kwargs) if data else getattr(client, method)(path)
    )
    body = b"".join(response) if response.streaming else response.content
    out[name] = [response.status_code, body.decode()[:2000]]


call("put", "put", "/api/context/", {"scope": "s", "name": "x", "value": [1]})
call("bad", "post", "/api/context/push/", {"scope": "s", "name": "x", "value": 1, "nope": 1})
call("missing", "get", "/api/context/?scope=none")
call("scopes", "get", "/api/scopes/")
call("schema", "get", "/api/schema/?format=json")
call("docs", "get", "/api/docs/")
call("redoc", "get", "/api/redoc/")
call("asset", "get", "/api/docs/assets/swagger-ui-bundle.js")
call("no_asset", "get", "/api/docs/assets/LICENSE")
out["anonymous"] = Client().get("/api/scopes/").status_code
print(json.dumps(out))
