#!/usr/bin/env bash
# Debian's Chromium for the tests that open the HTML reports in a browser (tests/cli/test_report_browser.py).
# Installed if missing (CI runs as root with apt); under CI=true a failed install fails the run, since those tests
# must run there, not skip.
set -uo pipefail
command -v chromium >/dev/null && exit 0
if [[ $(id -u) == 0 ]]; then
  export DEBIAN_FRONTEND=noninteractive
  (apt-get update -qq && apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core) \
    > /tmp/spmd-chromium-apt.log 2>&1 && exit 0
  echo "ci/chromium: apt-get install chromium failed (see /tmp/spmd-chromium-apt.log)" >&2
else
  echo "ci/chromium: not root: cannot install chromium" >&2
fi
[[ ${CI:-} == true ]] && exit 1
exit 0
