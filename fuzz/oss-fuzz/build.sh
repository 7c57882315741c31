#!/bin/bash -eu
# OSS-Fuzz / ClusterFuzzLite build script for MetaRoCE's cargo-fuzz targets.
#
# Follows OSS-Fuzz's Rust conventions: `cargo fuzz build -O` (with debug
# assertions) in the project's fuzz/ directory, then into $OUT, per target:
#   $OUT/<target>                  the libFuzzer binary
#   $OUT/<target>.dict             its dictionary (fuzz/dict/, generated from
#                                  the codec's opcode and syndrome tables)
#   $OUT/<target>_seed_corpus.zip  fuzz/corpus/<target> and the past crashers
#                                  of fuzz/artifacts-regressions/<target>
#
# Environment: OUT (required), SRC (the base image's; the checkout is
# $SRC/metaroce unless PROJECT_DIR says otherwise), CARGO_FUZZ_FLAGS (extra
# flags for `cargo fuzz build`; OSS-Fuzz passes none and builds with its
# nightly and the sanitizer it chose). To try it locally on stable Rust:
#   OUT=$(mktemp -d) PROJECT_DIR=$PWD CARGO_FUZZ_FLAGS="-s none" fuzz/oss-fuzz/build.sh

PROJECT_DIR="${PROJECT_DIR:-$SRC/metaroce}"
FUZZ_DIR="$PROJECT_DIR/fuzz"
: "${OUT:?OUT must name the output directory}"
mkdir -p "$OUT"

cd "$FUZZ_DIR"
# shellcheck disable=SC2086 # CARGO_FUZZ_FLAGS is a list of flags
cargo fuzz build -O --debug-assertions ${CARGO_FUZZ_FLAGS:-}

targets=$(cargo fuzz list)
if [[ -z "$targets" ]]; then
	echo "cargo fuzz list names no target" >&2
	exit 1
fi
release="$FUZZ_DIR/target/x86_64-unknown-linux-gnu/release"
for target in $targets; do
	cp "$release/$target" "$OUT/"
	case "$target" in
	codec_*) dict=roce.dict ;;
	*) dict=stateful.dict ;;
	esac
	cp "$FUZZ_DIR/dict/$dict" "$OUT/$target.dict"
	seeds=()
	for dir in "corpus/$target" "artifacts-regressions/$target"; do
		if [[ -d "$dir" ]]; then
			while IFS= read -r -d '' f; do
				seeds+=("$f")
			done < <(find "$dir" -type f ! -name README.md -print0)
		fi
	done
	if ((${#seeds[@]} == 0)); then
		echo "fuzz target $target has no seed inputs in corpus/$target" >&2
		exit 1
	fi
	rm -f "$OUT/${target}_seed_corpus.zip"
	zip -qj "$OUT/${target}_seed_corpus.zip" "${seeds[@]}"
done
echo "built $(echo "$targets" | wc -w) targets into $OUT"
