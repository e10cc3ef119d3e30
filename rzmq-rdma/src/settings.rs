//! RDMA settings: [`RdmaOptions`], the typed, process-wide options of the upgrader, its
//! providers and data paths, and [`TABLE`], the `RZMQ_RDMA*` / `RZMQ_SOFT_*` variables that
//! give their defaults, read once through rzmq-core's one parser
//! ([`rzmq_core::env`]).
//!
//! Programs set them with [`crate::install_with`] before their first socket; the C ABI (for
//! LD_PRELOAD users) installs [`RdmaOptions::from_env`] when the first context is created, and
//! `zmq_ctx_set(ctx, ZMQ_RDMA_MODE, ..)` changes the mode of the installed upgrader
//! ([`crate::upgrade::set_mode`]). They are process-wide because the upgrader is: rzmq-core's
//! engine consults one upgrader per process (docs/SETTINGS.md).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::OnceLock;

use rzmq_core::alt::Mode;
use rzmq_core::env::{self, Kind, SettingError, Value, Var};

/// The rendezvous threshold's default, in bytes (`RZMQ_RDMA_RNDV_THRESHOLD`).
pub const DEFAULT_RNDV_THRESHOLD: usize = 64 * 1024;

/// Where a soft device listens for (and peers reach) its wires.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WireAddr {
    /// A TCP address (port 0 = any when listening).
    Tcp(SocketAddr),
    /// A Unix stream socket path.
    Unix(PathBuf),
}

impl WireAddr {
    /// Parses `tcp:IP:PORT` or `unix:PATH`.
    pub fn parse(s: &str) -> Result<WireAddr, &'static str> {
        if let Some(rest) = s.strip_prefix("tcp:") {
            rest.parse()
                .map(WireAddr::Tcp)
                .map_err(|_| "soft wire address: bad tcp address")
        } else if let Some(rest) = s.strip_prefix("unix:") {
            if rest.is_empty() {
                return Err("soft wire address: empty unix path");
            }
            Ok(WireAddr::Unix(PathBuf::from(rest)))
        } else {
            Err("soft wire address must start with tcp: or unix:")
        }
    }
}

impl std::fmt::Display for WireAddr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WireAddr::Tcp(a) => write!(f, "tcp:{a}"),
            WireAddr::Unix(p) => write!(f, "unix:{}", p.display()),
        }
    }
}

/// Every variable rzmq-rdma reads (docs/SETTINGS.md has one row per entry).
pub static TABLE: &[Var] = &[
    Var {
        name: "RZMQ_RDMA",
        kind: Kind::Choice(&[
            "auto", "off", "require", "on", "yes", "true", "1", "no", "false", "0",
        ]),
        default: "auto",
        option: "RdmaOptions::mode, context ZMQ_RDMA_MODE (0 off, 1 auto, 2 require)",
        doc: "upgrade tcp connections to RDMA when both ends can; never; or always (refuse others)",
    },
    Var {
        name: "RZMQ_RDMA_PROVIDER",
        kind: Kind::Choice(&["auto", "ibverbs", "soft", "loopback"]),
        default: "auto",
        option: "RdmaOptions::provider",
        doc: "the verbs provider; auto: ibverbs when it lists a device, else no RDMA",
    },
    Var {
        name: "RZMQ_RDMA_DEVICE",
        kind: Kind::Text,
        default: "the first device",
        option: "RdmaOptions::device",
        doc: "ibverbs device name (mlx5_0)",
    },
    Var {
        name: "RZMQ_RDMA_PORT",
        kind: Kind::Uint { max: 255 },
        default: "1",
        option: "RdmaOptions::port",
        doc: "ibverbs port",
    },
    Var {
        name: "RZMQ_RDMA_GID_INDEX",
        kind: Kind::Uint {
            max: u32::MAX as u64,
        },
        default: "the first RoCE v2 GID",
        option: "RdmaOptions::gid_index",
        doc: "ibverbs GID index (on Ethernet ports the default is the first RoCE v2 GID, else 0)",
    },
    Var {
        name: "RZMQ_RDMA_LOG",
        kind: Kind::Flag,
        default: "off",
        option: "RdmaOptions::log",
        doc: "one stderr line per connection: the transport chosen (or why not RDMA), counters",
    },
    Var {
        name: "RZMQ_RDMA_EVENTS",
        kind: Kind::Flag,
        default: "off",
        option: "RdmaOptions::events",
        doc: "monitor events 0x8000 (EVENT_TRANSPORT) per connection",
    },
    Var {
        name: "RZMQ_RDMA_RNDV_THRESHOLD",
        kind: Kind::Uint {
            max: u32::MAX as u64,
        },
        default: "65536",
        option: "RdmaOptions::rndv_threshold",
        doc: "frames above this many bytes go by rendezvous (zero-copy RDMA READ)",
    },
    Var {
        name: "RZMQ_RDMA_MR_CACHE",
        kind: Kind::Flag,
        default: "on for soft and loopback, off for ibverbs",
        option: "RdmaOptions::mr_cache",
        doc: "registration cache",
    },
    Var {
        name: "RZMQ_RDMA_MW",
        kind: Kind::Flag,
        default: "on",
        option: "RdmaOptions::mw",
        doc: "memory windows for rendezvous frames (off: one registration per frame)",
    },
    Var {
        name: "RZMQ_SOFT_LISTEN",
        kind: Kind::Text,
        default: "one device per local address",
        option: "RdmaOptions::soft_listen",
        doc: "soft provider wire listener, tcp:IP:PORT or unix:PATH",
    },
    Var {
        name: "RZMQ_SOFT_ADVERTISE",
        kind: Kind::Text,
        default: "the listener's address",
        option: "RdmaOptions::soft_advertise",
        doc: "soft provider: the address peers connect to, when it differs from the listener's",
    },
    Var {
        name: "RZMQ_SOFT_CMA",
        kind: Kind::Flag,
        default: "on",
        option: "RdmaOptions::soft_cma",
        doc: "soft provider: READs from a readable peer process on this host use process_vm_readv",
    },
    Var {
        name: "RZMQ_RDMA_EXPECT_DEVICE",
        kind: Kind::Flag,
        default: "off",
        option: "none (tests only)",
        doc: "rzmq-rdma's own tests: an RDMA device must be present (a real or emulated NIC)",
    },
];

/// The verbs provider to use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ProviderChoice {
    /// ibverbs when libibverbs lists a device, else no RDMA.
    #[default]
    Auto,
    /// libibverbs (a NIC, or the emulated library).
    Ibverbs,
    /// The software provider.
    Soft,
    /// QPs of one process only (measuring the engine).
    Loopback,
}

/// The typed RDMA options (process-wide; see the module documentation).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RdmaOptions {
    /// When tcp connections upgrade (`RZMQ_RDMA`, default `auto`).
    pub mode: Mode,
    /// The provider (`RZMQ_RDMA_PROVIDER`, default `auto`).
    pub provider: ProviderChoice,
    /// The ibverbs device (`RZMQ_RDMA_DEVICE`; `None`: the first one).
    pub device: Option<String>,
    /// The ibverbs port (`RZMQ_RDMA_PORT`; `None`: 1).
    pub port: Option<u8>,
    /// The GID index (`RZMQ_RDMA_GID_INDEX`; `None`: the first RoCE v2 GID on Ethernet).
    pub gid_index: Option<u32>,
    /// One stderr line per connection (`RZMQ_RDMA_LOG`).
    pub log: bool,
    /// Transport monitor events (`RZMQ_RDMA_EVENTS`).
    pub events: bool,
    /// Rendezvous threshold in bytes (`RZMQ_RDMA_RNDV_THRESHOLD`, 65536).
    pub rndv_threshold: usize,
    /// Registration cache (`RZMQ_RDMA_MR_CACHE`; `None`: per provider).
    pub mr_cache: Option<bool>,
    /// Memory windows (`RZMQ_RDMA_MW`, on).
    pub mw: bool,
    /// The soft provider's listener (`RZMQ_SOFT_LISTEN`; `None`: one device per local address).
    pub soft_listen: Option<WireAddr>,
    /// The soft provider's advertised address (`RZMQ_SOFT_ADVERTISE`).
    pub soft_advertise: Option<WireAddr>,
    /// Direct reads between processes of one host (`RZMQ_SOFT_CMA`, on).
    pub soft_cma: bool,
    /// Soft devices the upgrader opens accept fault injection
    /// ([`SoftConfig::faults`](crate::provider::soft::SoftConfig::faults); off). For tests of the
    /// layers above, which cut wires with [`crate::provider::soft::cut_wires_at`]; no variable
    /// sets it.
    pub soft_faults: bool,
    /// A provider setting from the environment was invalid (reported once): no provider is
    /// usable, so connections stay on TCP (or are refused under `require`), as a provider that
    /// fails to open. `None` for options a program builds.
    pub provider_error: Option<String>,
}

impl Default for RdmaOptions {
    fn default() -> Self {
        RdmaOptions {
            mode: Mode::Auto,
            provider: ProviderChoice::Auto,
            device: None,
            port: None,
            gid_index: None,
            log: false,
            events: false,
            rndv_threshold: DEFAULT_RNDV_THRESHOLD,
            mr_cache: None,
            mw: true,
            soft_listen: None,
            soft_advertise: None,
            soft_cma: true,
            soft_faults: false,
            provider_error: None,
        }
    }
}

impl RdmaOptions {
    /// The options the environment gives, parsed on first use and kept (each variable read
    /// once per process). A bad `RZMQ_RDMA` is an error (RDMA stays off, as before); a bad
    /// provider setting makes the provider unusable ([`RdmaOptions::provider_error`]); a bad
    /// tunable is reported and replaced by its default.
    pub fn from_env() -> Result<RdmaOptions, SettingError> {
        static ENV: OnceLock<Result<RdmaOptions, SettingError>> = OnceLock::new();
        ENV.get_or_init(|| RdmaOptions::from_lookup(env::read))
            .clone()
    }

    /// The options with `lookup` giving each variable's value (tests pass their own).
    pub fn from_lookup(
        mut lookup: impl FnMut(&'static Var) -> Result<Option<Value>, SettingError>,
    ) -> Result<RdmaOptions, SettingError> {
        let mut o = RdmaOptions::default();
        for v in TABLE {
            let value = match lookup(v) {
                Ok(Some(value)) => value,
                Ok(None) => continue,
                Err(e) if v.name == "RZMQ_RDMA" => return Err(e),
                Err(e) if is_provider_setting(v.name) => {
                    env::report(&e, "no RDMA provider");
                    o.provider_error.get_or_insert_with(|| e.to_string());
                    continue;
                }
                Err(e) => {
                    env::report(&e, &format!("using the default ({})", v.default));
                    continue;
                }
            };
            if let Err(msg) = o.apply(v.name, value) {
                let e = SettingError {
                    name: v.name,
                    value: msg.0,
                    expected: msg.1,
                };
                env::report(&e, "no RDMA provider");
                o.provider_error.get_or_insert_with(|| e.to_string());
            }
        }
        Ok(o)
    }

    /// Stores one parsed variable; `Err((value, expected))` for a text that does not parse.
    fn apply(&mut self, name: &str, value: Value) -> Result<(), (String, String)> {
        let wire = |t: &str| {
            WireAddr::parse(t).map_err(|_| (t.to_string(), "tcp:IP:PORT or unix:PATH".into()))
        };
        match (name, value) {
            ("RZMQ_RDMA", Value::Choice(c)) => {
                self.mode = match c {
                    "off" | "no" | "false" | "0" => Mode::Off,
                    "auto" => Mode::Auto,
                    _ => Mode::Require,
                }
            }
            ("RZMQ_RDMA_PROVIDER", Value::Choice(c)) => {
                self.provider = match c {
                    "ibverbs" => ProviderChoice::Ibverbs,
                    "soft" => ProviderChoice::Soft,
                    "loopback" => ProviderChoice::Loopback,
                    _ => ProviderChoice::Auto,
                }
            }
            ("RZMQ_RDMA_DEVICE", Value::Text(t)) => self.device = Some(t),
            ("RZMQ_RDMA_PORT", Value::Uint(n)) => self.port = Some(n as u8),
            ("RZMQ_RDMA_GID_INDEX", Value::Uint(n)) => self.gid_index = Some(n as u32),
            ("RZMQ_RDMA_LOG", Value::Flag(b)) => self.log = b,
            ("RZMQ_RDMA_EVENTS", Value::Flag(b)) => self.events = b,
            ("RZMQ_RDMA_RNDV_THRESHOLD", Value::Uint(n)) => self.rndv_threshold = n as usize,
            ("RZMQ_RDMA_MR_CACHE", Value::Flag(b)) => self.mr_cache = Some(b),
            ("RZMQ_RDMA_MW", Value::Flag(b)) => self.mw = b,
            ("RZMQ_SOFT_LISTEN", Value::Text(t)) => self.soft_listen = Some(wire(&t)?),
            ("RZMQ_SOFT_ADVERTISE", Value::Text(t)) => self.soft_advertise = Some(wire(&t)?),
            ("RZMQ_SOFT_CMA", Value::Flag(b)) => self.soft_cma = b,
            _ => {}
        }
        Ok(())
    }
}

/// Whether a bad value of `name` makes the provider unusable (it did before: the provider
/// failed to open), rather than falling back to a default.
fn is_provider_setting(name: &str) -> bool {
    matches!(
        name,
        "RZMQ_RDMA_PROVIDER"
            | "RZMQ_RDMA_DEVICE"
            | "RZMQ_RDMA_PORT"
            | "RZMQ_RDMA_GID_INDEX"
            | "RZMQ_SOFT_LISTEN"
            | "RZMQ_SOFT_ADVERTISE"
            | "RZMQ_SOFT_CMA"
    )
}

/// `RZMQ_RDMA_EXPECT_DEVICE` (tests: an RDMA device must be present; a bad value is
/// reported and counts as off).
#[cfg(all(test, feature = "ibverbs"))] // Only the ibverbs provider's unit test asks.
pub(crate) fn expect_device() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| {
        let v = env::read_or_default(env::entry(TABLE, "RZMQ_RDMA_EXPECT_DEVICE"));
        v == Some(Value::Flag(true))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(pairs: &[(&str, &str)]) -> Result<RdmaOptions, SettingError> {
        RdmaOptions::from_lookup(|v| match pairs.iter().find(|(n, _)| *n == v.name) {
            Some((_, value)) => env::parse(v, value),
            None => Ok(None),
        })
    }

    /// docs/SETTINGS.md lists exactly the variables of rzmq-core's table and this one, once
    /// each, with each table's default.
    #[test]
    fn the_settings_doc_lists_every_variable() {
        let doc = include_str!("../../docs/SETTINGS.md");
        let mut rows: Vec<(&str, &str)> = doc
            .lines()
            .filter_map(|l| {
                let cells: Vec<&str> = l.split('|').map(str::trim).collect();
                let name = cells.get(1)?.strip_prefix("`RZMQ_")?.strip_suffix('`')?;
                Some((&cells[1][1..name.len() + 6], *cells.get(3)?))
            })
            .collect();
        rows.sort_unstable();
        let mut vars: Vec<&Var> = env::TABLE.iter().chain(TABLE.iter()).collect();
        vars.sort_unstable_by_key(|v| v.name);
        let names: Vec<&str> = vars.iter().map(|v| v.name).collect();
        let documented: Vec<&str> = rows.iter().map(|r| r.0).collect();
        assert_eq!(documented, names, "docs/SETTINGS.md and the tables differ");
        for (v, (_, default)) in vars.iter().zip(&rows) {
            assert_eq!(
                default.trim_matches('`'),
                v.default,
                "{}: default in docs/SETTINGS.md",
                v.name
            );
        }
    }

    #[test]
    fn no_environment_gives_the_defaults() {
        assert_eq!(with(&[]).unwrap(), RdmaOptions::default());
    }

    #[test]
    fn values_land_in_typed_options() {
        let o = with(&[
            ("RZMQ_RDMA", "require"),
            ("RZMQ_RDMA_PROVIDER", "soft"),
            ("RZMQ_RDMA_LOG", "1"),
            ("RZMQ_RDMA_RNDV_THRESHOLD", "4096"),
            ("RZMQ_RDMA_MR_CACHE", "0"),
            ("RZMQ_SOFT_LISTEN", "tcp:127.0.0.1:0"),
            ("RZMQ_SOFT_CMA", "off"),
        ])
        .unwrap();
        assert_eq!(o.mode, Mode::Require);
        assert_eq!(o.provider, ProviderChoice::Soft);
        assert!(o.log && !o.events && !o.soft_cma);
        assert_eq!((o.rndv_threshold, o.mr_cache), (4096, Some(false)));
        assert!(o.soft_listen.is_some() && o.provider_error.is_none());
        assert_eq!(with(&[("RZMQ_RDMA", "0")]).unwrap().mode, Mode::Off);
        assert_eq!(with(&[("RZMQ_RDMA", "on")]).unwrap().mode, Mode::Require);
    }

    #[test]
    fn bad_values_fail_as_before() {
        // A bad mode: RDMA stays off (install reports it).
        let e = with(&[("RZMQ_RDMA", "sometimes")]).unwrap_err();
        assert_eq!(e.name, "RZMQ_RDMA");
        // A bad provider setting: no provider.
        for (name, value) in [
            ("RZMQ_RDMA_PROVIDER", "fancy"),
            ("RZMQ_SOFT_CMA", "2"),
            ("RZMQ_SOFT_LISTEN", "udp:1"),
            ("RZMQ_RDMA_PORT", "256"),
        ] {
            let o = with(&[(name, value)]).unwrap();
            assert!(o.provider_error.unwrap().contains(name), "{name}");
        }
        // A bad tunable: its default.
        let o = with(&[("RZMQ_RDMA_RNDV_THRESHOLD", "big")]).unwrap();
        assert_eq!(o.rndv_threshold, DEFAULT_RNDV_THRESHOLD);
        assert!(o.provider_error.is_none());
    }
}
