"""The construction plumbing the REST adapters share: one client base, one adapter base.

``EndpointClient`` is the base of each provider's ``client.py`` class. A subclass names its
provider, default URL, published limits, auth header and error mapper as class attributes and
adds one method per endpoint; the base builds the ``ApiClient`` (``self.api``) from them.

``RestAdapter`` is the base of each REST provider's adapter. It owns the public constructor
every caller (the stack, ``catalog refresh``, the contract suite, the bench) uses: the URL
and key come from the arguments or ``providers.settings`` (environment), then the client is
built. Everything provider-specific (offers, create, delete) stays in the subclass.

Neither ever stores the key outside ``ApiClient`` nor puts it in a repr.

``require_capabilities`` is the one check every adapter's ``create_nodes`` runs first: a node
asking for something the adapter does not declare (spot, several nodes, cloud-init or a
script, tags) is refused with ``PlanError`` before any request, never silently degraded.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from typing import Any, ClassVar, Generic, TypeVar, overload

import httpx
from pydantic import BaseModel, SecretStr, TypeAdapter, ValidationError

from provisioner.errors import PlanError, ProviderAPIError, ProviderError
from provisioner.offer import Offer
from provisioner.providers import settings
from provisioner.providers.base import Bootstrap, Capability, NodeSpec
from provisioner.providers.http import ApiClient, ErrorMapper, RateLimits, RetryPolicy
from provisioner.providers.screening import OfferScreen

M = TypeVar("M", bound=BaseModel)
T = TypeVar("T")


def needed_capabilities(spec: NodeSpec) -> set[Capability]:
    """What creating ``spec`` needs from an adapter (MULTI_NODE is decided per call, not per node).

    User data of a ``script`` bootstrap needs SCRIPT_BOOTSTRAP or USER_DATA (an adapter that runs
    cloud-init runs a script too; checked by ``require_capabilities``); of a ``cloud_init``
    bootstrap, USER_DATA. The bootstrap method is the NodeSpec's typed field, never read from the text.
    """
    needed = {Capability.SPOT if spec.spot else Capability.ON_DEMAND}
    if spec.user_data:
        needed.add(Capability.SCRIPT_BOOTSTRAP if spec.bootstrap is Bootstrap.SCRIPT else Capability.USER_DATA)
    if spec.tags:
        needed.add(Capability.TAGS)
    if spec.capacity_block_hours:
        needed.add(Capability.RESERVATION)
    return needed


_WHAT = {
    Capability.SPOT: "spot (interruptible) nodes",
    Capability.ON_DEMAND: "on-demand nodes",
    Capability.MULTI_NODE: "more than one node per cluster",
    Capability.TAGS: "tags",
    Capability.RESERVATION: "nodes in a reservation bought upfront (Capacity Block)",
}


def _refusal(need: Capability, have: frozenset[Capability]) -> str:
    """Why a node needing ``need`` cannot be created with ``have``, in words a planner acts on."""
    if need in (Capability.USER_DATA, Capability.SCRIPT_BOOTSTRAP):
        if Capability.SCRIPT_BOOTSTRAP in have:
            return "runs user data only as a script (bootstrap 'script'); cloud-config is not executed there"
        ssh = " (bootstrap over SSH after boot)" if Capability.SSH_BOOTSTRAP in have else ""
        return f"cannot pass user data: its nodes accept no user data{ssh}"
    return f"cannot create {_WHAT.get(need, need.value)}"


def require_capabilities(
    provider: str,
    capabilities: frozenset[Capability],
    nodes: Sequence[NodeSpec],
    *,
    per_node: Callable[[NodeSpec], frozenset[Capability]] | None = None,
) -> None:
    """Raise PlanError unless the adapter can create every node as specified. No request is made.

    ``capabilities`` is the adapter's declared set; ``per_node`` (optional) gives a node's own
    set where it differs (Fluence's CPU VMs boot cloud-init, its GPU VMs do not). The error
    names the provider, the nodes and what they ask for, so it reads as a planning mistake,
    not a provider failure: nothing was bought.
    """
    if len(nodes) > 1 and Capability.MULTI_NODE not in capabilities:
        raise PlanError(
            f"{provider}: the adapter {_refusal(Capability.MULTI_NODE, capabilities)} "
            f"({len(nodes)} asked); nothing was bought"
        )
    refused: dict[Capability, tuple[str, list[str]]] = {}
    for spec in nodes:
        have = per_node(spec) if per_node else capabilities
        for need in sorted(needed_capabilities(spec)):
            if need in have or (need is Capability.SCRIPT_BOOTSTRAP and Capability.USER_DATA in have):
                continue
            refused.setdefault(need, (_refusal(need, have), []))[1].append(spec.name)
    if refused:
        why, names = next(iter(refused.values()))
        more = f" (and {len(refused) - 1} more refusal(s))" if len(refused) > 1 else ""
        raise PlanError(
            f"{provider}: the adapter {why}; node(s) {', '.join(names)} ask for it; nothing was "
            f"bought: plan them differently or on another provider{more}"
        )


def is_not_found(error: ProviderError) -> bool:
    """The provider answered 404 (what ``delete`` of an already-gone node gets)."""
    return isinstance(error, ProviderAPIError) and error.status == 404


class EndpointClient:
    """One provider's API: ``self.api`` bound to ``base_url`` (trailing ``/`` stripped).

    Subclasses set ``provider``, ``default_url``, ``default_limits`` and ``error_mapper``
    (wrapped in ``staticmethod``), and ``auth_header``/``auth_scheme`` when the provider does
    not take ``Authorization: Bearer <key>``. ``limits=None`` means ``default_limits``.
    """

    provider: ClassVar[str]
    default_url: ClassVar[str]
    default_limits: ClassVar[RateLimits]
    error_mapper: ErrorMapper  # set as ``staticmethod(map_error)``: a class attribute, never bound
    auth_header: ClassVar[str] = "Authorization"
    auth_scheme: ClassVar[str | None] = "Bearer"

    def __init__(
        self,
        api_key: SecretStr | None,
        *,
        base_url: str | None = None,
        limits: RateLimits | None = None,
        transport: httpx.BaseTransport | None = None,
        timeout_s: float = 30.0,
        retry: RetryPolicy | None = None,
    ) -> None:
        self.base_url = (base_url or self.default_url).rstrip("/")
        self.limits = limits or self.default_limits
        self.api = ApiClient(
            self.provider,
            self.base_url,
            api_key,
            error_mapper=self.error_mapper,
            limits=self.limits,
            auth_header=self.auth_header,
            auth_scheme=self.auth_scheme,
            timeout_s=timeout_s,
            retry=retry,
            transport=transport,
        )

    def __repr__(self) -> str:
        return f"{type(self).__name__}(base_url={self.base_url!r})"

    def close(self) -> None:
        self.api.close()

    @overload
    def _parse(self, schema: type[M], data: Any, what: str) -> M: ...
    @overload
    def _parse(self, schema: TypeAdapter[T], data: Any, what: str) -> T: ...
    def _parse(self, schema: Any, data: Any, what: str) -> Any:
        """``data`` validated by a model class or TypeAdapter; a body of another shape is a
        ``ProviderAPIError`` naming the first bad field, not a crash."""
        try:
            return schema.validate_python(data) if isinstance(schema, TypeAdapter) else schema.model_validate(data)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(part) for part in first["loc"])
            detail = f"unexpected {what} payload at {where}: {first['msg']}"
            raise ProviderAPIError(self.provider, 200, detail) from None


C = TypeVar("C", bound=EndpointClient)


class RestAdapter(Generic[C]):
    """Shared construction of a REST adapter; the subclass sets ``name`` and ``client_class``.

    ``base_url`` defaults to ``PROVISIONER_<NAME>_API_URL`` or the client's ``default_url``;
    ``api_key`` to the provider's key variable (``providers.settings.api_key``); ``limits``
    to the client's published ``default_limits``. ``poll_interval_s`` is how often callers
    poll ``get_nodes`` while waiting. ``close()`` releases the HTTP connections.
    """

    name: ClassVar[str]
    client_class: type[C]

    def __init__(
        self,
        api_key: str | SecretStr | None = None,
        *,
        base_url: str | None = None,
        limits: RateLimits | None = None,
        transport: httpx.BaseTransport | None = None,
        timeout_s: float = 30.0,
        retry: RetryPolicy | None = None,
        poll_interval_s: float = 5.0,
    ) -> None:
        self.base_url = base_url or settings.api_url(self.name, self.client_class.default_url)
        self.poll_interval_s = poll_interval_s
        self.client: C = self.client_class(
            settings.api_key(self.name, api_key),
            base_url=self.base_url,
            limits=limits,
            transport=transport,
            timeout_s=timeout_s,
            retry=retry,
        )

        self.dropped_offers: Counter[str] = Counter()
        """Offers the last ``list_offers`` refused as untrusted data, by reason (see providers.screening)."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}(base_url={self.base_url!r})"

    def _screened(self, items: Iterable[T], make: Callable[[T], Iterable[Offer]]) -> list[Offer]:
        """``make(item)`` for every item through an ``OfferScreen``: bad data is dropped and
        counted in ``dropped_offers``, never raised."""
        screen = OfferScreen(self.name)
        offers = screen.build(items, make)
        self.dropped_offers = screen.dropped
        return offers

    def close(self) -> None:
        """Close the HTTP client (the stack and ``catalog refresh`` call this when done)."""
        self.client.close()
