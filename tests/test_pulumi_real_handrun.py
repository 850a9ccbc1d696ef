"""docs/stacks.md's hand-run, exactly as printed, by the real Pulumi CLI on each neocloud's fake.

``cd stacks && pulumi login --local && pulumi stack init dev && pulumi config set provisioner:spec
../examples/SPEC && pulumi up`` (``--yes``: no terminal here), then ``pulumi stack output``, a
``pulumi preview --expect-no-changes``, ``pulumi destroy``. The project is a copy of ``stacks/``'s
two files in the test's tmp dir (the program writes the cluster secrets under ``.provisioner/``
beside it). One step differs: ``pulumi login --local`` is ``file://~``, which the CLI resolves to
the home directory of the user database entry (Go's ``user.Current``), not ``$HOME``, so a test
cannot keep it in a tmp dir; the test logs in to ``file://<tmp>/backend``, the same file backend
in another folder. The spec
is planned by the program from the refreshed-catalog cache (``PROVISIONER_CACHE_DIR``), which holds
the fake's own offers, as ``provisioner catalog refresh`` would write it.

One node without a control plane: a plan the SSH pass does not serve (``ssh_pass_nodes``), since the
pass would SSH to the fakes' documentation addresses. Fluence bootstraps every node over SSH, so
its hand-run against this plain fake stops at the SSH pass (no machine answers on a documentation
address): the test pins that ``up`` fails there naming the node (the nodes bought), and that
``destroy`` still leaves no instance. Where the machine running ``pulumi up`` reaches the node,
Fluence's hand-run works: tests/boot/test_boot_pulumi_local.py runs it on a booted VM.

The canary (issue 25 item 3): after ``up``, ``pulumi stack export``, every file of the backend and
the stack's config file hold none of the fake's API key, the SSH private key, the munge key or the
k3s token, as written or in base64 (test-side decoding of every base64 run, gzip included), while
the stack does hold them as Pulumi secrets where the program takes them (``provisioner:secrets``).
"""

from __future__ import annotations

import base64
import gzip
import json
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from provisioner.catalog import Catalog, dump_catalog, load_bundled_catalog
from provisioner.testing.fakes.serving import serve
from tests.providers.contract import load_harness
from tests.pulumi_real import STACKS, PulumiEngine, pulumi_engine
from tests.test_secrets_over_ssh import decoded

HANDRUN = ("lambda", "runpod", "vastai")
"""The neoclouds whose one-node plan needs no SSH pass (Fluence: see the module docstring)."""


@dataclass
class HandRun:
    engine: PulumiEngine
    name: str
    harness: object
    stacks: Path
    home: Path

    @property
    def backend(self) -> Path:
        return self.home / "backend"

    @property
    def backend_url(self) -> str:
        return f"file://{self.backend}"

    def pulumi(self, *args: str, check: bool = True, stdin: str | None = None) -> object:
        return self.engine.run(*args, cwd=self.stacks, check=check, stdin=stdin)


def _catalog(name: str, url: str, harness: object) -> Catalog:
    adapter = harness.make_provider(  # type: ignore[attr-defined]
        api_key=harness.api_key,  # type: ignore[attr-defined]
        base_url=url,
        limits=harness.scaled_limits,  # type: ignore[attr-defined]
        timeout_s=harness.timeout_s,  # type: ignore[attr-defined]
    )
    offers = adapter.list_offers(harness.offer_query)  # type: ignore[attr-defined]
    bundled = load_bundled_catalog()
    return Catalog(as_of=bundled.as_of, origin="fake", providers=bundled.providers, offers=list(offers))


def _spec(name: str, catalog: Catalog) -> str:
    first = catalog.offers[0]
    return (
        f"name: hand-{name[:4]}\n"
        f"gpus: {{model: [{first.gpu_model}], count: {first.gpus}}}\n"
        "nodes: {count: 1}\ncontrol_plane: none\n"
        f"providers: {{allow: [{name}]}}\npricing: {{mode: on_demand}}\nworkload: {{hours: 1}}\n"
    )


@pytest.fixture
def handrun(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[HandRun]:
    name = request.param
    engine = pulumi_engine(tmp_path)
    harness = load_harness(name)
    work, home = tmp_path / "work", tmp_path / "home"
    (work / "stacks").mkdir(parents=True)
    (work / "examples").mkdir()
    (home / "backend").mkdir(parents=True)
    for file in ("Pulumi.yaml", "__main__.py"):
        shutil.copy(STACKS / file, work / "stacks" / file)
    with serve(harness.app) as server:
        catalog = _catalog(name, server.url, harness)
        (tmp_path / "cache").mkdir()
        (tmp_path / "cache" / "catalog.json").write_text(dump_catalog(catalog))
        (work / "examples" / f"hand-{name}.yaml").write_text(_spec(name, catalog))
        prefix = f"PROVISIONER_{name.upper()}"
        env = engine.env
        env.pop("PULUMI_BACKEND_URL")  # `pulumi login` chooses the backend, as for a user
        env.update(
            {
                "HOME": str(home),
                "PULUMI_HOME": str(home / ".pulumi"),
                f"{prefix}_API_URL": server.url,
                f"{prefix}_API_KEY": harness.api_key,
                "PROVISIONER_CACHE_DIR": str(tmp_path / "cache"),
                "PROVISIONER_STATE_DIR": str(tmp_path / "state"),
                "PROVISIONER_OWNER": "handrun-test",
                **dict(harness.env),
            }
        )
        run = HandRun(engine, name, harness, work / "stacks", home)
        try:
            yield run
        finally:
            if harness.instances():
                run.pulumi("destroy", "--yes", "--skip-preview", check=False)
    assert harness.app.validation_errors == []


def _b64_forms(secret: str) -> list[str]:
    """``secret`` base64-encoded at each of the three byte offsets it can sit at in a larger blob,
    less the edge characters its neighbours change."""
    forms = []
    for shift in range(3):
        encoded = base64.b64encode(b"\0" * shift + secret.encode()).decode()
        forms.append(encoded[4 : len(encoded) - 4])
    return [form for form in forms if len(form) >= 12]


def _secrets_kept(run: HandRun) -> dict[str, str]:
    """What the program kept in its 0600 secrets file (the docs' default for a spec)."""
    path = run.stacks / ".provisioner" / "dev" / ".cluster-secrets.json"
    assert path.stat().st_mode & 0o777 == 0o600
    data = json.loads(path.read_text())
    return {key: data[key] for key in ("ssh_private_key", "munge_key_b64", "k3s_token")}


def _needles(api_key: str, secrets: dict[str, str]) -> dict[str, str]:
    needles = {"api key": api_key}
    for key, value in secrets.items():
        lines = [line for line in value.splitlines() if len(line) >= 16 and "PRIVATE KEY" not in line]
        for i, line in enumerate(lines or [value]):
            needles[f"{key}[{i}]"] = line
    return needles


def in_the_clear(texts: dict[str, str], needles: dict[str, str]) -> list[str]:
    """Where each needle shows in ``texts`` as written, inside any base64 run (decoded, gunzipped,
    JSON strings unpacked) or base64-encoded at any alignment: ``"<what> in <where>"``."""
    found = []
    for where, text in texts.items():
        plain = "\n".join(decoded(text))
        for what, needle in needles.items():
            if needle in plain or any(form in text for form in _b64_forms(needle)):
                found.append(f"{what} in {where}")
    return found


def _assert_nothing_in_the_clear(run: HandRun, secrets: dict[str, str]) -> None:
    texts = {"pulumi stack export": run.pulumi("stack", "export").stdout}  # type: ignore[attr-defined]
    for path in sorted(run.backend.rglob("*")) + sorted(run.stacks.glob("Pulumi.*.yaml")):
        if path.is_file():
            texts[str(path)] = path.read_text(errors="replace")
    assert any(where.endswith("dev.json") for where in texts), "no state file found in the backend"
    assert in_the_clear(texts, _needles(run.harness.api_key, secrets)) == []  # type: ignore[attr-defined]


def test_the_search_finds_a_secret_the_way_state_could_hold_it() -> None:
    key = "rp-" + "k3y" * 10
    private = "-----BEGIN OPENSSH PRIVATE KEY-----\n" + "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ\n-----END"
    needles = _needles(key, {"ssh_private_key": private})
    packed = base64.b64encode(gzip.compress(json.dumps({"env": {"KEY": key}}).encode())).decode()
    texts = {
        "plain": f'{{"inputs": {{"api": "{key}"}}}}',
        "pickled": json.dumps({"__provider": base64.b64encode(b"\x80\x04dill" + key.encode() + b"\x94").decode()}),
        "gzipped": json.dumps({"user_data": packed}),
        "line": json.dumps({"key": private}),
        "clean": json.dumps({"ciphertext": "v1:" + base64.b64encode(b"x" * 40).decode()}),
    }
    assert in_the_clear(texts, needles) == [
        "api key in plain",
        "api key in pickled",
        "api key in gzipped",
        "ssh_private_key[0] in line",
    ]


def _docs_sequence(run: HandRun) -> None:
    """The commands docs/stacks.md prints, in order (``--yes``: no terminal to confirm in)."""
    run.pulumi("login", run.backend_url)  # for --local: see the module docstring
    run.pulumi("stack", "init", "dev")
    run.pulumi("config", "set", "provisioner:spec", f"../examples/hand-{run.name}.yaml")
    run.pulumi("up", "--yes")


@pytest.mark.parametrize("handrun", HANDRUN, indirect=True)
def test_the_documented_hand_run_builds_and_destroys(handrun: HandRun) -> None:
    run = handrun
    _docs_sequence(run)
    assert (run.backend / ".pulumi" / "stacks" / "provisioner" / "dev.json").is_file()
    outputs = json.loads(run.pulumi("stack", "output", "--json").stdout)  # type: ignore[attr-defined]
    assert outputs["provider"] == run.name
    assert [node["name"] for node in outputs["nodes"]] == [f"hand-{run.name[:4]}-0"]
    assert outputs["ssh_command"].endswith(outputs["head_address"])
    assert run.harness.instances() == 1  # type: ignore[attr-defined]
    _assert_nothing_in_the_clear(run, _secrets_kept(run))
    # A second look changes nothing: the engine's diff of every resource is empty.
    run.pulumi("preview", "--expect-no-changes")
    # The engine reads every resource back through its provider (the dynamic provider's read): the
    # fake's answer matches what the state holds.
    run.pulumi("refresh", "--yes", "--expect-no-changes")
    run.pulumi("destroy", "--yes")
    assert run.harness.instances() == 0  # type: ignore[attr-defined]
    state = json.loads(run.pulumi("stack", "export").stdout)  # type: ignore[attr-defined]
    assert state["deployment"].get("resources") in (None, [])
    run.pulumi("stack", "rm", "--yes", "dev")


@pytest.mark.parametrize("handrun", ["runpod"], indirect=True)
def test_secrets_given_as_secret_config_stay_encrypted(handrun: HandRun) -> None:
    # The docs' other way to give the cluster secrets: `pulumi config set --secret
    # provisioner:secrets < plan.secrets.json`, from stdin. Made here by a first run, then fed back.
    run = handrun
    _docs_sequence(run)
    kept = run.stacks / ".provisioner" / "dev" / ".cluster-secrets.json"
    secrets = _secrets_kept(run)
    run.pulumi("config", "set", "--secret", "provisioner:secrets", stdin=kept.read_text())
    kept.unlink()
    run.pulumi("up", "--yes", "--skip-preview")
    assert not kept.exists()  # the secret config was used, not a new file
    config = (run.stacks / "Pulumi.dev.yaml").read_text()
    assert "secure:" in config
    _assert_nothing_in_the_clear(run, secrets)
    state = json.loads(run.pulumi("stack", "export").stdout)  # type: ignore[attr-defined]
    ciphertexts = [
        value
        for resource in state["deployment"]["resources"]
        for value in resource.get("inputs", {}).values()
        if isinstance(value, dict) and "ciphertext" in value
    ]
    assert ciphertexts, "no input of any resource is a Pulumi secret"
    shown = run.pulumi("stack", "export", "--show-secrets").stdout  # type: ignore[attr-defined]
    assert "ssh-ed25519" in shown or "ssh-rsa" in shown  # decrypts with the passphrase
    run.pulumi("destroy", "--yes", "--skip-preview")
    assert run.harness.instances() == 0  # type: ignore[attr-defined]


@pytest.mark.parametrize("handrun", ["fluence"], indirect=True)
def test_fluence_hand_run_stops_at_the_ssh_pass_and_destroys_clean(handrun: HandRun) -> None:
    run = handrun
    run.pulumi("login", run.backend_url)
    run.pulumi("stack", "init", "dev")
    run.pulumi("config", "set", "provisioner:spec", "../examples/hand-fluence.yaml")
    done = run.pulumi("up", "--yes", check=False)
    assert done.returncode != 0  # type: ignore[attr-defined]
    # The nodes were bought; the SSH pass (ClusterTopology) refuses the fake's TEST-NET address.
    assert "ClusterTopology hand-flue: node(s) hand-flue-0" in done.stdout  # type: ignore[attr-defined]
    assert run.harness.instances() == 1  # type: ignore[attr-defined]
    # The failed step's inputs held every cluster secret (a Pulumi secret): none left in the clear.
    _assert_nothing_in_the_clear(run, _secrets_kept(run))
    run.pulumi("destroy", "--yes", "--skip-preview")
    assert run.harness.instances() == 0  # type: ignore[attr-defined]
