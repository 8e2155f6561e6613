"""``rewind init``: the local certificate authority HTTPS interception signs with (``rewind
record --intercept``), made by mitmdump, with what trusting it means."""

from __future__ import annotations

import click

from rewind.replay.cli.failure import attempt, note
from rewind.replay.cli.options import HELP_OPTIONS

TRUST = (
    "rewind: the certificate is trusted only by the commands rewind runs with --intercept "
    "(SSL_CERT_FILE, REQUESTS_CA_BUNDLE, CURL_CA_BUNDLE, NODE_EXTRA_CA_CERTS set for them), "
    "never system-wide; such a command accepts any HTTPS site signed with this key, so the key "
    "stays on this machine, readable by you alone. To undo: delete the directory.")


@click.command("init", context_settings=HELP_OPTIONS)
@click.option("--force", is_flag=True, help="Replace the CA that exists (programs that trust "
              "the old certificate stop trusting what the new one signs).")
def init(force: bool) -> None:
    """Make the local certificate authority for HTTPS interception.

    \b
        rewind init
        rewind record --intercept -- ./agent

    mitmproxy's mitmdump makes it (install mitmproxy first; REWIND_MITMDUMP names another
    binary), in REWIND_CA_DIR, else rewind/ca in your configuration directory (~/.config):
    the directory 0700, the key 0600. Prints the certificate's path and the key's.
    """
    from rewind.replay.play.proxy.intercept.authority import make

    made = attempt(lambda: make(force))
    note(f"rewind: made a local certificate authority in {made.directory}")
    click.echo(f"certificate: {made.cert}")
    click.echo(f"private key: {made.key}")
    note(TRUST)
