"""What a provider's fake hands the shared contract suite (tests/providers/test_contract.py).

A provider joins the suite through its fake: the module its ``FACTS.fake`` names defines
``contract_harness() -> Harness``. The suite takes the providers from the registry, builds a
fresh harness per test, serves ``harness.app`` on 127.0.0.1 and runs every required behaviour.

Fields:

- ``app``: a fresh fake (``provisioner.testing.fakes.base.FakeApp``) accepting ``api_key``.
- ``make_provider(api_key=..., base_url=..., transport=None, limits=..., timeout_s=...,
  retry=...)``: builds the adapter. The suite passes ``limits=harness.scaled_limits`` and a
  ``RetryPolicy`` with short delays. ``transport``: a ``FakeTransport`` the adapter must send
  every request through instead of the network (the SDK adapters through
  ``provisioner.testing.in_process``), so that an answer the fake drops reaches the adapter as its
  HTTP library's read timeout at once.
- ``node_specs(n, prefix)``: n NodeSpecs named ``f"{prefix}{i}"`` that the fake can launch
  (an instance type and region it sells, an SSH key if the provider needs one).
- ``published_limits`` and ``scale``: the provider's real limits; tests run at
  ``published_limits.scaled(scale)`` and check the fake's call log against that.
- ``offer_query``: an OfferQuery that must return at least one offer from the fake.
- ``count_instances()`` / ``count_launches()``: live instances in the fake and instances it has
  ever launched (defaults: ``app.instance_count()`` and ``app.launched``).
- ``launch_route``/``list_route``/``offers_route``: the fault ``route`` names or kinds for the
  launch call, the instance listing call and the offers call (defaults: the route kinds).
- ``balance_fault_route``: where ``insufficient_balance`` is injected (the call that refuses
  for lack of funds; default the launch).
- ``needs``: the files under the shared ``provider-apis`` folder the fake validates against
  (``(provider, file)`` pairs); the suite skips (fails in CI) when one is absent.
- ``env``: variables a test that runs the adapter through the environment (the engines) sets.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from provisioner.providers.base import NodeSpec, OfferQuery, Provider
from provisioner.providers.http import RateLimits
from provisioner.testing.fakes.base import FakeApp


@dataclass
class Harness:
    name: str
    app: FakeApp
    make_provider: Callable[..., Provider]
    api_key: str
    node_specs: Callable[[int, str], list[NodeSpec]]
    published_limits: RateLimits
    scale: float = 20.0
    offer_query: OfferQuery = field(default_factory=OfferQuery)
    count_instances: Callable[[], int] | None = None
    count_launches: Callable[[], int] | None = None
    launch_route: str = "launch"
    list_route: str = "list"
    offers_route: str = "offers"
    balance_fault_route: str = "launch"
    timeout_s: float = 2.0
    """A short client timeout for callers that make the fake hold an answer (test_stack_neocloud);
    long enough for an ordinary answer on a loaded machine."""
    needs: tuple[tuple[str, str], ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    """Variables the adapter needs set to run against this fake (the images the AWS/GCP fakes hold)."""

    @property
    def scaled_limits(self) -> RateLimits:
        return self.published_limits.scaled(self.scale)

    def instances(self) -> int:
        return self.count_instances() if self.count_instances else self.app.instance_count()

    def launches(self) -> int:
        return self.count_launches() if self.count_launches else self.app.launched


__all__ = ["Harness"]
