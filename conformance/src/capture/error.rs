//! The error type of capture reading.

use std::{fmt, io};

/// Why a capture file could not be read (further).
///
/// `Display` gives one line that names the byte offset where it applies; a caller
/// such as the CLI prefixes the file name.
#[derive(Debug)]
pub enum CaptureError {
    /// The input has no bytes at all.
    Empty,
    /// The first four bytes are no pcap or pcapng magic (bytes missing in a
    /// shorter input are shown as 0). Always at offset 0.
    NotACapture {
        /// The first four bytes of the input.
        magic: [u8; 4],
    },
    /// The input ends inside the file header or a record/block.
    Truncated {
        /// Byte offset of the incomplete header, record or block.
        offset: u64,
        /// How many more bytes it needed, when its header was complete enough to tell.
        needed: Option<u64>,
    },
    /// The bytes are not a valid capture at this point.
    Malformed {
        /// Byte offset of the offending header, record or block.
        offset: u64,
        /// What is wrong, in a few words.
        reason: String,
    },
    /// The underlying reader failed.
    Io(io::Error),
}

impl CaptureError {
    /// The byte offset the error refers to, if any.
    pub fn offset(&self) -> Option<u64> {
        match self {
            CaptureError::NotACapture { .. } => Some(0),
            CaptureError::Truncated { offset, .. } | CaptureError::Malformed { offset, .. } => {
                Some(*offset)
            }
            CaptureError::Empty | CaptureError::Io(_) => None,
        }
    }

    pub(crate) fn malformed(offset: u64, reason: impl Into<String>) -> Self {
        CaptureError::Malformed {
            offset,
            reason: reason.into(),
        }
    }
}

impl fmt::Display for CaptureError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CaptureError::Empty => {
                f.write_str("empty file (0 bytes): not a pcap or pcapng capture")
            }
            CaptureError::NotACapture { magic } => write!(
                f,
                "not a pcap or pcapng capture: unknown magic {:02x} {:02x} {:02x} {:02x} (\"{}\") at byte offset 0",
                magic[0],
                magic[1],
                magic[2],
                magic[3],
                magic.escape_ascii()
            ),
            CaptureError::Truncated {
                offset,
                needed: Some(n),
            } => write!(
                f,
                "truncated capture: the record at byte offset {offset} lacks {n} more byte(s)"
            ),
            CaptureError::Truncated {
                offset,
                needed: None,
            } => write!(
                f,
                "truncated capture: the file ends inside the record at byte offset {offset}"
            ),
            CaptureError::Malformed { offset, reason } => {
                write!(f, "malformed capture at byte offset {offset}: {reason}")
            }
            CaptureError::Io(e) => write!(f, "I/O error while reading the capture: {e}"),
        }
    }
}

impl std::error::Error for CaptureError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            CaptureError::Io(e) => Some(e),
            _ => None,
        }
    }
}

impl From<io::Error> for CaptureError {
    fn from(e: io::Error) -> Self {
        CaptureError::Io(e)
    }
}
