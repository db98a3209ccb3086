#!/bin/sh
# Assembles the runtime image's whole filesystem in /rootfs (Docker/Dockerfile's `rootfs` stage runs it; the image
# is `FROM scratch` plus this tree). What a node needs and nothing else — no package manager, no Perl, no apt
# caches — which keeps the image near a third of a Debian base with the same packages:
#   /usr/local/bin   settee, settee-js, swift-backtrace-static (from /staging)
#   /lib, /lib64, /usr/lib   every shared library those binaries load (ldd's closure: glibc, libstdc++, libgcc_s,
#                    zlib, SQLite, SpiderMonkey) and the dynamic loader
#   /bin             busybox (sh, ls, cat, rm, id, stat, ps, wget...) for `docker exec` and the scripts in
#                    Docker/README.md; the node itself needs no shell
#   /etc             passwd/group with the `settee` user (uid/gid 10001), nsswitch.conf, the CA bundle
#   /usr/share/zoneinfo   time zones (TZ in logs)
#   /tmp (1777), /var/lib/settee (the data volume; owner and mode are set in the final stage)
set -eu
root=/rootfs
mkdir -p "$root/usr/local/bin" "$root/bin" "$root/etc/ssl/certs" "$root/usr/share" "$root/var/lib/settee" "$root/tmp"
chmod 1777 "$root/tmp"
cp -a /staging/. "$root/usr/local/bin/"
rm -f "$root/usr/local/bin/README.md"

# Shared libraries: ldd resolves each binary's whole closure; copy every file at the path ldd names (a symlink is
# copied as the file it points to, under the name the binary asks for).
for bin in "$root"/usr/local/bin/* /bin/busybox; do
    ldd "$bin" 2>/dev/null || true
done | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }' | sort -u | while read -r lib; do
    cp -L --parents "$lib" "$root/"
done

cp /bin/busybox "$root/bin/busybox"
for tool in sh ash ls cat rm mkdir cp mv ln id stat ps env df du head tail grep wget sleep kill uname; do
    ln -s busybox "$root/bin/$tool"
done

cat > "$root/etc/passwd" <<'EOF'
root:x:0:0:root:/root:/bin/sh
settee:x:10001:10001:settee:/var/lib/settee:/bin/false
nobody:x:65534:65534:nobody:/nonexistent:/bin/false
EOF
cat > "$root/etc/group" <<'EOF'
root:x:0:
settee:x:10001:
nogroup:x:65534:
EOF
cat > "$root/etc/nsswitch.conf" <<'EOF'
passwd: files
group: files
hosts: files dns
EOF
cp /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/ca-certificates.crt"
cp -a /usr/share/zoneinfo "$root/usr/share/zoneinfo"
rm -rf "$root/usr/share/zoneinfo/right"  # the leap-second variants (TZ=right/…): 1.9 MB nobody here uses

# The tree must run on its own: every binary starts inside it (a missing library fails the build here, not in a
# user's container).
chroot "$root" /usr/local/bin/settee --help >/dev/null
[ "$(echo '["reset"]' | chroot "$root" /usr/local/bin/settee-js)" = true ]
chroot "$root" /bin/sh -c 'id -u settee' >/dev/null
