//! Extension transport headers and the set a packet carries.

mod base;
mod mp;

pub use base::{
    AethRepr, AtomicAckEthRepr, AtomicEthRepr, CnpRepr, DethRepr, FethRepr, IethRepr, ImmDtRepr,
    RdethRepr, RethRepr, Syndrome, SyndromeKind, XrcethRepr,
};
pub use mp::{MpethRepr, SackethRepr, mpeth_flags, sacketh_flags};

use crate::error::WireError;
use crate::opcode::ExtKind;

/// Calls `$m!` with every `field => ExtKind` pair of [`ExtHeaders`], in
/// [`ExtKind::ALL`] (wire) order; unrolled, so emit and length need no loop.
macro_rules! in_wire_order {
    ($m:ident) => {
        $m!(
            rdeth => Rdeth,
            deth => Deth,
            xrceth => Xrceth,
            mpeth => Mpeth,
            sacketh => Sacketh,
            feth => Feth,
            reth => Reth,
            atomic_eth => AtomicEth,
            aeth => Aeth,
            atomic_ack_eth => AtomicAckEth,
            immdt => ImmDt,
            ieth => Ieth,
            cnp => Cnp,
        )
    };
}

/// The extension headers of one packet. `None` = absent.
///
/// Parsing fills exactly the headers the opcode's layout names. Emitting writes
/// the present headers in [`ExtKind::ALL`] order, whatever the opcode, so a
/// builder can also make packets whose headers disagree with their opcode.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub struct ExtHeaders {
    /// RDETH.
    pub rdeth: Option<RdethRepr>,
    /// DETH.
    pub deth: Option<DethRepr>,
    /// XRCETH.
    pub xrceth: Option<XrcethRepr>,
    /// MPETH.
    pub mpeth: Option<MpethRepr>,
    /// SACKETH.
    pub sacketh: Option<SackethRepr>,
    /// FETH.
    pub feth: Option<FethRepr>,
    /// RETH.
    pub reth: Option<RethRepr>,
    /// AtomicETH.
    pub atomic_eth: Option<AtomicEthRepr>,
    /// AETH.
    pub aeth: Option<AethRepr>,
    /// AtomicAckETH.
    pub atomic_ack_eth: Option<AtomicAckEthRepr>,
    /// Immediate data.
    pub immdt: Option<ImmDtRepr>,
    /// IETH.
    pub ieth: Option<IethRepr>,
    /// CNP reserved bytes.
    pub cnp: Option<CnpRepr>,
}

impl ExtHeaders {
    /// Parses the headers `kinds` names, in that order, from the start of `input`.
    /// Error offsets are relative to `input`.
    #[inline]
    pub fn parse<'a>(kinds: &[ExtKind], input: &'a [u8]) -> Result<(Self, &'a [u8]), WireError> {
        let mut headers = ExtHeaders::default();
        let rest = headers.parse_from(kinds, input)?;
        Ok((headers, rest))
    }

    /// [`ExtHeaders::parse`] into `self`, in place (every header `kinds`
    /// does not name is cleared); returns the bytes after them.
    #[inline]
    pub fn parse_from<'a>(
        &mut self,
        kinds: &[ExtKind],
        input: &'a [u8],
    ) -> Result<&'a [u8], WireError> {
        *self = ExtHeaders::default();
        let mut rest = input;
        for &kind in kinds {
            let offset = input.len() - rest.len();
            rest = self.parse_one(kind, rest).map_err(|e| e.shifted(offset))?;
        }
        Ok(rest)
    }

    #[inline]
    fn parse_one<'a>(&mut self, kind: ExtKind, input: &'a [u8]) -> Result<&'a [u8], WireError> {
        macro_rules! take {
            ($slot:ident, $repr:ty) => {{
                let (h, rest) = <$repr>::parse(input)?;
                self.$slot = Some(h);
                rest
            }};
        }
        Ok(match kind {
            ExtKind::Rdeth => take!(rdeth, RdethRepr),
            ExtKind::Deth => take!(deth, DethRepr),
            ExtKind::Xrceth => take!(xrceth, XrcethRepr),
            ExtKind::Mpeth => take!(mpeth, MpethRepr),
            ExtKind::Sacketh => take!(sacketh, SackethRepr),
            ExtKind::Feth => take!(feth, FethRepr),
            ExtKind::Reth => take!(reth, RethRepr),
            ExtKind::AtomicEth => take!(atomic_eth, AtomicEthRepr),
            ExtKind::Aeth => take!(aeth, AethRepr),
            ExtKind::AtomicAckEth => take!(atomic_ack_eth, AtomicAckEthRepr),
            ExtKind::ImmDt => take!(immdt, ImmDtRepr),
            ExtKind::Ieth => take!(ieth, IethRepr),
            ExtKind::Cnp => take!(cnp, CnpRepr),
        })
    }

    /// Whether the header of `kind` is present.
    pub const fn has(&self, kind: ExtKind) -> bool {
        match kind {
            ExtKind::Rdeth => self.rdeth.is_some(),
            ExtKind::Deth => self.deth.is_some(),
            ExtKind::Xrceth => self.xrceth.is_some(),
            ExtKind::Mpeth => self.mpeth.is_some(),
            ExtKind::Sacketh => self.sacketh.is_some(),
            ExtKind::Feth => self.feth.is_some(),
            ExtKind::Reth => self.reth.is_some(),
            ExtKind::AtomicEth => self.atomic_eth.is_some(),
            ExtKind::Aeth => self.aeth.is_some(),
            ExtKind::AtomicAckEth => self.atomic_ack_eth.is_some(),
            ExtKind::ImmDt => self.immdt.is_some(),
            ExtKind::Ieth => self.ieth.is_some(),
            ExtKind::Cnp => self.cnp.is_some(),
        }
    }

    /// Makes the header of `kind` present with all fields zero, if it is absent.
    pub fn insert_default(&mut self, kind: ExtKind) {
        match kind {
            ExtKind::Rdeth => _ = self.rdeth.get_or_insert_default(),
            ExtKind::Deth => _ = self.deth.get_or_insert_default(),
            ExtKind::Xrceth => _ = self.xrceth.get_or_insert_default(),
            ExtKind::Mpeth => _ = self.mpeth.get_or_insert_default(),
            ExtKind::Sacketh => _ = self.sacketh.get_or_insert_default(),
            ExtKind::Feth => _ = self.feth.get_or_insert_default(),
            ExtKind::Reth => _ = self.reth.get_or_insert_default(),
            ExtKind::AtomicEth => _ = self.atomic_eth.get_or_insert_default(),
            ExtKind::Aeth => _ = self.aeth.get_or_insert_default(),
            ExtKind::AtomicAckEth => _ = self.atomic_ack_eth.get_or_insert_default(),
            ExtKind::ImmDt => _ = self.immdt.get_or_insert_default(),
            ExtKind::Ieth => _ = self.ieth.get_or_insert_default(),
            ExtKind::Cnp => _ = self.cnp.get_or_insert_default(),
        }
    }

    /// Removes the header of `kind`.
    pub fn remove(&mut self, kind: ExtKind) {
        match kind {
            ExtKind::Rdeth => self.rdeth = None,
            ExtKind::Deth => self.deth = None,
            ExtKind::Xrceth => self.xrceth = None,
            ExtKind::Mpeth => self.mpeth = None,
            ExtKind::Sacketh => self.sacketh = None,
            ExtKind::Feth => self.feth = None,
            ExtKind::Reth => self.reth = None,
            ExtKind::AtomicEth => self.atomic_eth = None,
            ExtKind::Aeth => self.aeth = None,
            ExtKind::AtomicAckEth => self.atomic_ack_eth = None,
            ExtKind::ImmDt => self.immdt = None,
            ExtKind::Ieth => self.ieth = None,
            ExtKind::Cnp => self.cnp = None,
        }
    }

    /// The present headers, in wire order.
    pub fn kinds(&self) -> impl Iterator<Item = ExtKind> + '_ {
        ExtKind::ALL.into_iter().filter(|k| self.has(*k))
    }

    /// Bytes on the wire.
    pub fn buffer_len(&self) -> usize {
        let mut len = 0;
        macro_rules! add {
            ($($slot:ident => $kind:ident),* $(,)?) => {$(
                if self.$slot.is_some() {
                    len += ExtKind::$kind.wire_len();
                }
            )*};
        }
        in_wire_order!(add);
        len
    }

    /// Writes the present headers in wire order; returns the bytes written.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, WireError> {
        let mut at = 0;
        macro_rules! put {
            ($($slot:ident => $kind:ident),* $(,)?) => {$(
                if let Some(header) = &self.$slot {
                    header.emit(buf.get_mut(at..).unwrap_or_default())?;
                    at += ExtKind::$kind.wire_len();
                }
            )*};
        }
        in_wire_order!(put);
        Ok(at)
    }
}
