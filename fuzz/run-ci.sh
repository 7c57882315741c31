#!/usr/bin/env bash
# Builds every fuzz target without a sanitizer (works on stable Rust), with
# debug assertions and overflow checks (-a), and
# runs each for a number of seconds (default 30, or $1). Fails on any crash,
# and prints exec/s per target.
#
# Each run starts by replaying the committed seed corpus (corpus/<target>) and
# the past crashers (artifacts-regressions/<target>), then fuzzes with the
# target's dictionary (dict/roce.dict for the packet targets, dict/stateful.dict
# for the stateful ones). New inputs go to a scratch directory, so the committed
# corpus is not touched; a crash is saved under artifacts/<target>/ (see
# README.md for what to do with it).
set -euo pipefail

seconds="${1:-30}"
case "$seconds" in
'' | *[!0-9]*)
	echo "usage: $0 [SECONDS]" >&2
	exit 2
	;;
esac

cd "$(dirname "$0")"
if ! cargo fuzz --version >/dev/null 2>&1; then
	echo "cargo-fuzz is missing: cargo install cargo-fuzz --locked" >&2
	exit 1
fi

cargo fuzz build -s none -a
mapfile -t targets < <(cargo fuzz list)

scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT

failed=()
summary=()
for target in "${targets[@]}"; do
	echo "=== $target: ${seconds}s"
	log="$scratch/$target.log"
	mkdir -p "$scratch/$target" "corpus/$target"
	dirs=("$scratch/$target" "corpus/$target")
	if [[ -d "artifacts-regressions/$target" ]]; then
		dirs+=("artifacts-regressions/$target")
	fi
	case "$target" in
	codec_*) dict=dict/roce.dict ;;
	*) dict=dict/stateful.dict ;;
	esac
	status=0
	cargo fuzz run -s none -a "$target" "${dirs[@]}" -- \
		-max_total_time="$seconds" -print_final_stats=1 -dict="$dict" >"$log" 2>&1 || status=$?
	# libFuzzer's final stats (-print_final_stats=1).
	execs="$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -n 1)"
	runs="$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)"
	if ((status != 0)); then
		tail -n 60 "$log"
		failed+=("$target")
		summary+=("$target: FAILED (exit $status) after ${runs:-?} runs; see fuzz/artifacts/$target/")
	else
		summary+=("$target: ${execs:-?} exec/s, ${runs:-?} runs in ${seconds}s")
	fi
done

echo "=== fuzz summary"
printf '%s\n' "${summary[@]}"
if ((${#failed[@]} > 0)); then
	echo "crashed: ${failed[*]}" >&2
	exit 1
fi

# The OSS-Fuzz build script, with OUT in a temporary directory (the build
# above is reused: same flags).
echo "=== OSS-Fuzz build.sh"
oss-fuzz/check-build.sh
