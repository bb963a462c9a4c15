#!/usr/bin/env bash
# A one-node Slurm cluster on this machine that a real SkyPilot can run jobs on (as root).
#
#   bash scripts/local-slurm.sh up     # install, start, declare; last line: the infra string (slurm/local)
#   bash scripts/local-slurm.sh down   # stop everything it started, forget the declaration
#   bash scripts/local-slurm.sh status # exit 0 when the cluster answers
#
# What `up` does (idempotent):
# * Debian's slurm-wlm, munge, openssh-server (plus acl, rsync); an unprivileged user
#   ($LOCAL_SLURM_USER, default `skyslurm`) with an SSH key; sshd on 127.0.0.1 at a free port;
#   munged, slurmctld, slurmd started by hand (no systemd); one partition `debug` with every CPU.
# * ~/.slurm/config (SkyPilot reads clusters from it): `Host local` -> that user at 127.0.0.1.
# * Offline supplies for SkyPilot's runtime setup on the node (a cluster with internet needs none):
#   uv's installer (a `curl` shim on the user's PATH answers https://astral.sh/uv/install.sh with
#   a script that copies the uv binary from the PyPI wheel), Python 3.10 (pyenv's, reached through
#   a traverse-only ACL) and SSL_CERT_FILE for uv's TLS to PyPI.
# * `python` on the user's PATH runs $LOCAL_SLURM_JOB_PYTHON (default: $LAUNCHER_PYTHON), so jobs
#   such as task_specs/train.py find torch.
# * Declares the cluster for the current LAUNCHER_HOME (`launcher clusters add local ...`) when
#   $LAUNCHER_PYTHON can import the launcher (and warns when it lacks SkyPilot: the `sky` extra).
# * LAUNCHER_PYTHON / LOCAL_SLURM_JOB_PYTHON may be relative (.venv/bin/python) or bare names:
#   they are made absolute first, since the job user's shim runs them from elsewhere.
set -euo pipefail

CMD=${1:-}
NAME=${LOCAL_SLURM_NAME:-local}
SUSER=${LOCAL_SLURM_USER:-skyslurm}
STATE=${LOCAL_SLURM_STATE:-/var/lib/gpu-launcher/local-slurm}
SLURM_CONF=/etc/slurm/slurm.conf
UV_VERSION=0.13.9

log() { echo "local-slurm: $*" >&2; }
die() { echo "local-slurm: error: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "run as root (it installs packages and starts daemons)"

# abs_python VAR PATH: PATH as an absolute path to an executable (a bare name is looked up on
# PATH; a relative path is taken from the current directory). Symlinks are kept, not followed:
# a venv's bin/python must stay the venv's. The job user's shim runs it from another directory,
# so a relative path there would not be found (exit 127 in setup).
abs_python() {
  local p=$2
  case "$p" in
    /*) ;;
    */*) p="$(cd "$(dirname "$p")" 2>/dev/null && pwd)/$(basename "$p")" || die "$1=$2: no such directory" ;;
    *) p=$(command -v "$p") || die "$1=$2: not found on PATH" ;;
  esac
  [ -x "$p" ] || die "$1=$2: $p is not an executable file"
  printf '%s' "$p"
}
LAUNCHER_PYTHON=$(abs_python LAUNCHER_PYTHON "${LAUNCHER_PYTHON:-python3}")
JOB_PY=$(abs_python LOCAL_SLURM_JOB_PYTHON "${LOCAL_SLURM_JOB_PYTHON:-$LAUNCHER_PYTHON}")

pid_alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

# wait_for SECONDS WHAT CMD...: poll CMD once a second, at most SECONDS.
wait_for() {
  local limit=$1 what=$2; shift 2
  for _ in $(seq "$limit"); do
    if "$@" >/dev/null 2>&1; then return 0; fi
    sleep 1
  done
  die "gave up after ${limit}s waiting for $what"
}

install_packages() {
  local missing=()
  command -v slurmctld >/dev/null || missing+=(slurm-wlm)
  command -v munged >/dev/null || missing+=(munge)
  [ -x /usr/sbin/sshd ] || missing+=(openssh-server)
  command -v setfacl >/dev/null || missing+=(acl)
  command -v rsync >/dev/null || missing+=(rsync)
  command -v ssh-keygen >/dev/null || missing+=(openssh-client)
  [ ${#missing[@]} = 0 ] && return 0
  log "installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null \
    || { apt-get update -q >/dev/null && apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null; }
}

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# Grant $SUSER traverse (x) on every ancestor of $1 that others cannot enter; remembered for `down`.
# (Both the path as given, e.g. a venv's bin/python, and where its symlinks lead.)
grant_traverse() {
  local d p
  for p in "$(cd "$(dirname "$1")" && pwd)/x" "$(readlink -f "$1")"; do
    d=$(dirname "$p")
    while [ "$d" != "/" ]; do
      # Others' execute bit: "x", or "t" (sticky with x, e.g. /tmp). A named-user entry replaces
      # "other" for that user, so adding one where others may already enter would take rights away.
      case "$(stat -c %A "$d" | cut -c10)" in x | t) ;; *)
        setfacl -m "u:$SUSER:x" "$d"
        grep -qxF "$d" "$STATE/acl-dirs" 2>/dev/null || echo "$d" >>"$STATE/acl-dirs"
        ;;
      esac
      d=$(dirname "$d")
    done
  done
}

setup_user() {
  id "$SUSER" >/dev/null 2>&1 || useradd -m -s /bin/bash "$SUSER"
  local home
  home=$(getent passwd "$SUSER" | cut -d: -f6)
  mkdir -p "$STATE" && chmod 700 "$STATE"
  [ -f "$STATE/id_ed25519" ] || ssh-keygen -q -t ed25519 -N "" -C "local-slurm" -f "$STATE/id_ed25519"
  install -d -m 700 -o "$SUSER" -g "$SUSER" "$home/.ssh" "$home/bin"
  install -m 600 -o "$SUSER" -g "$SUSER" "$STATE/id_ed25519.pub" "$home/.ssh/authorized_keys"

  # uv from its PyPI wheel, served to SkyPilot's `curl -LsSf https://astral.sh/uv/install.sh | sh`.
  if [ ! -x "$STATE/uv/uv" ]; then
    local tmp
    tmp=$(mktemp -d)
    "$LAUNCHER_PYTHON" -m pip download -q --no-deps --only-binary=:all: "uv==$UV_VERSION" -d "$tmp" \
      || die "could not download the uv wheel from PyPI"
    mkdir -p "$STATE/uv"
    python3 - "$tmp" "$STATE/uv/uv" <<'EOF'
import pathlib, sys, zipfile
whl = next(pathlib.Path(sys.argv[1]).glob("uv-*.whl"))
with zipfile.ZipFile(whl) as z:
    name = next(n for n in z.namelist() if n.endswith(".data/scripts/uv"))
    pathlib.Path(sys.argv[2]).write_bytes(z.read(name))
EOF
    chmod 755 "$STATE/uv/uv"
    rm -rf "$tmp"
  fi
  install -d -m 755 /opt/local-slurm
  install -m 755 "$STATE/uv/uv" /opt/local-slurm/uv
  cat >"$home/bin/curl" <<'EOF'
#!/bin/sh
# local-slurm: answers uv's installer URL offline; every other request goes to the real curl.
for a in "$@"; do
  case "$a" in
    https://astral.sh/uv/install.sh)
      echo 'd="${UV_INSTALL_DIR:-$HOME/.local/bin}"; mkdir -p "$d" && cp /opt/local-slurm/uv "$d/uv" && chmod 755 "$d/uv"'
      exit 0 ;;
  esac
done
exec /usr/bin/curl "$@"
EOF
  # Python 3.10 for SkyPilot's runtime venv (Debian 12 has 3.11 only).
  if [ ! -x /usr/bin/python3.10 ] && [ ! -x /usr/local/bin/python3.10 ]; then
    local py310
    py310=$(ls -d /root/.pyenv/versions/3.10*/bin/python3.10 "$(pyenv root 2>/dev/null || echo /nonexistent)"/versions/3.10*/bin/python3.10 2>/dev/null | head -1 || true)
    [ -n "$py310" ] || die "no Python 3.10 found for SkyPilot's runtime (pyenv install 3.10, or a cluster with internet)"
    ln -sfn "$py310" "$home/bin/python3.10"
    grant_traverse "$py310"
  fi
  # `python` for jobs: the launcher's environment (torch, scikit-learn for the example).
  printf '#!/bin/sh\nexec %q "$@"\n' "$JOB_PY" >"$home/bin/python"
  grant_traverse "$JOB_PY"
  chmod 755 "$home/bin/curl" "$home/bin/python"
  chown -R "$SUSER:$SUSER" "$home/bin"
  for f in .bashrc .profile; do
    touch "$home/$f"
    grep -q 'local-slurm: offline' "$home/$f" || cat >>"$home/$f" <<'EOF'
# local-slurm: offline supplies for SkyPilot's runtime setup
export PATH="$HOME/bin:$PATH"
export SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt
EOF
    chown "$SUSER:$SUSER" "$home/$f"
  done
}

start_sshd() {
  mkdir -p /run/sshd
  ssh-keygen -A >/dev/null
  [ -f "$STATE/ssh_port" ] || free_port >"$STATE/ssh_port"
  local port
  port=$(cat "$STATE/ssh_port")
  if ! pid_alive "$STATE/sshd.pid"; then
    /usr/sbin/sshd -p "$port" -o ListenAddress=127.0.0.1 -o PidFile="$STATE/sshd.pid" \
      -o PasswordAuthentication=no -o AllowUsers="$SUSER"
  fi
  wait_for 20 "sshd on 127.0.0.1:$port" ssh -q -i "$STATE/id_ed25519" -p "$port" -o BatchMode=yes \
    -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null "$SUSER@127.0.0.1" true
}

write_slurm_conf() {
  local host cpus mem_mib
  host=$(hostname -s)
  cpus=$(nproc)
  mem_mib=$(awk '/MemTotal/ {m = int($2 / 1024 / 2); print (m > 8000 ? 8000 : m)}' /proc/meminfo)
  mkdir -p /etc/slurm /var/spool/slurmctld /var/spool/slurmd /var/log/slurm /run/slurm
  chown slurm:slurm /var/spool/slurmctld /var/log/slurm /run/slurm 2>/dev/null || true
  cat >"$SLURM_CONF" <<EOF
# written by scripts/local-slurm.sh (one node, for SkyPilot tests)
ClusterName=local
SlurmctldHost=$host(127.0.0.1)
SlurmUser=slurm
AuthType=auth/munge
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldPidFile=/run/slurm/slurmctld.pid
SlurmdPidFile=/run/slurm/slurmd.pid
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
ReturnToService=2
KillWait=10
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus Boards=1 SocketsPerBoard=1 CoresPerSocket=$cpus ThreadsPerCore=1 RealMemory=$mem_mib State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE DefaultTime=INFINITE State=UP
EOF
}

start_slurm() {
  mkdir -p /run/munge /var/log/munge /var/lib/munge
  chown munge:munge /run/munge /var/log/munge /var/lib/munge
  [ -f /etc/munge/munge.key ] || { mungekey -c -f 2>/dev/null || /usr/sbin/create-munge-key -f; chown munge:munge /etc/munge/munge.key; }
  pid_alive /run/munge/munged.pid || su munge -s /bin/sh -c /usr/sbin/munged
  wait_for 20 "munged" sh -c 'munge -n | unmunge'
  pid_alive /run/slurm/slurmctld.pid || slurmctld
  wait_for 30 "slurmctld" scontrol ping
  pid_alive /run/slurm/slurmd.pid || slurmd
  local host
  host=$(hostname -s)
  wait_for 60 "node $host to register" sh -c "sinfo -h -n $host -o %T | grep -Eq 'idle|mix|alloc|down|drain'"
  if sinfo -h -n "$host" -o %T | grep -Eq 'down|drain'; then
    scontrol update nodename="$host" state=resume || true
  fi
  wait_for 60 "node $host idle" sh -c "sinfo -h -n $host -o %T | grep -Eq 'idle|mix|alloc'"
}

write_sky_slurm_config() {
  local port cfg
  port=$(cat "$STATE/ssh_port")
  cfg="$HOME/.slurm/config"
  install -d -m 700 "$HOME/.slurm"
  touch "$cfg" && chmod 600 "$cfg"
  python3 - "$cfg" "$NAME" <<EOF
import re, sys
path, name = sys.argv[1], sys.argv[2]
text = open(path).read()
block = f"""# >>> local-slurm {name}
Host {name}
  HostName 127.0.0.1
  Port $port
  User $SUSER
  IdentityFile $STATE/id_ed25519
  IdentitiesOnly yes
  StrictHostKeyChecking no
  UserKnownHostsFile /dev/null
# <<< local-slurm {name}
"""
text = re.sub(rf"# >>> local-slurm {re.escape(name)}\n.*?# <<< local-slurm {re.escape(name)}\n", "", text, flags=re.S)
open(path, "w").write(text + block)
EOF
}

declare_cluster() {
  local home
  home=$(getent passwd "$SUSER" | cut -d: -f6)
  # SkyPilot puts its own venv first on PATH (and HOME is per SkyPilot cluster): jobs find
  # `python` (the launcher's environment) through the user's real ~/bin.
  if "$LAUNCHER_PYTHON" -c 'import launcher' 2>/dev/null; then
    "$LAUNCHER_PYTHON" -m launcher.cli.main clusters add "$NAME" --infra "slurm/$NAME" \
      --cpus "$(nproc)" --job-prefix "export PATH=$home/bin:\$PATH" --replace >&2
    # SkyPilot launches the jobs; the quickstart installs the launcher without it.
    "$LAUNCHER_PYTHON" -c 'import importlib.util, sys; sys.exit(importlib.util.find_spec("sky") is None)' \
      || log "warning: SkyPilot is not installed for $LAUNCHER_PYTHON, and launches on slurm/$NAME need it: $LAUNCHER_PYTHON -m pip install -c requirements.lock -e '.[sky,train]'"
  else
    log "$LAUNCHER_PYTHON cannot import the launcher; declare it yourself: launcher clusters add $NAME --infra slurm/$NAME"
  fi
}

up() {
  install_packages
  setup_user
  start_sshd
  write_slurm_conf
  start_slurm
  write_sky_slurm_config
  declare_cluster
  log "Slurm partition 'debug' on $(hostname -s) is up; SkyPilot reaches it as slurm/$NAME"
  echo "slurm/$NAME"
}

down() {
  # Jobs first (SkyPilot clusters are Slurm jobs), then the SkyPilot API server of this
  # LAUNCHER_HOME, then the daemons in reverse order.
  if command -v scancel >/dev/null && scontrol ping >/dev/null 2>&1; then
    scancel --user "$SUSER" 2>/dev/null || true
    for _ in $(seq 20); do [ -z "$(squeue -h -u "$SUSER" 2>/dev/null)" ] && break; sleep 1; done
  fi
  if "$LAUNCHER_PYTHON" -c 'import launcher' 2>/dev/null; then
    "$LAUNCHER_PYTHON" -m launcher.cli.main clusters remove "$NAME" --missing-ok >&2 || true
    "$LAUNCHER_PYTHON" -m launcher.executors.sky_server stop >&2 || true
  fi
  for pidfile in /run/slurm/slurmd.pid /run/slurm/slurmctld.pid /run/munge/munged.pid "$STATE/sshd.pid"; do
    if pid_alive "$pidfile"; then
      kill "$(cat "$pidfile")"
      for _ in $(seq 20); do pid_alive "$pidfile" || break; sleep 0.5; done
    fi
    rm -f "$pidfile"
  done
  if [ -f "$STATE/acl-dirs" ]; then
    while read -r d; do setfacl -x "u:$SUSER" "$d" 2>/dev/null || true; done <"$STATE/acl-dirs"
    rm -f "$STATE/acl-dirs"
  fi
  # The user's own processes (skylet and friends a killed job left behind).
  if id "$SUSER" >/dev/null 2>&1; then
    for pid in $(pgrep -u "$SUSER" || true); do kill "$pid" 2>/dev/null || true; done
  fi
  log "stopped"
}

status() {
  pid_alive /run/slurm/slurmctld.pid && pid_alive /run/slurm/slurmd.pid && pid_alive "$STATE/sshd.pid" \
    && sinfo -h -o %T | grep -Eq 'idle|mix|alloc' && echo "slurm/$NAME"
}

case "$CMD" in
  up) up ;;
  down) down ;;
  status) status ;;
  *) echo "usage: $0 up|down|status" >&2; exit 2 ;;
esac
