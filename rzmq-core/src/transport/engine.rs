//! A new connection's engine: the ZMTP settings a socket's options give it, the RDMA upgrade
//! it may try, and same-host tuning of its stream.

use std::time::{Duration, Instant};

use crate::engine::{Engine, Proto, Stream, Upgrade};
use crate::transport::same_host::{local_congestion_control_paces, tune_same_host_with};
use crate::transport::ConnSetup;
use crate::zmtp::{self, SocketType};

/// An engine for a new connection of this socket.
pub(crate) fn new_engine(setup: &ConnSetup, stream: Stream, proto: Proto) -> Engine {
    // Same-host tcp runs reno, which does not pace: large bodies go out whole.
    let cc = setup.options.rzmq.tcp_local_cc.as_deref();
    let unpaced = matches!((&stream, cc), (Stream::Tcp(t), Some(cc)) if tune_same_host_with(t, cc))
        && !local_congestion_control_paces(cc);
    let mut e = Engine::new(stream, proto);
    e.set_split_large(!unpaced);
    e.subscriptions = matches!(setup.socket_type, SocketType::Sub | SocketType::XSub);
    e
}

/// The upgrade of a new tcp ZMTP connection, when an upgrader is installed and enabled.
pub(crate) fn make_upgrade(
    setup: &ConnSetup,
    connecting: bool,
    required: bool,
    stream: &Stream,
    endpoint: &str,
) -> Option<Box<Upgrade>> {
    if setup.socket_type == SocketType::Stream || setup.options.raw_socket {
        return None;
    }
    let Stream::Tcp(t) = stream else {
        return None;
    };
    // CURVE: the RDMA path would carry messages unencrypted; the upgrade declines it (and says
    // so) unless the socket's ZMQ_RDMA_CURVE_PLAINTEXT allows it.
    Upgrade::new(
        connecting,
        required,
        setup.options.mechanism == crate::options::CURVE
            && !setup.options.rzmq.rdma_curve_plaintext,
        t.local_addr().ok(),
        setup.monitor.clone(),
        endpoint.to_string(),
    )
}

/// The protocol of a new connection: raw for STREAM, ZMTP with the socket's settings otherwise.
pub(crate) fn make_proto(
    setup: &ConnSetup,
    peer_address: Option<String>,
    fd: i32,
    advertise: Option<Vec<u8>>,
) -> Proto {
    if setup.socket_type == SocketType::Stream || setup.options.raw_socket {
        return Proto::new_raw();
    }
    let o = &setup.options;
    let ms = |v: i32| {
        if v > 0 {
            Some(Duration::from_millis(v as u64))
        } else {
            None
        }
    };
    let cfg = zmtp::Config {
        socket_type: setup.socket_type,
        routing_id: o.routing_id.clone(),
        mechanism: match o.mechanism {
            crate::options::PLAIN => zmtp::Mechanism::Plain,
            crate::options::CURVE => zmtp::Mechanism::Curve,
            _ => zmtp::Mechanism::Null,
        },
        as_server: o.as_server,
        plain: zmtp::Credentials {
            username: o.plain_username.clone(),
            password: o.plain_password.clone(),
        },
        zap_domain: o.zap_domain.clone(),
        zap_enforce_domain: o.zap_enforce_domain,
        maxmsgsize: o.maxmsgsize,
        metadata: o
            .metadata
            .iter()
            .map(|(k, v)| (String::from_utf8_lossy(k).into_owned(), v.clone()))
            .chain(advertise.map(|v| (crate::alt::PROPERTY.to_string(), v)))
            .collect(),
        heartbeat_ivl: ms(o.heartbeat_ivl),
        heartbeat_ttl: if o.heartbeat_ttl > 0 {
            Some(Duration::from_millis(u64::from(o.heartbeat_ttl) * 100))
        } else {
            None
        },
        heartbeat_timeout: Some(Duration::from_millis(
            o.effective_heartbeat_timeout().max(0) as u64,
        )),
        handshake_ivl: ms(o.handshake_ivl),
        peer_address,
        local_properties: vec![("__fd".to_string(), fd.to_string().into_bytes())],
        curve: zmtp::CurveKeys {
            public_key: o.curve_publickey,
            secret_key: o.curve_secretkey,
            server_key: o.curve_serverkey,
        },
    };
    Proto::new_zmtp(cfg, Instant::now())
}
