#!/usr/bin/env bash
# The tests that claim exact rates and counts, in a debug build: pacing,
# counting and the search's verdicts must not depend on the optimiser. The
# same tests run in the release build in scripts/test.sh; this runs them
# again with the debug profile (a binary about ten times slower per packet
# in user space), so a rate that holds only because the code is fast shows.
#
# Usage: scripts/rates-debug.sh [FILTER...]   (default: the list below)
# Needs root, as the suite does. Takes about 10 minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh tcpdump
filters=("$@")
if [ ${#filters[@]} = 0 ]; then
    filters=(
        adhoc::
        xdplive::live_frames_all_arrive
        xdprx::paced_live
        vlan::vlan_tags_on_the_wire_and_counted_exactly
        stick::stick_forwards
        cli_habits::issue23_tcp_rate_paces_goodput
        first_hour::issue_23_a_met_low_rate
        search_limits::policed_
        loadtest::mlrsearch_finds_the_policed_ndr_and_pdr
        loadtest::ramp_saturates_where_the_dut_is_policed
        sweep::
    )
fi
exec cargo test --locked --test integration -- "${filters[@]}"
