"""NCCL settings for each inter-node fabric, derived from the chosen offer.

``nccl_env(offer)`` is pure: the same offer always yields the same ordered mapping.
Both the Slurm/cloud-init renderers and the Kubernetes renderer put it into the
environment of every training process, so a node is configured one way whichever
control plane runs it.

Which settings apply is decided by ``fabric_profile(offer)``:

* ``efa``        AWS Elastic Fabric Adapter through libfabric and the aws-ofi-nccl plugin.
* ``tcpxo``      GCP a3-megagpu (GPUDirect-TCPXO, the "FasTrak" NCCL net plugin).
* ``tcpx``       GCP a3-highgpu (GPUDirect-TCPX).
* ``gib``        GCP a3-ultragpu / a4 RDMA through Google's gIB NCCL plugin.
* ``infiniband`` Mellanox/NVIDIA IB HCAs (verbs).
* ``roce``       RDMA over converged Ethernet (verbs with a RoCE v2 GID).
* ``tcp``        plain sockets; IB explicitly disabled so NCCL does not probe for it.
"""

from __future__ import annotations

from provisioner.offer import Offer
from provisioner.providers.registry import facts
from provisioner.spec import Fabric

# Interfaces NCCL must not use for its bootstrap/socket traffic.
_EXCLUDE_IFACES = "^lo,docker0"

_TCPXO_NICS = "enp6s0,enp7s0,enp13s0,enp14s0,enp134s0,enp135s0,enp141s0,enp142s0"
_TCPX_NICS = "eth1,eth2,eth3,eth4"


def fabric_profile(offer: Offer) -> str:
    """Name the NCCL transport this offer uses (see the module docstring for the list)."""
    itype = offer.instance_type.lower()
    declared = facts().get(offer.provider)  # the provider's NIC layouts (its FACTS.nccl_profiles)
    for prefix, profile in declared.nccl_profiles if declared else ():
        if itype.startswith(prefix):
            return profile
    if offer.fabric is Fabric.EFA:
        return "efa"
    if offer.fabric is Fabric.INFINIBAND:
        return "infiniband"
    if offer.fabric is Fabric.ROCE:
        return "roce"
    return "tcp"


def _socket_ifname(offer: Offer) -> str:
    declared = facts().get(offer.provider)  # a documented data-plane interface (its FACTS.nccl_ifname)
    return (declared.nccl_ifname if declared else None) or _EXCLUDE_IFACES


def _efa(offer: Offer) -> dict[str, str]:
    return {
        "FI_PROVIDER": "efa",
        "FI_EFA_USE_DEVICE_RDMA": "1",  # GPUDirect RDMA on p4d/p5 and later
        "FI_EFA_FORK_SAFE": "1",  # dataloader workers fork after libfabric init
        "NCCL_NET_PLUGIN": "ofi",  # loads libnccl-net-ofi.so from aws-ofi-nccl
        "NCCL_TUNER_PLUGIN": "ofi",
        "NCCL_SOCKET_IFNAME": _EXCLUDE_IFACES,
        "LD_LIBRARY_PATH": "/opt/amazon/ofi-nccl/lib:/opt/amazon/efa/lib${LD_LIBRARY_PATH:+:${LD_LIBRARY_PATH}}",
    }


def _tcpxo(offer: Offer) -> dict[str, str]:
    return {
        "NCCL_FASTRAK_CTRL_DEV": "enp0s12",
        "NCCL_FASTRAK_IFNAME": _TCPXO_NICS,
        "NCCL_SOCKET_IFNAME": "enp0s12",
        "NCCL_FASTRAK_NUM_FLOWS": "2",
        "NCCL_FASTRAK_USE_SNAP": "1",
        "NCCL_FASTRAK_USE_LLCM": "1",
        "NCCL_FASTRAK_LLCM_DEVICE_DIRECTORY": "/dev/aperture_devices",
        "NCCL_FASTRAK_ENABLE_CONTROL_CHANNEL": "0",
        "NCCL_FASTRAK_ENABLE_HOTPATH_LOGGING": "0",
        "NCCL_FASTRAK_PLUGIN_ACCEPT_TIMEOUT_MS": "600000",
        "NCCL_CROSS_NIC": "0",
        "NCCL_ALGO": "Ring,Tree",
        "NCCL_PROTO": "Simple,LL128",
        "NCCL_MIN_NCHANNELS": "4",
        "NCCL_DYNAMIC_CHUNK_SIZE": "524288",
        "NCCL_P2P_NET_CHUNKSIZE": "524288",
        "NCCL_P2P_PCI_CHUNKSIZE": "524288",
        "NCCL_P2P_NVL_CHUNKSIZE": "1048576",
        "NCCL_BUFFSIZE": "8388608",
        "NCCL_NET_GDR_LEVEL": "PIX",
        "NCCL_TUNER_PLUGIN": "libnccl-tuner.so",
        "NCCL_TUNER_CONFIG_PATH": "/var/lib/tcpxo/lib64/a3plus_tuner_config.textproto",
        "NCCL_SHIMNET_GUEST_CONFIG_CHECKER_CONFIG_FILE": "/var/lib/tcpxo/lib64/a3plus_guest_config.textproto",
        "LD_LIBRARY_PATH": "/var/lib/tcpxo/lib64${LD_LIBRARY_PATH:+:${LD_LIBRARY_PATH}}",
    }


def _tcpx(offer: Offer) -> dict[str, str]:
    return {
        "NCCL_GPUDIRECTTCPX_CTRL_DEV": "eth0",
        "NCCL_GPUDIRECTTCPX_SOCKET_IFNAME": _TCPX_NICS,
        "NCCL_GPUDIRECTTCPX_TX_BINDINGS": ("eth1:8-21,112-125;eth2:8-21,112-125;eth3:60-73,164-177;eth4:60-73,164-177"),
        "NCCL_GPUDIRECTTCPX_RX_BINDINGS": (
            "eth1:22-35,126-139;eth2:22-35,126-139;eth3:74-87,178-191;eth4:74-87,178-191"
        ),
        "NCCL_GPUDIRECTTCPX_PROGRAM_FLOW_STEERING_WAIT_MICROS": "50000",
        "NCCL_GPUDIRECTTCPX_UNIX_CLIENT_PREFIX": "/run/tcpx",
        "NCCL_SOCKET_IFNAME": "eth0",
        "NCCL_CROSS_NIC": "0",
        "NCCL_ALGO": "Ring",
        "NCCL_PROTO": "Simple",
        "NCCL_NSOCKS_PERTHREAD": "4",
        "NCCL_SOCKET_NTHREADS": "1",
        "NCCL_DYNAMIC_CHUNK_SIZE": "524288",
        "NCCL_P2P_NET_CHUNKSIZE": "524288",
        "NCCL_P2P_PCI_CHUNKSIZE": "524288",
        "NCCL_P2P_NVL_CHUNKSIZE": "1048576",
        "NCCL_BUFFSIZE": "4194304",
        "NCCL_NET_GDR_LEVEL": "PIX",
        "NCCL_MAX_NCHANNELS": "12",
        "NCCL_MIN_NCHANNELS": "12",
        "LD_LIBRARY_PATH": "/var/lib/tcpx/lib64${LD_LIBRARY_PATH:+:${LD_LIBRARY_PATH}}",
    }


def _gib(offer: Offer) -> dict[str, str]:
    tuner = "tuner_config_a4.txtpb" if offer.instance_type.startswith("a4") else "tuner_config_a3u.txtpb"
    return {
        "NCCL_NET": "gIB",
        "NCCL_SOCKET_IFNAME": "enp0s19,enp192s20",
        "NCCL_CROSS_NIC": "0",
        "NCCL_NET_GDR_LEVEL": "PIX",
        "NCCL_P2P_NET_CHUNKSIZE": "131072",
        "NCCL_NVLS_CHUNKSIZE": "524288",
        "NCCL_IB_ADAPTIVE_ROUTING": "1",
        "NCCL_IB_QPS_PER_CONNECTION": "4",
        "NCCL_IB_TC": "52",
        "NCCL_IB_FIFO_TC": "84",
        "NCCL_TUNER_CONFIG_PATH": f"/usr/local/gib/configs/{tuner}",
        "LD_LIBRARY_PATH": "/usr/local/gib/lib64${LD_LIBRARY_PATH:+:${LD_LIBRARY_PATH}}",
    }


def _infiniband(offer: Offer) -> dict[str, str]:
    return {
        "NCCL_IB_HCA": "mlx5",
        "NCCL_IB_DISABLE": "0",
        "NCCL_NET_GDR_LEVEL": "PIX",
        "NCCL_IB_QPS_PER_CONNECTION": "2",
        "NCCL_SOCKET_IFNAME": _socket_ifname(offer),
    }


def _roce(offer: Offer) -> dict[str, str]:
    return {
        "NCCL_IB_HCA": "mlx5",
        "NCCL_IB_DISABLE": "0",
        "NCCL_IB_GID_INDEX": "3",  # RoCE v2 over IPv4 on Mellanox defaults
        "NCCL_IB_TC": "106",
        "NCCL_NET_GDR_LEVEL": "PIX",
        "NCCL_SOCKET_IFNAME": _socket_ifname(offer),
    }


def _tcp(offer: Offer) -> dict[str, str]:
    return {
        "NCCL_IB_DISABLE": "1",
        "NCCL_SOCKET_IFNAME": _socket_ifname(offer),
        # More sockets and threads per peer recover much of a fast NIC's bandwidth over TCP.
        "NCCL_NSOCKS_PERTHREAD": "4",
        "NCCL_SOCKET_NTHREADS": "2",
    }


_PROFILES = {
    "efa": _efa,
    "tcpxo": _tcpxo,
    "tcpx": _tcpx,
    "gib": _gib,
    "infiniband": _infiniband,
    "roce": _roce,
    "tcp": _tcp,
}


def nccl_env(offer: Offer) -> dict[str, str]:
    """NCCL/libfabric environment for processes on a node of ``offer``.

    Pure and deterministic; keys are returned sorted. ``LD_LIBRARY_PATH`` (where
    present) ends in a literal ``${LD_LIBRARY_PATH:+:${LD_LIBRARY_PATH}}`` for shell
    expansion: consumers that write a non-shell environment should drop that suffix
    (``value.split("$")[0]``) or expand it themselves.
    ``NCCL_DEBUG=WARN`` is always set so fabric fallbacks are visible in job logs.
    """
    env = _PROFILES[fabric_profile(offer)](offer)
    env["NCCL_DEBUG"] = "WARN"
    return dict(sorted(env.items()))


__all__ = ["fabric_profile", "nccl_env"]
