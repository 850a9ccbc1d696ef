"""The project's one error tree.

::

    ProvisionerError                      exit 1 unless noted
    ├── UsageError                        exit 2: a command line mistake (unknown option, bad value)
    ├── SpecError                         exit 2: a bad spec, with file/line/column and a field path
    ├── PlanError                         exit 3: the spec is valid but cannot be planned
    │   ├── NoFeasibleOfferError          ... because every offer was rejected (carries the reasons)
    │   └── PlanFileError                 exit 2: a plan file that cannot be read or is not a plan
    ├── CatalogError                      exit 2: an unreadable or malformed catalog file
    ├── ProviderError                     exit 4: a provider refused or failed
    │   ├── CredentialsError              missing or rejected API key
    │   ├── QuotaError                    quota exhausted or insufficient balance
    │   ├── CapacityError                 no capacity for the requested nodes
    │   ├── RateLimitError                throttled; ``retry_after_s`` when the provider said
    │   └── ProviderAPIError              any other API failure; ``status`` and ``detail``
    ├── StackError                        exit 5: realizing a plan as a Pulumi stack failed
    ├── ClusterBusyError                  exit 6: another up/down/gc holds the cluster (names the holder)
    └── ValidationFailedError             exit 11: node validation failed (``burst`` refuses to start)

Every error renders as one line (``str(err)``); the CLI prints that line and exits
with ``err.exit_code``. Provider errors never carry API keys: adapters build them
from the provider's response body, which holds none.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


class ProvisionerError(Exception):
    """Base of every error this project raises on purpose."""

    exit_code = 1


class UsageError(ProvisionerError):
    """A command line mistake. ``option`` names the option or argument at fault, ``where`` the
    command (``provisioner plan``) whose ``--help`` explains it."""

    exit_code = 2

    def __init__(self, message: str, *, option: str | None = None, where: str | None = None) -> None:
        self.message = message
        self.option = option
        self.where = where
        super().__init__(str(self))

    def __str__(self) -> str:
        text = f"Invalid value for {self.option}: {self.message}" if self.option else self.message
        return f"{text} (see '{self.where} --help')" if self.where else text


class SpecError(ProvisionerError):
    """A spec document is invalid. Renders as ``FILE:LINE:COL: path: message``."""

    exit_code = 2

    def __init__(
        self,
        message: str,
        *,
        path: str = "",
        file: str = "<spec>",
        line: int = 1,
        column: int = 1,
    ) -> None:
        self.message = message
        self.path = path
        self.file = file
        self.line = line
        self.column = column
        super().__init__(str(self))

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}:{self.column}"
        return f"{where}: {self.path}: {self.message}" if self.path else f"{where}: {self.message}"


class CatalogError(ProvisionerError):
    """A catalog file could not be read or does not match the offer model."""

    exit_code = 2


class PlanError(ProvisionerError):
    """The spec is valid but no plan can be made from it."""

    exit_code = 3


class PlanFileError(PlanError):
    """A plan file (``up plan.json``, ``render``, ``validate``) that cannot be read or is not a valid
    plan: bad input, exit 2 as a bad spec is (3 is for a valid spec no offer fits)."""

    exit_code = 2


@dataclass(frozen=True)
class Rejection:
    """One offer the optimizer turned down, and why.

    ``field`` is the spec path whose requirement the offer failed (``interconnect.fabric``),
    and ``stage`` orders the checks: a rejection at a later stage means the offer passed
    every earlier check, which is how the CLI names the field to blame when nothing fits.
    """

    provider: str
    instance_type: str
    region: str
    reason: str
    field: str = ""
    stage: int = 0


class NoFeasibleOfferError(PlanError):
    """Every offer was rejected; ``rejected`` says why for each one."""

    def __init__(self, message: str, rejected: Sequence[Rejection] = ()) -> None:
        self.rejected = list(rejected)
        super().__init__(message)


class ProviderError(ProvisionerError):
    """A provider refused a request or failed. ``provider`` names which one."""

    exit_code = 4

    def __init__(self, provider: str, message: str) -> None:
        self.provider = provider
        self.message = message
        super().__init__(f"{provider}: {message}")


class CredentialsError(ProviderError):
    """The API key is missing, malformed or rejected."""


class QuotaError(ProviderError):
    """A quota is exhausted or the account balance is too low."""


class CapacityError(ProviderError):
    """The provider has no capacity for what was asked."""


class RateLimitError(ProviderError):
    """The provider throttled us. ``retry_after_s`` is set when it said how long to wait."""

    def __init__(self, provider: str, message: str, retry_after_s: float | None = None) -> None:
        self.retry_after_s = retry_after_s
        super().__init__(provider, message)


class ProviderAPIError(ProviderError):
    """Any other API failure, with the HTTP status (0 for transport errors) and detail."""

    def __init__(self, provider: str, status: int, detail: str) -> None:
        self.status = status
        self.detail = detail
        super().__init__(provider, f"HTTP {status}: {detail}" if status else detail)


class StackError(ProvisionerError):
    """Realizing a plan as a Pulumi stack failed."""

    exit_code = 5


class StackLockedError(StackError):
    """Another machine's pulumi update holds the stack's lock: this one changed nothing."""


class ClusterBusyError(ProvisionerError):
    """Another process (here: the cluster's lock; elsewhere: a live lease mark on its nodes) is
    creating or deleting the cluster. Nothing was bought or deleted by the refused command."""

    exit_code = 6


class ValidationFailedError(ProvisionerError):
    """Node validation failed; a job is not started on the cluster unless forced."""

    exit_code = 11


__all__ = [
    "CapacityError",
    "CatalogError",
    "ClusterBusyError",
    "CredentialsError",
    "NoFeasibleOfferError",
    "PlanError",
    "PlanFileError",
    "ProviderAPIError",
    "ProviderError",
    "ProvisionerError",
    "QuotaError",
    "RateLimitError",
    "Rejection",
    "SpecError",
    "StackError",
    "UsageError",
    "ValidationFailedError",
]
