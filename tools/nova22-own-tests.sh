#!/usr/bin/env bash
# Nova 22's own functional tests (the modules in tests/nova22/own_tests.txt)
# with grant_scheduler as the scheduler driver, compared test by test with
# the stock FilterScheduler.
#
#   tools/nova22-own-tests.sh          ours, compared with the stock run
#                                      recorded in tests/nova22/own_tests_stock.json
#   tools/nova22-own-tests.sh both     both schedulers, side by side, in one run
#                                      (and the record of the stock run rewritten)
#
# Fails when grant_scheduler fails a test the stock scheduler passes, except
# the differences tests/nova22/own_tests_allowed.txt lists with a reason.
# Run as root, after tools/nova22-root.sh build and install.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT=.nova-own-tests
RECORD=tests/nova22/own_tests_stock.json
mkdir -p "$OUT"

run() {
    local start=$SECONDS
    bash tools/nova22-run.sh python3 -W ignore -m tests.nova22.own_tests \
        --scheduler "$1" --json "/src/$OUT/$1.json" --workers 2 \
        @tests/nova22/own_tests.txt
    echo "[nova22-own-tests] $1: $((SECONDS - start)) s" >&2
}

case "${1:-ours}" in
    ours) stock="$RECORD" ;;
    both)
        run stock
        python3 - "$OUT/stock.json" "$RECORD" <<'PY'
import json, sys
with open(sys.argv[1]) as f:
    outcomes = json.load(f)["outcomes"]
with open(sys.argv[2], "w") as f:
    json.dump({"scheduler": "stock", "outcomes": outcomes}, f, indent=1,
              sort_keys=True)
    f.write("\n")
PY
        stock="$OUT/stock.json"
        ;;
    *) echo "usage: $0 [both]" >&2; exit 2 ;;
esac
run grant_scheduler
bash tools/nova22-run.sh python3 -W ignore -m tests.nova22.own_tests \
    --compare "/src/$stock" "/src/$OUT/grant_scheduler.json" \
    --allowed tests/nova22/own_tests_allowed.txt
