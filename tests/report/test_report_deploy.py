"""The schedules in deploy/ run commands `dr-scale fit` and `dr-scale report` accept, with credentials kept off
the command line; the nightly fit writes the model the report reads."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import yaml

from dr_scale.cli import build_parser
from dr_scale.io.tomlcompat import tomllib
from dr_scale.report.policies_file import parse_policies

DEPLOY = Path(__file__).parents[2] / "deploy"


def test_kubernetes_cronjob_runs_a_valid_report_command():
    cronjob, fit_job, configmap = yaml.safe_load_all((DEPLOY / "kubernetes" / "report-cronjob.yaml").read_text())
    (secret,) = yaml.safe_load_all((DEPLOY / "kubernetes" / "storage-secret.example.yaml").read_text())
    assert (cronjob["kind"], configmap["kind"], secret["kind"]) == ("CronJob", "ConfigMap", "Secret")
    pod = cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["image"] == "dr-scale:latest" and "command" not in container  # the entry point is dr-scale
    args = build_parser().parse_args(container["args"])
    assert args.command == "report" and args.window == "7d" and args.logs.startswith("s3://")
    assert not any("secret" in a.lower() or "key" in a.lower() for a in container["args"])
    from_secret = {e["name"] for e in container["env"] if "secretKeyRef" in e.get("valueFrom", {})}
    assert {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "DR_SCALE_STORAGE_OPTIONS"} <= from_secret
    for e in container["env"]:  # the shared Secret of deploy/, and keys it has
        if e["name"] in from_secret:
            ref = e["valueFrom"]["secretKeyRef"]
            assert ref["name"] == secret["metadata"]["name"] and ref["key"] in secret["stringData"]
    assert cronjob["spec"]["concurrencyPolicy"] == "Forbid"
    mount = next(m for m in container["volumeMounts"] if m["name"] == "policies")
    policies = configmap["data"]["report_policies.toml"]
    assert args.policies == f"{mount['mountPath']}/report_policies.toml"
    pf = parse_policies(tomllib.loads(policies), args.policies)
    assert pf.reward_model.startswith("s3://") and len(pf.policies) == 2
    # the nightly fit writes the reward model the report reads, before the report runs
    (fit,) = fit_job["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"]
    fit_args = build_parser().parse_args(fit["args"])
    assert fit_args.command == "fit" and fit_args.out == pf.reward_model and fit_args.folds == 5
    assert fit_args.logs == args.logs and fit_job["spec"]["concurrencyPolicy"] == "Forbid"
    def start(job):  # (hour, minute) of a daily schedule
        minute, hour = job["spec"]["schedule"].split()[:2]
        return int(hour), int(minute)

    assert start(fit_job) < start(cronjob)


def test_crontab_lines_are_valid_report_commands():
    lines = [line for line in (DEPLOY / "cron" / "crontab.example").read_text().splitlines()
             if line and not line.startswith("#") and "=" not in line.split()[0]]
    assert len(lines) == 3
    commands = []
    for line in lines:
        command = line.split(None, 5)[5].replace("\\%", "%")
        command = re.sub(r"\$\(date [^)]*%F\)", "2026-11-08", command)  # what the shell would substitute
        command = re.sub(r"\$\(date [^)]*\)", "2026-W45", command)
        words = shlex.split(command)
        if "sh" in words and "-c" in words:
            words = shlex.split(words[words.index("-c") + 1])
        start = words.index("dr-scale")
        end = words.index(">>") if ">>" in words else len(words)
        args = build_parser().parse_args(words[start + 1:end])
        assert args.storage_options == "/etc/dr-scale/storage.json"
        commands.append(args.command)
        if args.command == "fit":
            assert args.out == "$REWARD_MODEL" and args.folds == 5 and args.logs == "$REPORT_LOGS"
    assert commands == ["fit", "report", "report"]
