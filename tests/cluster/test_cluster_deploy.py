"""deploy/ agrees with the code: every manifest parses, and what it runs exists.

The Dockerfile cannot be built here (no container engine); these tests check the
facts the manifests depend on instead: the image's entry point is the ``dr-scale``
console script; every container running the image either runs a ``dr-scale``
command line that our own parser accepts or a ``dask scheduler`` / ``dask worker``
command line that distributed's parser accepts; the job files they name exist and
are jobs ``dr-scale run`` knows; environment variable names are the ones the code
reads; secrets referenced are defined; credentials never appear in arguments; the
TLS config uses keys distributed knows.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import dask.config
import pytest
import yaml

from dr_scale.cli import COMMANDS, build_parser
from dr_scale.commands.run import JOBS, load_job
from dr_scale.io.storage import STORAGE_OPTIONS_ENV
from dr_scale.io.tomlcompat import tomllib
from dr_scale.outofcore.compute import CONNECT_TIMEOUT_KEY, WORKER_CONFIG

ROOT = Path(__file__).parents[2]
DEPLOY = ROOT / "deploy"
OURS = ["daskcluster.yaml", "visits-daskjob.yaml", "storage-secret.example.yaml"]
#: environment variables dr-scale reads (besides the standard AWS_* read by s3fs/botocore)
CODE_ENV = {STORAGE_OPTIONS_ENV, "DR_SCALE_CACHE", "DR_SCALE_DATA"}
SECRET_WORDS = re.compile(r"secret|password|token|access[-_]?key|aws_", re.I)


def dockerfile_stages() -> dict[str, list[tuple[str, str]]]:
    """{stage name: [(INSTRUCTION, arguments)]} of deploy/Dockerfile, continuation lines joined."""
    text = re.sub(r"\\\n", " ", (DEPLOY / "Dockerfile").read_text())
    stages: dict[str, list] = {}
    current = None
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        instruction, _, rest = line.partition(" ")
        if instruction == "FROM":
            current = rest.split(" AS ")[-1].strip() if " AS " in rest else rest
            stages[current] = [(instruction, rest)]
        else:
            stages[current].append((instruction.upper(), rest.strip()))
    return stages


def load_all(path: Path) -> list[dict]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def pod_specs(doc: dict) -> list[tuple[str, dict]]:
    """(role, pod spec) of a DaskCluster / DaskJob document."""
    if doc["kind"] == "DaskCluster":
        spec = doc["spec"]
        return [("scheduler", spec["scheduler"]["spec"]), ("worker", spec["worker"]["spec"])]
    if doc["kind"] == "DaskJob":
        cluster = doc["spec"]["cluster"]["spec"]
        return [("job", doc["spec"]["job"]["spec"]), ("scheduler", cluster["scheduler"]["spec"]),
                ("worker", cluster["worker"]["spec"])]
    return []


def operator_docs() -> list[dict]:
    return [d for name in OURS for d in load_all(DEPLOY / "kubernetes" / name)
            if d["kind"] in ("DaskCluster", "DaskJob")]


def secrets() -> dict[str, set[str]]:
    docs = load_all(DEPLOY / "kubernetes" / "storage-secret.example.yaml")
    return {d["metadata"]["name"]: set(d["stringData"]) for d in docs if d["kind"] == "Secret"}


def config_key_of(name: str) -> str | None:
    """The Dask config key an environment variable sets, among those dr-scale reads."""
    config = dask.config.collect_env({name: "value"})
    return next((k for k in ("scheduler-address", CONNECT_TIMEOUT_KEY)
                 if dask.config.get(k, default=None, config=config) == "value"), None)


def check_env(env: list[dict]) -> None:
    known_secrets = secrets()
    for var in env:
        name = var["name"]
        if name.startswith("DR_SCALE_"):
            assert name in CODE_ENV, f"{name} is not read by dr-scale"
        if name.startswith("DASK_"):  # must land on a config key Dask or dr-scale reads
            assert config_key_of(name) in ("scheduler-address", CONNECT_TIMEOUT_KEY), name
        ref = var.get("valueFrom", {}).get("secretKeyRef")
        if ref:
            assert ref["key"] in known_secrets.get(ref["name"], ()), f"{name}: no secret {ref}"
        else:
            assert not SECRET_WORDS.search(name) or name == "AWS_DEFAULT_REGION", f"{name} must come from a Secret"


def test_dockerfile_image_entry_point_user_and_targets():
    stages = dockerfile_stages()
    assert list(stages) == ["dask", "cli"]  # the last stage (the default target) is the dr-scale CLI
    base = dict(stages["dask"])
    assert re.fullmatch(r"python:3\.\d+-slim", stages["dask"][0][1].split()[0])
    runs = " ".join(arg for ins, arg in stages["dask"] if ins == "RUN")
    assert "pip install ." in runs
    copied = [arg.split()[0] for ins, arg in stages["dask"] if ins == "COPY"]
    assert {"pyproject.toml", "dr_scale", "pipelines"} <= set(copied)
    assert base["USER"].split(":")[0] not in ("root", "0")
    assert f"--uid {base['USER'].split(':')[0]}" in runs
    assert base["WORKDIR"] == "/app"
    entry = dict(stages["cli"])["ENTRYPOINT"]
    assert ast.literal_eval(entry) == ["dr-scale"]
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["dr-scale"] == "dr_scale.cli:console"


def test_operator_manifests_run_valid_commands():
    uid = int(dict(dockerfile_stages()["dask"])["USER"].split(":")[0])
    kinds = set()
    for doc in operator_docs():
        assert doc["apiVersion"] == "kubernetes.dask.org/v1"
        kinds.add(doc["kind"])
        name = doc["metadata"]["name"]
        for role, pod in pod_specs(doc):
            assert pod["securityContext"]["runAsNonRoot"] and pod["securityContext"]["runAsUser"] == uid
            (container,) = pod["containers"]
            assert container["image"] == "dr-scale:latest"
            check_env(container.get("env", []))
            args = [str(a) for a in container.get("command", []) + container.get("args", [])]
            assert not any(SECRET_WORDS.search(a) for a in args), args
            if role == "job":
                assert "command" not in container  # the image's entry point, dr-scale, runs the args
                parsed = build_parser().parse_args(container["args"])
                assert parsed.command in COMMANDS and parsed.command == "run"
                job = load_job(str(ROOT / parsed.job), parsed.set)  # the job file exists, kind known
                assert job["job"] in JOBS and "storage_options" not in job
                assert all(v.startswith("s3://") for k, v in job.items() if k in ("out", "data") and v)
                assert any(e["name"] == "DR_SCALE_CACHE" and e["value"].startswith("s3://")
                           for e in container["env"])
            else:
                assert container["command"][:2] == ["dask", role]
                validate_dask_command(role, [a.replace("$(DASK_WORKER_NAME)", "w") for a in args[2:]])
        cluster_spec = doc["spec"]["cluster"]["spec"] if doc["kind"] == "DaskJob" else doc["spec"]
        service = cluster_spec["scheduler"]["service"]
        assert service["selector"]["dask.org/cluster-name"] == name
        assert {p["name"]: p["port"] for p in service["ports"]}["tcp-comm"] == 8786
    assert kinds == {"DaskCluster", "DaskJob"}


def validate_dask_command(role: str, args: list[str]) -> None:
    """distributed's own command-line parser reads ``dask <role> args`` as meant (nothing is started).

    Its parsers ignore unknown options (they fall into positional slots), so the positional
    slots must stay empty: the operator gives the scheduler address in DASK_SCHEDULER_ADDRESS.
    """
    if role == "scheduler":
        from distributed.cli.dask_scheduler import main
    else:
        from distributed.cli.dask_worker import main
    with main.make_context(f"dask {role}", list(args)) as ctx:
        params = ctx.params
    assert not params.get("preload_argv") and params.get("scheduler") is None, (role, args)
    if role == "scheduler":
        assert int(params["port"]) == 8786
    else:
        assert params["nthreads"] == 1


def test_helm_values_use_the_dask_image_target():
    values = yaml.safe_load((DEPLOY / "helm" / "values.yaml").read_text())
    text = (DEPLOY / "helm" / "values.yaml").read_text()
    assert "dask" in dockerfile_stages()  # the target the chart's images are built from
    for role in ("scheduler", "worker"):
        image = values[role]["image"]
        assert image["repository"] == "dr-scale-dask"
        assert f"--target dask -t {image['repository']}:{image['tag']}" in text
    assert values["jupyter"]["enabled"] is False
    assert values["scheduler"]["servicePort"] == 8786
    check_env(values["worker"]["env"])
    assert values["worker"]["threads_per_worker"] == 1


def test_slurm_example_runs_a_known_job():
    config = yaml.safe_load((DEPLOY / "slurm" / "jobqueue.yaml").read_text())
    slurm = config["jobqueue"]["slurm"]
    assert {"cores", "processes", "memory", "walltime", "queue", "job-script-prologue"} <= set(slurm)
    assert slurm["cores"] % slurm["processes"] == 0
    script = (DEPLOY / "slurm" / "visits_slurm.py").read_text()
    tree = ast.parse(script)
    defaults = [n.value.value for n in ast.walk(tree) if isinstance(n, ast.keyword) and n.arg == "default"
                and isinstance(n.value, ast.Constant) and isinstance(n.value.value, str)]
    (job_file,) = [d for d in defaults if d.endswith(".toml")]
    assert load_job(str(ROOT / job_file))["job"] in JOBS
    assert '"run", args.job_file, "--scheduler"' in script  # the same CLI, pointed at the SLURM cluster
    assert "from dask_jobqueue import SLURMCluster" in script


def test_tls_config_uses_known_distributed_keys():
    config = yaml.safe_load((DEPLOY / "tls" / "dask-tls.yaml").read_text())
    defaults = dask.config.defaults

    def leaves(d, prefix=()):
        for k, v in d.items():
            yield from leaves(v, prefix + (k,)) if isinstance(v, dict) else [prefix + (k,)]

    known = {}
    for d in defaults:
        dask.config.update(known, d)
    for path in leaves(config):
        node = known
        for part in path:
            assert part in node, f"unknown Dask config key {'.'.join(path)}"
            node = node[part]
    tls = config["distributed"]["comm"]["tls"]
    assert {role: set(tls[role]) for role in ("scheduler", "worker", "client")} == \
        {role: {"cert", "key"} for role in ("scheduler", "worker", "client")}
    assert config["distributed"]["comm"]["require-encryption"] is True


def test_environment_names_map_to_the_config_keys_the_code_reads():
    assert config_key_of("DASK_DR_SCALE__CONNECT_TIMEOUT") == CONNECT_TIMEOUT_KEY
    assert config_key_of("DASK_SCHEDULER_ADDRESS") == "scheduler-address"
    assert config_key_of("DASK_SCHEDULER_ADRESS") is None


@pytest.mark.parametrize("path", sorted(p.relative_to(DEPLOY).as_posix() for p in DEPLOY.rglob("*")
                                        if p.is_file() and "cron" not in p.parts
                                        and p.name != "report-cronjob.yaml"))
def test_docs_walk_through_every_deploy_file(path):
    assert f"deploy/{path}" in (ROOT / "docs" / "deploy.md").read_text()


def leaf_parsers(parser, path=()):
    """(command path, parser) of every runnable sub-command, however deeply nested."""
    import argparse

    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        yield path, parser
    for action in subs:
        for name, sub in action.choices.items():
            yield from leaf_parsers(sub, path + (name,))


def test_every_command_takes_the_compute_options():
    leaves = dict(leaf_parsers(build_parser()))
    assert {path[0] for path in leaves} == set(COMMANDS)
    for path, parser in leaves.items():
        options = {s for a in parser._actions for s in a.option_strings}
        assert {"--scheduler", "--local-workers", "--no-progress"} <= options, path


def flat_settings(tree: dict, prefix: str = "") -> dict:
    """{"a.b.c": value} of a nested Dask config."""
    flat = {}
    for key, value in tree.items():
        if isinstance(value, dict):
            flat.update(flat_settings(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def test_the_image_gives_dask_workers_the_local_clusters_settings():
    """deploy/dask/workers.yaml holds exactly the settings ``--local-workers`` uses, and the image installs it."""
    settings = yaml.safe_load((DEPLOY / "dask" / "workers.yaml").read_text())
    assert flat_settings(settings) == WORKER_CONFIG
    copies = [arg.split() for ins, arg in dockerfile_stages()["dask"] if ins == "COPY"]
    assert ["deploy/dask/workers.yaml", "/etc/dask/dr-scale-workers.yaml"] in copies
    assert "/etc/dask" in dask.config.paths  # a folder every Dask process reads its config from
