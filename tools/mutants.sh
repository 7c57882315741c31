#!/usr/bin/env bash
# Mutation testing of the reference transport with the conformance suite as
# the oracle (docs/mutation-testing.md). cargo-mutants mutates the chosen
# files of reference-impl/src, one mutant at a time; a mutant is caught when
# `the_committed_suite_passes_on_the_reference_transport` fails on it.
#
#   tools/mutants.sh [--minutes N] [--timeout S] [--out DIR] [--triage FILE]
#                    [--changed BASE] [--shard] [FILE...]
#
# FILE: paths under reference-impl/src (e.g. reference-impl/src/rc/responder/ack.rs).
# --changed  also the .rs files of reference-impl/src/rc and /mp that differ
#            from git revision BASE (CI: the files a change touches).
# --shard    when no file is named (or --changed found none): one file of
#            rc/ and mp/, chosen by the day of the year (a rotating shard).
# -- ARGS    passed on to cargo mutants (e.g. -- --exclude-re 'Responses::len').
# --minutes  bound of the whole run (default 15); mutants not reached are
#            reported as not run.
# --timeout  bound of one mutant's test, seconds (default 180).
# --out      where cargo-mutants writes mutants.out/ (default target/mutants).
# --triage   a triage file (tools/mutants-triage.txt): a missed mutant listed
#            there is "triaged" (unless its class is `caught`); the exit code
#            is 1 only for an untriaged one.
# Prints one Markdown table per file: caught, missed (triaged), timeout, unviable.
# Needs cargo-mutants 27 (`cargo install cargo-mutants --locked`).
set -euo pipefail

minutes=15
timeout_s=180
out=target/mutants
triage=""
changed=""
shard=0
files=()
extra=()
while [ $# -gt 0 ]; do
    case "$1" in
        --minutes) minutes="$2"; shift 2 ;;
        --timeout) timeout_s="$2"; shift 2 ;;
        --out) out="$2"; shift 2 ;;
        --triage) triage="$2"; shift 2 ;;
        --changed) changed="$2"; shift 2 ;;
        --shard) shard=1; shift ;;
        -h|--help) sed -n '2,24p' "$0"; exit 0 ;;
        --) shift; extra=("$@"); break ;;
        -*) echo "tools/mutants.sh: unknown option $1" >&2; exit 4 ;;
        *) files+=("$1"); shift ;;
    esac
done
top=$(git rev-parse --show-toplevel)
cd "$top"
if [ -n "$changed" ]; then
    while IFS= read -r f; do
        [ -f "$f" ] && files+=("$f")
    done < <(git diff --name-only "$changed" -- 'reference-impl/src/rc/*.rs' 'reference-impl/src/mp/*.rs')
fi
if [ ${#files[@]} -eq 0 ] && [ "$shard" -eq 1 ]; then
    mapfile -t all < <(git ls-files 'reference-impl/src/rc/*.rs' 'reference-impl/src/mp/*.rs' | sort)
    day=$((10#$(date -u +%j)))
    files=("${all[$((day % ${#all[@]}))]}")
fi
if [ ${#files[@]} -eq 0 ]; then
    echo "tools/mutants.sh: no file to mutate (name files under reference-impl/src, or --changed BASE / --shard)" >&2
    exit 4
fi
for f in "${files[@]}"; do
    case "$f" in
        reference-impl/src/*.rs) [ -f "$f" ] || { echo "tools/mutants.sh: no file $f" >&2; exit 4; } ;;
        *) echo "tools/mutants.sh: $f is not under reference-impl/src" >&2; exit 4 ;;
    esac
done
if ! cargo mutants --version >/dev/null 2>&1; then
    echo "tools/mutants.sh: cargo-mutants is missing: cargo install cargo-mutants --locked" >&2
    exit 4
fi

file_args=()
for f in "${files[@]}"; do file_args+=(--file "$f"); done
mkdir -p "$out"
# A target directory of its own, kept between runs (dependencies are built
# once). Not the workspace's target/: the copy's crates get the same
# artifact names as the workspace's (cargo hashes workspace-relative paths),
# so a mutant built there would be taken as fresh by the next ordinary build.
export CARGO_TARGET_DIR="${MUTANTS_TARGET_DIR:-$top/target/mutants-target}"
started=$(date -u +%FT%TZ)
set +e
# --baseline=skip: cargo-mutants 27's baseline ignores --test-package and
# would run every test of the workspace; the tree is known to pass.
# --cargo-arg=--test=suite: build and run only the test binary that holds
# the suite test (conformance/tests/suite/, module runner); without it every
# test target of the conformance crate is built per mutant.
timeout --signal=INT --kill-after=30 "$((minutes * 60))" \
    cargo mutants --package metaroce-ref "${file_args[@]}" \
    --test-package metaroce-conformance --baseline=skip \
    --timeout "$timeout_s" --build-timeout 600 --jobs 1 --output "$out" \
    --cargo-arg=--test=suite ${extra[@]+"${extra[@]}"} \
    -- -- --exact runner::the_committed_suite_passes_on_the_reference_transport
status=$?
set -e
mo="$out/mutants.out"
echo
echo "## Mutants of the reference transport vs. the conformance suite"
echo
echo "Run $started, $(git rev-parse --short HEAD), bound ${minutes} min, ${timeout_s} s per mutant$( [ $status -eq 124 ] && echo ': **the time bound ended the run**; mutants not listed were not run')."
echo
echo "| file | caught | missed (triaged) | timeout | unviable |"
echo "|---|---:|---:|---:|---:|"
untriaged=0
# grep -c prints 0 and exits 1 when nothing matches: one number either way.
count() { local n=0; [ -f "$mo/$1" ] && n=$(grep -c "^$2:" "$mo/$1") || true; echo "$n"; }
for f in "${files[@]}"; do
    missed=$(count missed.txt "$f")
    triaged=0
    if [ -n "$triage" ] && [ -f "$mo/missed.txt" ]; then
        while IFS= read -r line; do
            # A triage line is `file: <mutant text as cargo-mutants prints it, without the line:col> | reason`.
            text=$(printf '%s' "$line" | sed -E 's/^([^:]+):[0-9]+:[0-9]+: /\1: /')
            # A `caught` line is a record, not triage (the mutant should not survive).
            if grep -F -- "$text |" "$triage" | grep -qv -- "| caught:"; then
                triaged=$((triaged + 1))
            else
                echo "UNTRIAGED: $line" >&2
                untriaged=$((untriaged + 1))
            fi
        done < <(grep "^$f:" "$mo/missed.txt")
    fi
    echo "| \`${f#reference-impl/src/}\` | $(count caught.txt "$f") | $missed ($triaged) | $(count timeout.txt "$f") | $(count unviable.txt "$f") |"
done
echo
if [ -f "$mo/missed.txt" ] && [ -s "$mo/missed.txt" ]; then
    echo "Missed:"
    echo
    sed 's/^/- /' "$mo/missed.txt"
fi
if [ -n "$triage" ] && [ "$untriaged" -gt 0 ]; then
    echo "tools/mutants.sh: $untriaged missed mutant(s) not in $triage" >&2
    exit 1
fi
exit 0
