//! Server certificates for the TLS-wrapped transports (rustls with the ring provider): a
//! PEM certificate chain and key from files, or a self-signed certificate made at start for
//! `localhost`, `127.0.0.1` and `::1`, by the rules of Iggy's config sections.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// Where a listener's certificate comes from (`[tcp.tls]`, `[websocket.tls]`,
/// `[quic.certificate]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CertificateSource {
    /// Self-signed when allowed: see [`SelfSigned`].
    pub self_signed: SelfSigned,
    pub cert_file: PathBuf,
    pub key_file: PathBuf,
}

/// When a self-signed certificate is made instead of reading the files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SelfSigned {
    /// Never: both files must exist.
    Never,
    /// Only while `cert_file` does not exist (`[tcp.tls]`, `[websocket.tls]`).
    UnlessFileExists,
    /// Always, whatever files exist (`[quic.certificate] self_signed = true`).
    Always,
}

/// A certificate could not be had.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("read {path}")]
    Read {
        path: PathBuf,
        #[source]
        source: rustls::pki_types::pem::Error,
    },
    #[error("{path} holds no certificate")]
    NoCertificate { path: PathBuf },
    #[error("make a self-signed certificate")]
    SelfSigned(#[source] rcgen::Error),
    #[error("the certificate and key do not make a TLS configuration")]
    Config(#[source] rustls::Error),
}

/// A certificate chain and its private key.
#[derive(Debug)]
pub struct Certificate {
    pub chain: Vec<CertificateDer<'static>>,
    pub key: PrivateKeyDer<'static>,
    /// Made at start rather than read (for the log line).
    pub self_signed: bool,
}

impl CertificateSource {
    /// Reads the files or makes a self-signed certificate, by [`Self::self_signed`].
    pub fn load(&self) -> Result<Certificate, TlsError> {
        let generate = match self.self_signed {
            SelfSigned::Never => false,
            SelfSigned::UnlessFileExists => !self.cert_file.is_file(),
            SelfSigned::Always => true,
        };
        if generate {
            return self_signed();
        }
        let chain = CertificateDer::pem_file_iter(&self.cert_file)
            .and_then(Iterator::collect::<Result<Vec<_>, _>>)
            .map_err(read_error(&self.cert_file))?;
        if chain.is_empty() {
            let path = self.cert_file.clone();
            return Err(TlsError::NoCertificate { path });
        }
        let key =
            PrivateKeyDer::from_pem_file(&self.key_file).map_err(read_error(&self.key_file))?;
        Ok(Certificate {
            chain,
            key,
            self_signed: false,
        })
    }
}

impl Certificate {
    /// A rustls server configuration (TLS 1.2 and 1.3, ring, no client authentication, no
    /// ALPN: Iggy's clients send none).
    pub fn server_config(self) -> Result<rustls::ServerConfig, TlsError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(TlsError::Config)?
            .with_no_client_auth()
            .with_single_cert(self.chain, self.key)
            .map_err(TlsError::Config)
    }
}

fn self_signed() -> Result<Certificate, TlsError> {
    let names = ["localhost", "127.0.0.1", "::1"]
        .map(str::to_owned)
        .to_vec();
    let made = rcgen::generate_simple_self_signed(names).map_err(TlsError::SelfSigned)?;
    let key = PrivateKeyDer::try_from(made.signing_key.serialize_der())
        .map_err(|_unknown| TlsError::SelfSigned(rcgen::Error::CouldNotParseKeyPair))?;
    Ok(Certificate {
        chain: vec![made.cert.der().clone()],
        key,
        self_signed: true,
    })
}

pub(crate) fn read_error(
    path: &Path,
) -> impl FnOnce(rustls::pki_types::pem::Error) -> TlsError + '_ {
    move |source| TlsError::Read {
        path: path.to_owned(),
        source,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn self_signed_unless_the_file_exists_and_files_when_told() {
        let directory = std::env::temp_dir().join(format!("tls-{}", std::process::id()));
        std::fs::create_dir_all(&directory).unwrap();
        let cert_file = directory.join("cert.pem");
        let key_file = directory.join("key.pem");
        let _ = std::fs::remove_file(&cert_file);
        let source = CertificateSource {
            self_signed: SelfSigned::UnlessFileExists,
            cert_file: cert_file.clone(),
            key_file: key_file.clone(),
        };
        let made = source.load().unwrap();
        assert!(made.self_signed);
        made.server_config().unwrap();

        // Files written: read, not made.
        let pair = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
        std::fs::write(&cert_file, pair.cert.pem()).unwrap();
        std::fs::write(&key_file, pair.signing_key.serialize_pem()).unwrap();
        let read = source.load().unwrap();
        assert!(!read.self_signed);
        assert_eq!(read.chain, vec![pair.cert.der().clone()]);
        read.server_config().unwrap();

        // `Always` ignores the files; `Never` needs them.
        let always = CertificateSource {
            self_signed: SelfSigned::Always,
            ..source.clone()
        };
        assert!(always.load().unwrap().self_signed);
        std::fs::write(&cert_file, "not a certificate").unwrap();
        let never = CertificateSource {
            self_signed: SelfSigned::Never,
            ..source
        };
        assert!(matches!(never.load(), Err(TlsError::NoCertificate { .. })));
        std::fs::remove_dir_all(&directory).unwrap();
    }
}
