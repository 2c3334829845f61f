#!/usr/bin/env bash
# Writes isobench's pod image as a docker-archive tarball, without Docker or a registry: the
# isobench binary with fio, sysbench, iperf3 and dmesg and the libraries they link, from this
# host. `ctr -n k8s.io images import OUT` (or `scripts/k8s-local.sh up DIR OUT`) makes it a
# node's image; for a real cluster, build the Dockerfile and push it instead.
#
#   scripts/k8s-image.sh [--tag isobench:VERSION] [--bin target/release/isobench] OUT.tar
#   scripts/k8s-image.sh --root DIR --tag NAME --entrypoint JSON OUT.tar   (any root directory)
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
version=$(sed -n 's/^version = "\(.*\)"/\1/p' "$here/Cargo.toml" | head -1)
tag="isobench:$version"
bin="$here/target/release/isobench"
root=""
entrypoint='["/usr/local/bin/isobench"]'
while [ $# -gt 1 ]; do
  case "$1" in
    --tag) tag=$2; shift 2 ;;
    --bin) bin=$2; shift 2 ;;
    --root) root=$2; shift 2 ;;
    --entrypoint) entrypoint=$2; shift 2 ;;
    *) echo "k8s-image: unknown option $1" >&2; exit 2 ;;
  esac
done
out=${1:?"usage: $0 [--tag T] [--bin B] OUT.tar"}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# copy_with_libraries FILE DEST: FILE at DEST in the root, and every library it links.
copy_with_libraries() {
  install -D -m 755 "$1" "$work/root$2"
  ldd "$1" 2>/dev/null | awk '/=> \// { print $3 } /^\t\// { print $1 }' | while read -r lib; do
    [ -e "$work/root$lib" ] || install -D -m 755 "$(readlink -f "$lib")" "$work/root$lib"
  done
}

if [ -z "$root" ]; then
  [ -x "$bin" ] || { echo "k8s-image: $bin is missing (cargo build --release)" >&2; exit 1; }
  copy_with_libraries "$bin" /usr/local/bin/isobench
  for tool in fio sysbench iperf3 dmesg; do
    path=$(command -v "$tool") || { echo "k8s-image: $tool is missing (scripts/setup.sh installs it)" >&2; exit 1; }
    copy_with_libraries "$path" "/usr/bin/$tool"
  done
  mkdir -p "$work/root/tmp" "$work/root/etc" "$work/root/data" "$work/root/scratch"
  chmod 1777 "$work/root/tmp"
  echo "root:x:0:0:root:/root:/bin/false" >"$work/root/etc/passwd"
  echo "root:x:0:" >"$work/root/etc/group"
else
  cp -a "$root" "$work/root"
fi

# docker-archive: a layer tar, the image config naming its digest, and manifest.json.
mkdir -p "$work/image"
tar --numeric-owner --owner=0 --group=0 --mtime=@0 --sort=name -C "$work/root" -cf "$work/layer.tar" .
layer=$(sha256sum "$work/layer.tar" | cut -d' ' -f1)
mkdir -p "$work/image/$layer"
mv "$work/layer.tar" "$work/image/$layer/layer.tar"
cat >"$work/config.json" <<EOF
{"architecture": "amd64", "os": "linux", "created": "1970-01-01T00:00:00Z",
 "config": {"Entrypoint": $entrypoint, "Env": ["PATH=/usr/local/bin:/usr/bin:/bin"], "WorkingDir": "/"},
 "rootfs": {"type": "layers", "diff_ids": ["sha256:$layer"]}}
EOF
config=$(sha256sum "$work/config.json" | cut -d' ' -f1)
mv "$work/config.json" "$work/image/$config.json"
echo "[{\"Config\": \"$config.json\", \"RepoTags\": [\"$tag\"], \"Layers\": [\"$layer/layer.tar\"]}]" >"$work/image/manifest.json"
tar -C "$work/image" -cf "$out" .
echo "$out ($tag, $(du -h "$out" | cut -f1))"
