"""The admin's pending queue in a real headless Chromium (as tests/admin/test_browser_admin.py
drives it): a request filed after the page opened, and one decided meanwhile by
someone else, show without a reload (the queue's script follows the event feed)."""

import threading

import pytest
from django.db import connection

from agentstate.services import approvals, runs
from tests.admin.test_browser_admin import CHROMIUM, CHROMIUM_ARGS, open_page

pytestmark = pytest.mark.django_db(transaction=True)


def in_thread(work) -> None:
    """ORM work off the Playwright thread (its event loop refuses the ORM)."""

    def run() -> None:
        work()
        connection.close()

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()


def test_the_queue_shows_new_and_decided_requests_without_a_reload(live_server, make_user):
    from playwright.sync_api import expect, sync_playwright

    agent = make_user("agent")
    other = make_user("other-reviewer", "agentstate.decide_approvalrequest")
    make_user("reviewer", "agentstate.decide_approvalrequest", is_staff=True)
    run = runs.create_run("live-run", user=agent)
    first = approvals.request_approval(run, "send_email", "call-1", by=agent)

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page, refused = open_page(browser, live_server)
            page.goto(f"{live_server.url}/admin/")
            page.fill("#id_username", "reviewer")
            page.fill("#id_password", "pw")
            page.click("input[type=submit]")
            page.goto(f"{live_server.url}/admin/agentstate/approvalrequest/")
            expect(page.locator("#result_list")).to_contain_text("call-1")
            loaded = page.evaluate("performance.timeOrigin")

            in_thread(lambda: approvals.request_approval(run, "send_email", "call-2", by=agent))
            expect(page.locator("#result_list")).to_contain_text("call-2")

            in_thread(lambda: approvals.decide(first.pk, "approve", by=other))
            row = page.locator("#result_list tr", has_text="call-1")
            expect(row).to_contain_text("approved")
            assert page.evaluate("performance.timeOrigin") == loaded  # never reloaded
            assert refused == []
        finally:
            browser.close()
