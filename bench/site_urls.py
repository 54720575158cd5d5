"""The demo's URLs plus the HTTP baselines: bare Django views doing one statement each."""

import random

from django.db import connection
from django.http import JsonResponse
from django.urls import path
from django.views.decorators.csrf import csrf_exempt

from bench.api_ops import ROW_TABLE, ROWS
from project.urls import urlpatterns as site_urls


@csrf_exempt
def bare_update(request):
    with connection.cursor() as cursor:
        cursor.execute(f"UPDATE {ROW_TABLE} SET n = n + 1 WHERE id = %s", [random.randrange(ROWS)])
    return JsonResponse({"updated": cursor.rowcount})


def bare_select(request):
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT n FROM {ROW_TABLE} WHERE id = %s", [random.randrange(ROWS)])
        (n,) = cursor.fetchone()
    return JsonResponse({"n": n})


urlpatterns = [
    path("bench/update/", bare_update),
    path("bench/select/", bare_select),
    *site_urls,
]
