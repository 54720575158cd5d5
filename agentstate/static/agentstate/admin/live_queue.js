// The review queue without a reload: follows the event feed (a long-poll of
// /api/events/?after=...&wait=..., with the reviewer's session) and, when an
// approval request is filed, decided or expires, reads the same changelist page
// again and puts its rows in place of the ones shown.
"use strict";
(function () {
  const script = document.currentScript;
  const feed = script.dataset.feed;
  let after = script.dataset.after;
  const sleep = (ms) => new Promise((done) => setTimeout(done, ms));

  async function refresh() {
    const response = await fetch(window.location.href, { credentials: "same-origin" });
    if (!response.ok) return;
    const next = new DOMParser().parseFromString(await response.text(), "text/html");
    const rows = document.querySelector("#result_list tbody");
    const newRows = next.querySelector("#result_list tbody");
    if (rows && newRows) {
      rows.replaceWith(newRows);
    } else {
      const form = document.querySelector("#changelist-form");
      const newForm = next.querySelector("#changelist-form");
      if (form && newForm) form.replaceWith(newForm);
    }
    for (const selector of [".paginator", "#changelist-filter"]) {
      const now = document.querySelector(selector);
      const then = next.querySelector(selector);
      if (now && then) now.replaceWith(then);
    }
    document.dispatchEvent(new CustomEvent("agentstate:queue-refreshed"));
  }

  async function follow() {
    for (;;) {
      const url = `${feed}?object_type=approvalrequest&after=${after}&wait=25&page_size=500`;
      try {
        const response = await fetch(url, {
          credentials: "same-origin",
          headers: { Accept: "application/json" },
        });
        if (!response.ok) {
          await sleep(5000);
          continue;
        }
        const page = await response.json();
        if (page.results.length) {
          after = page.results[page.results.length - 1].id;
          await refresh();
        }
      } catch (error) {
        await sleep(2000);
      }
    }
  }

  follow();
})();
