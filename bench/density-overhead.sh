#!/usr/bin/env bash
# What does the density machinery cost at N = 1? The fio job of bench/fio-overhead.sh bare and as
# a `density = 1` cell (the sandbox started behind a barrier, its volume provisioned per sandbox,
# its samples aggregated): the harness must not be the bottleneck. Prints the median IOPS ratio.
#
#   bench/density-overhead.sh               DENSITY=4 bench/density-overhead.sh   (N bare fios at once)
exec env DENSITY="${DENSITY:-1}" "$(dirname "$0")/fio-overhead.sh"
