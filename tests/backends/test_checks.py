import pytest
from django.core.checks import run_checks
from django.test import override_settings

from agentstate.checks import check_settings, check_sqlite_transaction_mode

# The checks read settings.DATABASES; overriding it is the point here.
pytestmark = pytest.mark.filterwarnings("ignore:Overriding setting DATABASES:UserWarning")


def test_sqlite_without_immediate_mode_is_an_error():
    databases = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": "x.sqlite3"}}
    with override_settings(DATABASES=databases):
        errors = check_sqlite_transaction_mode()
    assert [e.id for e in errors] == ["agentstate.E001"]


@pytest.mark.parametrize("mode", ["IMMEDIATE", "EXCLUSIVE", "immediate"])
def test_sqlite_with_immediate_or_exclusive_mode_passes(mode):
    databases = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": "x.sqlite3",
            "OPTIONS": {"transaction_mode": mode},
        }
    }
    with override_settings(DATABASES=databases):
        assert check_sqlite_transaction_mode() == []


@pytest.mark.parametrize(
    "value", [{"PAUSE_TTL": 0}, {"APPROVAL_TTL": -5}, {"MAX_BODY_BYTES": 0}, {"NOPE": 1}]
)
def test_invalid_agentstate_settings_are_errors(value):
    with override_settings(AGENTSTATE=value):
        assert [e.id for e in check_settings()] == ["agentstate.E002"]


@pytest.mark.django_db  # Django 6.1's JSONField check asks the database what it supports
def test_the_demo_site_passes_every_check():
    assert [m for m in run_checks() if m.level >= 40] == []
