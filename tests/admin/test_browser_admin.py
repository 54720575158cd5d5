"""A real browser walks the reviewer's path through the admin, and reads the API docs.

Debian's headless Chromium (``/usr/bin/chromium``, installed by
``scripts/test.sh``; never a browser downloaded by ``playwright install``),
driven by Playwright against pytest-django's live server, with every request
to another host refused: a reviewer logs in, finds the pending request from
the admin index, approves it with the list action, and the agent's REST
check for that call then answers ``true``; then it rejects the other request
from its own page, with a reason. Swagger UI and Redoc render the schema
from the app's own assets.

Each step's screenshot is saved; with ``AGENTSTATE_SCREENSHOTS=docs/images``
they replace the ones in the reviewers' guide (docs/admin.md).

The database is set up before the browser starts and read after it stops:
Playwright's sync API runs an event loop in this thread, in which Django
refuses ORM calls.
"""

import os
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest

from agentstate.models import ApprovalPolicy, ApprovalRequest
from agentstate.services import approvals, runs

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser, pytest.mark.slow]

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
TIMEOUT_MS = 30_000
VIEWPORT = {"width": 1280, "height": 800}


@pytest.fixture
def screenshots(tmp_path):
    """``shot(page, name)`` saves ``name.png``, in docs/images/ when asked to."""
    folder = Path(os.environ.get("AGENTSTATE_SCREENSHOTS") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)

    def shot(page, name: str) -> None:
        page.screenshot(path=str(folder / f"{name}.png"), full_page=True)

    return shot


def open_page(browser, live_server):
    """``(page, refused)``: a new page kept to the live server (:func:`offline`),
    whose actions and ``expect`` assertions wait up to TIMEOUT_MS. Playwright's
    ``expect`` waits 5 s of its own unless told, which Redoc's first render can
    take on a loaded machine."""
    from playwright.sync_api import expect

    expect.set_options(timeout=TIMEOUT_MS)
    page = browser.new_page(viewport=VIEWPORT)
    page.set_default_timeout(TIMEOUT_MS)
    return page, offline(page, live_server)


def offline(page, live_server) -> list[str]:
    """Refuse every request that leaves the live server; the list of those refused."""
    local = urlsplit(live_server.url).netloc
    refused: list[str] = []

    def route(route):
        if urlsplit(route.request.url).netloc == local:
            route.continue_()
        else:
            refused.append(route.request.url)
            route.abort()

    page.route("**/*", route)
    return refused


def test_a_reviewer_approves_a_pending_request_in_the_admin(live_server, make_user, screenshots):
    from playwright.sync_api import expect, sync_playwright

    agent = make_user("agent")
    make_user("reviewer", "agentstate.decide_approvalrequest", is_staff=True)
    run = runs.create_run("browser-run", {"ticket": "T-7"}, user=agent)
    request = approvals.request_approval(
        run, "send_email", "call-42", {"to": "bob@example.com"}, by=agent
    )
    approvals.request_approval(run, "send_email", "call-43", {"to": "eve@example.com"}, by=agent)
    seen: list[str] = []

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page, refused = open_page(browser, live_server)

            # 1. The admin's login page: the reviewer signs in.
            page.goto(f"{live_server.url}/admin/")
            page.fill("#id_username", "reviewer")
            page.fill("#id_password", "pw")
            page.click("input[type=submit]")

            # 2. The index counts what waits for a decision; the reviewer follows it.
            queue_link = page.get_by_role("link", name="Approval requests (2 pending)").first
            expect(queue_link).to_be_visible()
            seen.append(page.title())
            screenshots(page, "admin-index")
            queue_link.click()

            # 3. The queue: pending first, oldest first, arguments pretty-printed.
            row = page.locator("#result_list tbody tr").filter(has_text="call-42")
            expect(row).to_contain_text("browser-run")
            expect(row).to_contain_text('"to": "bob@example.com"')
            expect(row).to_contain_text("pending")
            seen.append(page.title())
            screenshots(page, "admin-queue")

            # 4. Tick the request, pick "Approve selected requests", Go.
            row.locator("input[name=_selected_action]").check()
            page.select_option("select[name=action]", "approve_selected")
            page.click("button[name=index]")

            # 5. The admin reports the count; the row now reads approved.
            expect(page.locator("ul.messagelist")).to_contain_text("1 request approved.")
            decided_row = page.locator("#result_list tbody tr").filter(has_text="call-42")
            expect(decided_row).to_contain_text("approved")
            expect(decided_row).to_contain_text("reviewer")
            seen.append(page.locator("ul.messagelist").inner_text())
            screenshots(page, "admin-approved")

            # 6. The other request's own page: arguments, the run's context, a reason, Reject.
            page.locator("#result_list tbody tr").filter(has_text="call-43").get_by_role(
                "link", name="send_email"
            ).click()
            expect(page.locator("body")).to_contain_text('"to": "eve@example.com"')
            expect(page.locator("body")).to_contain_text('"ticket": "T-7"')
            seen.append(page.title())
            screenshots(page, "admin-request")
            page.fill("#id_reason", "unknown recipient")
            page.click("#reject-button")
            expect(page.locator("ul.messagelist")).to_contain_text("was rejected")
            seen.append(page.locator("ul.messagelist").inner_text())
            assert refused == []
        finally:
            browser.close()

    print("\nreviewer's path:", " -> ".join(seen))
    stored = ApprovalRequest.objects.select_related("decided_by").get(pk=request.pk)
    assert (stored.status, stored.decided_by.username) == ("approved", "reviewer")
    other_request = ApprovalRequest.objects.get(call_id="call-43")
    assert (other_request.status, other_request.reason) == ("rejected", "unknown recipient")

    # 7. The agent's REST check for that call now answers true.
    with httpx.Client(base_url=live_server.url, auth=("agent", "pw"), timeout=30) as api:
        check = api.get(
            "/api/runs/browser-run/approvals/",
            params={"tool_name": "send_email", "call_id": "call-42"},
        )
        other = api.get(
            "/api/runs/browser-run/approvals/",
            params={"tool_name": "send_email", "call_id": "call-43"},
        )
    assert check.status_code == 200, check.text
    assert check.json() == {"tool_name": "send_email", "call_id": "call-42", "approved": True}
    assert other.json()["approved"] is False


def test_the_api_docs_render_from_the_apps_own_assets(live_server, screenshots):
    """Swagger UI and Redoc list the operations with no request leaving the server."""
    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page, refused = open_page(browser, live_server)

            page.goto(f"{live_server.url}/api/docs/")
            expect(page.locator(".swagger-ui .title")).to_contain_text("agentstate API")
            claim = page.locator(".opblock-summary-path", has_text="/api/pauses/claim/")
            expect(claim.first).to_be_visible()
            operations = page.locator(".opblock").count()
            screenshots(page, "api-docs")

            page.goto(f"{live_server.url}/api/redoc/")
            expect(page.locator("h1").first).to_contain_text("agentstate API")
            expect(page.get_by_text("/api/pauses/claim/").first).to_be_attached()
            assert refused == []
        finally:
            browser.close()
    assert operations >= 20


def test_a_reviewer_makes_a_policy_and_the_next_matching_call_arrives_decided(
    live_server, make_user, screenshots
):
    """From a pending request's page: "Approve and always approve this tool for agent",
    for 7 days, for calls to bob only. The agent's next call to bob is filed approved
    by the policy (its page links to it); a call to eve still waits."""
    from playwright.sync_api import expect, sync_playwright

    agent = make_user("agent")
    make_user("reviewer", "agentstate.decide_approvalrequest", is_staff=True)
    run = runs.create_run("policy-run", {"ticket": "T-8"}, user=agent)
    request = approvals.request_approval(
        run, "send_email", "call-1", {"to": "bob@example.com", "body": "report"}, by=agent
    )

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page, refused = open_page(browser, live_server)
            page.goto(f"{live_server.url}/admin/login/?next=/admin/")
            page.fill("#id_username", "reviewer")
            page.fill("#id_password", "pw")
            page.click("input[type=submit]")

            page.goto(f"{live_server.url}/admin/agentstate/approvalrequest/{request.pk}/change/")
            button = page.locator("#approve-policy-button")
            expect(button).to_contain_text("Approve and always approve this tool for agent")
            expect(page.locator("#id_arguments")).to_have_value(
                '{\n  "body": "report",\n  "to": "bob@example.com"\n}'
            )
            page.fill("#id_policy_days", "7")
            page.fill("#id_policy_arguments", '{"to": "bob@example.com"}')
            page.fill("#id_reason", "weekly report to bob")
            screenshots(page, "admin-policy")
            button.click()
            expect(page.locator("ul.messagelist")).to_contain_text("was approved")
            expect(page.locator("ul.messagelist")).to_contain_text("approved by policy #")

            page.goto(f"{live_server.url}/admin/agentstate/approvalpolicy/")
            row = page.locator("#result_list tbody tr").first
            expect(row).to_contain_text("send_email")
            expect(row).to_contain_text("in force")
            screenshots(page, "admin-policies")
            assert refused == []
        finally:
            browser.close()

    # The agent files its next calls: one the policy matches, one it does not.
    with httpx.Client(base_url=live_server.url, auth=("agent", "pw"), timeout=30) as api:
        to_bob = api.post(
            "/api/runs/policy-run/approval-requests/",
            json={
                "tool_name": "send_email",
                "call_id": "call-2",
                "arguments": {"to": "bob@example.com", "body": "next week"},
            },
        )
        to_eve = api.post(
            "/api/runs/policy-run/approval-requests/",
            json={"tool_name": "send_email", "call_id": "call-3", "arguments": {"to": "eve"}},
        )
    assert to_bob.status_code == 201, to_bob.text
    policy = ApprovalPolicy.objects.get()
    assert (policy.user.username, policy.arguments, policy.reason) == (
        "agent",
        {"to": "bob@example.com"},
        "weekly report to bob",
    )
    assert (to_bob.json()["status"], to_bob.json()["policy"], to_bob.json()["decided_by"]) == (
        "approved",
        policy.pk,
        None,
    )
    assert to_eve.json()["status"] == "pending" and to_eve.json()["policy"] is None
    first = ApprovalRequest.objects.select_related("decided_by").get(pk=request.pk)
    assert (first.status, first.decided_by.username) == ("approved", "reviewer")

    # The request the policy decided links to it, in a browser again.
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page, refused = open_page(browser, live_server)
            page.goto(f"{live_server.url}/admin/login/?next=/admin/")
            page.fill("#id_username", "reviewer")
            page.fill("#id_password", "pw")
            page.click("input[type=submit]")
            page.goto(
                f"{live_server.url}/admin/agentstate/approvalrequest/{to_bob.json()['id']}/change/"
            )
            page.get_by_role("link", name=f"policy #{policy.pk}").click()
            expect(page.locator("body")).to_contain_text("weekly report to bob")
            assert refused == []
        finally:
            browser.close()
