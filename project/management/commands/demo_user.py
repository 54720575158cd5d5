"""Create the demo site's superuser and API token, once, and say how to use them."""

import os
import secrets

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand
from rest_framework.authtoken.models import Token


class Command(BaseCommand):
    help = "Create the demo superuser (DEMO_USER, default 'admin') and print its credentials."

    def handle(self, *args, **options):
        User = get_user_model()
        username = os.environ.get("DEMO_USER", "admin")
        user = User.objects.filter(username=username).first()
        if user is None:
            password = os.environ.get("DEMO_PASSWORD") or secrets.token_urlsafe(12)
            user = User.objects.create_superuser(username, f"{username}@example.com", password)
            shown = "(from DEMO_PASSWORD)" if os.environ.get("DEMO_PASSWORD") else password
            self.stdout.write(f"==> created superuser {username!r}, password: {shown}")
        else:
            self.stdout.write(f"==> superuser {username!r} exists (password unchanged)")
        token, _ = Token.objects.get_or_create(user=user)
        self.stdout.write(f"    API token: {token.key}")
        port = os.environ.get("PORT", "8000")  # scripts/demo.sh serves on $PORT
        self.stdout.write(
            f'    try: curl -H "Authorization: Token {token.key}" http://127.0.0.1:{port}/api/scopes/'
        )
