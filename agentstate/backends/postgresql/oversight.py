"""Oversight on PostgreSQL: the rules, ``consume`` and the deadlines' sweep in the
ORM's form (``backends.orm.oversight``: one transaction each, under the row locks
of the run then the request), the run's record of a call decided at its deadline
written by ``agentstate_write_decision`` as every decision is."""

import json

from django.db import connections

from agentstate.backends.events import from_json as events_from_json
from agentstate.backends.orm.oversight import OversightOperations as ORMOversight
from agentstate.models import Event, Run
from agentstate.types import Actor


class OversightOperations(ORMOversight):
    def _deadline_decision(
        self, run: Run, tool_name: str, call_id: str, approve: bool, reason: str, by: Actor
    ) -> Event:
        with connections[self.alias].cursor() as cursor:
            cursor.execute(
                "SELECT agentstate_write_decision(r, %s, %s, %s, false, %s, NULL, %s)"
                " FROM agentstate_run r WHERE r.id = %s",
                [tool_name, call_id, approve, reason, by.name, run.pk],
            )
            (event,) = cursor.fetchone()
        return events_from_json(
            [json.loads(event) if isinstance(event, str) else event], self.alias
        )[0]
