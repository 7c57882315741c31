//! The properties the `codec_parse` and `codec_roundtrip` targets check, in
//! one place.
//! The fuzz targets and the corpus replay (`codec/tests/fuzz_corpus.rs`)
//! both call them.
//!
//! A violated property is an `Err` describing it; a panic inside the codec
//! stays a panic. The fuzz targets turn an `Err` into a panic, so libFuzzer
//! reports both as crashes.

use metaroce_codec::{Dialect, Frame, IcrcStatus, ParseOptions, icrc};

/// Both dialects: the MetaRoCE default and plain RoCEv2.
fn all_options() -> [ParseOptions; 2] {
    [
        ParseOptions::default(),
        ParseOptions {
            dialect: Dialect::Base,
            ..ParseOptions::default()
        },
    ]
}

/// Any bytes: parsing in either dialect must not panic, an error must format,
/// and a parsed frame's ICRC check must not panic and must say `NotRoce`
/// exactly when the frame has no RoCE packet.
pub fn check_parse(data: &[u8]) -> Result<(), String> {
    for options in all_options() {
        match Frame::parse(data, &options) {
            Ok(frame) => {
                let status = icrc::verify(&frame);
                if (status == IcrcStatus::NotRoce) != frame.roce.is_none() {
                    return Err(format!(
                        "{:?}: icrc::verify says {status:?} but roce is {}",
                        options.dialect,
                        if frame.roce.is_some() {
                            "present"
                        } else {
                            "absent"
                        },
                    ));
                }
            }
            Err(error) => {
                let _ = error.to_string();
            }
        }
    }
    Ok(())
}

/// Any bytes: whatever parses (in either dialect) emits back byte for byte.
pub fn check_roundtrip(data: &[u8]) -> Result<(), String> {
    for options in all_options() {
        let Ok(frame) = Frame::parse(data, &options) else {
            continue;
        };
        let emitted = frame.to_bytes();
        if emitted != data {
            let at = emitted
                .iter()
                .zip(data)
                .position(|(a, b)| a != b)
                .unwrap_or(emitted.len().min(data.len()));
            return Err(format!(
                "{:?}: to_bytes differs from the input: {} bytes emitted, {} parsed, \
                 first difference at byte {at}",
                options.dialect,
                emitted.len(),
                data.len(),
            ));
        }
    }
    Ok(())
}
