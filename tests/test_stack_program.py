"""The Pulumi program (stacks/program.py) under the mock runtime, driven by stack config.

Config is what ``pulumi config set`` writes (``provisioner:plan``, ``provisioner:spec``,
secret ``provisioner:secrets``, ...); the program plans, renders with the cluster's kept or
passed-in secrets and registers one GpuCluster. Also: the project file the engine reads.
"""

from __future__ import annotations

import base64
import gzip
import json
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pulumi
import pytest
import yaml
from pulumi.runtime.config import set_all_config

from provisioner.errors import StackError
from provisioner.plan import save_plan
from provisioner.secrets import ClusterSecrets, load_secrets, save_secrets
from provisioner.stacks import program
from provisioner.workflow import plan_from_source
from tests.test_stack_cluster import Recorder, example, is_secret, plan_on

STACKS = Path(__file__).resolve().parents[1] / "stacks"
EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


@pytest.fixture(autouse=True)
def _clean_config() -> Iterator[None]:
    yield
    set_all_config({}, [])


def _run(config: dict[str, str], secret_keys: tuple[str, ...] = ()) -> tuple[Recorder, dict[str, Any]]:
    recorder = Recorder()
    pulumi.runtime.set_mocks(recorder, project="gpu-cluster", stack="test", preview=False)
    set_all_config({f"provisioner:{k}": v for k, v in config.items()}, [f"provisioner:{k}" for k in secret_keys])
    outputs: dict[str, Any] = {}

    @pulumi.runtime.test
    def run() -> pulumi.Output[Any]:
        cluster = program.build()
        names = ("head_address", "ssh_command", "nodes", "hourly_usd", "expires_at")
        return pulumi.Output.all(*[getattr(cluster, n) for n in names]).apply(
            lambda values: outputs.update(zip(names, values, strict=True))
        )

    run()
    return recorder, outputs


def _user_data(recorder: Recorder) -> dict[str, str]:
    out = {}
    for instance in recorder.of("aws:ec2/instance:Instance"):
        packed = instance.inputs["userDataBase64"]
        assert is_secret(packed)
        out[instance.name] = gzip.decompress(base64.b64decode(packed["value"])).decode()
    return out


def _step_secrets(recorder: Recorder) -> dict[str, Any]:
    """The secrets the ClusterTopology step (the SSH pass) was handed: a Pulumi secret."""
    (step,) = recorder.of("pulumi-python:dynamic/provisioner:ClusterTopology")
    assert is_secret(step.inputs["secrets"])
    return dict(step.inputs["secrets"]["value"])


def test_a_saved_plan_keeps_its_secrets_beside_it(tmp_path: Path) -> None:
    plan = plan_on(example("pretrain-h100-slurm.yaml"), "aws")
    path = tmp_path / "plan.json"
    save_plan(plan, path)
    recorder, outputs = _run({"plan": str(path), "owner": "bob", "expiresAt": "2026-12-01T00:00:00Z"})
    kept = tmp_path / "plan.secrets.json"
    assert stat.S_IMODE(kept.stat().st_mode) == 0o600
    secrets = load_secrets(kept)
    first = _user_data(recorder)
    assert sorted(first) == [n.name for n in plan.nodes]
    assert secrets.munge_key_b64.get_secret_value() not in "".join(first.values())  # user data holds no secret
    assert _step_secrets(recorder)["munge_key_b64"] == secrets.munge_key_b64.get_secret_value()  # the SSH pass's
    assert outputs["hourly_usd"] == str(plan.option.hourly_usd) and outputs["expires_at"] == "2026-12-01T00:00:00Z"
    assert outputs["ssh_command"].startswith("ssh ubuntu@198.51.100.")
    tags = recorder.of("aws:ec2/vpc:Vpc")[0].inputs["tags"]
    assert (tags["provisioner-owner"], tags["provisioner-expires"]) == ("bob", "2026-12-01T00:00:00Z")
    (key,) = recorder.of("aws:ec2/keyPair:KeyPair")
    assert key.inputs["publicKey"] == secrets.ssh_public_key
    again, _ = _run({"plan": str(path), "owner": "bob", "expiresAt": "2026-12-01T00:00:00Z"})
    assert _user_data(again) == first  # same secrets, same bootstrap: nodes join one cluster


def test_a_spec_is_planned_like_the_cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    source = EXAMPLES / "pretrain-h100-slurm.yaml"
    expected = plan_from_source(source, catalog_path=None)
    recorder, outputs = _run({"spec": str(source)})
    assert (tmp_path / ".provisioner" / "test" / ".cluster-secrets.json").is_file()
    assert [n["name"] for n in outputs["nodes"]] == [n.name for n in expected.nodes]
    assert outputs["hourly_usd"] == str(expected.option.hourly_usd)
    assert outputs["expires_at"].endswith("Z")  # now + the spec's TTL
    types = {r.typ for r in recorder.resources}
    assert "provisioner:index:GpuCluster" in types


def test_secrets_passed_as_secret_config_are_used_and_not_written(tmp_path: Path) -> None:
    plan = plan_on(example("pretrain-h100-slurm.yaml"), "aws")
    path = tmp_path / "plan.json"
    save_plan(plan, path)
    given = ClusterSecrets.generate("from-config")
    blob = json.dumps(
        {
            "munge_key_b64": given.munge_key_b64.get_secret_value(),
            "k3s_token": given.k3s_token.get_secret_value(),
            "ssh_private_key": given.ssh_private_key.get_secret_value() if given.ssh_private_key else None,
            "ssh_public_key": given.ssh_public_key,
        }
    )
    recorder, outputs = _run({"plan": str(path), "secrets": blob}, secret_keys=("secrets",))
    assert not (tmp_path / "plan.secrets.json").exists()
    user_data = _user_data(recorder)
    assert given.munge_key_b64.get_secret_value() not in "".join(user_data.values())
    assert _step_secrets(recorder)["munge_key_b64"] == given.munge_key_b64.get_secret_value()
    (key,) = recorder.of("aws:ec2/keyPair:KeyPair")
    assert key.inputs["publicKey"] == given.ssh_public_key  # unsecreted: a public key
    assert given.munge_key_b64.get_secret_value() not in json.dumps(outputs)


def test_the_secrets_file_piped_into_secret_config_is_used(tmp_path: Path) -> None:
    # docs/stacks.md: `pulumi config set --secret provisioner:secrets < plan.secrets.json`, the file
    # as save_secrets writes it, its "version" field included (the real engine found it refused:
    # tests/test_pulumi_real_handrun.py).
    plan = plan_on(example("pretrain-h100-slurm.yaml"), "aws")
    path = tmp_path / "plan.json"
    save_plan(plan, path)
    kept = tmp_path / "kept.secrets.json"
    given = ClusterSecrets.generate("piped")
    save_secrets(kept, given)
    recorder, _ = _run({"plan": str(path), "secrets": kept.read_text()}, secret_keys=("secrets",))
    assert _step_secrets(recorder)["k3s_token"] == given.k3s_token.get_secret_value()


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({}, "exactly one of provisioner:spec"),
        ({"spec": "a.yaml", "plan": "b.json"}, "exactly one of provisioner:spec"),
        ({"plan": "missing.json"}, "cannot read plan"),
        ({"spec": str(EXAMPLES / "pretrain-h100-slurm.yaml"), "expiresAt": "next tuesday"}, "not an ISO 8601"),
    ],
)
def test_config_mistakes_are_one_line_errors(
    config: dict[str, str], message: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    pulumi.runtime.set_mocks(Recorder(), project="gpu-cluster", stack="test", preview=False)
    set_all_config({f"provisioner:{k}": v for k, v in config.items()})
    with pytest.raises(pulumi.RunError, match=message) as raised:
        program.main()
    assert "\n" not in str(raised.value) and raised.value.__cause__ is None
    with pytest.raises(StackError if "exactly" in message or "ISO" in message else Exception):
        program.build()


def test_the_project_file_names_a_python_program_in_stacks() -> None:
    project = yaml.safe_load((STACKS / "Pulumi.yaml").read_text(encoding="utf-8"))
    assert project["runtime"]["name"] == "python" and "main" not in project  # the folder's __main__.py
    assert "provisioner.stacks.program import main" in (STACKS / "__main__.py").read_text(encoding="utf-8")
    # The project name is the config namespace the program reads (provisioner:spec, provisioner:plan).
    assert project["name"] == "provisioner" and set(project["config"]) == {"spec", "plan"}


def test_a_named_secrets_file_is_used_as_provisioner_up_passes_it(tmp_path: Path) -> None:
    plan = plan_on(example("lora-a100-k8s.yaml"), "lambda")
    path = tmp_path / "plan.json"
    save_plan(plan, path)
    kept = tmp_path / "state" / "lora-finetune.secrets.json"
    recorder, _ = _run({"plan": str(path), "secretsFile": str(kept)})
    assert stat.S_IMODE(kept.stat().st_mode) == 0o600 and not (tmp_path / "plan.secrets.json").exists()
    (nodes,) = recorder.of("pulumi-python:dynamic/provisioner:NeocloudNodes")
    token = load_secrets(kept).k3s_token.get_secret_value()
    assert is_secret(nodes.inputs["user_data"]) and token not in json.dumps(nodes.inputs["user_data"])
    assert _step_secrets(recorder)["k3s_token"] == token  # a neocloud stack's nodes get it over the SSH pass too
    kept.chmod(0o644)  # readable by others: refused with one line, nothing registered
    pulumi.runtime.set_mocks(Recorder(), project="gpu-cluster", stack="test", preview=False)
    set_all_config({"provisioner:plan": str(path), "provisioner:secretsFile": str(kept)})
    with pytest.raises(pulumi.RunError, match="chmod 600"):
        program.main()
