//! The bench client's transports (`--transport`): frames over plain TCP, TCP in TLS,
//! WebSocket (one frame per Binary message), WebSocket in TLS, QUIC (one stream per
//! request), and the HTTP API with or without TLS (each frame as its JSON request,
//! [`crate::http_link`]). Blocking, one request in flight, as the client is. TLS accepts any
//! certificate (a bench measures, it does not authenticate the server), as the SDK's QUIC
//! and WebSocket clients do by default.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;

use proto::header::HEADER_SIZE;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, ClientConnection, DigitallySignedStruct, SignatureScheme, StreamOwned};
use tungstenite::{Message, WebSocket};

use crate::http_link::HttpLink;

/// Which transport a bench client speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Transport {
    #[default]
    Tcp,
    TcpTls,
    WebSocket,
    WebSocketTls,
    Quic,
    Http,
    Https,
}

impl Transport {
    pub const NAMES: &'static str = "tcp, tcp-tls, ws, wss, quic, http, https";

    pub fn parse(name: &str) -> Option<Self> {
        Some(match name {
            "tcp" => Self::Tcp,
            "tcp-tls" => Self::TcpTls,
            "ws" => Self::WebSocket,
            "wss" => Self::WebSocketTls,
            "quic" => Self::Quic,
            "http" => Self::Http,
            "https" => Self::Https,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::Tcp => "tcp",
            Self::TcpTls => "tcp-tls",
            Self::WebSocket => "ws",
            Self::WebSocketTls => "wss",
            Self::Quic => "quic",
            Self::Http => "http",
            Self::Https => "https",
        }
    }
}

type Tls = StreamOwned<ClientConnection, TcpStream>;

/// One connection of any transport.
pub(crate) enum Link {
    Tcp(TcpStream),
    Tls(Box<Tls>),
    WebSocket(Box<WebSocket<TcpStream>>),
    WebSocketTls(Box<WebSocket<Tls>>),
    Quic(Box<quic::QuicLink>),
    Http(Box<HttpLink>),
}

impl Link {
    pub(crate) fn connect(transport: Transport, address: SocketAddr) -> io::Result<Self> {
        Ok(match transport {
            Transport::Tcp => Self::Tcp(tcp(address)?),
            Transport::TcpTls => Self::Tls(Box::new(tls(tcp(address)?)?)),
            Transport::WebSocket => {
                let stream = tcp(address)?;
                Self::WebSocket(Box::new(upgrade(stream, "ws", address)?))
            }
            Transport::WebSocketTls => {
                let stream = tls(tcp(address)?)?;
                Self::WebSocketTls(Box::new(upgrade(stream, "wss", address)?))
            }
            Transport::Quic => Self::Quic(Box::new(quic::QuicLink::connect(address)?)),
            Transport::Http => {
                Self::Http(Box::new(HttpLink::new(Box::new(tcp(address)?), address)))
            }
            Transport::Https => {
                let stream = Box::new(tls(tcp(address)?)?);
                Self::Http(Box::new(HttpLink::new(stream, address)))
            }
        })
    }

    /// Sends one frame.
    pub(crate) fn write_frame(&mut self, head: &[u8], body: &[u8]) -> io::Result<()> {
        match self {
            Self::Tcp(stream) => write_vectored(stream, head, body),
            Self::Tls(stream) => {
                stream.write_all(head)?;
                stream.write_all(body)?;
                stream.flush()
            }
            Self::WebSocket(socket) => send_message(socket, head, body),
            Self::WebSocketTls(socket) => send_message(socket, head, body),
            Self::Quic(link) => {
                link.send(head, body);
                Ok(())
            }
            Self::Http(link) => link.send(head, body),
        }
    }

    /// Reads one frame: the header into `head`, the rest into `body` (resized to it).
    pub(crate) fn read_frame(
        &mut self,
        head: &mut [u8; HEADER_SIZE],
        body: &mut Vec<u8>,
        size_of: impl Fn(&[u8; HEADER_SIZE]) -> io::Result<usize>,
    ) -> io::Result<()> {
        let message = match self {
            Self::Tcp(stream) => return read_stream(stream, head, body, size_of),
            Self::Tls(stream) => return read_stream(stream, head, body, size_of),
            Self::WebSocket(socket) => receive_message(socket)?,
            Self::WebSocketTls(socket) => receive_message(socket)?,
            Self::Quic(link) => link.receive()?,
            Self::Http(link) => link.receive()?,
        };
        let (frame_head, rest) = message
            .split_at_checked(HEADER_SIZE)
            .ok_or_else(|| io::Error::other("a reply shorter than a header"))?;
        head.copy_from_slice(frame_head);
        if size_of(head)? != rest.len() {
            return Err(io::Error::other("a reply whose size is not its message's"));
        }
        body.clear();
        body.extend_from_slice(rest);
        Ok(())
    }
}

fn tcp(address: SocketAddr) -> io::Result<TcpStream> {
    let stream = TcpStream::connect(address)?;
    stream.set_nodelay(true)?;
    Ok(stream)
}

fn tls(stream: TcpStream) -> io::Result<Tls> {
    let name = ServerName::try_from("localhost").map_err(io::Error::other)?;
    let connection =
        ClientConnection::new(Arc::new(client_config()), name).map_err(io::Error::other)?;
    Ok(StreamOwned::new(connection, stream))
}

fn upgrade<S: Read + Write>(
    stream: S,
    scheme: &str,
    address: SocketAddr,
) -> io::Result<WebSocket<S>> {
    let (socket, _response) = tungstenite::client(format!("{scheme}://{address}/"), stream)
        .map_err(|error| io::Error::other(error.to_string()))?;
    Ok(socket)
}

fn write_vectored(stream: &mut TcpStream, head: &[u8], body: &[u8]) -> io::Result<()> {
    let mut slices = [io::IoSlice::new(head), io::IoSlice::new(body)];
    let mut slices = &mut slices[..];
    while !slices.is_empty() {
        let written = stream.write_vectored(slices)?;
        if written == 0 {
            return Err(io::ErrorKind::WriteZero.into());
        }
        io::IoSlice::advance_slices(&mut slices, written);
    }
    Ok(())
}

fn read_stream(
    stream: &mut impl Read,
    head: &mut [u8; HEADER_SIZE],
    body: &mut Vec<u8>,
    size_of: impl Fn(&[u8; HEADER_SIZE]) -> io::Result<usize>,
) -> io::Result<()> {
    stream.read_exact(head)?;
    body.resize(size_of(head)?, 0);
    stream.read_exact(body)
}

fn send_message<S: Read + Write>(
    socket: &mut WebSocket<S>,
    head: &[u8],
    body: &[u8],
) -> io::Result<()> {
    let mut frame = Vec::with_capacity(head.len() + body.len());
    frame.extend_from_slice(head);
    frame.extend_from_slice(body);
    socket
        .send(Message::binary(frame))
        .map_err(|error| io::Error::other(error.to_string()))
}

fn receive_message<S: Read + Write>(socket: &mut WebSocket<S>) -> io::Result<Vec<u8>> {
    loop {
        match socket.read() {
            Ok(Message::Binary(bytes)) => return Ok(bytes.to_vec()),
            Ok(Message::Ping(_) | Message::Pong(_) | Message::Frame(_)) => {}
            Ok(other) => return Err(io::Error::other(format!("unexpected message {other:?}"))),
            Err(error) => return Err(io::Error::other(error.to_string())),
        }
    }
}

/// A rustls client configuration (ring) that accepts any server certificate.
fn client_config() -> ClientConfig {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier = Arc::new(AnyCertificate(provider.clone()));
    ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("ring supports the default protocol versions")
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_no_client_auth()
}

/// Accepts every certificate; checks the handshake signatures with the provider's algorithms.
#[derive(Debug)]
struct AnyCertificate(Arc<rustls::crypto::CryptoProvider>);

impl ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// QUIC on a compio runtime of a thread per connection (the runtime cannot move between
/// threads, a bench client must): each request is one stream, handed to that thread and its
/// reply handed back, a hop the other transports do not pay.
mod quic {
    use std::io;
    use std::net::SocketAddr;
    use std::sync::Arc;
    use std::sync::mpsc::{Receiver, Sender, channel};

    use compio_quic::crypto::rustls::QuicClientConfig;
    use compio_quic::{ClientConfig, Connection, Endpoint, EndpointConfig};

    pub(crate) struct QuicLink {
        requests: Sender<Vec<u8>>,
        replies: Receiver<io::Result<Vec<u8>>>,
        /// The frame of the request in flight, handed over when its reply is awaited.
        pending: Vec<u8>,
    }

    impl QuicLink {
        pub(crate) fn connect(address: SocketAddr) -> io::Result<Self> {
            let (requests, requested) = channel::<Vec<u8>>();
            let (answer, replies) = channel();
            let (ready, connected) = channel();
            std::thread::Builder::new()
                .name("bench-quic".into())
                .spawn(move || {
                    let runtime = match compio::runtime::Runtime::new() {
                        Ok(runtime) => runtime,
                        Err(error) => return drop(ready.send(Err(error))),
                    };
                    runtime.block_on(async move {
                        let (_endpoint, connection) = match dial(address).await {
                            Ok(dialed) => {
                                let _ = ready.send(Ok(()));
                                dialed
                            }
                            Err(error) => return drop(ready.send(Err(error))),
                        };
                        while let Ok(frame) = requested.recv() {
                            if answer.send(exchange(&connection, frame).await).is_err() {
                                return;
                            }
                        }
                    });
                })?;
            connected
                .recv()
                .map_err(|_gone| io::Error::other("the QUIC thread ended"))??;
            Ok(Self {
                requests,
                replies,
                pending: Vec::new(),
            })
        }

        /// Holds the frame until [`Self::receive`] (the request goes out with its reply's
        /// stream).
        pub(crate) fn send(&mut self, head: &[u8], body: &[u8]) {
            self.pending.clear();
            self.pending.extend_from_slice(head);
            self.pending.extend_from_slice(body);
        }

        /// Hands the pending frame to the connection's thread and waits for the reply.
        pub(crate) fn receive(&mut self) -> io::Result<Vec<u8>> {
            let gone = || io::Error::other("the QUIC thread ended");
            if self
                .requests
                .send(std::mem::take(&mut self.pending))
                .is_err()
            {
                return Err(gone());
            }
            match self.replies.recv() {
                Ok(reply) => reply,
                Err(_disconnected) => Err(gone()),
            }
        }
    }

    async fn dial(address: SocketAddr) -> io::Result<(Endpoint, Connection)> {
        let crypto =
            QuicClientConfig::try_from(super::client_config()).map_err(io::Error::other)?;
        let config = ClientConfig::new(Arc::new(crypto));
        let endpoint = Endpoint::new(
            client_socket(address)?,
            EndpointConfig::default(),
            None,
            None,
        )?;
        let connecting = endpoint
            .connect(address, "localhost", Some(config))
            .map_err(io::Error::other)?;
        let connection = connecting.await.map_err(io::Error::other)?;
        Ok((endpoint, connection))
    }

    /// The client's receive buffer: replies of a megabyte and more arrive in bursts, and a
    /// datagram that finds the kernel's default 208 KiB full is dropped and resent after
    /// QUIC slows down (the server sizes its own socket the same way).
    const RECEIVE_BUFFER_BYTES: libc::c_int = 8 << 20;

    /// A UDP socket of the server's address family on any local address and port, its
    /// receive buffer sized (past `net.core.rmem_max` where the process may).
    fn client_socket(server: SocketAddr) -> io::Result<compio::net::UdpSocket> {
        use std::os::fd::AsRawFd;
        let any: SocketAddr = if server.is_ipv4() {
            (std::net::Ipv4Addr::UNSPECIFIED, 0).into()
        } else {
            (std::net::Ipv6Addr::UNSPECIFIED, 0).into()
        };
        let socket = std::net::UdpSocket::bind(any)?;
        let size = RECEIVE_BUFFER_BYTES;
        // A c_int is 4 bytes: the length fits a socklen_t.
        let length = libc::socklen_t::try_from(size_of::<libc::c_int>()).unwrap_or(4);
        let set = |option| {
            // SAFETY: the descriptor is open (owned by `socket`), and the value is a c_int
            // whose size is passed with it.
            unsafe {
                libc::setsockopt(
                    socket.as_raw_fd(),
                    libc::SOL_SOCKET,
                    option,
                    (&raw const size).cast(),
                    length,
                )
            }
        };
        // Without CAP_NET_ADMIN the forced size is refused and the plain one is capped by
        // the kernel, which is still no smaller than its default.
        if set(libc::SO_RCVBUFFORCE) != 0 {
            set(libc::SO_RCVBUF);
        }
        compio::net::UdpSocket::from_std(socket)
    }

    /// One request on a new stream, its reply read to the end.
    async fn exchange(connection: &Connection, frame: Vec<u8>) -> io::Result<Vec<u8>> {
        let (mut send, mut recv) = connection.open_bi_wait().await.map_err(io::Error::other)?;
        send.write_all_chunks(&mut [bytes::Bytes::from(frame)])
            .await
            .map_err(io::Error::other)?;
        send.finish().map_err(io::Error::other)?;
        let mut reply = Vec::new();
        while let Some(chunk) = recv
            .read_chunk(usize::MAX, true)
            .await
            .map_err(io::Error::other)?
        {
            reply.extend_from_slice(&chunk.bytes);
        }
        Ok(reply)
    }
}
