#!/bin/sh
# Turn a fresh `debootstrap --variant=minbase bookworm` tree into a container base.
# Run by scripts/build-images on the host with the rootfs path as $1; its content is
# part of the base image's input hash, so editing it rebuilds the image.
set -eu
rootfs=$1

# Updates and security fixes, like the public debian:bookworm image.
cat >"$rootfs/etc/apt/sources.list" <<'SOURCES'
deb http://deb.debian.org/debian bookworm main
deb http://deb.debian.org/debian bookworm-updates main
deb http://deb.debian.org/debian-security bookworm-security main
SOURCES

# Small layers matter with podman's vfs driver, which copies every layer whole.
cat >"$rootfs/etc/apt/apt.conf.d/90delaybridge" <<'APT'
APT::Install-Recommends "false";
APT::Install-Suggests "false";
Acquire::Retries "3";
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/*.bin || true"; };
APT
cat >"$rootfs/etc/dpkg/dpkg.cfg.d/90delaybridge-nodoc" <<'DPKG'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
DPKG
# No daemons start during image builds.
printf '#!/bin/sh\nexit 101\n' >"$rootfs/usr/sbin/policy-rc.d"
chmod 755 "$rootfs/usr/sbin/policy-rc.d"

rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/* "$rootfs"/var/log/*.log \
  "$rootfs"/usr/share/man/* "$rootfs"/usr/share/info/* "$rootfs"/usr/share/locale/*
find "$rootfs/usr/share/doc" -mindepth 2 ! -name copyright -delete 2>/dev/null || true
# Java's postinst links its man page through update-alternatives, which fails if the
# directory is missing (the public slim images keep it for the same reason).
mkdir -p "$rootfs/usr/share/man/man1"
# The container's hostname and resolver come from the engine at run time.
: >"$rootfs/etc/hostname"
: >"$rootfs/etc/resolv.conf"
# The rootfs directory came from mktemp -d (mode 0700), and the image's / inherits its
# mode: without this, no non-root user (the sidecar runs as uid 10001) can exec anything.
chmod 0755 "$rootfs"
