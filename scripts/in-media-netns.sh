#!/usr/bin/env bash
# Runs a command inside a fresh network namespace holding a veth pair with a test address
# (10.79.1.1), then removes the namespace. For tests whose WebRTC peers use libnice: it gathers
# no loopback candidates, and test traffic must never reach this host's own address.
# usage: scripts/in-media-netns.sh COMMAND [ARGS...]   (needs root)
set -euo pipefail
ns="dtunit-$$"
cleanup() { ip netns del "$ns" 2>/dev/null || true; }
trap cleanup EXIT
ip netns add "$ns"
ip netns exec "$ns" ip link set lo up
ip netns exec "$ns" sysctl -qw net.ipv6.conf.all.disable_ipv6=1
ip netns exec "$ns" ip link add dt0 type veth peer name dt1
ip netns exec "$ns" ip addr add 10.79.1.1/24 dev dt0
ip netns exec "$ns" ip link set dt0 up
ip netns exec "$ns" ip link set dt1 up
ip netns exec "$ns" "$@"
