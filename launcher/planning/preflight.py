"""Before a real launch writes anything: can each cloud with credentials actually be used?

A cloud we provision through a Pulumi stack (aws, gcp) needs the Pulumi CLI, an SSH public key
and the network allowed to SSH in (`--ssh-cidr`). A cloud missing one of them is treated like a
cloud without credentials: its offers leave the plan, with the reason shown. When nothing usable
is left, the launch refuses at once with the documented exit code (ToolMissingError, exit 5, for
a missing tool; BadInputError, exit 2, for missing settings) instead of starting a run that could
only wait. A dry run skips this: it shows the plan and what a real launch still needs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from launcher.errors import BadInputError, LauncherError, ToolMissingError
from launcher.providers.base import CredentialStatus
from pricing.clouds import STACK_CLOUDS



@dataclass(frozen=True)
class Preflight:
    statuses: dict[str, CredentialStatus]
    problems: dict[str, list[tuple[str, str]]] = field(default_factory=dict)  # cloud -> [(kind, what)]

    def notes(self) -> list[str]:
        return [f"{c}: offers skipped: needs {'; '.join(w for _, w in p)}" for c, p in self.problems.items()]

    def refusal(self, cause: LauncherError) -> LauncherError:
        """One error naming every missing piece; exit 5 when a tool is missing, else 2."""
        kinds = {k for p in self.problems.values() for k, _ in p}
        what = "; ".join(f"{c} needs {', '.join(w for _, w in p)}" for c, p in self.problems.items())
        msg = f"no usable offer: {what}"
        hint = "fix that and rerun, or add an `infra: local` alternative; `--dry-run` shows the plan without them"
        if "tool" in kinds:
            return ToolMissingError(msg, hint=hint)
        return BadInputError(msg, hint=hint)


SKYPILOT_HINT = "SkyPilot (pip install -c requirements.lock -e '.[sky]': the `sky` extra)"


def skypilot_installed() -> bool:
    import importlib.util

    return importlib.util.find_spec("sky") is not None


def cloud_preflight(
    statuses: Mapping[str, CredentialStatus], *, ssh_cidr: str | None, pulumi_found: bool | None = None, public_key: bool | None = None,
    sky_found: bool | None = None,
) -> Preflight:
    """`statuses` with every stack cloud that has credentials but cannot be used turned off, and
    every declared-cluster kind (Slurm, Kubernetes, SSH pools) when SkyPilot, which launches
    there, is not installed (the quickstart installs the core without it)."""
    from launcher.clusters import CLUSTER_KINDS

    declared = [c for c in CLUSTER_KINDS if statuses.get(c) is not None and statuses[c].enabled]
    if declared and not (skypilot_installed() if sky_found is None else sky_found):
        out = dict(statuses)
        for c in declared:
            out[c] = replace(statuses[c], enabled=False, source=f"declared, but a launch there needs {SKYPILOT_HINT}")
        inner = cloud_preflight(out, ssh_cidr=ssh_cidr, pulumi_found=pulumi_found, public_key=public_key, sky_found=True)
        return Preflight(inner.statuses, {**{c: [("tool", SKYPILOT_HINT)] for c in declared}, **inner.problems})
    usable = [c for c in STACK_CLOUDS if statuses.get(c) is not None and statuses[c].enabled]
    if not usable:
        return Preflight(dict(statuses))
    if pulumi_found is None or public_key is None:
        from launcher.providers import stacks

        pulumi_found = stacks.pulumi_found() if pulumi_found is None else pulumi_found
        public_key = stacks.ssh_public_key() is not None if public_key is None else public_key
    missing: list[tuple[str, str]] = []
    if not pulumi_found:
        missing.append(("tool", "the Pulumi CLI (curl -fsSL https://get.pulumi.com | sh)"))
    if not ssh_cidr:
        missing.append(("settings", "--ssh-cidr CIDR (or LAUNCHER_SSH_CIDR): the network allowed to SSH in"))
    if not public_key:
        missing.append(("settings", "an SSH public key at ~/.ssh/id_ed25519.pub or ~/.ssh/id_rsa.pub"))
    if not missing:
        return Preflight(dict(statuses))
    out = dict(statuses)
    problems = {}
    for c in usable:
        out[c] = replace(statuses[c], enabled=False, source="credentials found, but a launch needs " + "; ".join(w for _, w in missing))
        problems[c] = missing
    return Preflight(out, problems)
