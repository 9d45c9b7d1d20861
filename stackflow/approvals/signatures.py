"""Signing an approval's payload with an SSH key and checking a signature against an
allowed_signers file (git's format), through `ssh-keygen -Y` (OpenSSH 8.2 or later).

Every call runs ssh-keygen directly (no shell) with the payload on stdin; the signature and the
signers file go through files in a private temporary folder (0700) removed afterwards. A child
gets this process's environment minus stackflow's settings and credentials.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

from stackflow.approvals.payload import NAMESPACE
from stackflow.errors import StackflowError
from stackflow.processes import clean_environment

SIGNATURE_BEGIN = "-----BEGIN SSH SIGNATURE-----"
SIGNATURE_END = "-----END SSH SIGNATURE-----"
MAX_SIGNATURE = 16_000  # an armored ed25519/RSA-4096 signature is well under 2 kB
TIMEOUT_S = 30  # ssh-keygen answers at once; a hung one must not hold the gate


class SignatureError(StackflowError, ValueError):
    """A signature that does not approve what it was offered for; the message says why."""


class SigningUnavailable(StackflowError):
    """ssh-keygen is missing or cannot sign with the key given."""


def ssh_keygen() -> str:
    """The ssh-keygen program.

    Raises:
        SigningUnavailable: it is not on PATH.
    """
    found = shutil.which("ssh-keygen")
    if found is None:
        raise SigningUnavailable(
            "ssh-keygen was not found on PATH: signed approvals need OpenSSH 8.2 or later "
            "(Debian/Ubuntu: apt-get install openssh-client)"
        )
    return found


def _run(args: list[str], payload: bytes | None) -> subprocess.CompletedProcess[bytes]:
    try:
        return subprocess.run(
            [ssh_keygen(), *args],
            input=payload if payload is not None else b"",
            capture_output=True,
            timeout=TIMEOUT_S,
            env=clean_environment(),
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise SigningUnavailable(
            f"ssh-keygen did not answer within {TIMEOUT_S}s (a key asking for its passphrase "
            "with no terminal? load it into ssh-agent)"
        ) from None


def _said(done: subprocess.CompletedProcess[bytes]) -> str:
    return " ".join(done.stderr.decode(errors="replace").split())[:300] or f"exit {done.returncode}"


def sign(payload: bytes, key: Path) -> str:
    """Sign `payload` with the private key at `key` (or the agent's, for a public key file).

    Returns:
        The armored signature text.

    Raises:
        SigningUnavailable: no ssh-keygen, no such key, or ssh-keygen refused to sign (its own
            words, never the key's content).
    """
    if not key.is_file():
        raise SigningUnavailable(f"the signing key {key} does not exist or is not a file")
    done = _run(["-Y", "sign", "-q", "-f", str(key), "-n", NAMESPACE], payload)
    text = done.stdout.decode(errors="replace").strip()
    if done.returncode != 0 or SIGNATURE_BEGIN not in text:
        raise SigningUnavailable(f"ssh-keygen could not sign with {key}: {_said(done)}")
    return text + "\n"


def armored(signature: str) -> str:
    """The signature's armored block, as pasted (surrounding blanks dropped).

    Raises:
        SignatureError: it is empty, too long or not an SSH signature.
    """
    text = signature.strip()
    if not text:
        raise SignatureError("no signature was given")
    if len(text) > MAX_SIGNATURE:
        raise SignatureError(f"the signature is longer than {MAX_SIGNATURE} characters")
    if not (text.startswith(SIGNATURE_BEGIN) and text.endswith(SIGNATURE_END)):
        raise SignatureError(
            f"not an SSH signature (it must start with {SIGNATURE_BEGIN} and end with "
            f"{SIGNATURE_END})"
        )
    return text + "\n"


def verify(payload: bytes, signature: str, allowed_signers: bytes) -> str:
    """The principal whose key made `signature` over `payload`, checked against
    `allowed_signers` (the file's content, git's format) for the approval namespace.

    Raises:
        SignatureError: not a signature, a key the file does not list, or a signature that does
            not cover this payload (made over another plan, run or commit).
        SigningUnavailable: ssh-keygen is missing.
    """
    text = armored(signature)
    with tempfile.TemporaryDirectory(prefix="stackflow-sig-") as made:  # 0700, removed after
        folder = Path(made)
        sig, signers = folder / "approval.sig", folder / "allowed_signers"
        sig.write_text(text)
        signers.write_bytes(allowed_signers)
        found = _run(["-Y", "find-principals", "-s", str(sig), "-f", str(signers)], None)
        principals = found.stdout.decode(errors="replace").split()
        if found.returncode != 0 or not principals:
            raise SignatureError(
                "the key that made this signature is not in the allowed signers file"
            )
        for principal in principals:
            done = _run(
                [
                    "-Y",
                    "verify",
                    "-I",
                    principal,
                    "-n",
                    NAMESPACE,
                    "-s",
                    str(sig),
                    "-f",
                    str(signers),
                ],
                payload,
            )
            if done.returncode == 0:
                return principal
    raise SignatureError(
        f"the signature by {principals[0]} does not cover this approval request (it was made "
        "over another plan, run, environment or commit, or for another purpose)"
    )
