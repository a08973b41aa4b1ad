//! `[cluster.tls]`: the replica bus inside TLS (rustls, ring). The acceptor of a connection
//! serves this node's certificate; the dialer checks it against the cluster's CA
//! ([`PeerCheck::Ca`]) or, for self-signed clusters, takes any certificate
//! ([`PeerCheck::Any`]: the traffic is encrypted and the dialer still proves the shared secret,
//! but the acceptor is not authenticated). The shared-secret handshake runs inside the TLS
//! session, so `[cluster.auth]` authenticates the dialer either way.

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

use compio_tls::{TlsAcceptor, TlsConnector};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};

use crate::tls::{Certificate, TlsError, read_error};

/// How a dialer checks the certificate of the peer it dials.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PeerCheck {
    /// Against the CA certificates in this PEM file, for the peer's address.
    Ca(PathBuf),
    /// Not at all (self-signed clusters): encryption without authenticating the acceptor.
    Any,
}

/// The TLS sides of one node's replica connections.
pub struct ReplicaTls {
    pub(super) acceptor: TlsAcceptor,
    pub(super) connector: TlsConnector,
}

impl fmt::Debug for ReplicaTls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ReplicaTls")
    }
}

impl ReplicaTls {
    /// This node serves `certificate` and checks its peers by `peers`.
    pub fn new(certificate: Certificate, peers: &PeerCheck) -> Result<Self, TlsError> {
        let server = certificate.server_config()?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = ClientConfig::builder_with_provider(Arc::clone(&provider))
            .with_safe_default_protocol_versions()
            .map_err(TlsError::Config)?;
        let client = match peers {
            PeerCheck::Ca(path) => {
                let authorities = CertificateDer::pem_file_iter(path)
                    .and_then(Iterator::collect::<Result<Vec<_>, _>>)
                    .map_err(read_error(path))?;
                let mut roots = RootCertStore::empty();
                for authority in authorities {
                    roots.add(authority).map_err(TlsError::Config)?;
                }
                if roots.is_empty() {
                    return Err(TlsError::NoCertificate { path: path.clone() });
                }
                builder.with_root_certificates(roots).with_no_client_auth()
            }
            PeerCheck::Any => builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(AnyCertificate(provider)))
                .with_no_client_auth(),
        };
        Ok(Self {
            acceptor: TlsAcceptor::from(Arc::new(server)),
            connector: TlsConnector::from(Arc::new(client)),
        })
    }
}

/// Takes every certificate; still checks the handshake's signatures with the provider's
/// algorithms (so the session is with the holder of the certificate's key).
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
        let algorithms = &self.0.signature_verification_algorithms;
        rustls::crypto::verify_tls12_signature(message, cert, dss, algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        let algorithms = &self.0.signature_verification_algorithms;
        rustls::crypto::verify_tls13_signature(message, cert, dss, algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}
