"""Request and response shapes of the budget endpoints.

A cap is an integer from 0 to 2**63 - 1, or ``null`` for none; a counter a
body leaves out keeps its cap. ``used``, ``remaining``, ``resets_at`` and the
period's start are the server's: no request serializer has them, and
unknown fields are refused.
"""

from rest_framework import serializers

from agentstate.services.budgets import MAX_CAP, PERIODS

from .fields import StrictIntegerField, StrictSerializer
from .schema import ErrorSerializer


def _cap(counter: str) -> StrictIntegerField:
    return StrictIntegerField(
        required=False,
        allow_null=True,
        min_value=0,
        max_value=MAX_CAP,
        help_text=f"The cap on {counter}; null removes it, left out keeps it.",
    )


class RunBudgetRequest(StrictSerializer):
    requests = _cap("model requests")
    input_tokens = _cap("input tokens")
    output_tokens = _cap("output tokens")
    total_tokens = _cap("total tokens")


class UserBudgetRequest(RunBudgetRequest):
    period = serializers.ChoiceField(
        choices=PERIODS,
        allow_null=True,
        required=False,
        help_text="null: never resets; day or month: resets at the start of each UTC day or"
        " month. Left out keeps it; a change starts a new period, counted from 0.",
    )


class CapsSerializer(serializers.Serializer):
    requests = serializers.IntegerField(allow_null=True)
    input_tokens = serializers.IntegerField(allow_null=True)
    output_tokens = serializers.IntegerField(allow_null=True)
    total_tokens = serializers.IntegerField(allow_null=True)


class UsedSerializer(serializers.Serializer):
    requests = serializers.IntegerField()
    input_tokens = serializers.IntegerField()
    output_tokens = serializers.IntegerField()
    total_tokens = serializers.IntegerField()


class RunBudgetSerializer(serializers.Serializer):
    """A run's budget: ``used`` is the run's usage; ``remaining`` is null where uncapped."""

    caps = CapsSerializer()
    used = UsedSerializer()
    remaining = CapsSerializer(help_text="cap - used, never below 0; null where uncapped.")


class UserBudgetSerializer(RunBudgetSerializer):
    """A user's budget over every run the user created: ``used`` in the current period."""

    period = serializers.ChoiceField(choices=PERIODS, allow_null=True)
    resets_at = serializers.DateTimeField(
        allow_null=True, help_text="When the current period ends; null without a period."
    )


class BudgetExceededSerializer(ErrorSerializer):
    """409 ``budget_exceeded``: the budget and the counter that refused the add."""

    budget = serializers.ChoiceField(choices=["run", "user"])
    counter = serializers.ChoiceField(choices=list(RunBudgetRequest().fields))
