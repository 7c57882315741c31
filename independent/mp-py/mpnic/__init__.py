"""mpnic: a clean-room MetaRoCE MP endpoint (SPEC §7) in Python."""
