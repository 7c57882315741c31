#!/bin/bash
# fuzz.sh -- `metaroce fuzz` against Linux soft-RoCE (rdma_rxe): the same
# lab as certify.sh (guest, TAP in a namespace of its own, the agent on rxe0),
# but instead of the suite, mutated and generated traffic on fuzz QPs with
# the fuzzer's oracles (a liveness probe on a sentinel QP, canaries around
# every MR, completions that should not exist) -- the path to a hardware NIC.
#
# Usage: lab/rxe/fuzz.sh WORKDIR OUTDIR [metaroce fuzz args...]
# Knobs (environment): FUZZ_PACKETS (2000), FUZZ_SECONDS (600), FUZZ_SEED (1),
#   TMO, BUILD (as certify.sh).
# Writes OUTDIR/fuzz.txt (the summary), OUTDIR/findings/ (each finding's
# reproducer vector and pcapng), the guest NIC's capture and the versions.
# Exit status: metaroce fuzz's (0 no finding, 1 findings), 3 lab failure.
MODE=fuzz exec "$(dirname "$0")/certify.sh" "$@"
