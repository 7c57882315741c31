//! The `--iut` argument: `builtin`, `builtin:mutant=NAME`, `raw:IFACE`,
//! `pcap:IFACE`.

use std::fmt;
use std::str::FromStr;

/// Which IUT to reach, and how.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum IutSpec {
    /// The reference transport in process; optionally a bug-zoo mutant.
    Builtin {
        /// Mutant name (`metaroce zoo --list`).
        mutant: Option<String>,
    },
    /// AF_PACKET on an interface.
    Raw {
        /// Interface name.
        iface: String,
    },
    /// libpcap on an interface (feature `libpcap`).
    Pcap {
        /// Interface name.
        iface: String,
    },
}

impl Default for IutSpec {
    fn default() -> Self {
        IutSpec::Builtin { mutant: None }
    }
}

impl fmt::Display for IutSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IutSpec::Builtin { mutant: None } => f.write_str("builtin"),
            IutSpec::Builtin { mutant: Some(m) } => write!(f, "builtin:mutant={m}"),
            IutSpec::Raw { iface } => write!(f, "raw:{iface}"),
            IutSpec::Pcap { iface } => write!(f, "pcap:{iface}"),
        }
    }
}

impl FromStr for IutSpec {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let (kind, rest) = s.split_once(':').unwrap_or((s, ""));
        match kind {
            "builtin" if rest.is_empty() => Ok(IutSpec::Builtin { mutant: None }),
            "builtin" => match rest.strip_prefix("mutant=") {
                Some(m) if !m.is_empty() => Ok(IutSpec::Builtin {
                    mutant: Some(m.to_string()),
                }),
                _ => Err(format!(
                    "`{s}`: the only option of builtin is `mutant=NAME`"
                )),
            },
            "raw" | "pcap" if rest.is_empty() => {
                Err(format!("`{s}`: name the interface, as in `{kind}:veth0`"))
            }
            "raw" => Ok(IutSpec::Raw {
                iface: rest.to_string(),
            }),
            "pcap" => Ok(IutSpec::Pcap {
                iface: rest.to_string(),
            }),
            _ => Err(format!(
                "`{s}`: an IUT is `builtin`, `builtin:mutant=NAME`, `raw:IFACE` or `pcap:IFACE`"
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_form() {
        assert_eq!("builtin".parse(), Ok(IutSpec::Builtin { mutant: None }));
        assert_eq!(
            "builtin:mutant=msn_off_by_one".parse(),
            Ok(IutSpec::Builtin {
                mutant: Some("msn_off_by_one".into())
            })
        );
        assert_eq!(
            "raw:veth0".parse(),
            Ok(IutSpec::Raw {
                iface: "veth0".into()
            })
        );
        assert!("raw".parse::<IutSpec>().is_err());
        assert!("builtin:x".parse::<IutSpec>().is_err());
        assert!("tcp:x".parse::<IutSpec>().is_err());
    }
}
