"""An app server process killed (SIGKILL) mid-request: nothing half-written, and the
client's retry of a call ends with exactly one effect.

gunicorn serves the demo site with sync workers (one request at a time each) on the
test database; its master starts a new worker for every one killed. Six client
threads, each with its own ``agentstate_client.AgentStateClient`` (its retries
on), push to their own list, put a counter with ``if_version``, put pauses, and
file and decide approval requests, while the test kills a busy worker at random
moments. A request whose worker dies gets no answer; the caller retries it:

- a push is never retried (it is not idempotent): unanswered, it is stored once or
  not at all;
- a put with ``if_version`` again with the same version: refused with
  ``version_mismatch`` when the first one was stored (then the value is the one
  sent), stored otherwise;
- a pause put again: one pause for the call, complete, under the last question;
- ``request_approval`` is retried by the client (idempotent per call id), a decide
  again by the caller: ``already_decided`` with the decision sent, or decided now.

Then the database is read: every acknowledged write stored once, each list's
length its elements', each decided request with its run's record of the call and
one ``approval.decided`` event, each pending one with neither.
``AGENTSTATE_SERVER_KILLS`` sets the number of kills (20).
"""

import os
import random
import signal
import threading
import time
from collections import Counter, defaultdict
from pathlib import Path

import httpx
import pytest
from django.contrib.auth.models import User
from rest_framework.authtoken.models import Token

from agentstate.models import ApprovalCall, ApprovalRequest, Element, Event, PausedRun, Variable
from agentstate_client import AgentStateClient
from agentstate_client.errors import AlreadyDecided, ServiceUnavailable, VersionMismatch
from tests.faults.processes import figures, wait_until
from tests.hardening import LiveServer, database_env

pytestmark = pytest.mark.django_db(transaction=True)

THREADS = 6
WORKERS = 2
SCOPE = "killed"
KINDS = ("push", "put", "pause", "decide")


def children(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (gunicorn's master: its workers)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # gone meanwhile
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


class Counted(httpx.HTTPTransport):
    """The client's transport, counting requests left without an answer (their
    worker killed), by what the request was."""

    def __init__(self, lost: Counter, kind: list[str]) -> None:
        super().__init__()
        self.lost, self.kind = lost, kind

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        try:
            return super().handle_request(request)
        except httpx.TransportError:
            self.lost[self.kind[0]] += 1
            raise


class Traffic:
    """The client threads and what each was answered."""

    def __init__(self, url: str, token: str, runs: list[str]) -> None:
        self.url, self.token, self.runs = url, token, runs
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.lost: Counter = Counter()  # requests left unanswered, by kind
        self.sent: Counter = Counter()  # calls made (a retry is the same call)
        self.acked: Counter = Counter()
        self.retried: Counter = Counter()  # calls the caller made again
        self.pushed: dict[int, list[int]] = defaultdict(list)  # thread -> acknowledged values
        self.push_sent: dict[int, set[int]] = defaultdict(set)
        self.counters: dict[int, int] = {}  # thread -> value (and version - 1) stored
        self.pauses: dict[tuple[str, str], tuple[dict, str]] = {}  # -> (payload, question)
        self.decided: dict[int, str] = {}  # request id -> decision
        self.errors: list[str] = []

    def __enter__(self) -> "Traffic":
        self.threads = [threading.Thread(target=self._run, args=(t,)) for t in range(THREADS)]
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(120)

    def _run(self, t: int) -> None:
        kind = ["push"]
        client = AgentStateClient(
            f"{self.url}/api/",
            token=self.token,
            retries=5,
            backoff=0.05,
            timeout=30,
            transport=Counted(self.lost, kind),
        )
        i = 0
        try:
            while not self.stop.is_set():
                i += 1
                kind[0] = KINDS[i % len(KINDS)]
                with self.lock:
                    self.sent[kind[0]] += 1
                getattr(self, f"_{kind[0]}")(client, t, i)
        except Exception as error:  # noqa: BLE001 - reported by the test
            self.errors.append(f"thread {t}, call {i} ({kind[0]}): {error!r}")
        finally:
            client.close()

    def _again(self, kind: str, call):
        """``call()`` until it is answered; an unanswered one (or a 503: nothing
        changed) is the caller's to make again."""
        for attempt in range(50):
            try:
                return call()
            except ServiceUnavailable as error:  # Unreachable too: no answer
                last = error
                with self.lock:
                    self.retried[kind] += attempt == 0
                time.sleep(0.05)
        raise AssertionError(f"{kind}: no answer in 50 attempts: {last!r}")

    def _push(self, client: AgentStateClient, t: int, i: int) -> None:
        self.push_sent[t].add(i)
        try:
            client.push(SCOPE, f"list-{t}", i)
        except ServiceUnavailable:
            return  # never retried: stored once or not at all
        self.pushed[t].append(i)
        self._ack("push")

    def _put(self, client: AgentStateClient, t: int, i: int) -> None:
        value = self.counters.get(t, 0)

        def put() -> None:
            try:
                client.put(SCOPE, f"counter-{t}", value + 1, if_version=value)
            except VersionMismatch:
                # the unanswered attempt was stored: the value is the one sent
                stored = client.get(SCOPE, [f"counter-{t}"])[f"counter-{t}"]
                assert stored == value + 1, f"counter-{t}: {stored} after {value}"

        self._again("put", put)
        self.counters[t] = value + 1
        self._ack("put")

    def _pause(self, client: AgentStateClient, t: int, i: int) -> None:
        key = (f"chat-{t}", f"call-{i}")
        payload = {"thread": t, "call": i, "text": "x" * 200}
        pause = self._again("pause", lambda: client.put_pause(*key, "agent", payload))
        self.pauses[key] = (payload, pause["question_id"])
        self._ack("pause")

    def _decide(self, client: AgentStateClient, t: int, i: int) -> None:
        run_id = self.runs[t]
        decision = random.choice(("approve", "reject"))
        request, _ = self._again(
            "decide", lambda: client.request_approval(run_id, "send_email", f"call-{i}")
        )

        def decide() -> None:
            try:
                client.decide(request["id"], decision)
            except AlreadyDecided:
                # the unanswered attempt decided it
                status = client.get_approval_request(request["id"])["status"]
                decided = {"approve": "approved", "reject": "rejected"}[decision]
                assert status == decided, (request["id"], status, decision)

        self._again("decide", decide)
        self.decided[request["id"]] = decision
        self._ack("decide")

    def _ack(self, kind: str) -> None:
        with self.lock:
            self.acked[kind] += 1


def killing(master: int, traffic: Traffic, kills: int) -> list[float]:
    """SIGKILL a worker (a random one: busy, the clients outnumber the workers) at a
    random moment after the calls made progress since the last kill, until ``kills``
    and every kind of call lost an answer; the seconds between kills."""
    pauses = []
    done = 0
    started = time.monotonic()
    while done < kills or any(traffic.lost[kind] == 0 for kind in KINDS):
        assert time.monotonic() - started < 90, f"unanswered only: {dict(traffic.lost)}"
        assert not traffic.errors, traffic.errors
        acked = sum(traffic.acked.values())
        wait_until(lambda a=acked: sum(traffic.acked.values()) >= a + 2, "progress", 60)
        workers = children(master)
        if len(workers) < WORKERS:
            continue
        pause = random.uniform(0, 0.3)
        time.sleep(pause)
        try:
            os.kill(random.choice(workers), signal.SIGKILL)
        except ProcessLookupError:
            continue
        pauses.append(pause)
        done += 1
    return pauses


def check_pushes(traffic: Traffic) -> dict[str, int]:
    counts = Counter()
    for t, acked in traffic.pushed.items():
        variable = Variable.objects.get(scope__key=SCOPE, name=f"list-{t}")
        values = list(
            Element.objects.filter(variable=variable)
            .order_by("position")
            .values_list("value", flat=True)
        )
        assert variable.tail - variable.head == len(values), "a list's length is not its elements'"
        assert len(values) == len(set(values)), f"list-{t}: a push stored twice"
        assert set(acked) <= set(values), f"list-{t}: an acknowledged push lost"
        assert set(values) <= traffic.push_sent[t], f"list-{t}: a push never sent stored"
        assert [v for v in values if v in set(acked)] == acked, f"list-{t}: order changed"
        counts["stored"] += len(values)
        counts["unanswered_stored"] += len(set(values) - set(acked))
    return counts


def check_database(traffic: Traffic) -> dict[str, int]:
    pushes = check_pushes(traffic)
    for t, value in traffic.counters.items():
        variable = Variable.objects.get(scope__key=SCOPE, name=f"counter-{t}")
        assert (variable.value, variable.version) == (value, value), f"counter-{t}"
    for (chat_id, call_id), (payload, question) in traffic.pauses.items():
        (pause,) = PausedRun.objects.filter(chat_id=chat_id, tool_call_id=call_id)
        assert (pause.payload, str(pause.question_id)) == (payload, question), pause
        assert pause.owner == "agent" and pause.expires_at is not None
        assert pause.status == PausedRun.Status.PENDING
    pauses = PausedRun.objects.filter(chat_id__startswith="chat-").count()
    pause_events = Event.objects.filter(kind="pause.created").count()
    assert len(traffic.pauses) <= pauses <= traffic.sent["pause"], "a pause half-written"
    assert pauses <= pause_events <= traffic.sent["pause"] + traffic.retried["pause"]
    requests = ApprovalRequest.objects.filter(run__run_id__in=traffic.runs)
    per_call = Counter(requests.values_list("run__run_id", "call_id"))
    assert set(per_call.values()) == {1}, "a request filed twice for one call"
    calls = {
        (c.record.run.run_id, c.call_id): c.decision
        for c in ApprovalCall.objects.select_related("record__run")
    }
    decided_events = Counter(
        Event.objects.filter(kind="approval.decided").values_list("object_id", flat=True)
    )
    for request in requests.select_related("run"):
        key = (request.run.run_id, request.call_id)
        if request.status == ApprovalRequest.Status.PENDING:
            assert key not in calls and not decided_events[str(request.pk)], request.pk
            assert request.pk not in traffic.decided, f"decision {request.pk} lost"
            continue
        decision = "approve" if request.status == ApprovalRequest.Status.APPROVED else "reject"
        assert calls.get(key) == decision, f"request {request.pk}: its run's record is not"
        assert decided_events[str(request.pk)] == 1, f"request {request.pk}: events"
        if request.pk in traffic.decided:
            assert traffic.decided[request.pk] == decision
    return {
        "pushes_stored": pushes["stored"],
        "unanswered_pushes_stored": pushes["unanswered_stored"],
        "pauses_stored": pauses,
        "requests_stored": requests.count(),
        "decided_stored": requests.exclude(status=ApprovalRequest.Status.PENDING).count(),
    }


def test_a_server_process_killed_mid_request_leaves_nothing_half_written():
    kills = int(os.environ.get("AGENTSTATE_SERVER_KILLS", "20"))
    user = User.objects.create_superuser("agent")
    token = Token.objects.create(user=user).key
    env = {**database_env(), "GUNICORN_CMD_ARGS": "--preload"}  # a worker restarts at once
    with LiveServer(env, workers=WORKERS, threads=1) as server:  # sync workers
        with AgentStateClient(f"{server.url}/api/", token=token) as client:
            runs = [client.create_run(f"run-{t}")["run_id"] for t in range(THREADS)]
        with Traffic(server.url, token, runs) as traffic:
            wait_until(lambda: sum(traffic.acked.values()) >= 40, "traffic", 60)
            moments = killing(server.process.pid, traffic, kills)
            acked = sum(traffic.acked.values())
            wait_until(lambda: sum(traffic.acked.values()) >= acked + 40, "traffic after", 60)
        assert not traffic.errors, traffic.errors
        output = server.output()
    assert "Traceback" not in output, output
    stored = check_database(traffic)
    lost = sum(traffic.lost.values())
    figures(
        "server-killed",
        kills=len(moments),
        sent=dict(traffic.sent),
        acknowledged=dict(traffic.acked),
        unanswered=dict(traffic.lost),
        retried_by_caller=dict(traffic.retried),
        **stored,
        lost=0,
        doubled=0,
        unanswered_total=lost,
    )
