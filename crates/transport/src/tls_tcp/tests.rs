//! TCP wrapped in TLS over loopback with a scripted handler and a rustls client that trusts
//! the server's certificate (PEM files made here): pipelined requests are answered as they
//! complete; a frame over the unauthenticated limit is refused before its body is read, and
//! a frame that is not a request gets an eviction, each ending only its own connection; a
//! client that does not speak TLS fails its handshake and the others go on.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use proto::header::{EvictionHeader, EvictionReason, HEADER_SIZE, ReplyHeader};
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use zerocopy::FromBytes;

use super::{TlsTcpConfig, TlsTcpServer};
use crate::test_handler::{Scripted, request};
use crate::tls::{CertificateSource, SelfSigned};

fn config() -> TlsTcpConfig {
    TlsTcpConfig {
        address: "127.0.0.1:0".parse().unwrap(),
        connections_max: 16,
        frame_size_max: 1 << 20,
        unauthenticated_frame_size_max: 4096,
        in_flight_max: 8,
        handshake_grace: Duration::from_secs(5),
        frame_read_timeout: Duration::from_secs(5),
        write_timeout: Duration::from_secs(5),
    }
}

/// A certificate for `localhost` written as PEM files into a fresh directory.
struct Files {
    directory: PathBuf,
    cert_file: PathBuf,
    key_file: PathBuf,
}

impl Files {
    fn new(name: &str) -> Self {
        let directory = std::env::temp_dir().join(format!("tls-tcp-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&directory).unwrap();
        let made = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
        let cert_file = directory.join("cert.pem");
        let key_file = directory.join("key.pem");
        std::fs::write(&cert_file, made.cert.pem()).unwrap();
        std::fs::write(&key_file, made.signing_key.serialize_pem()).unwrap();
        Self {
            directory,
            cert_file,
            key_file,
        }
    }
}

impl Drop for Files {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.directory);
    }
}

type Client = rustls::StreamOwned<rustls::ClientConnection, TcpStream>;

/// A TLS client that trusts only the certificate in `cert_file`.
fn connect(address: SocketAddr, cert_file: &PathBuf) -> Client {
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_file(cert_file).unwrap())
        .unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let name = "localhost".try_into().unwrap();
    let connection = rustls::ClientConnection::new(Arc::new(config), name).unwrap();
    let stream = TcpStream::connect(address).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    rustls::StreamOwned::new(connection, stream)
}

fn read_frame(client: &mut Client) -> Vec<u8> {
    let mut frame = vec![0; HEADER_SIZE];
    client.read_exact(&mut frame).unwrap();
    let size = u32::from_le_bytes(frame[48..52].try_into().unwrap());
    frame.resize(usize::try_from(size).unwrap(), 0);
    client.read_exact(&mut frame[HEADER_SIZE..]).unwrap();
    frame
}

fn reply(client: &mut Client) -> (u64, Vec<u8>) {
    let frame = read_frame(client);
    let header = ReplyHeader::parse(&frame).unwrap();
    (header.request.get(), frame[HEADER_SIZE..].to_vec())
}

/// The eviction the server sends, then the end of the stream.
fn eviction_then_end(client: &mut Client) -> EvictionReason {
    let frame = read_frame(client);
    let reason = EvictionHeader::read_from_bytes(&frame[..])
        .unwrap()
        .reason()
        .unwrap();
    let mut rest = Vec::new();
    let _ = client.read_to_end(&mut rest);
    assert!(rest.is_empty(), "nothing after the eviction");
    reason
}

fn serve_until_done(files: &Files, client: impl FnOnce(SocketAddr) + Send + 'static) {
    let source = CertificateSource {
        self_signed: SelfSigned::Never,
        cert_file: files.cert_file.clone(),
        key_file: files.key_file.clone(),
    };
    let tls = source.load().unwrap().server_config().unwrap();
    let runtime = compio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let server = TlsTcpServer::bind(config(), tls).await.unwrap();
        let address = server.local_address();
        let client = std::thread::spawn(move || client(address));
        let done = async {
            while !client.is_finished() {
                compio::time::sleep(Duration::from_millis(5)).await;
            }
        };
        let handler = Rc::new(Scripted::logging_in());
        server.serve(Rc::clone(&handler), done).await;
        client.join().unwrap();
        handler.assert_all_closed();
    });
}

#[test]
fn pipelined_requests_over_tls_are_answered_as_they_complete() {
    let files = Files::new("pipelined");
    let cert_file = files.cert_file.clone();
    serve_until_done(&files, move |address| {
        let mut client = connect(address, &cert_file);
        client.write_all(&request(5, b"login")).unwrap();
        assert_eq!(reply(&mut client), (5, b"login".to_vec()));
        client.write_all(&request(1, b"first")).unwrap();
        client.write_all(&request(2, b"second")).unwrap();
        assert_eq!(reply(&mut client), (2, b"second".to_vec()));
        assert_eq!(reply(&mut client), (1, b"first".to_vec()));
    });
}

#[test]
fn bad_frames_and_plaintext_clients_end_only_their_own_connection() {
    let files = Files::new("bad");
    let cert_file = files.cert_file.clone();
    serve_until_done(&files, move |address| {
        let mut good = connect(address, &cert_file);
        good.write_all(&request(2, b"before")).unwrap();
        assert_eq!(reply(&mut good).0, 2);

        // Over the unauthenticated limit: refused from its header, the body never read.
        let mut big = connect(address, &cert_file);
        let frame = request(2, &vec![0; 8192]);
        big.write_all(&frame[..HEADER_SIZE]).unwrap();
        big.flush().unwrap();
        assert_eq!(
            eviction_then_end(&mut big),
            EvictionReason::InvalidRequestBodySize
        );

        let mut reply_frame = connect(address, &cert_file);
        let mut frame = request(2, b"");
        frame[60] = 8; // the command byte: Reply
        reply_frame.write_all(&frame).unwrap();
        assert_eq!(
            eviction_then_end(&mut reply_frame),
            EvictionReason::InvalidRequestOperation
        );

        // Plain frames on the TLS port: the handshake fails, the connection closes.
        let mut plain = TcpStream::connect(address).unwrap();
        plain
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        plain.write_all(&request(2, b"plain")).unwrap();
        let mut rest = Vec::new();
        let _ = plain.read_to_end(&mut rest);
        assert!(ReplyHeader::parse(&rest).is_err(), "no reply in plaintext");

        good.write_all(&request(2, b"after")).unwrap();
        assert_eq!(reply(&mut good), (2, b"after".to_vec()));
    });
}

/// The frame after a login is sized by the login's answer, not by what the connection was
/// when the reader began waiting for it: a first request over the unauthenticated limit is
/// served. Its body, larger than the first part read, arrives whole across parts.
#[test]
fn the_first_frame_after_a_login_has_the_authenticated_limit() {
    let files = Files::new("after-login");
    let cert_file = files.cert_file.clone();
    serve_until_done(&files, move |address| {
        let mut client = connect(address, &cert_file);
        client.write_all(&request(5, b"login")).unwrap();
        assert_eq!(reply(&mut client), (5, b"login".to_vec()));
        let body: Vec<u8> = (0..300_000_u32)
            .map(|index| u8::try_from(index % 251).unwrap())
            .collect();
        client.write_all(&request(6, &body)).unwrap();
        assert_eq!(reply(&mut client), (6, body));
    });
}
