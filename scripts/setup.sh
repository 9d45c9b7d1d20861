#!/usr/bin/env bash
# Sets up stackflow on a fresh machine: system packages it needs, then a virtualenv in .venv
# installed from the committed constraints, then the Pulumi CLI (built with Go if there is none).
# Safe to run again: it only does what is missing.
#   bash scripts/setup.sh          runtime: MariaDB (the local cloud's databases), PostgreSQL (team
#                                  mode) + .venv + the Pulumi CLI
#   bash scripts/setup.sh --dev    also the test tools, Chromium (browser tests), and podman, runc
#                                  and debootstrap (the job image's test, run as root)
set -euo pipefail
cd "$(dirname "$0")/.."

dev=0
for arg in "$@"; do
  case "$arg" in
    --dev) dev=1 ;;
    *) echo "setup.sh: unknown option '$arg' (accepted: --dev)" >&2; exit 2 ;;
  esac
done

say() { printf '\033[1m[setup]\033[0m %s\n' "$*"; }

# --- system packages (Debian/Ubuntu) ---------------------------------------------------------
need=()
command -v mariadbd >/dev/null 2>&1 || [ -x /usr/sbin/mariadbd ] || need+=(mariadb-server)
# Team mode on one machine (and its tests): a PostgreSQL the project starts, as the `postgres` user.
compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null || need+=(postgresql)
if [ "$dev" = 1 ] && ! command -v chromium >/dev/null 2>&1; then need+=(chromium); fi
# The job image (scripts/build-image.sh, its test in the slow tier): rootful podman on runc, and
# debootstrap for the image's Debian base (no image registry is needed).
if [ "$dev" = 1 ]; then
  command -v podman >/dev/null 2>&1 || need+=(podman)
  command -v runc >/dev/null 2>&1 || [ -x /usr/sbin/runc ] || need+=(runc)
  command -v debootstrap >/dev/null 2>&1 || [ -x /usr/sbin/debootstrap ] || need+=(debootstrap)
fi
if [ "${#need[@]}" -gt 0 ]; then
  if ! command -v apt-get >/dev/null 2>&1; then
    say "missing system packages: ${need[*]} (no apt-get here: install them with your package manager)"
    exit 1
  fi
  sudo=""
  [ "$(id -u)" = 0 ] || sudo="sudo"
  say "installing system packages: ${need[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

# --- podman for the job image's test (root only: the test needs rootful podman) ----------------
# runc, not crun: crun refuses hybrid cgroup hierarchies. Default ulimits within this machine's
# hard limits: podman's own defaults are above them, and runc then cannot start a container.
if [ "$dev" = 1 ] && [ "$(id -u)" = 0 ] && command -v podman >/dev/null 2>&1; then
  conf=/etc/containers/containers.conf.d/50-stackflow.conf
  nofile=$(ulimit -Hn); [ "$nofile" != unlimited ] && [ "$nofile" -lt 20000 ] || nofile=20000
  nproc=$(ulimit -Hu); [ "$nproc" != unlimited ] && [ "$nproc" -lt 32768 ] || nproc=32768
  want=$(printf '%s\n' "# written by stackflow's scripts/setup.sh --dev" '[containers]' \
    "default_ulimits = [\"nofile=$nofile:$nofile\", \"nproc=$nproc:$nproc\"]" \
    '[engine]' 'runtime = "runc"')
  if [ "$(cat "$conf" 2>/dev/null)" != "$want" ]; then
    say "configuring podman: runtime runc, ulimits nofile $nofile, nproc $nproc ($conf)"
    mkdir -p "$(dirname "$conf")"
    printf '%s\n' "$want" > "$conf"
  fi
fi

# --- promtool for the alert rules' test: taken out of Debian's prometheus package, never installed
# (that would add a Prometheus server and its service); one static binary in the per-user cache.
if [ "$dev" = 1 ] && command -v apt-get >/dev/null 2>&1; then
  promtool_dir="${XDG_CACHE_HOME:-$HOME/.cache}/stackflow/promtool"
  if [ ! -x "$promtool_dir/promtool" ]; then
    say "extracting promtool from Debian's prometheus package into $promtool_dir"
    scratch=$(mktemp -d)
    ( cd "$scratch" && apt-get -o APT::Sandbox::User=root download -qq prometheus >/dev/null && dpkg-deb -x prometheus_*.deb x )
    mkdir -p "$promtool_dir"
    install -m 0755 "$scratch/x/usr/bin/promtool" "$promtool_dir/promtool"
    rm -rf "$scratch"
  fi
fi

# --- python environment ----------------------------------------------------------------------
python=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  say "creating .venv with $($python --version)"
  "$python" -m venv .venv
fi
extras=""
[ "$dev" = 1 ] && extras="[dev]"
stamp=".venv/.stackflow-installed${extras}"
want=$(cat pyproject.toml constraints.txt | sha256sum | cut -c1-16)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  say "installing stackflow${extras} from constraints.txt (reproducible pins)"
  log=.venv/pip-install.log
  if ! { .venv/bin/python -m pip install -q --upgrade pip &&
         .venv/bin/python -m pip install -q -c constraints.txt -e ".${extras}"; } >"$log" 2>&1; then
    tail -40 "$log" >&2
    say "pip install failed (full log: $log)"
    exit 1
  fi
  echo "$want" > "$stamp"
fi

# --- Pulumi CLI (the automation engine runs it by path) ---------------------------------------
# Reused from the per-user cache (~/.cache/stackflow/pulumi/v<sdk version>, shared by every clone),
# or linked from a `pulumi` of that exact version on PATH, or built with Go from scripts/pulumi-cli.
if ! .venv/bin/python -m stackflow.pulumi_cli ensure; then
  say "no Pulumi CLI (see above): every run needs it, on the local cloud too"
  exit 1
fi
# --- the repository's policy pack (pulumi-policy needs protobuf 5, stackflow locks 6) ----------
# Its own virtualenv in the per-user cache, made once by pip; without it the first run of an
# environment with policies makes it (about 30 s).
if ! .venv/bin/python -m stackflow.policy ready; then
  say "the policy pack's virtualenv could not be made (see above): runs with policies will try again"
fi
say "ready: .venv/bin/python flows/run.py --help"
