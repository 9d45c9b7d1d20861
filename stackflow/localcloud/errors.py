"""The errors of the local cloud (moto on loopback standing in for AWS; not AWS)."""

from __future__ import annotations

from stackflow.errors import StackflowError


class CloudServerError(StackflowError):
    """The local cloud's server could not be started, reached or stopped."""


class ControlApiError(CloudServerError):
    """The local cloud's control API (`/_stackflow/*`) refused a call or did not answer it."""


class ControlAnswerCutOff(ControlApiError):
    """The cloud server closed the connection in the middle of its answer."""


class JournalError(CloudServerError):
    """The local cloud's journal has a damaged line: the server will not start on it."""


class PassphraseFileError(StackflowError):
    """The local cloud's passphrase file cannot be read (names the file)."""


class DataplaneError(StackflowError):
    """The data plane could not serve a database or load balancer (names which, and why)."""


class KnobsError(StackflowError, ValueError):
    """A knob spec is not valid, or the cloud server refused or did not answer a knobs call."""


class InventoryError(StackflowError):
    """Listing the local cloud's resources failed (names the kind and the server)."""


class InvalidInput(StackflowError, ValueError):
    """An input value the cloud could not even be asked about (e.g. malformed JSON text)."""


class NoMatchingResource(StackflowError, LookupError):
    """A lookup function (getVpc) found no match, or more than the one it needs, in pulumi-aws's
    words ("no matching EC2 VPC found")."""


class LoadBalancerNotServed(StackflowError, LookupError):
    """The cloud server's data plane lists no address for a load balancer that exists."""


class RandomInputError(StackflowError, ValueError):
    """A RandomPassword's inputs describe no password that can be made."""


class FaultInjected(Exception):
    """A fault the local cloud's knobs asked for, shaped like the AWS error it stands for
    (not a StackflowError: the plugin reports it as AWS would, and the engine classifies it)."""

    def __init__(self, code: str, message: str, operation: str = "") -> None:
        super().__init__(f"{code}: {message}")
        self.code, self.message, self.operation = code, message, operation
