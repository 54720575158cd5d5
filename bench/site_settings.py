"""The demo site as the HTTP benchmark serves it: its settings, plus two bare views."""

from project.settings import *

ROOT_URLCONF = "bench.site_urls"
