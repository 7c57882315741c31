#!/usr/bin/env bash
# Runs build.sh as OSS-Fuzz would, with OUT pointing at a temporary
# directory (stable Rust: CARGO_FUZZ_FLAGS="-s none"), and checks what it
# leaves there: for every target of `cargo fuzz list` a binary, a dictionary
# and a non-empty seed corpus zip; then each binary replays its own seed
# corpus (libFuzzer -runs=0: every input once, no fuzzing), bounded in time.
set -euo pipefail

fuzz_dir="$(cd "$(dirname "$0")/.." && pwd)"
out="$(mktemp -d)"
work="$(mktemp -d)"
trap 'rm -rf "$out" "$work"' EXIT

OUT="$out" PROJECT_DIR="$(dirname "$fuzz_dir")" CARGO_FUZZ_FLAGS="${CARGO_FUZZ_FLAGS:--s none}" \
	"$fuzz_dir/oss-fuzz/build.sh"

cd "$fuzz_dir"
failed=0
for target in $(cargo fuzz list); do
	for f in "$out/$target" "$out/$target.dict" "$out/${target}_seed_corpus.zip"; do
		if [[ ! -s "$f" ]]; then
			echo "missing or empty: $f" >&2
			failed=1
		fi
	done
	[[ -x "$out/$target" ]] || { echo "not executable: $out/$target" >&2; failed=1; continue; }
	mkdir -p "$work/$target"
	unzip -qo "$out/${target}_seed_corpus.zip" -d "$work/$target"
	n=$(find "$work/$target" -type f | wc -l)
	if ! timeout 300 "$out/$target" -runs=0 -dict="$out/$target.dict" "$work/$target" >"$work/$target.log" 2>&1; then
		tail -n 30 "$work/$target.log" >&2
		echo "$target fails on its own seed corpus" >&2
		failed=1
		continue
	fi
	echo "$target: binary, dictionary, $n seed inputs replayed"
done
exit "$failed"
