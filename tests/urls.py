"""The test site's URLs: the admin and the API where the demo site mounts them."""

from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/", include("agentstate.api.urls")),
]
