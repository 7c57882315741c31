//! Opcode names in vectors: the codec's constant names (`RC_WRITE_ONLY`,
//! `MP_ACK`, `CNP`) or the names `metaroce decode` prints (`RDMA WRITE Only`),
//! case-insensitively.

use metaroce_codec::Opcode;

/// The opcode called `name`, if any.
pub fn opcode_by_name(name: &str) -> Option<Opcode> {
    let wanted = name.trim();
    if let Some(&(_, op)) = Opcode::CONSTANTS
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(wanted))
    {
        return Some(op);
    }
    (0..=u8::MAX)
        .map(Opcode)
        .find(|op| op.name().is_some_and(|n| n.eq_ignore_ascii_case(wanted)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constants_and_display_names() {
        assert_eq!(opcode_by_name("RC_WRITE_ONLY"), Some(Opcode::RC_WRITE_ONLY));
        assert_eq!(opcode_by_name("mp_ack"), Some(Opcode::MP_ACK));
        assert_eq!(opcode_by_name("CNP"), Some(Opcode::CNP));
        assert_eq!(
            opcode_by_name(Opcode::RC_READ_REQUEST.name().unwrap()),
            Some(Opcode::RC_READ_REQUEST)
        );
        assert_eq!(opcode_by_name("RC_NOPE"), None);
    }
}
