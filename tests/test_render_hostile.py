"""Hostile strings never add a directive, key or command to a rendered file, whatever their source.

Two layers are attacked. (1) Plans: offer, option, spec and topology strings set without
validation (``model_construct`` / ``model_copy``, as a hand-edited plan.json or a lying provider
would carry them) must be refused with one located line before anything renders. (2) The
templates themselves: a ``ClusterView`` holding the hostile value (bypassing that guard) is
rendered into every target; each target either refuses (a one-line ProvisionerError) or comes out
with exactly the structure of the benign render: the same YAML keys, files and commands; the
same slurm.conf/topology.conf keys; bash syntax intact and no command substitution live where a
hostile value landed (a small bash lexer, itself tested, marks where ``$(`` and backquotes run).
Rendered files are written without following symlinks already in the output folder.
"""

from __future__ import annotations

import base64
import dataclasses
import functools
import os
import re
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from provisioner.errors import PlanError, ProvisionerError, SpecError
from provisioner.render import RenderedCluster, render_cluster, write_rendered
from provisioner.render.bootstrap import render_bootstrap_script
from provisioner.render.cloudinit import render_cloudinit
from provisioner.render.launch import render_launch
from provisioner.render.slurm import render_slurm
from provisioner.render.views import ClusterView, NodeView, SwitchView, cluster_view
from tests.test_render_slurm import CANARY, make_plan

PAYLOAD = "touch /tmp/PWNED"
HOSTILE = [
    "x\nruncmd: [reboot]",
    f"a$({PAYLOAD})b",
    f"a`{PAYLOAD}`b",
    "{{ 7*7 }}",
    "a%hb=c",
    "x\nPrologSlurmctld=/tmp/evil",
    f"x'; {PAYLOAD}; '",
    f'x"; {PAYLOAD}; "',
    "a b#c,d[1-2]",
    "x\n[Service]\nExecStartPre=/tmp/evil",
]
IDS = [
    "newline-yaml",
    "dollar-paren",
    "backquote",
    "jinja",
    "percent-equals",
    "slurm-directive",
    "squote",
    "dquote",
    "spaces-hash-hostlist",
    "unit-section",
]


# ----- a small bash lexer: where would bash run a command substitution? -------------------------
_WORD_BREAK = set(" \t\n;&|()<>")
_HEREDOC = re.compile(r"<<-?[ \t]*(['\"]?)([A-Za-z_][A-Za-z0-9_]*)\1")


def live_substitutions(script: str) -> set[int]:
    """Indexes of every ``$(`` and backquote bash would expand: outside single quotes, comments,
    ``$'...'`` and quoted here-documents; inside double quotes, ``${...}``, ``$((...))``, unquoted
    here-documents and nested substitutions. Good enough for the scripts rendered here."""
    live: set[int] = set()
    stack = ["sh"]  # sh (top level), cmd ($( ... )), dq ("..."), brace (${ ... }), arith ($(( ... )))
    heredocs: list[tuple[str, bool]] = []
    i, n = 0, len(script)
    while i < n:
        ch, top = script[i], stack[-1]
        prev = script[i - 1] if i else "\n"
        if ch == "\\":
            i += 2
            continue
        if top in ("sh", "cmd", "brace") and ch == "'":
            end = script.find("'", i + 1)
            i = n if end < 0 else end + 1
            continue
        if top in ("sh", "cmd") and script.startswith("$'", i):
            j = i + 2
            while j < n and script[j] != "'":
                j += 2 if script[j] == "\\" else 1
            i = j + 1
            continue
        if top in ("sh", "cmd") and ch == "#" and prev in _WORD_BREAK:
            end = script.find("\n", i)
            i = n if end < 0 else end
            continue
        if top in ("sh", "cmd") and (match := _HEREDOC.match(script, i)):
            heredocs.append((match[2], bool(match[1])))
            i = match.end()
            continue
        if top in ("sh", "cmd") and ch == "\n" and heredocs:
            i += 1
            for delimiter, quoted in heredocs:
                while i < n:
                    end = script.find("\n", i)
                    end = n if end < 0 else end
                    line = script[i:end]
                    if line.lstrip("\t") == delimiter:
                        i = end + 1
                        break
                    if not quoted:
                        live.update(i + k for k in live_substitutions('"' + line.replace('"', " ") + '"') if k)
                    i = end + 1
            heredocs = []
            continue
        if script.startswith("$((", i):
            stack.append("arith")
            i += 3
            continue
        if script.startswith("$(", i) or ch == "`":
            live.add(i)
            if ch == "`":
                end = script.find("`", i + 1)
                live.update(i + 1 + k for k in live_substitutions(script[i + 1 : end if end > 0 else n]))
                i = n if end < 0 else end + 1
                continue
            stack.append("cmd")
            i += 2
            continue
        if script.startswith("${", i):
            stack.append("brace")
            i += 2
            continue
        if ch == '"' and top == "dq":
            stack.pop()
        elif ch == '"':
            stack.append("dq")
        elif (ch == ")" and top == "cmd") or (ch == "}" and top == "brace"):
            stack.pop()
        elif top == "arith" and script.startswith("))", i):
            stack.pop()
            i += 1
        i += 1
    return live


@pytest.mark.parametrize(
    ("script", "live"),
    [
        ('echo "$(touch x)"', True),
        ("echo '$(touch x)'", False),
        ("# $(touch x)", False),
        ("a=`touch x`", True),
        ("cat <<'E'\n$(touch x)\nE\n", False),
        ("cat <<E\n$(touch x)\nE\n", True),
        ('x=$(echo "$(touch x)")', True),
        ("echo ${a:-'$(touch x)'}", False),
        ('echo "${a:-$(touch x)}"', True),
        ("echo $'\\'$(touch x)'", False),
        ("echo 'a'\"'\"'$(touch x)'", False),
        ("n=${#v[@]} # $(touch x)", False),
        ("f() { echo; } # `touch x`", False),
    ],
)
def test_the_lexer_sees_live_substitutions(script: str, live: bool) -> None:
    marker = script.index("touch x")
    assert (marker - 2 in live_substitutions(script) or marker - 1 in live_substitutions(script)) is live


# ----- (1) hostile plans are refused before anything renders ---------------------------------------
def _with(model: Any, **changes: Any) -> Any:
    return model.model_copy(update=changes)  # no validation, as a hand-edited file would carry them


PLAN_ATTACKS: dict[str, Callable[[Any, str], Any]] = {
    "name": lambda p, v: _with(p, spec=_with(p.spec, name=v)),
    "option.region": lambda p, v: _with(p, option=_with(p.option, region=v)),
    "option.zone": lambda p, v: _with(p, option=_with(p.option, zone=v)),
    "option.instance_type": lambda p, v: _with(p, option=_with(p.option, instance_type=v)),
    "option.gpu_model": lambda p, v: _with(p, option=_with(p.option, gpu_model=v)),
    "option.provider": lambda p, v: _with(p, option=_with(p.option, provider=v)),
    "option.offer.instance_type": lambda p, v: _with(
        p, option=_with(p.option, offer=_with(p.option.offer, instance_type=v))
    ),
    "plan node 1": lambda p, v: _with(p, nodes=(p.nodes[0], _with(p.nodes[1], name=v))),
}


@pytest.mark.parametrize("hostile", HOSTILE, ids=IDS)
@pytest.mark.parametrize("field", sorted(PLAN_ATTACKS))
def test_a_hostile_plan_is_refused_in_one_located_line(field: str, hostile: str) -> None:
    plan = PLAN_ATTACKS[field](make_plan(nodes=2), hostile)
    with pytest.raises((PlanError, SpecError)) as caught:
        render_cluster(plan, CANARY)
    assert "\n" not in str(caught.value)
    where = caught.value.path if isinstance(caught.value, SpecError) else str(caught.value)
    assert field in where


@pytest.mark.parametrize("hostile", HOSTILE, ids=IDS)
def test_hostile_topology_switch_names_are_refused(hostile: str) -> None:
    topology = {"llm-pretrain-0": ["spine0", hostile], "llm-pretrain-1": ["spine0", "leaf1"]}
    with pytest.raises(PlanError, match="switch name") as caught:
        render_cluster(make_plan(nodes=2), CANARY, topology=topology)
    assert "\n" not in str(caught.value)


def test_a_hostile_node_address_is_refused() -> None:
    with pytest.raises(SpecError):
        render_cluster(make_plan(nodes=2), CANARY, node_addresses={"llm-pretrain-0": f"10.0.0.1\n$({PAYLOAD})"})


# ----- (2) the templates quote whatever reaches them -----------------------------------------------
def _benign(control_plane: str) -> ClusterView:
    return cluster_view(make_plan({"control_plane": control_plane}, nodes=2), slurmdbd=control_plane == "slurm")


VIEW_ATTACKS: dict[str, Callable[[ClusterView, str], ClusterView]] = {
    "name": lambda c, v: dataclasses.replace(c, name=v),
    "head-name": lambda c, v: dataclasses.replace(c, nodes=(NodeView(v, 0, "head"), *c.nodes[1:])),
    "worker-name": lambda c, v: dataclasses.replace(c, nodes=(c.nodes[0], NodeView(v, 1, "worker"))),
    "region": lambda c, v: dataclasses.replace(c, region=v),
    "zone": lambda c, v: dataclasses.replace(c, zone=v),
    "instance_type": lambda c, v: dataclasses.replace(c, instance_type=v),
    "gpu_model": lambda c, v: dataclasses.replace(c, gpu_model=v),
    "gres_type": lambda c, v: dataclasses.replace(c, gres_type=v),
    "fabric_profile": lambda c, v: dataclasses.replace(c, fabric_profile=v),
    "checkpoint_path": lambda c, v: dataclasses.replace(c, checkpoint_path="/mnt/" + v),
    "shared_mount_path": lambda c, v: dataclasses.replace(c, shared_mount_path="/data/" + v),
    "ssh_public_key": lambda c, v: dataclasses.replace(c, ssh_public_key="ssh-ed25519 AAAA " + v),
    "nccl_env": lambda c, v: dataclasses.replace(c, nccl_env=(*c.nccl_env, ("NCCL_DEBUG", v))),
    "switch": lambda c, v: dataclasses.replace(c, switches=(SwitchView(name=v, nodes=tuple(n.name for n in c.nodes)),)),
}


@functools.lru_cache(maxsize=256)
def _load(text: str) -> Any:
    """Parse YAML with libyaml (the pure-Python parser makes this suite slow); memoized."""
    return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


# Fields whose value the worker's files place differently from the head's; the rest render the head only.
_BOTH_ROLES = {"name", "head-name", "worker-name", "shared_mount_path"}


def _roles(field: str) -> tuple[str, ...]:
    return ("head", "worker") if field in _BOTH_ROLES else ("head",)


@functools.lru_cache(maxsize=64)
def _benign_render(control_plane: str, field: str) -> dict[str, str]:
    return _render_view(VIEW_ATTACKS[field](_benign(control_plane), "plain-value1"), _roles(field))


def _render_view(view: ClusterView, roles: tuple[str, ...] = ("head", "worker")) -> dict[str, str]:
    """Every target for ``roles``. Raises the ProvisionerError of a target that refuses."""
    out: dict[str, str] = {}
    slurm: dict[str, str] = {}
    if view.control_plane == "slurm":
        slurm = render_slurm(view)
        out.update({f"slurm/{k}": v for k, v in slurm.items()})
        out.update({f"launch/{k}": v for k, v in render_launch(view).items()})
    for role in roles:
        user_data = render_cloudinit(view, role, CANARY, slurm)
        out[f"cloud-init/{role}.yaml"] = user_data
        out[f"bootstrap/{role}.sh"] = render_bootstrap_script(view, role, user_data)
    return out


def _shell_texts(files: dict[str, str]) -> dict[str, str]:
    """Every shell text: scripts, the bootstrap (and the files it embeds), user data scripts and sh -c lines."""
    texts: dict[str, str] = {}
    for path, text in files.items():
        if path.endswith((".sh", ".sbatch")):
            texts[path] = text
            for i, block in enumerate(re.findall(r"<<'PROVISIONER_B64'\n(.*?)\nPROVISIONER_B64\n", text, re.S)):
                decoded = base64.b64decode(block).decode("utf-8", "replace")
                if decoded.startswith("#!/bin/bash"):
                    texts[f"{path}#{i}"] = decoded
        if path.endswith(".yaml") and path.startswith("cloud-init/"):
            doc = _load(text)
            for entry in doc["write_files"]:
                if str(entry.get("content", "")).startswith("#!/bin/bash"):
                    texts[f"{path}:{entry['path']}"] = entry["content"]
            for i, command in enumerate(doc["runcmd"]):
                if isinstance(command, list) and command[:2] == ["sh", "-c"]:
                    texts[f"{path}:runcmd[{i}]"] = command[2]
    return texts


def _units(doc: dict[str, Any]) -> dict[str, list[str]]:
    """systemd unit files: their section headers and setting names, in order."""
    return {
        entry["path"]: [line.split("=", 1)[0] for line in entry["content"].splitlines()]
        for entry in doc["write_files"]
        if entry["path"].startswith("/etc/systemd/")
    }


def _conf_keys(text: str) -> list[list[str]]:
    return [
        [word.split("=", 1)[0] for word in line.split()]
        for line in text.splitlines()
        if line and not line.startswith("#")
    ]


def _assert_same_structure(benign: dict[str, str], hostile: dict[str, str]) -> None:
    assert set(hostile) == set(benign)
    for path, text in hostile.items():
        if path.endswith(".yaml"):
            ours, theirs = _load(text), _load(benign[path])
            assert set(ours) == set(theirs), path
            assert [f["path"] for f in ours["write_files"]] == [f["path"] for f in theirs["write_files"]], path
            assert len(ours["runcmd"]) == len(theirs["runcmd"]), path
            for mine, base in zip(ours["runcmd"], theirs["runcmd"], strict=True):
                assert type(mine) is type(base) and (
                    not isinstance(mine, list) or (len(mine) == len(base) and mine[0] == base[0])
                ), (path, mine)
            assert _units(ours) == _units(theirs), path
            assert [k for k in ours.get("users", []) if k == "default"] == ["default"]
        elif path.startswith("slurm/") and path.endswith(".conf"):
            assert _conf_keys(text) == _conf_keys(benign[path]), path
    base_texts = set(_shell_texts(benign).values())
    changed = {where: script for where, script in _shell_texts(hostile).items() if script not in base_texts}
    # One bash parses every changed script, each wrapped in a function body (never run).
    wrapped = "".join(f"f{i}() {{\n{script}\n}}\n" for i, script in enumerate(changed.values()))
    result = subprocess.run(["bash", "-n"], input=wrapped, capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, (sorted(changed), result.stderr)
    for where, script in changed.items():
        if PAYLOAD not in script:
            continue
        live = live_substitutions(script)
        for match in re.finditer(re.escape(PAYLOAD), script):
            assert match.start() - 2 not in live and match.start() - 1 not in live, (
                where,
                script[max(0, match.start() - 80) : match.end() + 20],
            )


# Every field on Slurm (the most targets); on the other control planes, the fields their own files use.
_CASES = [("slurm", field) for field in sorted(VIEW_ATTACKS)] + [
    (plane, field)
    for plane in ("kubernetes", "none")
    for field in ("name", "head-name", "worker-name", "ssh_public_key")
]


@pytest.mark.parametrize("hostile", HOSTILE, ids=IDS)
@pytest.mark.parametrize(("control_plane", "field"), _CASES)
def test_templates_quote_or_refuse_every_hostile_value(control_plane: str, field: str, hostile: str) -> None:
    base = _benign(control_plane)
    view = VIEW_ATTACKS[field](base, hostile)
    benign = _benign_render(control_plane, field)
    try:
        rendered = _render_view(view, _roles(field))
    except ProvisionerError as exc:  # refused: nothing rendered, one line naming the value
        assert ("\n" not in str(exc) and "refusing" in str(exc)) or "not a plain identifier" in str(exc)
        return
    _assert_same_structure(benign, rendered)


def test_values_that_slurm_files_cannot_hold_are_refused_and_the_rest_render() -> None:
    """The free-text fields render everywhere (quoted); the names slurm.conf needs are refused."""
    base = _benign("slurm")
    for field in ("region", "instance_type", "gpu_model", "fabric_profile", "checkpoint_path", "ssh_public_key"):
        _render_view(VIEW_ATTACKS[field](base, HOSTILE[1]))
    for field in ("name", "head-name", "gres_type", "switch"):
        with pytest.raises(PlanError, match="not a plain identifier"):
            _render_view(VIEW_ATTACKS[field](base, HOSTILE[5]))


# ----- written without following symlinks -------------------------------------------------------
def test_rendered_files_never_follow_symlinks_in_the_output_folder(tmp_path: Path) -> None:
    rendered = render_cluster(make_plan(nodes=2), CANARY)
    out = tmp_path / "out"
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "head.sh").write_text("precious\n")
    out.mkdir()
    os.symlink(victim, out / "ssh")  # a symlinked subfolder: refused
    with pytest.raises(ProvisionerError, match="symlink"):
        write_rendered(rendered, out)
    assert (victim / "head.sh").read_text() == "precious\n" and sorted(os.listdir(victim)) == ["head.sh"]

    os.unlink(out / "ssh")
    (out / "ssh").mkdir()
    os.symlink(victim / "head.sh", out / "ssh" / "head.sh")  # a symlinked file: replaced, not followed
    write_rendered(rendered, out)
    assert (victim / "head.sh").read_text() == "precious\n"
    assert not (out / "ssh" / "head.sh").is_symlink()
    assert (out / "ssh" / "head.sh").read_text() == rendered["ssh/head.sh"]
    assert (out / "ssh" / "head.sh").stat().st_mode & 0o777 == 0o600
    assert not [p for p in out.rglob(".*.tmp")]


def test_a_file_where_a_folder_belongs_is_refused(tmp_path: Path) -> None:
    (tmp_path / "slurm").write_text("not a folder\n")
    with pytest.raises(ProvisionerError, match="not a folder"):
        write_rendered(render_cluster(make_plan(nodes=2), CANARY), tmp_path)


@pytest.mark.parametrize("rel", ["../escape.txt", "/etc/passwd", "a/../../b", "", "a//b/."])
def test_paths_outside_the_folder_are_refused(tmp_path: Path, rel: str) -> None:
    with pytest.raises(ProvisionerError, match="refusing"):
        write_rendered(RenderedCluster(files={rel: "x"}), tmp_path / "out")
