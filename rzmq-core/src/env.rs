//! The one reader of `RZMQ_*` environment variables: a table of every variable rzmq-core reads,
//! one parser with one rule per kind, and the defaults they give to typed options.
//!
//! Environment variables only give defaults, for programs that cannot set options (LD_PRELOAD
//! users of `libzmq.so`): each one is the default of a socket option, a context option or a
//! process-wide setting that programs can set themselves. docs/SETTINGS.md lists them all:
//! [`TABLE`] and rzmq-rdma's own table (`rzmq_rdma::settings::TABLE`), read through [`read`].
//! Rules:
//!
//! - unset or empty: the default;
//! - on/off ([`Kind::Flag`]): `1`, `on`, `true`, `yes` are on; `0`, `off`, `false`, `no` off
//!   (any case);
//! - numbers: decimal, within the variable's range;
//! - anything else is an error naming the variable ([`SettingError`]), reported once on
//!   stderr; the variable then gives its default (or, where the code failed before, its caller
//!   fails the same way).
//!
//! Each variable is read once per process: [`core`](fn@core) parses this crate's table on first use,
//! and callers (rzmq-rdma) cache what they parse. Nothing on a message path reads the
//! environment: options carry plain fields.

use std::fmt;
use std::sync::OnceLock;

/// How a variable's value is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// On/off (see the module rules).
    Flag,
    /// A non-negative decimal integer up to `max`.
    Uint {
        /// The largest accepted value.
        max: u64,
    },
    /// One of these words.
    Choice(&'static [&'static str]),
    /// Free text (a name, an address).
    Text,
    /// Free text where an empty value is a value of its own, not the default
    /// (`RZMQ_TCP_LOCAL_CC`: empty keeps the host's algorithm).
    TextOrEmpty,
}

impl Kind {
    /// What the kind accepts, for errors and docs.
    pub fn expected(&self) -> String {
        match self {
            Kind::Flag => "1/on/true/yes or 0/off/false/no".to_string(),
            Kind::Uint { max } => format!("an integer from 0 to {max}"),
            Kind::Choice(words) => words.join(", "),
            Kind::Text => "text".to_string(),
            Kind::TextOrEmpty => "text (empty allowed)".to_string(),
        }
    }
}

/// One environment variable: its name, kind, default, the typed option it gives the default
/// of, and what it means (docs/SETTINGS.md has one row per entry).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Var {
    /// The variable's name (`RZMQ_...`).
    pub name: &'static str,
    /// How its value is read.
    pub kind: Kind,
    /// The default, as docs/SETTINGS.md writes it.
    pub default: &'static str,
    /// The typed option it gives the default of.
    pub option: &'static str,
    /// One line: what it does.
    pub doc: &'static str,
}

/// A bad value in an environment variable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SettingError {
    /// The variable.
    pub name: &'static str,
    /// The value found.
    pub value: String,
    /// What was expected.
    pub expected: String,
}

impl fmt::Display for SettingError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}={:?}: expected {}",
            self.name, self.value, self.expected
        )
    }
}

impl std::error::Error for SettingError {}

/// Every variable rzmq-core reads (rzmq-rdma has its own table, through the same parser).
pub static TABLE: &[Var] = &[
    Var {
        name: "RZMQ_DIRECT",
        kind: Kind::Flag,
        default: "on",
        option: "socket ZMQ_RZMQ_DIRECT / sockopt::Direct",
        doc: "direct sends: an idle connection's output is written by the sending thread",
    },
    Var {
        name: "RZMQ_DIRECT_RX",
        kind: Kind::Flag,
        default: "on",
        option: "socket ZMQ_RZMQ_DIRECT_RX / sockopt::DirectRx",
        doc: "direct receives: a blocked receiver reads its idle connection itself",
    },
    Var {
        name: "RZMQ_SPIN_US",
        kind: Kind::Uint { max: 1_000_000 },
        default: "30",
        option: "socket ZMQ_RZMQ_BUSY_POLL_US / sockopt::BusyPoll",
        doc: "microseconds a direct receive busy-polls before it sleeps (0: never)",
    },
    Var {
        name: "RZMQ_FRAMED",
        kind: Kind::Flag,
        default: "on",
        option: "socket ZMQ_RZMQ_FRAMED / sockopt::Framed",
        doc: "framed lane: short frames are encoded by the sender into a byte queue",
    },
    Var {
        name: "RZMQ_FRAMED_NAP_US",
        kind: Kind::Uint { max: 1000 },
        default: "20",
        option: "socket ZMQ_RZMQ_FRAMED_NAP_US / sockopt::FramedNap",
        doc: "microseconds the I/O thread waits between writes of a stream (0: never)",
    },
    Var {
        name: "RZMQ_FRAMED_NAP_EMPTY",
        kind: Kind::Flag,
        default: "on",
        option: "socket ZMQ_RZMQ_FRAMED_NAP_EMPTY / sockopt::FramedNapEmpty",
        doc: "a stream's pass naps once more when the lane is empty",
    },
    Var {
        name: "RZMQ_RDMA_CURVE_PLAINTEXT",
        kind: Kind::Flag,
        default: "off",
        option: "socket ZMQ_RDMA_CURVE_PLAINTEXT / sockopt::RdmaCurvePlaintext",
        doc: "CURVE connections may move to RDMA, where messages travel unencrypted",
    },
    Var {
        name: "RZMQ_HUGE_PAGES",
        kind: Kind::Flag,
        default: "on",
        option: "process-wide, context ZMQ_RZMQ_HUGE_PAGES / pool::set_huge_pages",
        doc: "large frame storage (2 MiB and up) asks for transparent huge pages",
    },
    Var {
        name: "RZMQ_TCP_LOCAL_CC",
        kind: Kind::TextOrEmpty,
        default: "reno",
        option: "context ZMQ_RZMQ_TCP_LOCAL_CC (zmq_ctx_set_ext) / CtxOptions::tcp_local_cc",
        doc: "congestion control of same-host tcp connections (off, default or empty: the host's)",
    },
];

/// Parses an on/off value: `Some(true)` for `1/on/true/yes`, `Some(false)` for
/// `0/off/false/no` (any case, surrounding spaces ignored), `None` otherwise.
pub fn parse_flag(value: &str) -> Option<bool> {
    let v = value.trim();
    const ON: [&str; 4] = ["1", "on", "true", "yes"];
    const OFF: [&str; 4] = ["0", "off", "false", "no"];
    if ON.iter().any(|w| v.eq_ignore_ascii_case(w)) {
        Some(true)
    } else if OFF.iter().any(|w| v.eq_ignore_ascii_case(w)) {
        Some(false)
    } else {
        None
    }
}

/// A typed value parsed from a variable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    /// [`Kind::Flag`].
    Flag(bool),
    /// [`Kind::Uint`].
    Uint(u64),
    /// [`Kind::Choice`]: the word, as listed.
    Choice(&'static str),
    /// [`Kind::Text`].
    Text(String),
}

/// Parses `value` as `var`'s kind (an empty value is `Ok(None)`: the default).
pub fn parse(var: &Var, value: &str) -> Result<Option<Value>, SettingError> {
    let v = value.trim();
    if v.is_empty() && var.kind != Kind::TextOrEmpty {
        return Ok(None);
    }
    let err = || SettingError {
        name: var.name,
        value: value.to_string(),
        expected: var.kind.expected(),
    };
    Ok(Some(match var.kind {
        Kind::Flag => Value::Flag(parse_flag(v).ok_or_else(err)?),
        Kind::Uint { max } => Value::Uint(
            v.parse::<u64>()
                .ok()
                .filter(|&n| n <= max)
                .ok_or_else(err)?,
        ),
        Kind::Choice(words) => Value::Choice(
            words
                .iter()
                .find(|w| v.eq_ignore_ascii_case(w))
                .copied()
                .ok_or_else(err)?,
        ),
        Kind::Text | Kind::TextOrEmpty => Value::Text(v.to_string()),
    }))
}

/// Reads and parses `var` from the environment (unset or empty: `Ok(None)`). The only place in
/// rzmq that reads an `RZMQ_*` variable; call it once per variable and keep the result.
pub fn read(var: &Var) -> Result<Option<Value>, SettingError> {
    match std::env::var_os(var.name) {
        None => Ok(None),
        Some(os) => match os.into_string() {
            Ok(s) => parse(var, &s),
            Err(os) => Err(SettingError {
                name: var.name,
                value: os.to_string_lossy().into_owned(),
                expected: var.kind.expected(),
            }),
        },
    }
}

/// A variable of the system's that libzmq itself reads at the point of use (`TMPDIR` for ipc
/// wildcards), read each time as libzmq does; not a setting of rzmq's.
pub fn system_var(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

/// Reports a bad value once (each variable is read once) on stderr, naming the variable.
pub fn report(e: &SettingError, fallback: &str) {
    eprintln!("rzmq: {e}; {fallback}");
}

/// [`read`], with a bad value reported and replaced by the default (`Ok(None)`).
pub fn read_or_default(var: &Var) -> Option<Value> {
    read(var).unwrap_or_else(|e| {
        report(&e, &format!("using the default ({})", var.default));
        None
    })
}

/// The entry of `table` named `name` (panics on a name missing from the table: a bug).
pub fn entry(table: &'static [Var], name: &str) -> &'static Var {
    table
        .iter()
        .find(|v| v.name == name)
        .unwrap_or_else(|| panic!("{name} is not in the settings table"))
}

/// The defaults rzmq-core's variables give, parsed once per process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CoreDefaults {
    /// `RZMQ_DIRECT`.
    pub direct: bool,
    /// `RZMQ_DIRECT_RX`.
    pub direct_rx: bool,
    /// `RZMQ_SPIN_US`, microseconds.
    pub busy_poll_us: u32,
    /// `RZMQ_FRAMED`.
    pub framed: bool,
    /// `RZMQ_FRAMED_NAP_US`, microseconds.
    pub framed_nap_us: u32,
    /// `RZMQ_FRAMED_NAP_EMPTY`.
    pub framed_nap_empty: bool,
    /// `RZMQ_RDMA_CURVE_PLAINTEXT`.
    pub rdma_curve_plaintext: bool,
    /// `RZMQ_HUGE_PAGES`.
    pub huge_pages: bool,
    /// `RZMQ_TCP_LOCAL_CC` (`None`: keep the host's).
    pub tcp_local_cc: Option<Vec<u8>>,
}

impl CoreDefaults {
    /// The built-in defaults (no environment).
    pub fn built_in() -> CoreDefaults {
        CoreDefaults {
            direct: true,
            direct_rx: true,
            busy_poll_us: 30,
            framed: true,
            framed_nap_us: 20,
            framed_nap_empty: true,
            rdma_curve_plaintext: false,
            huge_pages: true,
            tcp_local_cc: Some(b"reno".to_vec()),
        }
    }

    /// The defaults with `lookup` giving each variable's parsed value (bad values reported by
    /// `lookup`'s caller and given as `None`).
    pub fn from_lookup(mut lookup: impl FnMut(&'static Var) -> Option<Value>) -> CoreDefaults {
        let mut d = CoreDefaults::built_in();
        for v in TABLE {
            let Some(value) = lookup(v) else { continue };
            match (v.name, value) {
                ("RZMQ_DIRECT", Value::Flag(b)) => d.direct = b,
                ("RZMQ_DIRECT_RX", Value::Flag(b)) => d.direct_rx = b,
                ("RZMQ_SPIN_US", Value::Uint(n)) => d.busy_poll_us = n as u32,
                ("RZMQ_FRAMED", Value::Flag(b)) => d.framed = b,
                ("RZMQ_FRAMED_NAP_US", Value::Uint(n)) => d.framed_nap_us = n as u32,
                ("RZMQ_FRAMED_NAP_EMPTY", Value::Flag(b)) => d.framed_nap_empty = b,
                ("RZMQ_RDMA_CURVE_PLAINTEXT", Value::Flag(b)) => d.rdma_curve_plaintext = b,
                ("RZMQ_HUGE_PAGES", Value::Flag(b)) => d.huge_pages = b,
                ("RZMQ_TCP_LOCAL_CC", Value::Text(t)) => d.tcp_local_cc = local_cc(&t),
                _ => {}
            }
        }
        d
    }
}

/// `RZMQ_TCP_LOCAL_CC`'s meaning: `off`/`default` keep the host's algorithm.
pub fn local_cc(text: &str) -> Option<Vec<u8>> {
    match text.trim() {
        "" | "off" | "default" => None,
        name => Some(name.as_bytes().to_vec()),
    }
}

/// rzmq-core's defaults from the environment, parsed on first use (bad values reported once).
pub fn core() -> &'static CoreDefaults {
    static DEFAULTS: OnceLock<CoreDefaults> = OnceLock::new();
    DEFAULTS.get_or_init(|| CoreDefaults::from_lookup(read_or_default))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_follow_one_rule() {
        for on in ["1", "on", "ON", "true", "Yes", " 1 "] {
            assert_eq!(parse_flag(on), Some(true), "{on}");
        }
        for off in ["0", "off", "False", "NO"] {
            assert_eq!(parse_flag(off), Some(false), "{off}");
        }
        for bad in ["2", "enabled", "", "o"] {
            assert_eq!(parse_flag(bad), None, "{bad}");
        }
    }

    #[test]
    fn bad_values_name_the_variable() {
        let v = entry(TABLE, "RZMQ_SPIN_US");
        assert_eq!(parse(v, "45").unwrap(), Some(Value::Uint(45)));
        assert_eq!(parse(v, "").unwrap(), None);
        let e = parse(v, "2000000").unwrap_err();
        assert_eq!(e.name, "RZMQ_SPIN_US");
        assert!(e.to_string().contains("RZMQ_SPIN_US"), "{e}");
        assert!(parse(v, "-1").is_err());
        let e = parse(entry(TABLE, "RZMQ_DIRECT"), "maybe").unwrap_err();
        assert!(e.to_string().starts_with("RZMQ_DIRECT=\"maybe\""), "{e}");
        let choice = Var {
            name: "X",
            kind: Kind::Choice(&["auto", "off"]),
            default: "auto",
            option: "",
            doc: "",
        };
        assert_eq!(parse(&choice, "OFF").unwrap(), Some(Value::Choice("off")));
        assert!(parse(&choice, "of").is_err());
    }

    #[test]
    fn defaults_are_the_built_in_ones_without_the_environment() {
        let d = CoreDefaults::from_lookup(|_| None);
        assert_eq!(d, CoreDefaults::built_in());
        let d = CoreDefaults::from_lookup(|v| match v.name {
            "RZMQ_FRAMED" => Some(Value::Flag(false)),
            "RZMQ_SPIN_US" => Some(Value::Uint(0)),
            "RZMQ_TCP_LOCAL_CC" => Some(Value::Text("off".into())),
            _ => None,
        });
        assert!(!d.framed && d.busy_poll_us == 0 && d.tcp_local_cc.is_none() && d.direct);
        // Empty is the default for every variable but RZMQ_TCP_LOCAL_CC, where it keeps the
        // host's algorithm.
        let cc = entry(TABLE, "RZMQ_TCP_LOCAL_CC");
        let empty = parse(cc, " ").unwrap();
        assert_eq!(empty, Some(Value::Text(String::new())));
        let d = CoreDefaults::from_lookup(|v| match v.name {
            "RZMQ_TCP_LOCAL_CC" => empty.clone(),
            _ => None,
        });
        assert!(d.tcp_local_cc.is_none());
        assert!(CoreDefaults::built_in().tcp_local_cc.is_some());
    }

    #[test]
    fn every_variable_is_listed_once_with_a_parseable_default() {
        let mut names: Vec<_> = TABLE.iter().map(|v| v.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), TABLE.len());
        for v in TABLE {
            assert!(v.name.starts_with("RZMQ_") && !v.doc.is_empty(), "{v:?}");
            assert!(parse(v, v.default).is_ok(), "{v:?}");
        }
    }
}
