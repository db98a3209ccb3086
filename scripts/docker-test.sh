#!/usr/bin/env bash
# The Docker image and the multi-node scenarios in containers (issue: multi-node tests in Docker, for real).
#
#   scripts/docker-test.sh             build the image from host binaries and run every check below
#   scripts/docker-test.sh --figures   also measure the image's figures (docs/operations.md#docker): a 60 s partition
#                                      with 1,000 writes on each side, and the time from `docker run` to healthy
#
# What it does, on a Debian 12 machine (CI's kind), installing what is missing:
#   1. docker.io, debootstrap and docker-compose (Compose v1) from Debian's packages; starts dockerd when none
#      answers (and stops only the one it started);
#   2. a Debian bookworm base image, `settee-base:bookworm`, made once with debootstrap from the mirror apt already
#      uses (no registry is reachable here) and kept by its tag;
#   3. `settee` built on the host with --static-swift-stdlib (debug by default, sharing
#      scripts/test.sh's build; SETTEE_DOCKER_CONFIGURATION=release for the release binaries,
#      SETTEE_DOCKER_SCRATCH_PATH=DIR to build it in DIR rather than .build) and `settee-js` (C++, one compiler
#      command), stripped and put in
#      Docker/prebuilt/, and the image built from Docker/Dockerfile's one runtime stage with BINARIES=prebuilt by
#      the legacy builder (no BuildKit here);
#   4. single-container checks: non-root user, the health check, SETTEE_ADMIN (and the refusal without it),
#      HTTPS through SETTEE_TLS_CERT/SETTEE_TLS_KEY, JavaScript in the container;
#   5. Docker/compose.yml's three nodes, and `settee-cluster-check --urls …` runs every multi-node scenario against
#      them (convergence of every kind of write, a partition with conflicting edits, SIGKILL during a write load,
#      a rolling restart, a wiped node), then a container recreated on its volume keeps its data.
# Everything it starts (containers, networks, volumes) is removed at the end, whatever happened.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
figures=0
[ "${1:-}" = "--figures" ] && figures=1
configuration="${SETTEE_DOCKER_CONFIGURATION:-debug}"
base=settee-base:bookworm
image=settee:local
project=settee-ci
password=docker-test-secret
ports=(5991 5992 5993)
started_dockerd=""
log() { printf '\n== docker-test: %s\n' "$*"; }
fail() { printf 'docker-test: FAIL: %s\n' "$*" >&2; exit 1; }

# ---------------------------------------------------------------------------------------------------- tools
need=()
[ -x /usr/bin/docker ] && [ -x /usr/sbin/dockerd ] || need+=(docker.io)
command -v debootstrap >/dev/null 2>&1 || need+=(debootstrap)
command -v docker-compose >/dev/null 2>&1 || need+=(docker-compose)
command -v openssl >/dev/null 2>&1 || need+=(openssl)
if [ ${#need[@]} -gt 0 ]; then
    log "installing ${need[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi
# Debian's client, not whatever else is on PATH (a newer one without the buildx plugin can't build here).
export PATH="/usr/bin:/usr/sbin:$PATH"
export DOCKER_BUILDKIT=0 COMPOSE_DOCKER_CLI_BUILD=0
forward_policy=""
if ! docker info >/dev/null 2>&1; then
    # dockerd sets the FORWARD chain's policy to DROP, which would cut the network-namespace cluster of the test
    # suite (Tests/SetteeClusterHarness) off; the policy is put back when this dockerd stops.
    forward_policy="$(iptables -S FORWARD 2>/dev/null | awk '$1 == "-P" {print $3}' || true)"
    log "starting dockerd"
    dockerd >/tmp/settee-dockerd.log 2>&1 &
    started_dockerd=$!
    for _ in $(seq 1 60); do docker info >/dev/null 2>&1 && break; sleep 0.5; done
    docker info >/dev/null 2>&1 || fail "dockerd did not start (see /tmp/settee-dockerd.log)"
fi

compose() {
    SETTEE_PASSWORD=$password SETTEE_NODE1_PORT=${ports[0]} SETTEE_NODE2_PORT=${ports[1]} SETTEE_NODE3_PORT=${ports[2]} \
        docker-compose -p "$project" -f Docker/compose.yml "$@"
}
single=(settee-test-one settee-test-noadmin settee-test-tls)
cleanup() {
    set +e
    compose down -v --remove-orphans >/dev/null 2>&1
    docker rm -f "${single[@]}" >/dev/null 2>&1
    docker volume rm settee-test-one-data >/dev/null 2>&1
    rm -rf "${tls_dir:-}"
    if [ -n "$started_dockerd" ]; then
        kill "$started_dockerd"; wait "$started_dockerd" 2>/dev/null
        [ -n "$forward_policy" ] && iptables -P FORWARD "$forward_policy"
    fi
}
trap cleanup EXIT

# ------------------------------------------------------------------------------------------------ base image
if ! docker image inspect "$base" >/dev/null 2>&1; then
    # The mirror apt uses here (deb822 sources first, then the one-line format); never a host written in the repository.
    mirror="$(awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/*.sources 2>/dev/null || true)"
    [ -n "$mirror" ] || mirror="$(awk '$1 == "deb" && $3 == "bookworm" {print $2; exit}' /etc/apt/sources.list 2>/dev/null || true)"
    [ -n "$mirror" ] || fail "no Debian mirror found in /etc/apt/sources.list*"
    log "making $base with debootstrap from $mirror"
    rootfs="$(mktemp -d /tmp/settee-rootfs.XXXXXX)"
    debootstrap --variant=minbase bookworm "$rootfs" "$mirror" >/tmp/settee-debootstrap.log 2>&1 \
        || { tail -20 /tmp/settee-debootstrap.log; fail "debootstrap failed"; }
    # As Debian's -slim images: no documentation, manual pages or package caches, now or in later installs.
    cat >"$rootfs/etc/dpkg/dpkg.cfg.d/settee-slim" <<'EOF'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
path-include /usr/share/locale/locale.alias
EOF
    find "$rootfs/usr/share/doc" -mindepth 1 -not -name copyright -not -type d -delete
    rm -rf "$rootfs"/usr/share/man/* "$rootfs"/usr/share/info/* "$rootfs"/var/cache/apt/archives/*.deb \
        "$rootfs"/var/cache/apt/*.bin "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/log/*.log
    find "$rootfs/usr/share/locale" -mindepth 1 -maxdepth 1 -not -name locale.alias -exec rm -rf {} +
    tar -C "$rootfs" -c . | docker import - "$base" >/dev/null
    rm -rf "$rootfs"
fi

# --------------------------------------------------------------------------------------------------- image
log "building static settee ($configuration) and settee-js on the host"
# In a debug build nothing is dead-stripped, and Foundation's static libraries need their own static dependencies
# (CoreFoundation, the ICU and collections Foundation bundles, its C shims), which the toolchain's static link list
# leaves to autolinking, and modules compiled without --static-swift-stdlib don't autolink them.
flags=(--static-swift-stdlib -c "$configuration")
# SETTEE_DOCKER_SCRATCH_PATH: build in that directory instead of .build (a release static build kept apart from the
# dynamic one the tests and benchmarks use: toggling --static-swift-stdlib recompiles everything).
[ -n "${SETTEE_DOCKER_SCRATCH_PATH:-}" ] && flags+=(--scratch-path "$SETTEE_DOCKER_SCRATCH_PATH")
[ "$configuration" = debug ] && for lib in CoreFoundation _FoundationICU _FoundationCollections _FoundationCShims; do
    flags+=(-Xlinker "-l$lib")
done
swift build --product settee "${flags[@]}" >/tmp/settee-docker-build.log 2>&1 \
    || { grep -E 'error' /tmp/settee-docker-build.log | head -20; fail "the static settee does not build"; }
bin="$(swift build "${flags[@]}" --show-bin-path)"
mkdir -p Docker/prebuilt
strip --strip-all --remove-section=.swift_ast -o Docker/prebuilt/settee "$bin/settee"
# settee-js is C++ alone: one compiler command, as the Dockerfile's build stage and scripts/test-settee-js.sh build
# it, with no Swift runtime in it.
cxx="${CXX:-$(command -v clang++ || command -v g++)}"
# shellcheck disable=SC2046
"$cxx" -std=c++17 -O2 Sources/settee-js/main.cpp $(pkg-config --cflags --libs mozjs-102) -lpthread -o /tmp/settee-js-image \
    || fail "settee-js does not build"
strip --strip-all -o Docker/prebuilt/settee-js /tmp/settee-js-image
rm -f /tmp/settee-js-image
# The crash backtracer the image's SWIFT_BACKTRACE names (as the Dockerfile's build stage copies it).
backtracer="$(dirname "$(readlink -f "$(command -v swift)")")/../libexec/swift/linux/swift-backtrace-static"
if [ -x "$backtracer" ]; then cp "$backtracer" Docker/prebuilt/swift-backtrace-static; else rm -f Docker/prebuilt/swift-backtrace-static; fi
# Objects compiled for the static link name the static-only Foundation libraries; the next dynamic link
# (scripts/test.sh) would look for them. SwiftPM doesn't rebuild them when the flag goes, so they are removed here.
[ -n "${SETTEE_DOCKER_SCRATCH_PATH:-}" ] || find "$bin" -name '*.o' -print0 2>/dev/null \
    | { xargs -0 -r grep -l -a -E -- '-l(CoreFoundation|_FoundationCShims|_FoundationCollections)' || true; } | xargs -r rm -f
ldd Docker/prebuilt/settee | grep -q libswiftCore && fail "settee is not linked with the static Swift runtime"
ldd Docker/prebuilt/settee-js | grep -q libswift && fail "settee-js is linked with the Swift runtime"

log "docker build (legacy builder, BINARIES=prebuilt, base $base)"
build_started=$(date +%s)
docker build -q -f Docker/Dockerfile --build-arg BINARIES=prebuilt --build-arg SWIFT_IMAGE="$base" \
    --build-arg RUNTIME_IMAGE="$base" -t "$image" . >/dev/null
size=$(docker image inspect -f '{{.Size}}' "$image")
echo "image $image: $((size / 1000000)) MB, built in $(( $(date +%s) - build_started )) s"

# ------------------------------------------------------------------------------------------ one container
wait_healthy() {  # container, seconds → prints the seconds it took
    local started=$(date +%s.%N) status
    for _ in $(seq 1 $(( $2 * 5 ))); do
        status="$(docker inspect -f '{{.State.Health.Status}}' "$1" 2>/dev/null || echo gone)"
        if [ "$status" = healthy ]; then echo "$(echo "$(date +%s.%N) - $started" | bc)"; return 0; fi
        [ "$status" = gone ] && break
        sleep 0.2
    done
    docker logs "$1" 2>&1 | tail -20
    fail "$1 is not healthy after $2 s (status $status)"
}
http() {  # method url [body] → prints the status code
    curl -s -o /tmp/settee-docker-body -w '%{http_code}' -X "$1" -H 'Content-Type: application/json' ${3:+-d "$3"} "$2" -k
}

log "one container: user, health check, admin, JavaScript"
run_started=$(date +%s.%N)
docker run -d --name settee-test-one -p 127.0.0.1:5990:5984 -e SETTEE_ADMIN=admin:$password \
    -v settee-test-one-data:/var/lib/settee "$image" >/dev/null
healthy_after=$(wait_healthy settee-test-one 60)
run_to_healthy=$(echo "$(date +%s.%N) - $run_started" | bc)
echo "healthy ${healthy_after}s after the health check's first poll began (${run_to_healthy}s after docker run)"
[ "$(docker exec settee-test-one id -u)" = 10001 ] || fail "the node does not run as uid 10001"
[ "$(docker exec settee-test-one stat -c '%u %a' /var/lib/settee)" = "10001 700" ] || fail "the data volume is not uid 10001, mode 700"
[ "$(http PUT http://127.0.0.1:5990/nobody)" = 401 ] || fail "a write without credentials was not refused"
[ "$(http PUT http://admin:$password@127.0.0.1:5990/js)" = 201 ] || fail "the admin of SETTEE_ADMIN could not create a database"
http PUT "http://admin:$password@127.0.0.1:5990/js/_design/t" \
    '{"views":{"v":{"map":"function (doc) { emit(doc.n * 2, null); }"}},"validate_doc_update":"function (doc) { if (doc.bad) throw({forbidden: \"no\"}); }"}' >/dev/null
http PUT "http://admin:$password@127.0.0.1:5990/js/a" '{"n":21}' >/dev/null
[ "$(http GET "http://admin:$password@127.0.0.1:5990/js/_design/t/_view/v")" = 200 ] \
    && grep -q '"key":42' /tmp/settee-docker-body || fail "a JavaScript view does not answer in the container: $(cat /tmp/settee-docker-body)"
[ "$(http PUT "http://admin:$password@127.0.0.1:5990/js/b" '{"bad":true}')" = 403 ] \
    || fail "validate_doc_update did not refuse in the container: $(cat /tmp/settee-docker-body)"
echo "uid 10001, /var/lib/settee 10001:700, 401 without credentials, a JavaScript view and validate_doc_update answer"

docker run -d --name settee-test-noadmin "$image" >/dev/null
code="$(docker wait settee-test-noadmin)"
[ "$code" = 64 ] || fail "without SETTEE_ADMIN the node exited with $code, not 64"
docker logs settee-test-noadmin 2>&1 | grep -q "without an admin" || fail "the refusal without SETTEE_ADMIN does not say why"
echo "without SETTEE_ADMIN: exit status 64, and the log says why"

tls_dir="$(mktemp -d /tmp/settee-docker-tls.XXXXXX)"
openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=settee.test -keyout "$tls_dir/key.pem" -out "$tls_dir/cert.pem" 2>/dev/null
chmod 0755 "$tls_dir"; chmod 0644 "$tls_dir"/*.pem
docker run -d --name settee-test-tls -p 127.0.0.1:5989:5984 -e SETTEE_ADMIN=admin:$password \
    -e SETTEE_TLS_CERT=/tls/cert.pem -e SETTEE_TLS_KEY=/tls/key.pem -v "$tls_dir:/tls:ro" "$image" >/dev/null
wait_healthy settee-test-tls 60 >/dev/null
[ "$(http GET https://127.0.0.1:5989/_up)" = 200 ] || fail "the TLS node does not answer https://"
curl -s --max-time 3 http://127.0.0.1:5989/_up >/dev/null 2>&1 && fail "the TLS node answers plain http://"
echo "SETTEE_TLS_CERT/SETTEE_TLS_KEY: https:// answers, plain http:// does not, the health check follows"
docker rm -f settee-test-one settee-test-noadmin settee-test-tls >/dev/null

# ---------------------------------------------------------------------------------------------- the cluster
log "three nodes from Docker/compose.yml (project $project)"
compose up -d --no-build >/dev/null 2>&1 || { compose up -d --no-build; fail "docker-compose up failed"; }
for n in 1 2 3; do wait_healthy settee-node$n 90 >/dev/null; done
urls="$(printf "http://admin:$password@127.0.0.1:%s," "${ports[@]}")"
swift build --product settee-cluster-check 2>&1 | grep -E 'error' && fail "settee-cluster-check does not build"
"$(swift build --show-bin-path)/settee-cluster-check" --urls "${urls%,}" \
    --containers settee-node1,settee-node2,settee-node3 --network "${project}_mesh" \
    || { for n in 1 2 3; do docker logs --tail 15 settee-node$n; done; fail "a multi-node scenario failed in containers"; }

log "a container recreated on its volume keeps its data"
node3="http://admin:$password@127.0.0.1:${ports[2]}"
before="$(curl -s "$node3/mn-basic" | python3 -c 'import json,sys; print(json.load(sys.stdin)["doc_count"])')"
old_id="$(docker inspect -f '{{.Id}}' settee-node3)"
compose up -d --no-build --force-recreate --no-deps settee-node3 >/dev/null 2>&1
[ "$(docker inspect -f '{{.Id}}' settee-node3)" != "$old_id" ] || fail "settee-node3 was not recreated"
wait_healthy settee-node3 90 >/dev/null
after="$(curl -s "$node3/mn-basic" | python3 -c 'import json,sys; print(json.load(sys.stdin)["doc_count"])')"
[ "$before" = "$after" ] && [ "$before" -gt 0 ] || fail "the recreated container has $after docs in mn-basic, had $before"
echo "settee-node3 recreated (new container, same volume): mn-basic still holds its $after documents"

# ------------------------------------------------------------------------------------------------- figures
if [ $figures = 1 ]; then
    log "figures: a 60 s partition with 1,000 writes on each side"
    db=partition-figure
    curl -s -X PUT "http://admin:$password@127.0.0.1:${ports[0]}/$db" >/dev/null
    for p in "${ports[@]}"; do
        for _ in $(seq 1 120); do [ "$(http GET "http://admin:$password@127.0.0.1:$p/$db")" = 200 ] && break; sleep 0.5; done
    done
    for n in 1 2 3; do docker network disconnect "${project}_mesh" settee-node$n; done
    cut_at=$(date +%s)
    for i in 0 1 2; do
        docs="$(python3 -c "import json; print(json.dumps({'docs': [{'_id': 'n$i-%04d' % k, 'n': k} for k in range(1000)]}))")"
        [ "$(http POST "http://admin:$password@127.0.0.1:${ports[$i]}/$db/_bulk_docs" "$docs")" = 201 ] || fail "writes during the partition"
    done
    sleep $(( 60 - ($(date +%s) - cut_at) ))
    healed=$(date +%s.%N)
    for n in 1 2 3; do docker network connect --alias node$n "${project}_mesh" settee-node$n; done
    converged=""
    for _ in $(seq 1 600); do
        ok=1
        for p in "${ports[@]}"; do
            c="$(curl -s "http://admin:$password@127.0.0.1:$p/$db" | python3 -c 'import json,sys; print(json.load(sys.stdin).get("doc_count"))')"
            [ "$c" = 3000 ] || ok=0
        done
        [ $ok = 1 ] && { converged="$(echo "$(date +%s.%N) - $healed" | bc)"; break; }
        sleep 0.2
    done
    [ -n "$converged" ] || fail "no convergence within 120 s of healing"
    echo "figure: converged ${converged}s after healing a 60 s partition with 1,000 writes on each of 3 nodes"
    echo "figure: image $((size / 1000000)) MB; docker run → healthy ${run_to_healthy}s"
fi
log "every check passed"
