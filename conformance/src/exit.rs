//! The exit-code contract of every `metaroce` command.

/// No FAIL, ERROR or INCONC (for `decode`: the whole file was read).
pub const OK: u8 = 0;
/// Some FAIL: the implementation under test broke a requirement.
pub const FAIL: u8 = 1;
/// Some ERROR or INCONC: the harness or test bed failed, or a precondition was not reached.
pub const ERROR: u8 = 2;
/// Bad input: an unreadable file, not a capture, a truncated capture, a bad vector.
pub const BAD_INPUT: u8 = 4;
