"""Fluence's v2 VM API in the Fluence fake (``fluence.FluenceFake``): ``/v1/clusters``,
``/v1/configurations/virtual_machines``, ``/v2/vms`` and ``/v2/vms/{id}/terminate``, validated
against ``fluence-openapi-original.yml`` by the shared framework. The VMs live in ``fake.vms``.
"""

from __future__ import annotations

import copy
import datetime as dt
import uuid
from typing import TYPE_CHECKING, Any

from werkzeug.wrappers import Request, Response

from provisioner.testing.fakes.base import Bought

if TYPE_CHECKING:
    from provisioner.testing.fakes.fluence import FluenceFake

USER_ID = "5b1f2a7e-0d7c-4c56-9a55-2f0b9d7a1c11"
CLUSTER = {
    "id": "92e6ed24-8bfa-4737-9409-a1aac994e1f5",
    "name": "Cloudless",
    "dcId": "0f7d3c1e-5a8b-4f0e-9d2c-6b1a4e3f2d10",
}
_CONFIGS = [
    ("0b6c5a3e-2f1d-4c9b-8a7e-6d5c4b3a2f10", "cpu-regular-4vcpu-8gb", 4, 8),
    ("1c7d6b4f-3a2e-4dac-9b8f-7e6d5c4b3a21", "cpu-premium-8vcpu-16gb", 8, 16),
]


def now_text(when: dt.datetime | None = None) -> str:
    return (when or dt.datetime.now(dt.UTC)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class VmRoutes:
    """The v2 VM half of ``FluenceFake`` (its routes are registered here)."""

    def __init__(self, fake: FluenceFake) -> None:
        self.fake = fake
        fake.route("GET", "/v1/clusters", self.clusters, kind="other", name="v1_clusters")
        fake.route(
            "GET", "/v1/configurations/virtual_machines", self.configurations, kind="other", name="v1_configurations"
        )
        fake.route("GET", "/v2/vms", self.list_vms, kind="list", name="v2_list_vms")
        fake.route("POST", "/v2/vms", self.create_vm, kind="launch", name="v2_create_vm")
        fake.route("POST", "/v2/vms/{vm_id}/terminate", self.terminate_vm, kind="delete", name="v2_terminate_vm")

    def clusters(self, request: Request) -> Response:
        fake = self.fake
        return fake.json({"items": [dict(CLUSTER)]})

    def configurations(self, request: Request) -> Response:
        fake = self.fake
        return fake.json(
            {
                "items": [
                    {
                        "id": cid,
                        "slug": slug,
                        "name": slug,
                        "vcpu": vcpu,
                        "ramGb": ram,
                        "dedicated": "premium" in slug,
                        "cpuFamilies": ["AMD_ZEN3"],
                        "preset": "general",
                        "tags": [],
                        "description": f"{vcpu} vCPU, {ram} GB",
                    }
                    for cid, slug, vcpu, ram in _CONFIGS
                ]
            }
        )

    def vm_view(self, vm: dict[str, Any]) -> dict[str, Any]:
        fake = self.fake
        if vm["status"] in ("new", "launching") and fake.booted(vm["id"]):
            vm["status"] = "launched"
        elif vm["status"] == "new":
            vm["status"] = "launching"
        view = {k: copy.deepcopy(v) for k, v in vm.items() if not k.startswith("_")}
        view["allowedActions"] = ["restart", "softReboot", "terminate"] if vm["status"] == "launched" else []
        if vm["status"] == "terminating":
            vm["status"] = "terminated"
        return view

    def list_vms(self, request: Request) -> Response:
        fake = self.fake
        page = max(int(request.args.get("page", 1)), 1)
        per_page = max(int(request.args.get("perPage", 20)), 1)
        views = [self.vm_view(vm) for vm in fake.vms.values()]
        pages = max((len(views) + per_page - 1) // per_page, 1)
        items = views[(page - 1) * per_page : page * per_page]
        return fake.json(
            {
                "items": items,
                "pagination": {
                    "totalRecords": len(views),
                    "filteredRecords": len(views),
                    "totalPages": pages,
                    "currentPage": page,
                    "perPage": per_page,
                },
            }
        )

    def create_vm(self, request: Request) -> Response:
        fake = self.fake
        req = fake.body(request)
        config = next((c for c in _CONFIGS if c[0] == req.get("configurationId")), None)
        if req.get("clusterId") != CLUSTER["id"] or config is None:
            return fake.error_reply("bad_request", message="Unknown cluster or configuration")
        user_data = ((req.get("cloudInit") or {}).get("userData") or "").encode()
        if len(user_data) > 16 * 1024:
            return fake.error_reply("bad_request", message="cloudInit.userData exceeds 16 KiB")
        granted, _ = fake.faults.grant_capacity(1, "v2_create_vm")
        if granted == 0:
            return fake.error_reply("capacity")
        vm_id = str(uuid.uuid4())
        vm = {
            "id": vm_id,
            "userId": USER_ID,
            "clusterId": CLUSTER["id"],
            "configurationId": config[0],
            "configurationSlug": config[1],
            "configurationName": config[1],
            "name": req.get("name", ""),
            "status": "new",
            "restartRequired": False,
            "allowedActions": [],
            "bootDisk": str(uuid.uuid4()),
            "dataDisks": [],
            "subnets": [],
            "sshKeys": list(req.get("sshKeys", [])),
            "networkInterfaces": [],
            "cloudInit": {} if user_data else None,
            "priceHourlyUsd": "0.05",
            "vcpu": config[2],
            "ramGb": config[3],
            "createdAt": now_text(),
            "updatedAt": now_text(),
            "_user_data": user_data,
        }
        fake.vms[vm_id] = vm
        fake.record_bought(Bought(vm_id, boot=user_data.decode(errors="replace")))
        fake.record_launch([vm_id])
        return fake.json({k: copy.deepcopy(v) for k, v in vm.items() if not k.startswith("_")})

    def terminate_vm(self, request: Request, vm_id: str) -> Response:
        fake = self.fake
        vm = fake.vms.get(vm_id)
        if vm is None:
            return fake.error_reply("not_found", message=f"VM {vm_id} not found")
        if vm["status"] in ("terminating", "terminated"):
            return fake.error_reply("bad_request", message="VM is already terminated")
        vm["status"], vm["updatedAt"], vm["_user_data"] = "terminating", now_text(), b""
        fake._births.pop(vm_id, None)
        view = {k: copy.deepcopy(v) for k, v in vm.items() if not k.startswith("_")}
        return fake.json(view)


__all__ = ["CLUSTER", "USER_ID", "VmRoutes", "now_text"]
