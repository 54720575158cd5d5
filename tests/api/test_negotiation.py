"""Content negotiation: the views' one renderer chosen as DRF's own negotiation
chooses it, whatever the Accept header and the format asked for."""

import pytest
from django.http import Http404
from rest_framework.exceptions import NotAcceptable, NotFound
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.test import APIRequestFactory

from agentstate.api.negotiation import ContentNegotiation

ACCEPTS = [
    None,
    "*/*",
    "application/json",
    "application/*",
    "application/json; indent=4",
    "application/json;q=0.5, */*;q=0.1",
    "text/html",
    "text/html, */*;q=0.8",
    "",
]


class DRFs(DefaultContentNegotiation):
    """DRF's negotiation, with agentstate's settings (its format parameter)."""

    settings = ContentNegotiation.settings


def chosen(negotiation, accept, query, suffix):
    headers = {} if accept is None else {"HTTP_ACCEPT": accept}
    request = Request(APIRequestFactory().get(f"/api/x/{query}", **headers))
    try:
        renderer, media_type = negotiation.select_renderer(request, [JSONRenderer()], suffix)
    except (NotAcceptable, NotFound, Http404) as refused:
        return type(refused)
    return type(renderer), media_type


@pytest.mark.parametrize("accept", ACCEPTS)
@pytest.mark.parametrize("query", ["", "?format=json", "?format=xml", "?a=1"])
@pytest.mark.parametrize("suffix", [None, "json"])
def test_the_renderer_is_the_one_drf_s_negotiation_chooses(accept, query, suffix):
    ours = chosen(ContentNegotiation(), accept, query, suffix)
    assert ours == chosen(DRFs(), accept, query, suffix)
    if accept in (None, "*/*", "application/json") and query in ("", "?a=1"):
        assert ours == (JSONRenderer, "application/json")


def test_a_request_for_what_the_api_does_not_render_is_refused(api):
    response = api.get("/api/scopes/", HTTP_ACCEPT="text/html")
    assert response.status_code == 406
    assert api.get("/api/scopes/", HTTP_ACCEPT="*/*")["Content-Type"] == "application/json"
