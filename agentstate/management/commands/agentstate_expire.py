"""``manage.py agentstate_expire``: the expiry sweep, for sites that use cron."""

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from agentstate.services import webhooks
from agentstate.services.sweep import sweep


class Command(BaseCommand):
    help = (
        "Mark overdue pending pauses and approval requests expired and delete resolved or "
        "expired pauses older than AGENTSTATE['RETENTION'] (what the Celery task does)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--batch-size",
            type=int,
            default=None,
            help="Rows per statement (default: AGENTSTATE['SWEEP_BATCH_SIZE']).",
        )

    def handle(
        self, *args: Any, batch_size: int | None = None, verbosity: int = 1, **options: Any
    ) -> None:
        if batch_size is not None and batch_size < 1:
            raise CommandError("--batch-size must be a positive integer.", returncode=2)

        def progress(label: str, total: int) -> None:
            if verbosity > 1:  # -v2: a line per batch
                self.stdout.write(f"  {label}: {total} so far")

        result = sweep(batch_size=batch_size, progress=progress)
        if verbosity:
            self.stdout.write(
                f"expired pauses: {result.expired_pauses}\n"
                f"expired approval requests: {result.expired_approval_requests}\n"
                f"purged pauses: {result.purged_pauses}\n"
                f"purged events: {result.purged_events}\n"
                f"purged threads: {result.purged_threads}\n"
                f"purged store items: {result.purged_store_items}"
            )
        # Sites on cron have no Celery worker: send the webhook deliveries that are due.
        due = webhooks.due()
        for pk in due:
            webhooks.deliver(pk)
        if verbosity:
            self.stdout.write(f"webhook deliveries tried: {len(due)}")
