#!/usr/bin/env bash
# Writes isobench's pod images as docker-archive tarballs, without Docker or a registry, from
# this host's files. `ctr -n k8s.io images import OUT` (or `scripts/k8s-local.sh up DIR OUT`)
# makes one a node's image; for a real cluster, build the Dockerfiles and push them instead.
#
#   scripts/k8s-image.sh [--tag isobench:VERSION] [--bin target/release/isobench] OUT.tar
#       the agent's: the isobench binary with fio, sysbench, iperf3 and dmesg and their libraries
#   scripts/k8s-image.sh --cassandra 5.0.9 [--tag isobench-cassandra:5.0.9] [--bin …] OUT.tar
#       the database's: isobench (which configures and runs the node, as the local server),
#       Debian's Java 17 runtime (openjdk-17-jre-headless) and Cassandra from Maven Central, as
#       `isobench server fetch cassandra` caches it (fetched first if it is not)
#   scripts/k8s-image.sh --database postgres|redis [--tag isobench-KIND:VERSION] [--bin …] OUT.tar
#       a served database's: isobench (which starts the server in the pod, as the agent does)
#       and the server's programs and files as Debian's package installs them on this host
#   scripts/k8s-image.sh --root DIR --tag NAME --entrypoint JSON OUT.tar   (any root directory)
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
version=$(sed -n 's/^version = "\(.*\)"/\1/p' "$here/Cargo.toml" | head -1)
tag=""
bin="$here/target/release/isobench"
root=""
cassandra=""
database=""
entrypoint='["/usr/local/bin/isobench"]'
env='"PATH=/usr/local/bin:/usr/bin:/bin"'
while [ $# -gt 1 ]; do
  case "$1" in
    --tag) tag=$2; shift 2 ;;
    --bin) bin=$2; shift 2 ;;
    --root) root=$2; shift 2 ;;
    --entrypoint) entrypoint=$2; shift 2 ;;
    --cassandra) cassandra=$2; shift 2 ;;
    --database) database=$2; shift 2 ;;
    *) echo "k8s-image: unknown option $1" >&2; exit 2 ;;
  esac
done
[ -n "$tag" ] || tag=${cassandra:+isobench-cassandra:$cassandra}
[ -n "$tag" ] || tag=${database:+isobench-$database:$version}
pg=$(ls /usr/lib/postgresql 2>/dev/null | sort -n | tail -1)
case "$database" in
  "") ;;
  postgres)
    [ -n "$pg" ] || { echo "k8s-image: PostgreSQL is missing (scripts/setup.sh installs it)" >&2; exit 1; }
    env="\"PATH=/usr/local/bin:/usr/lib/postgresql/$pg/bin:/usr/bin:/bin\"" ;;
  redis) command -v redis-server >/dev/null || { echo "k8s-image: redis-server is missing (scripts/setup.sh installs it)" >&2; exit 1; } ;;
  *) echo "k8s-image: --database takes postgres or redis, not $database (a MariaDB image is not built yet)" >&2; exit 2 ;;
esac
[ -n "$tag" ] || tag="isobench:$version"
[ -z "$cassandra$database" ] || entrypoint='["/usr/local/bin/isobench", "k8s", "db", "run"]'
if [ -n "$cassandra" ]; then
  jre=/usr/lib/jvm/java-17-openjdk-amd64
  env="\"PATH=/usr/local/bin:$jre/bin:/usr/bin:/bin\", \"JAVA_HOME=$jre\", \"ISOBENCH_CACHE=/opt/isobench\""
fi
out=${1:?"usage: $0 [--tag T] [--bin B] OUT.tar"}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# libraries_of FILE: into the root, every library FILE links (nothing for a static one).
libraries_of() {
  { ldd "$1" 2>/dev/null || true; } | awk '/=> \// { print $3 } /^\t\// { print $1 }' | while read -r lib; do
    [ -e "$work/root$lib" ] || install -D -m 755 "$(readlink -f "$lib")" "$work/root$lib"
  done
}

# copy_with_libraries FILE DEST: FILE at DEST in the root, and every library it links.
copy_with_libraries() {
  install -D -m 755 "$1" "$work/root$2"
  libraries_of "$1"
}

# class_data_archive ROOT: the node started once in the image's own root (private mount, PID,
# UTS and network namespaces, nothing of it left behind) and stopped cleanly, so that its
# class-data-sharing archive is in the image for every pod, as it is in the cache for local nodes.
class_data_archive() {
  local r=$1 jre=/usr/lib/jvm/java-17-openjdk-amd64
  mkdir -p "$r/proc" "$r/dev" "$r/data"
  echo "127.0.0.1 localhost isobench-image" >"$r/etc/hosts"
  if ! unshare -m -p -f -n -u sh -c '
      set -e
      PATH=/usr/sbin:/usr/bin:/sbin:/bin
      r=$1 path="/usr/local/bin:$2/bin:/usr/bin:/bin"
      hostname isobench-image; ip link set lo up
      mount -t proc proc "$r/proc"; mount --rbind /dev "$r/dev"
      mount -t tmpfs tmpfs "$r/tmp"; mount -t tmpfs tmpfs "$r/data"
      isobench() {
        env -i PATH="$path" ISOBENCH_CACHE=/opt/isobench /usr/sbin/chroot "$r" /usr/local/bin/isobench --workdir /tmp/isobench "$@"
      }
      isobench server start cassandra --version "$3" --heap 512M --quick-jit --data /data/cassandra >/dev/null
      isobench server stop cassandra >/dev/null
    ' sh "$r" "$jre" "$cassandra" >"$work/cds.log" 2>&1; then
    echo "k8s-image: no class-data archive (pods start without one): $(tail -3 "$work/cds.log")" >&2
  fi
  rm -f "$r/etc/hosts"
  ls "$r/opt/isobench/cassandra-$cassandra"/cds-*.jsa >/dev/null 2>&1 \
    || echo "k8s-image: no class-data archive was made (pods start without one)" >&2
}

if [ -z "$root" ]; then
  [ -x "$bin" ] || { echo "k8s-image: $bin is missing (cargo build --release)" >&2; exit 1; }
  copy_with_libraries "$bin" /usr/local/bin/isobench
  tools="fio sysbench iperf3 dmesg"
  # The database's pods run no workload engine; dmesg tells gVisor's kernel from the node's.
  [ -z "$cassandra$database" ] || tools="dmesg"
  for tool in $tools; do
    path=$(command -v "$tool") || { echo "k8s-image: $tool is missing (scripts/setup.sh installs it)" >&2; exit 1; }
    copy_with_libraries "$path" "/usr/bin/$tool"
  done
  if [ -z "$cassandra$database" ]; then
    # The served databases' loads and clients, where this host has them (PostgreSQL's are its
    # version's own programs: /usr/bin's are a Perl wrapper).
    for tool in pgbench psql redis-benchmark redis-cli mariadb; do
      path=$(command -v "$tool") || continue
      case "$tool" in pgbench | psql) path=/usr/lib/postgresql/$pg/bin/$tool ;; esac
      copy_with_libraries "$path" "/usr/bin/$tool"
    done
  fi
  mkdir -p "$work/root/tmp" "$work/root/etc" "$work/root/data" "$work/root/scratch"
  chmod 1777 "$work/root/tmp"
  echo "root:x:0:0:root:/root:/bin/false" >"$work/root/etc/passwd"
  echo "root:x:0:" >"$work/root/etc/group"
  case "$database" in
    postgres)
      # The server's programs, modules and share files (initdb reads them), /bin/sh (initdb
      # starts the server through it), and the package's user, which the server runs as.
      # Not its JIT (llvmjit.so and the 100 MB of LLVM it links): the short queries of pgbench
      # and sysbench stay below jit_above_cost, and the server runs without one when it is absent.
      for d in "/usr/lib/postgresql/$pg" "/usr/share/postgresql/$pg"; do (cd / && cp -a --parents "${d#/}" "$work/root/"); done
      rm -rf "$work/root/usr/lib/postgresql/$pg/lib/llvmjit"* "$work/root/usr/lib/postgresql/$pg/lib/bitcode"
      find "$work/root/usr/lib/postgresql/$pg" -type f \( -perm -u+x -o -name '*.so' \) | while read -r elf; do libraries_of "$elf"; done
      copy_with_libraries "$(readlink -f /bin/sh)" /bin/sh
      getent passwd postgres >>"$work/root/etc/passwd"
      getent group postgres >>"$work/root/etc/group"
      mkdir -p "$work/root/run/isobench" ;;
    redis)
      # redis-server is redis-check-rdb by another name: the name chooses what it runs as.
      copy_with_libraries "$(readlink -f "$(command -v redis-server)")" /usr/bin/redis-server
      mkdir -p "$work/root/run/isobench" ;;
  esac
  if [ -n "$cassandra" ]; then
    # Debian's Java runtime as its package installs it (its /etc files included), and every
    # library its programs and modules link.
    dpkg-query -W -f='${Status}' openjdk-17-jre-headless 2>/dev/null | grep -q "install ok installed" \
      || { echo "k8s-image: openjdk-17-jre-headless is missing (scripts/setup.sh installs it)" >&2; exit 1; }
    # (From /, with relative names: coreutils 9.1's `cp -a --parents` fails on absolute ones.)
    dpkg -L openjdk-17-jre-headless | grep -v '^/usr/share/\(doc\|man\|lintian\)' | while read -r f; do
      if [ -L "$f" ] || [ -f "$f" ]; then (cd / && cp -a --parents "${f#/}" "$work/root/"); fi
    done
    if [ -f /etc/ssl/certs/java/cacerts ]; then (cd / && cp -a --parents etc/ssl/certs/java/cacerts "$work/root/"); fi
    find "$jre" -type f \( -name '*.so' -o -perm -u+x \) | while read -r elf; do libraries_of "$elf"; done
    fetched=$("$bin" server fetch cassandra --version "$cassandra" | sed -n 's/^Cassandra .* is in \(.*\)$/\1/p')
    [ -f "$fetched/.complete" ] || { echo "k8s-image: no Cassandra $cassandra was fetched" >&2; exit 1; }
    mkdir -p "$work/root/opt/isobench/cassandra-$cassandra"
    cp -a "$fetched" "$work/root/opt/isobench/cassandra-$cassandra/lib"
    # The native code inside Cassandra's jars (netty's epoll transport, lz4, snappy, zstd, jna)
    # is unpacked at run time: the libraries it links must be in the image too, or Cassandra
    # silently falls back to slower pure-Java paths (NIO instead of epoll).
    mkdir -p "$work/natives"
    python3 - "$fetched" "$work/natives" <<'EOF'
import glob, os, sys, zipfile
for jar in glob.glob(os.path.join(sys.argv[1], "*.jar")):
    with zipfile.ZipFile(jar) as z:
        for name in z.namelist():
            if name.endswith(".so") and any(a in name for a in ("x86_64", "amd64", "x86-64")):
                with open(os.path.join(sys.argv[2], os.path.basename(jar) + "-" + os.path.basename(name)), "wb") as f:
                    f.write(z.read(name))
EOF
    for native in "$work/natives"/*.so; do libraries_of "$native"; done
    mkdir -p "$work/root/run/isobench"
    class_data_archive "$work/root"
  fi
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
 "config": {"Entrypoint": $entrypoint, "Env": [$env], "WorkingDir": "/"},
 "rootfs": {"type": "layers", "diff_ids": ["sha256:$layer"]}}
EOF
config=$(sha256sum "$work/config.json" | cut -d' ' -f1)
mv "$work/config.json" "$work/image/$config.json"
echo "[{\"Config\": \"$config.json\", \"RepoTags\": [\"$tag\"], \"Layers\": [\"$layer/layer.tar\"]}]" >"$work/image/manifest.json"
tar -C "$work/image" -cf "$out" .
echo "$out ($tag, $(du -h "$out" | cut -f1))"
