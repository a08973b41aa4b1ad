//! The bus over real loopback sockets: an authenticated peer's frames arrive whole and in
//! order; a peer with the wrong secret or another cluster's identity delivers nothing; an
//! oversized frame ends the connection.

use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

use super::handshake::Secrets;
use super::{BusConfig, accept, cluster_id, dial};

/// The frame limit of these tests' buses: room for bodies read in several pieces.
const FRAME_MAX: usize = 4 << 20;

/// Frames received, with the replica that sent each.
type Received = Vec<(u8, Vec<u8>)>;

fn frame(tag: u8, body: usize) -> Vec<u8> {
    let mut frame = vec![tag; 256 + body];
    let size = u32::try_from(frame.len()).unwrap();
    frame[48..52].copy_from_slice(&size.to_le_bytes());
    frame
}

fn config(replica: u8, peer: (u8, std::net::SocketAddr), secret: &[u8], name: &str) -> BusConfig {
    BusConfig {
        replica,
        cluster: cluster_id(name),
        peers: vec![peer],
        secrets: Some(Secrets::new(secret, None)),
        frame_size_max: FRAME_MAX,
        tls: None,
        handshake_timeout: Duration::from_secs(2),
        at_rest: [0; 32],
    }
}

/// Acceptor 0's configuration (its one peer, replica 1, is never dialed).
fn acceptor() -> BusConfig {
    let unused = "127.0.0.1:9".parse().unwrap();
    config(0, (1, unused), &[7; 32], "bus-test")
}

/// What acceptor 0 receives within `wait` from a dialer configured by `dialer`, which
/// sends `frames`.
fn delivered(
    dialer: impl FnOnce(std::net::SocketAddr) -> BusConfig,
    frames: Vec<Vec<u8>>,
) -> Vec<(u8, Vec<u8>)> {
    delivered_to(acceptor(), dialer, frames)
}

/// What an acceptor configured as `acceptor` receives within `wait` from a dialer
/// configured by `dialer`, which sends `frames`.
fn delivered_to(
    acceptor: BusConfig,
    dialer: impl FnOnce(std::net::SocketAddr) -> BusConfig,
    frames: Vec<Vec<u8>>,
) -> Vec<(u8, Vec<u8>)> {
    compio::runtime::Runtime::new()
        .unwrap()
        .block_on(async move {
            let listener = compio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let address = listener.local_addr().unwrap();
            let acceptor = Rc::new(acceptor);
            let received: Rc<RefCell<Received>> = Rc::default();
            let sink = Rc::clone(&received);
            let deliver = Rc::new(move |from: u8, frame: Vec<u8>| {
                sink.borrow_mut().push((from, frame));
                true
            });
            compio::runtime::spawn(accept(listener, acceptor, deliver)).detach();
            let outbound = dial(&Rc::new(dialer(address)));
            for frame in frames {
                outbound.send(0, frame);
            }
            compio::time::sleep(Duration::from_millis(500)).await;
            received.take()
        })
}

#[test]
fn an_authenticated_peer_delivers_whole_frames_in_order() {
    // The middle frame's body is read in three pieces.
    let frames = vec![frame(1, 0), frame(2, 3 << 20), frame(3, 10)];
    let got = delivered(
        |to| config(1, (0, to), &[7; 32], "bus-test"),
        frames.clone(),
    );
    let expected: Vec<(u8, Vec<u8>)> = frames.into_iter().map(|frame| (1, frame)).collect();
    assert_eq!(got, expected);
}

#[test]
fn a_wrong_secret_cluster_or_at_rest_key_delivers_nothing() {
    let wrong_secret = delivered(
        |to| config(1, (0, to), &[8; 32], "bus-test"),
        vec![frame(1, 0)],
    );
    assert!(wrong_secret.is_empty());
    let other_cluster = delivered(
        |to| config(1, (0, to), &[7; 32], "other"),
        vec![frame(1, 0)],
    );
    assert!(other_cluster.is_empty());
    let other_key = delivered(
        |to| BusConfig {
            at_rest: [3; 32],
            ..config(1, (0, to), &[7; 32], "bus-test")
        },
        vec![frame(1, 0)],
    );
    assert!(other_key.is_empty());
}

#[test]
fn an_oversized_frame_ends_the_connection_before_its_body() {
    let frames = vec![frame(1, 0), frame(2, FRAME_MAX), frame(3, 0)];
    let got = delivered(
        |to| config(1, (0, to), &[7; 32], "bus-test"),
        frames.clone(),
    );
    // The first frame arrives; the oversized one closes that connection. The dialer then
    // reconnects, but the frame after it was already written to the closed connection or is
    // delivered on the new one; either way the oversized frame never is.
    assert_eq!(got.first(), Some(&(1, frames[0].clone())));
    assert!(got.iter().all(|(_, frame)| frame.len() <= FRAME_MAX));
}

/// `[cluster.tls]` over real sockets: the acceptor serves a certificate, the dialer checks it
/// by its CA (or takes any, for self-signed clusters), and the shared-secret handshake and
/// the frames run inside the session.
#[cfg(feature = "tls")]
mod tls {
    use std::path::PathBuf;
    use std::rc::Rc;

    use super::super::BusConfig;
    use super::super::tls::{PeerCheck, ReplicaTls};
    use super::{Received, acceptor, config, delivered_to, frame};
    use crate::tls::{CertificateSource, SelfSigned};

    /// A directory removed when the test is done with it.
    struct Scratch(PathBuf);

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    /// A certificate for `127.0.0.1` written as PEM files; returns the source, the
    /// certificate's own file (usable as a CA file that trusts exactly it) and the directory
    /// holding them, removed on drop.
    fn certificate(name: &str) -> (CertificateSource, PathBuf, Scratch) {
        let made = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_owned()]).unwrap();
        let directory = std::env::temp_dir().join(format!(
            "replica-tls-{name}-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        std::fs::create_dir_all(&directory).unwrap();
        let (cert_file, key_file) = (directory.join("cert.pem"), directory.join("key.pem"));
        std::fs::write(&cert_file, made.cert.pem()).unwrap();
        std::fs::write(&key_file, made.signing_key.serialize_pem()).unwrap();
        let source = CertificateSource {
            self_signed: SelfSigned::Never,
            cert_file: cert_file.clone(),
            key_file,
        };
        (source, cert_file, Scratch(directory))
    }

    fn tls(source: &CertificateSource, peers: &PeerCheck) -> Rc<ReplicaTls> {
        Rc::new(ReplicaTls::new(source.load().unwrap(), peers).unwrap())
    }

    /// What an acceptor with `acceptor_tls` receives from a dialer with `dialer_tls`.
    fn delivered(
        acceptor_tls: Option<Rc<ReplicaTls>>,
        dialer_tls: Option<Rc<ReplicaTls>>,
        frames: Vec<Vec<u8>>,
    ) -> Received {
        let acceptor = BusConfig {
            tls: acceptor_tls,
            ..acceptor()
        };
        let dialer = |address| BusConfig {
            tls: dialer_tls,
            ..config(1, (0, address), &[7; 32], "bus-test")
        };
        delivered_to(acceptor, dialer, frames)
    }

    #[test]
    fn frames_arrive_whole_and_in_order_inside_tls_checked_by_the_ca() {
        let (node, node_cert, _scratch) = certificate("ca");
        let frames = vec![frame(1, 0), frame(2, 3 << 20), frame(3, 10)];
        let peers = PeerCheck::Ca(node_cert);
        let got = delivered(
            Some(tls(&node, &peers)),
            Some(tls(&node, &peers)),
            frames.clone(),
        );
        let expected: Received = frames.into_iter().map(|frame| (1, frame)).collect();
        assert_eq!(got, expected);
    }

    #[test]
    fn a_self_signed_cluster_takes_any_certificate() {
        let (node, _, _scratch) = certificate("any");
        let self_signed = CertificateSource {
            self_signed: SelfSigned::Always,
            ..node
        };
        let got = delivered(
            Some(tls(&self_signed, &PeerCheck::Any)),
            Some(tls(&self_signed, &PeerCheck::Any)),
            vec![frame(1, 100)],
        );
        assert_eq!(got, vec![(1, frame(1, 100))]);
    }

    #[test]
    fn a_dialer_refuses_an_acceptor_its_ca_did_not_sign_and_plain_meets_tls_nowhere() {
        let (acceptor, _, _acceptor_scratch) = certificate("acceptor");
        let (_, other_cert, _other_scratch) = certificate("other");
        let frames = vec![frame(1, 0)];
        let wrong_ca = delivered(
            Some(tls(&acceptor, &PeerCheck::Any)),
            Some(tls(&acceptor, &PeerCheck::Ca(other_cert))),
            frames.clone(),
        );
        assert!(wrong_ca.is_empty());
        let plain_dialer = delivered(Some(tls(&acceptor, &PeerCheck::Any)), None, frames.clone());
        assert!(plain_dialer.is_empty());
        let plain_acceptor = delivered(None, Some(tls(&acceptor, &PeerCheck::Any)), frames);
        assert!(plain_acceptor.is_empty());
    }
}
