"""Run inside the core site with the extras' packages hidden: what works, what says why not."""

import importlib.abc
import json
import sys

HIDDEN = {
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "celery",
    "kombu",
    "agents",
    "langgraph",
    "langchain_core",
    "pydantic_ai",
    "httpx",
    "agentstate_client",
    "psycopg",
}


class Hide(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in HIDDEN:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


sys.meta_path.insert(0, Hide())

import django  # noqa: E402

django.setup()

from django.contrib.auth import get_user_model  # noqa: E402
from django.core.exceptions import ImproperlyConfigured  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.test import Client  # noqa: E402
from django.urls import include  # noqa: E402

from agentstate.services import context, pauses  # noqa: E402

out: dict = {}
call_command("check", fail_level="WARNING")
call_command("migrate", verbosity=0)
context.put("s", "x", [1])
context.push("s", "x", 2)
out["context"] = context.get("s", ["x"])
question = pauses.put("chat", "call", "alice", {"step": 1})
out["claimed"] = pauses.claim("chat", "call", "alice", question)

admin = get_user_model().objects.create_superuser("root", password="pw")
client = Client()
client.force_login(admin)
out["admin"] = {
    page: client.get(f"/admin/agentstate/{page}/").status_code
    for page in ("approvalrequest", "pausedrun", "run", "scope", "event", "thread", "checkpoint")
}
out["index"] = client.get("/admin/").status_code


def refusal(action):
    try:
        action()
    except ImproperlyConfigured as error:
        return [type(error).__name__, isinstance(error, ImportError), str(error)]
    return None


out["api"] = refusal(lambda: include("agentstate.api.urls"))
out["tasks"] = refusal(lambda: __import__("agentstate.tasks"))
out["agents"] = refusal(lambda: __import__("agentstate.contrib.openai_agents"))
out["langgraph"] = refusal(lambda: __import__("agentstate.contrib.langgraph"))
out["pydantic_ai"] = refusal(lambda: __import__("agentstate.contrib.pydantic_ai"))

import io  # noqa: E402

expire = io.StringIO()
call_command("agentstate_expire", stdout=expire)
out["expire"] = expire.getvalue()
out["loaded"] = sorted(name for name in HIDDEN if name in sys.modules)
print(json.dumps(out))
