#!/usr/bin/env bash
# Runs Debian's Janus for a local Dialtone: only the VideoRoom plugin and the HTTP transport,
# its API on 127.0.0.1 only, guarded by an api_secret and a VideoRoom admin_key.
# usage: scripts/janus-dev.sh [DIR] [PORT]   (needs `apt-get install janus`; runs in the foreground)
# It prints the dialtone-server flags to use.
set -euo pipefail
dir=${1:-./data/janus}; port=${2:-8088}
lib=/usr/lib/$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)/janus
command -v janus >/dev/null || { echo "janus is not installed: scripts/deps.sh installs it" >&2; exit 1; }
mkdir -p "$dir"
secret_file="$dir/secrets"
if [ ! -f "$secret_file" ]; then
  umask 077
  printf 'API_SECRET=%s\nADMIN_KEY=%s\n' "$(head -c 24 /dev/urandom | base64 | tr -d '/+=')" \
    "$(head -c 24 /dev/urandom | base64 | tr -d '/+=')" > "$secret_file"
fi
# shellcheck disable=SC1090
. "$secret_file"
disable_plugins=$(cd "$lib/plugins" && ls ./*.so | sed 's|^\./||' | grep -v '^libjanus_videoroom.so$' | paste -sd, -)
disable_transports=$(cd "$lib/transports" && ls ./*.so | sed 's|^\./||' | grep -v '^libjanus_http.so$' | paste -sd, -)
cat > "$dir/janus.jcfg" <<CFG
general: { configs_folder = "$dir"; plugins_folder = "$lib/plugins"; transports_folder = "$lib/transports";
           events_folder = "$lib/events"; loggers_folder = "$lib/loggers"; debug_level = 3;
           api_secret = "$API_SECRET"; }
media: { }
nat: { }
plugins: { disable = "$disable_plugins"; }
transports: { disable = "$disable_transports"; }
events: { broadcast = false; }
loggers: { disable = "libjanus_jsonlog.so"; }
CFG
cat > "$dir/janus.transport.http.jcfg" <<CFG
general: { json = "compact"; base_path = "/janus"; http = true; port = $port; ip = "127.0.0.1"; https = false; }
admin: { admin_http = false; }
CFG
echo "general: { admin_key = \"$ADMIN_KEY\"; lock_rtp_forward = true; }" > "$dir/janus.plugin.videoroom.jcfg"
echo "Janus API on http://127.0.0.1:$port/janus. Start the server with:" >&2
echo "  --janus-url http://127.0.0.1:$port/janus --janus-api-secret $API_SECRET --janus-admin-key $ADMIN_KEY" >&2
exec janus -F "$dir" -C "$dir/janus.jcfg"
