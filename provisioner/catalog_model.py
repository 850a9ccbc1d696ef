"""The two in-memory forms of an offer catalog: ``Catalog`` (one ``Offer`` model per offer, what JSON
catalogs and provider answers give) and ``TableCatalog`` (columns, what columnar files give).

Both answer ``offer_table()``, the columns the optimizer reads. Kept apart from ``provisioner.offer``
(what an offer is) and ``provisioner.catalog`` (reading and writing catalog files) so that neither
the columns nor the JSON decoder import back into a module that imports them.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from pydantic import BaseModel, ConfigDict, PrivateAttr

from provisioner.offer import Offer, ProviderInfo, SafeId

if TYPE_CHECKING:
    from provisioner.columns import OfferTable


class Catalog(BaseModel):
    """Offers plus provider facts, dated. ``origin`` says which file it came from."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    as_of: dt.date
    origin: str = "bundled"
    providers: dict[SafeId, ProviderInfo]
    offers: list[Offer]
    _table: Any = PrivateAttr(default=None)

    def offer_table(self) -> OfferTable:
        """The offers as columns (built once, on first use; imports numpy)."""
        if self._table is None:
            from provisioner.columns import OfferTable

            self._table = OfferTable.from_offers(self.offers)
        return cast("OfferTable", self._table)


@dataclass(frozen=True, eq=False)
class TableCatalog:
    """A catalog held as columns (a columnar file): what ``resolve_plan`` reads, without an
    ``Offer`` model per offer. ``offers`` builds the models on demand (listings, refresh)."""

    as_of: dt.date
    origin: str
    providers: Mapping[str, ProviderInfo]
    table: OfferTable

    def offer_table(self) -> OfferTable:
        return self.table

    @property
    def offers(self) -> list[Offer]:
        return [self.table.offer(i) for i in range(len(self.table))]


__all__ = ["Catalog", "TableCatalog"]
