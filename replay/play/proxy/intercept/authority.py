"""The local certificate authority HTTPS interception signs with, made once by ``rewind init``.

mitmdump makes it itself (run once with the directory as its ``confdir``), in the format every
mitmproxy version reads: ``mitmproxy-ca.pem`` (key and certificate), ``mitmproxy-ca-cert.pem``
(the certificate alone), and copies in other encodings. So no Python cryptography library is
needed beside Rewind: interception needs mitmproxy anyway. The directory is 0700 and the files
holding the key 0600; the key is read by mitmdump alone, never by Rewind, never sent anywhere.

A command run with interception trusts the certificate through the variables its runtime reads:
a bundle of the system's roots and ours (``SSL_CERT_FILE`` replaces OpenSSL's default bundle,
so the roots must be in it), and ``NODE_EXTRA_CA_CERTS`` (added to Node's own).
"""

from __future__ import annotations

import os
import shutil
import ssl
import stat
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from rewind.exporter.core.errors import RewindError
from rewind.replay.play import launch
from rewind.replay.play.replay_settings import ENV_CA_DIR, ENV_MITMDUMP, ca_dir, mitmdump_program

KEY = "mitmproxy-ca.pem"  # key + certificate: the secret
CERT = "mitmproxy-ca-cert.pem"  # the certificate alone: what a program trusts
SECRETS = (KEY, "mitmproxy-ca.p12")
MADE = (*SECRETS, CERT, "mitmproxy-ca-cert.cer", "mitmproxy-ca-cert.p12",
        "mitmproxy-dhparam.pem")
MAKE_TIMEOUT_S = 120.0
INSTALL = ("install mitmproxy: apt install mitmproxy, pipx install mitmproxy, brew install "
           "mitmproxy, or pip install 'rewind-otel[intercept]' on Python 3.12+")


class InterceptionError(RewindError):
    """HTTPS interception cannot run here; the hint says what to install or run."""


@dataclass(frozen=True)
class Authority:
    """A CA directory ``rewind init`` made."""

    directory: Path

    @property
    def key(self) -> Path:
        return self.directory / KEY

    @property
    def cert(self) -> Path:
        return self.directory / CERT


def mitmdump(environ: Mapping[str, str] | None = None) -> str:
    """The path of the mitmdump to run; :class:`InterceptionError` naming how to get one."""
    program = mitmdump_program(environ)
    found = shutil.which(program)
    if found is None:
        raise InterceptionError(
            f"HTTPS interception runs mitmproxy's mitmdump, and {program!r} is not a program "
            "here", hint=f"{INSTALL}; or set {ENV_MITMDUMP} to its path")
    return found


def existing(environ: Mapping[str, str] | None = None) -> Authority:
    """The CA ``rewind init`` made, checked: present, its key readable by its owner alone."""
    found = Authority(ca_dir(environ))
    if not (found.key.is_file() and found.cert.is_file()):
        raise InterceptionError(f"no local certificate authority in {found.directory}",
                                hint="run `rewind init` first (it makes one), or set "
                                     f"{ENV_CA_DIR} to where yours is")
    for path in (found.directory, *(found.directory / name for name in SECRETS)):
        if path.exists() and stat.S_IMODE(path.stat().st_mode) & 0o077:
            raise InterceptionError(
                f"{path} can be read by other users of this machine: whoever reads the CA's "
                "key can impersonate any HTTPS site to a program that trusts it",
                hint=f"chmod go-rwx {path}, or make a new CA with `rewind init --force`")
    return found


def make(force: bool = False, environ: Mapping[str, str] | None = None) -> Authority:
    """A new CA in the configured directory (made 0700), by mitmdump; an existing one is
    replaced only when ``force``."""
    program = mitmdump(environ)
    made = Authority(ca_dir(environ))
    if made.key.exists() and not force:
        raise InterceptionError(f"a local certificate authority already exists in "
                                f"{made.directory}", hint="use it as it is, or replace it with "
                                "`rewind init --force`; programs trusting the old certificate "
                                "stop trusting what the new one signs")
    made.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    made.directory.chmod(0o700)
    for name in MADE:
        (made.directory / name).unlink(missing_ok=True)
    child = launch.start([program, "-q", "--no-server", "--set", f"confdir={made.directory}",
                          "--rfile", os.devnull], mitmdump_env(), stdout=subprocess.DEVNULL)
    try:
        child.wait(MAKE_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        launch.stop(child, 5)
    if not (made.key.is_file() and made.cert.is_file()):
        raise InterceptionError(f"{program} made no certificate authority in {made.directory} "
                                f"(exit code {child.returncode}; its message is above)",
                                hint=f"check that {program} runs (mitmdump --version); or "
                                     f"{INSTALL}")
    for name in SECRETS:
        if (made.directory / name).exists():
            (made.directory / name).chmod(0o600)
    return made


def mitmdump_env() -> dict[str, str | None]:
    """What mitmdump runs with: the user's own ``PYTHONPATH``, not Rewind's start-up hooks
    (mitmdump is another interpreter, where Rewind is not installed)."""
    return {"PYTHONPATH": os.environ.get("PYTHONPATH")}


def system_roots(environ: Mapping[str, str] | None = None) -> Path | None:
    """The bundle of root certificates the command would trust without us: its own
    ``SSL_CERT_FILE``, else OpenSSL's default file, else certifi's (httpx's)."""
    env = os.environ if environ is None else environ
    paths = ssl.get_default_verify_paths()
    for candidate in (env.get("SSL_CERT_FILE"), paths.cafile, paths.openssl_cafile):
        if candidate and Path(candidate).is_file():
            return Path(candidate)
    try:
        import certifi
    except ImportError:
        return None
    return Path(certifi.where())


def write_bundle(authority: Authority, into: Path,
                 environ: Mapping[str, str] | None = None) -> Path:
    """``into``: the system's roots then our certificate (never the key), for the variables
    that replace a runtime's default bundle."""
    roots = system_roots(environ)
    text = roots.read_text("utf-8", "replace") if roots is not None else ""
    into.write_text(f"{text.rstrip()}\n{authority.cert.read_text('ascii')}".lstrip(),
                    encoding="utf-8")
    return into
