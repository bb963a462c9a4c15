"""The container runtime of the local backend: podman or docker, whichever can start the image here.

`select_runtime(image)` is asked once before the first attempt: for each runtime on PATH it runs
a tiny bounded `run --rm IMAGE sh -c 'exit 0'` with the options the attempt will use. The first
that starts the image wins and its image digest is read (`image inspect`). When none can, one
`ContainerRuntimeError` says what failed for each, in the runtime's own words made short (e.g.
"podman cannot set RLIMIT_NPROC here"), so no attempt is started and nothing is billed. No
runtime installed at all: None (the job runs on the host and the ledger says so).

Images are spelled as SkyPilot spells them (`docker:<ref>`); the runtimes take the bare `<ref>`.
podman gets `--runtime runc` when runc is installed (crun cannot lower ulimits on some hosts) and
`--init` only where its init binary (catatonit) exists; either way the job runs under a small sh
forwarder that passes TERM/INT to every process in the container (a bare shell as PID 1 would
ignore them), so a preemption notice reaches the job as on the host.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from launcher.errors import ProviderError

DOCKER_PREFIX = "docker:"
PROBE_TIMEOUT_S = 60.0  # one probe (a cold start of a local image takes a second or two)
RM_TIMEOUT_S = 30.0
RUNTIMES = ("podman", "docker")
ULIMITS = ("--ulimit", "nofile=1024:1024")  # the host's own limit may be higher than a container may set

# What a container runtime's own exit codes mean (docker/podman `run`, and a shell's 126/127).
RUNTIME_EXIT_CODES = {
    125: "the container runtime failed",
    126: "the command cannot be executed",
    127: "the command was not found",
}

_RLIMITS = {0: "CPU", 1: "FSIZE", 2: "DATA", 3: "STACK", 4: "CORE", 5: "RSS", 6: "NPROC", 7: "NOFILE",
            8: "MEMLOCK", 9: "AS", 10: "LOCKS", 11: "SIGPENDING", 12: "MSGQUEUE", 13: "NICE", 14: "RTPRIO"}  # fmt: skip

# PID 1 (or catatonit's child) in the container: run the job, pass TERM/INT to every process of
# the container (kill -1 spares the sender and init), return the job's own exit code. A `wait`
# cut short by the trapped signal returns 128+n; if the job exits before `kill -0` looks, one more
# `wait` collects its real status (127 there: it was already collected).
FORWARDER = r"""trap 'kill -TERM -1 2>/dev/null' TERM
trap 'kill -INT -1 2>/dev/null' INT
if command -v bash >/dev/null 2>&1; then bash -c "$1" & else sh -c "$1" & fi
c=$!
s=0
while kill -0 "$c" 2>/dev/null; do wait "$c"; s=$?; done
wait "$c" 2>/dev/null; r=$?
[ "$r" = 127 ] || s=$r
exit "$s"
"""


class ContainerRuntimeError(ProviderError):
    """No container runtime here can start the image (nothing was started)."""


def bare_ref(image: str) -> str:
    """The reference a runtime takes: SkyPilot's `docker:` prefix removed."""
    return image[len(DOCKER_PREFIX) :] if image.startswith(DOCKER_PREFIX) else image


def sky_image_id(image: str) -> str:
    """The image as `sky.Resources(image_id=...)` takes a container image: `docker:<ref>`."""
    return image if image.startswith(DOCKER_PREFIX) else DOCKER_PREFIX + image


@dataclass(frozen=True)
class ContainerRuntime:
    """A runtime that started the image in the probe, with the options it needed."""

    name: str  # "podman" | "docker"
    path: str
    image: str  # the bare reference
    options: tuple[str, ...] = ()  # e.g. ("--runtime", "runc", "--init")
    init: bool = False  # an init process (catatonit, docker-init) reaps the job's orphans
    digest: str | None = None  # the image's content digest (sha256:...), not its tag
    image_id: str | None = None  # the runtime's image id (config digest)
    env: Mapping[str, str] = field(default_factory=dict)  # the runtime's own environment

    def run_argv(
        self,
        command: str,
        *,
        name: str,
        env_names: Sequence[str],
        workdir: Path | None,
        mounts: Sequence[Path],
    ) -> list[str]:
        """`run` for one rank. Variables are passed by name only (`-e NAME`): their values come
        from the runtime process's environment, so none (secrets) appear on a command line."""
        argv = [self.path, "run", "--rm", "--name", name, *self.options, *ULIMITS, "--pull", "never", "--network", "host"]
        for m in dict.fromkeys(str(p) for p in mounts):
            argv += ["-v", f"{m}:{m}"]
        if workdir is not None:
            argv += ["-w", str(workdir)]
        for k in env_names:
            argv += ["-e", k]
        return [*argv, self.image, "sh", "-c", FORWARDER, "launcher-job", command]

    def remove(self, names: Sequence[str]) -> None:
        """Remove containers that may outlive a SIGKILLed `run` client (bounded, best effort)."""
        if not names:
            return
        argv = [self.path, "rm", "-f", *(["--ignore", "--time", "0"] if self.name == "podman" else []), *names]
        try:
            subprocess.run(argv, capture_output=True, timeout=RM_TIMEOUT_S, env=_runtime_env(self.env))
        except (OSError, subprocess.TimeoutExpired):
            pass


def _runtime_env(base: Mapping[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ if base is None else base)
    env.setdefault("PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
    return env


def installed_runtimes(candidates: Sequence[str] | None = None) -> list[tuple[str, str]]:
    """(name, path) of each container runtime on PATH, podman first."""
    out = []
    for c in candidates if candidates is not None else RUNTIMES:
        path = shutil.which(c)
        if path:
            out.append((Path(c).name, path))
    return out


def explain(stderr: str, runtime: str, image: str) -> str:
    """A runtime's error output as one short line that says what failed."""
    text = stderr.strip()
    m = re.search(r"rlimit type (\d+)|RLIMIT_([A-Z]+)", text)
    if m and ("operation not permitted" in text.lower() or "permission denied" in text.lower()):
        which = _RLIMITS.get(int(m.group(1)), m.group(1)) if m.group(1) else m.group(2)
        return f"{runtime} cannot set RLIMIT_{which} here ({_last_line(text)})"
    low = text.lower()
    if "cannot connect to the docker daemon" in low or "is the docker daemon running" in low:
        return f"{runtime}: no daemon is running (cannot connect to the Docker daemon)"
    if "invalid reference format" in low:
        return f"{runtime}: {image!r} is not a valid image reference"
    if any(s in low for s in ("image not known", "no such image", "unable to find image", "image not found")):
        return f"{runtime}: image {image!r} is not in its local images (build, import or pull it first)"
    if 'oci runtime "runc" not found' in low:
        return f"{runtime}: runc is not installed"
    return f"{runtime}: {_last_line(text) or 'failed without saying why'}"


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    line = lines[-1] if lines else ""
    line = re.sub(r"^Error:\s*", "", line)
    return line[:300]


def _run(argv: list[str], timeout_s: float, env: Mapping[str, str]) -> tuple[int, str]:
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, stdin=subprocess.DEVNULL, env=dict(env))
    except subprocess.TimeoutExpired:
        return 124, f"timed out after {timeout_s:g}s"
    except OSError as e:
        return 127, str(e)
    return p.returncode, (p.stderr or "") + (p.stdout or "" if p.returncode else "")


PODMAN_INIT = Path("/usr/libexec/podman/catatonit")  # where podman looks for `--init` by default


def _init_options(name: str) -> tuple[str, ...] | None:
    """The options that give the container an init process, or None where there is none."""
    if name == "docker":
        return ("--init",)  # docker ships its own (docker-init)
    if PODMAN_INIT.exists():
        return ("--init",)
    other = shutil.which("catatonit")
    return ("--init", "--init-path", other) if other else None


def _option_sets(name: str) -> list[tuple[str, ...]]:
    if name == "podman" and shutil.which("runc"):
        return [("--runtime", "runc"), ()]
    return [()]


def probe(name: str, path: str, image: str, *, timeout_s: float = PROBE_TIMEOUT_S, env: Mapping[str, str] | None = None) -> ContainerRuntime | str:
    """Start `image` once with this runtime. The runtime (with the options that worked), or why not."""
    env = _runtime_env(env)
    ref = bare_ref(image)
    rc, err = _run([path, "image", "inspect", "--format", "{{.Id}}", ref], timeout_s, env)
    if rc != 0:
        return explain(err or "image not known", name, ref)
    init = _init_options(name)
    reasons: list[str] = []
    for options in _option_sets(name):
        options = (*options, *(init or ()))
        rt = ContainerRuntime(name, path, ref, options, init is not None, env=env)
        probe_name = f"launcher-probe-{os.getpid()}-{len(reasons)}"
        rc, err = _run(rt.run_argv("exit 0", name=probe_name, env_names=(), workdir=None, mounts=()), timeout_s, env)
        if rc == 0:
            digest, image_id = image_digest(rt)
            return ContainerRuntime(name, path, ref, options, init is not None, digest, image_id, env)
        rt.remove([probe_name])
        reasons.append(explain(err, name, ref))
    # The first option set is the one we prefer; its failure is the one worth reading.
    return reasons[0]


def image_digest(rt: ContainerRuntime) -> tuple[str | None, str | None]:
    """(content digest, image id) of the probed image. podman: the manifest digest; docker: the
    registry digest when the image came from one, else its id (also a content digest)."""
    fmt = "{{.Digest}} {{.Id}}" if rt.name == "podman" else "{{join .RepoDigests \",\"}} {{.Id}}"
    rc, out = _run_out([rt.path, "image", "inspect", "--format", fmt, rt.image], rt.env)
    if rc != 0 or not out.strip():
        return None, None
    parts = out.strip().split()
    image_id = parts[-1] if parts else None
    if image_id and not image_id.startswith("sha256:"):
        image_id = "sha256:" + image_id
    digest = parts[0] if len(parts) > 1 else None
    if digest and "@" in digest:  # docker: repo@sha256:... (the first repo digest)
        digest = digest.split(",")[0].split("@", 1)[1]
    return (digest if digest and digest.startswith("sha256:") else image_id), image_id


def _run_out(argv: list[str], env: Mapping[str, str]) -> tuple[int, str]:
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=PROBE_TIMEOUT_S, env=dict(env))
    except (OSError, subprocess.TimeoutExpired):
        return 1, ""
    return p.returncode, p.stdout


def select_runtime(
    image: str,
    *,
    candidates: Sequence[str] | None = None,
    timeout_s: float = PROBE_TIMEOUT_S,
    env: Mapping[str, str] | None = None,
) -> ContainerRuntime | None:
    """The first installed runtime that starts `image` here; None when no runtime is installed.
    Raises ContainerRuntimeError naming what failed for each runtime when none can."""
    found = installed_runtimes(candidates)
    if not found:
        return None
    reasons = []
    for name, path in found:
        got = probe(name, path, image, timeout_s=timeout_s, env=env)
        if isinstance(got, ContainerRuntime):
            return got
        reasons.append(got)
    raise ContainerRuntimeError(
        f"image {bare_ref(image)} cannot run here: " + "; ".join(reasons),
        hint="nothing was started; run the job where a container runtime works, or drop `image_id` to run on the host",
    )
