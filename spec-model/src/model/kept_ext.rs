//! Extension headers kept by a judge for later comparison or replay, out of
//! line: most requests carry none (a SEND, a WRITE Middle), and
//! [`ExtHeaders`] is over 200 bytes of `Option`s, so keeping it inline made
//! every kept request that much larger to build, move and drop.

use metaroce_codec::ExtHeaders;

/// A packet's extension headers: nothing allocated when it carries none.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct KeptExt(Option<Box<ExtHeaders>>);

impl KeptExt {
    /// Keeps `ext`.
    pub(crate) fn new(ext: &ExtHeaders) -> Self {
        if carries_none(ext) {
            KeptExt(None)
        } else {
            KeptExt(Some(Box::new(*ext)))
        }
    }

    /// The headers kept.
    pub(crate) fn get(&self) -> ExtHeaders {
        self.0.as_deref().copied().unwrap_or_default()
    }
}

/// `ext == ExtHeaders::default()`, without comparing every field's value
/// (a derived comparison with the default cost some 70 instructions per
/// kept packet). The pattern names every field: a new one must be added.
fn carries_none(ext: &ExtHeaders) -> bool {
    let ExtHeaders {
        rdeth,
        deth,
        xrceth,
        mpeth,
        sacketh,
        feth,
        reth,
        atomic_eth,
        aeth,
        atomic_ack_eth,
        immdt,
        ieth,
        cnp,
    } = ext;
    rdeth.is_none()
        && deth.is_none()
        && xrceth.is_none()
        && mpeth.is_none()
        && sacketh.is_none()
        && feth.is_none()
        && reth.is_none()
        && atomic_eth.is_none()
        && aeth.is_none()
        && atomic_ack_eth.is_none()
        && immdt.is_none()
        && ieth.is_none()
        && cnp.is_none()
}

#[cfg(test)]
mod tests {
    use super::*;
    use metaroce_codec::ext::RethRepr;

    #[test]
    fn keeps_what_it_is_given() {
        let none = ExtHeaders::default();
        assert_eq!(KeptExt::new(&none), KeptExt::default());
        assert_eq!(KeptExt::new(&none).get(), none);
        let reth = ExtHeaders {
            reth: Some(RethRepr {
                va: 0x1000,
                rkey: 7,
                dma_len: 4096,
            }),
            ..ExtHeaders::default()
        };
        assert_eq!(KeptExt::new(&reth).get(), reth);
        assert_ne!(KeptExt::new(&reth), KeptExt::new(&none));
    }
}
