"""The demo's URLs plus the HTTP baselines, each doing one statement.

- ``/bench/update/`` and ``/bench/select/``: bare Django views, no
  authentication: the limit of a Django view.
- ``/bench/drf/update/`` and ``/bench/drf/select/``: bare DRF ``APIView``\\ s
  authenticated by DRF's own ``TokenAuthentication`` (set on the view):
  the floor of any authenticated DRF endpoint.
"""

import random

from django.db import connection
from django.http import JsonResponse
from django.urls import path
from django.views.decorators.csrf import csrf_exempt
from rest_framework.authentication import TokenAuthentication
from rest_framework.permissions import IsAuthenticated
from rest_framework.response import Response
from rest_framework.views import APIView

from bench.api_ops import ROWS, SELECT, UPDATE
from project.urls import urlpatterns as site_urls


def _update() -> int:
    with connection.cursor() as cursor:
        cursor.execute(UPDATE, [random.randrange(ROWS)])
        return cursor.rowcount


def _select() -> int:
    with connection.cursor() as cursor:
        cursor.execute(SELECT, [random.randrange(ROWS)])
        (n,) = cursor.fetchone()
    return n


@csrf_exempt
def bare_update(request):
    return JsonResponse({"updated": _update()})


def bare_select(request):
    return JsonResponse({"n": _select()})


class DRFView(APIView):
    authentication_classes = [TokenAuthentication]
    permission_classes = [IsAuthenticated]


class DRFUpdate(DRFView):
    def post(self, request):
        return Response({"updated": _update()})


class DRFSelect(DRFView):
    def get(self, request):
        return Response({"n": _select()})


urlpatterns = [
    path("bench/update/", bare_update),
    path("bench/select/", bare_select),
    path("bench/drf/update/", DRFUpdate.as_view()),
    path("bench/drf/select/", DRFSelect.as_view()),
    *site_urls,
]
