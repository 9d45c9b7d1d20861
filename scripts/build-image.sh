#!/usr/bin/env bash
# Builds stackflow's job image with podman (docs/guides/container-image.md) and prints its name.
#   bash scripts/build-image.sh                 target `run`: stackflow + the Pulumi CLI
#   bash scripts/build-image.sh --local-cloud   target `localcloud`: the same plus MariaDB
# The image is named by a hash of what goes into it (the Containerfile, the project's files, the
# commit, the Pulumi CLI, the base), so an unchanged tree reuses the image it built before.
#
# No image registry is needed: the Debian base is bootstrapped once from the Debian mirror this
# machine's apt uses (debootstrap --variant=minbase) and imported. pip inside the build reaches
# the index this machine's pip uses, with its CA bundle mounted as a build secret: neither is
# written into the image. Needs root (debootstrap, rootful podman): scripts/setup.sh --dev
# installs and configures podman, runc and debootstrap.
set -euo pipefail
cd "$(dirname "$0")/.."

target=run
name=localhost/stackflow-run
for arg in "$@"; do
  case "$arg" in
    --local-cloud) target=localcloud; name=localhost/stackflow-run-localcloud ;;
    *) echo "error: build-image.sh: unknown option '$arg' (accepted: --local-cloud)" >&2; exit 2 ;;
  esac
done

say() { printf '[build-image] %s\n' "$*" >&2; }
fail() { printf 'error: %s\n' "$1" >&2; [ -z "${2:-}" ] || printf '  what to do: %s\n' "$2" >&2; exit 1; }

command -v podman >/dev/null || fail "podman is not installed" "run: bash scripts/setup.sh --dev"
python=.venv/bin/python
[ -x "$python" ] || fail "no .venv in $(pwd)" "run: bash scripts/setup.sh"
pulumi=$("$python" -m stackflow.pulumi_cli path) ||
  fail "no Pulumi CLI to copy into the image" "run: $python -m stackflow.pulumi_cli ensure"
pulumi_version=$("$python" -m stackflow.pulumi_cli version)
pulumi_version=${pulumi_version#v}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# --- the Debian base, once per machine -------------------------------------------------------
suite=bookworm
base=localhost/stackflow-base:$suite
# The mirrors this machine's apt uses for the suite ("500 http://mirror/debian bookworm/main
# amd64 Packages"); STACKFLOW_DEBIAN_MIRROR overrides the main one.
mirror_of() { apt-cache policy 2>/dev/null | awk -v s="$1/main" '$3 == s { print $2; exit }'; }
if ! podman image exists "$base"; then
  command -v debootstrap >/dev/null || fail "debootstrap is not installed" "run: bash scripts/setup.sh --dev"
  mirror=${STACKFLOW_DEBIAN_MIRROR:-$(mirror_of "$suite")}
  [ -n "$mirror" ] || fail "no Debian $suite mirror found in this machine's apt sources" \
    "set STACKFLOW_DEBIAN_MIRROR to one (e.g. http://deb.debian.org/debian)"
  security=$(mirror_of "$suite-security")
  say "bootstrapping the Debian $suite base from $mirror (once; about a minute)"
  rootfs=$work/rootfs
  if ! debootstrap --variant=minbase "$suite" "$rootfs" "$mirror" >"$work/debootstrap.log" 2>&1; then
    tail -20 "$work/debootstrap.log" >&2
    fail "debootstrap of Debian $suite failed (above)"
  fi
  {
    echo "deb $mirror $suite main"
    echo "deb $mirror $suite-updates main"
    [ -z "$security" ] || echo "deb $security $suite-security main"
  } >"$rootfs/etc/apt/sources.list"
  # no package files or lists in the base: each layer fetches the lists it needs and drops them
  rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/cache/apt/*.bin "$rootfs"/var/lib/apt/lists/*
  tar -C "$rootfs" -c . | podman import --quiet --change 'CMD ["/bin/bash"]' - "$base" >/dev/null
  rm -rf "$rootfs"
fi

# --- the context: the project's files, the commit, the CLI -----------------------------------
ctx=$work/context
mkdir -p "$ctx/project"
paths=(pyproject.toml constraints.txt README.md stackflow.toml stackflow flows tasks programs
       deployments cli graph migrations environments)
git ls-files -z --cached --others --exclude-standard -- "${paths[@]}" |
  while IFS= read -r -d '' f; do [ -e "$f" ] && printf '%s\0' "$f"; done |
  tar --null -T - -c | tar -x -C "$ctx/project"
if commit=$(git rev-parse --verify -q HEAD); then
  [ -z "$(git status --porcelain --untracked-files=no -- "${paths[@]}")" ] || commit="$commit-dirty"
  # what stackflow records as the project's commit (stackflow/gitops/git.py, EXPORTED)
  echo "$commit" >"$ctx/project/.stackflow-exported"
fi
cp image/Containerfile "$ctx/Containerfile"
cp "$pulumi" "$ctx/pulumi"

base_id=$(podman image inspect --format '{{.Id}}' "$base")
tag=$( { echo "$target $base_id $pulumi_version"; cd "$ctx" && find . -type f -print0 | sort -z |
         xargs -0 sha256sum; } | sha256sum | cut -c1-16)
image=$name:$tag
if podman image exists "$image"; then
  say "reusing $image (nothing that goes into it changed)"
  echo "$image"
  exit 0
fi

# --- pip's settings, as build secrets ---------------------------------------------------------
ca=${PIP_CERT:-$("$python" -m pip config get global.cert 2>/dev/null || true)}
ca=${ca:-${SSL_CERT_FILE:-/etc/ssl/certs/ca-certificates.crt}}
[ -r "$ca" ] || fail "no CA bundle at $ca for pip inside the build" "set PIP_CERT to one"
pip_conf=$work/pip.conf
(
  umask 077
  echo "[global]"
  for key in index-url extra-index-url trusted-host; do
    value=$("$python" -m pip config get "global.$key" 2>/dev/null || true)
    env_name=PIP_$(echo "$key" | tr 'a-z-' 'A-Z_')
    value=${!env_name:-$value}
    [ -z "$value" ] || echo "$key = $value"
  done
) >"$pip_conf"

say "building $image (target $target)"
started=$(date +%s)
podman build --network host --target "$target" \
  --build-arg "BASE=$base" --build-arg "PULUMI_VERSION=$pulumi_version" \
  --secret "id=ca,src=$ca" --secret "id=pip.conf,src=$pip_conf" \
  --label "org.opencontainers.image.revision=${commit:-unknown}" \
  --tag "$image" --file "$ctx/Containerfile" "$ctx" >&2
say "built $image in $(( $(date +%s) - started )) s"
# Earlier builds of this name go (a disk fills with one per commit otherwise); podman keeps one a
# container still uses, and the layers the new image shares with them.
podman images --format '{{.Repository}}:{{.Tag}}' |
  awk -v n="$name" -v keep="$image" -F: '$1 == n && $0 != keep' |
  xargs -r podman rmi >/dev/null 2>&1 || true
echo "$image"
