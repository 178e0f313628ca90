#!/usr/bin/env bash
# Frame times of examples/love in its four modes (docs/hosts.md), headless:
#   bench/love_frames.sh [FRAMES] [BUDGET_MS]      # defaults 300 and 4
# vendors ember into a copy of the game, runs each mode under xvfb-run for
# FRAMES frames at 1 ember thread, and prints one JSON object a mode (the
# game's "ember-love" line without its list of losses). Needs love, xvfb,
# xauth (scripts/setup.sh) and a build.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
frames="${1:-300}"
budget="${2:-4}"
game="$(mktemp -d /tmp/ember_love_bench.XXXXXX)"
trap 'rm -rf "$game"' EXIT
cp "$root"/examples/love/*.lua "$game"/
"$root/scripts/vendor.sh" "$game" > /dev/null
for mode in off oneshot budget thread; do
  line="$(cd / && xvfb-run -a love "$game" --mode "$mode" --frames "$frames" --budget-ms "$budget" |
    grep '^ember-love ')"
  echo "${line#ember-love }" | sed -e 's/, "losses": \[[^]]*\]//'
done
