#!/usr/bin/env bash
# Regenerates the report images of docs/reports.md from the repository's own commands:
#
#   report-<kind>.png       the four plots of the bundled example's weekly report
#                           (dr_scale/synthetic/data/example/logs, pipelines/report_policies.toml, --window 7d)
#   report-html-generated.png   report.html in headless Chromium: a generated 14-day stream
#                           (dr-scale generate bandit), a policy learned on days 1-7, the report over days 8-14
#   report-html-obd.png     report.html in headless Chromium: the Open Bandit Dataset sample
#                           (tests/fixtures/obd), a policy learned on 2019-11-24 … 27, the report over 28 … 30
#
# Needs chromium (Debian: apt-get install -y chromium) and the package's dependencies (Pillow comes with
# matplotlib). Run from anywhere:  bash docs/images/make_screenshots.sh
# The work happens in $TMPDIR/dr-scale-screenshots (default /tmp), removed at the end; only docs/images/ is
# written.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
images="$repo/docs/images"
work="${TMPDIR:-/tmp}/dr-scale-screenshots"   # a fixed name: the pages show the policy files' paths
rm -rf "$work" && mkdir -p "$work"
trap 'rm -rf "$work"' EXIT
export PYTHONPATH="$repo${PYTHONPATH:+:$PYTHONPATH}"   # this checkout's dr_scale, whatever is installed
dr() { python -m dr_scale.cli "$@" --no-progress; }
cd "$work"

# The bundled example's weekly report: its four plots.
dr report --logs "$repo/dr_scale/synthetic/data/example/logs" --policies "$repo/pipelines/report_policies.toml" \
    --window 7d --out example
for kind in estimates comparisons over_time weights; do
    cp example/plots/"$kind"-*.png "$images/report-$kind.png"
done

# A generated stream: 14 days of 4,000 rows, 5 actions; learn on the first week, report on the second.
dr generate bandit --rows 56000 --features 500 --actions 5 --days 14 --out gen-logs > /dev/null
dr fit gen-logs --folds 2 --out gen-rho.npz > /dev/null
dr learn gen-logs --days 2026-11-01:2026-11-07 --out gen-policy.npz > /dev/null
cat > gen-policies.toml <<'EOF'
reward_model = "gen-rho.npz"
estimators = ["DM", "IPS", "DR", "SNIPS", "SNDR"]
[[policy]]
name = "learned"
spec = "linear:gen-policy.npz"
[[policy]]
name = "uniform"
spec = "uniform"
[[policy]]
name = "always-0"
spec = "constant:0"
[[policy]]
name = "always-4"
spec = "constant:4"
EOF
dr report --logs gen-logs --policies gen-policies.toml --window 7d --out gen-report

# The Open Bandit Dataset sample (uniform-random logging over 80 items, 7 days): import, fit, learn on four
# days, report on the last three.
mkdir obd
cp "$repo/tests/fixtures/obd/all.csv.gz" "$repo/tests/fixtures/obd/item_context.csv" "$repo/tests/fixtures/obd/obd.toml" obd/
dr import obd/all.csv.gz --spec obd/obd.toml --out obd-logs > /dev/null
dr fit obd-logs --folds 2 --out obd-rho.npz > /dev/null
dr learn obd-logs --days 2019-11-24:2019-11-27 --out obd-policy.npz > /dev/null
cat > obd-policies.toml <<'EOF'
reward_model = "obd-rho.npz"
estimators = ["DM", "IPS", "DR", "SNIPS", "SNDR"]
[[policy]]
name = "learned"
spec = "linear:obd-policy.npz"
[[policy]]
name = "uniform"
spec = "uniform"
[[policy]]
name = "item-3"
spec = "constant:3"
EOF
dr report --logs obd-logs --policies obd-policies.toml --window 3d --out obd-report

# Each report.html in headless Chromium, 1200 px wide, cut to the page's length and reduced to 256 colours.
shot() {
    chromium --headless --no-sandbox --hide-scrollbars --window-size=1200,12000 \
        --screenshot="$work/$2.raw.png" "file://$work/$1/report.html" 2> /dev/null
    python - "$work/$2.raw.png" "$images/$2.png" <<'EOF'
import sys

import numpy as np
from PIL import Image

page = Image.open(sys.argv[1]).convert("RGB")
ink = np.flatnonzero((np.asarray(page) < 250).any(axis=(1, 2)))
page.crop((0, 0, page.width, int(ink.max()) + 32)).quantize(256).save(sys.argv[2], optimize=True)
EOF
}
shot gen-report report-html-generated
shot obd-report report-html-obd
ls -l "$images"/report-*.png
