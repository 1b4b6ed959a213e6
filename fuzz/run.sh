#!/usr/bin/env bash
# Runs every fuzz target for a bounded time (default 60 s each; FUZZ_SECONDS
# to change it), from a seed corpus made from the committed demo tapes.
# Outside CI's budget: run it by hand. Needs cargo-fuzz (`cargo install
# cargo-fuzz`); RUSTC_BOOTSTRAP lets the stable toolchain take libFuzzer's
# instrumentation flags. A crash is kept in fuzz/artifacts/<target>/: turn
# it into a regression test in the normal test command.
set -euo pipefail
cd "$(dirname "$0")"
export RUSTC_BOOTSTRAP=1 CARGO_INCREMENTAL=0
seconds="${FUZZ_SECONDS:-60}"
# The committed seeds (fuzz/seeds/) are made from the demo tapes; remake
# them after the tapes change: cargo run --bin make-corpus
[ -d seeds ] || cargo run --quiet --bin make-corpus
# seeds/mcp/ are MCP sessions captured with capture_mcp.py (the client
# cli/tests/mcp_proxy_client.py in front of cli/tests/fastmcp_server.py and
# @modelcontextprotocol/server-everything; rounds-2026-07-28: written lines
# in front of cli/tests/paging_server.py), not made by make-corpus.
# seeds/collect/ hold the Python exporter's body for the Pydantic AI agent
# of cli/tests/agents/pydantic_otel_agent.py and OTLP/JSON written by hand.
targets=(tape fact block record live lsp mcp collect)
for t in "${targets[@]}"; do
  # New inputs go to corpus/ (not committed); the committed seeds/ stay.
  mkdir -p "corpus/$t"
  echo "== $t (${seconds}s)"
  cargo fuzz run "$t" "corpus/$t" "seeds/$t" -- -max_total_time="$seconds" -rss_limit_mb=2048 -print_final_stats=1 2>&1 \
    | grep -E "^(stat::number_of_executed_units|stat::peak_rss_mb|==[0-9]+==|SUMMARY|Done)" || true
done
