#!/bin/bash
# Sets up N test hosts inside the SoftRoCE VM (run as root there):
#
#   host i = network namespace h$i with its own address 10.79.0.$i on a veth
#            (c$i, peer d$i on bridge cbr): the host's processes and its TCP
#            control traffic live here;
#   its RDMA device rxe_h$i runs over its own veth r$i (10.78.0.$i, peer q$i
#            on bridge rbr), so RDMA traffic between hosts crosses veth links
#            and a bridge rather than loopback.
#
# Linux 6.1's rxe routes and receives only in the initial namespace, so the
# rxe netdevs stay there; policy routing (one table per host, selected by
# output interface) sends each device's traffic out of its own veth instead
# of short-cutting to the local address. RDMA devices are shared across
# namespaces (`rdma system` netns mode "shared"), so each host opens its own.
#
# All r$i share the initial namespace, so by default any of them answers ARP
# for any of their addresses ("ARP flux"): the first reply can name the
# wrong veth, whose rxe device then drops the packets meant for another
# device's QP until the neighbour entry is re-validated some 5 s later.
# arp_ignore=1 / arp_announce=2 keep each veth to its own address, and
# permanent neighbour entries make resolution deterministic.
#
# Usage: hosts.sh N
set -eu
n=${1:-3}
sysctl -qw net.ipv4.conf.all.accept_local=1 net.ipv4.conf.all.rp_filter=0 \
    net.ipv4.conf.default.accept_local=1 net.ipv4.conf.default.rp_filter=0
modprobe rdma_rxe
ip link add rbr type bridge forward_delay 0 && ip link set rbr up
ip link add cbr type bridge forward_delay 0 && ip link set cbr up
# Local addresses are looked up after the per-host tables.
ip rule add pref 1000 lookup local
ip rule del pref 0
for i in $(seq 1 "$n"); do
    ip link add "r$i" type veth peer name "q$i"
    ip link set "q$i" master rbr && ip link set "q$i" up
    sysctl -qw "net.ipv4.conf.r$i.accept_local=1" "net.ipv4.conf.r$i.rp_filter=0" \
        "net.ipv4.conf.r$i.arp_ignore=1" "net.ipv4.conf.r$i.arp_announce=2"
    ip addr add "10.78.0.$i/24" dev "r$i" && ip link set "r$i" up
    ip route add 10.78.0.0/24 dev "r$i" src "10.78.0.$i" table $((100 + i))
    ip rule add pref $((100 + i)) oif "r$i" lookup $((100 + i))
    rdma link add "rxe_h$i" type rxe netdev "r$i"

    ip netns add "h$i"
    ip link add "c$i" type veth peer name "d$i"
    ip link set "d$i" master cbr && ip link set "d$i" up
    ip link set "c$i" netns "h$i"
    ip -n "h$i" addr add "10.79.0.$i/24" dev "c$i"
    ip -n "h$i" link set "c$i" up
    ip -n "h$i" link set lo up
done
for i in $(seq 1 "$n"); do
    for j in $(seq 1 "$n"); do
        [ "$i" = "$j" ] && continue
        ip neigh replace "10.78.0.$j" lladdr "$(cat "/sys/class/net/r$j/address")" dev "r$i" nud permanent
    done
done
# Wait for the devices' GIDs (the IPv4 GID appears with the address).
for i in $(seq 1 "$n"); do
    for _ in $(seq 50); do
        grep -q "0a4e:000$i" "/sys/class/infiniband/rxe_h$i/ports/1/gids/"* 2>/dev/null && break
        sleep 0.1
    done
done
rdma link show
