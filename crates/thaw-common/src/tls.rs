//! TLS for both protocols (an option): the master's gRPC service and the
//! workers' data protocol, with rustls (and its `ring` provider).
//!
//! A server (master or worker) has a certificate and key (`--tls-cert`,
//! `--tls-key`, PEM); every party that connects to one trusts the cluster's
//! CA (`--tls-ca` on workers, `THAW_TLS_CA` for clients). `thaw auth certs`
//! makes a CA and a server certificate for a list of hosts. A server
//! certificate must name the host or IP address clients dial (its subject
//! alternative names).
//!
//! With TLS a worker's block reads cost a user-space copy and encryption per
//! byte (no sendfile); short-circuit reads on the worker's host are
//! unchanged (no bytes cross the network).

use std::io;
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

use crate::{Result, ThawError};

/// Installs ring as the process's crypto provider, which the HTTP client of
/// the S3 under-store (reqwest, built without a provider) uses.
pub fn install_crypto_provider() {
    provider();
}

/// The one crypto provider, installed for the process (tonic builds its
/// rustls configurations with the default provider).
fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    let p = Arc::new(rustls::crypto::ring::default_provider());
    let _ = rustls::crypto::CryptoProvider::install_default((*p).clone());
    p
}

fn read(path: &Path, what: &str) -> Result<Vec<u8>> {
    std::fs::read(path).map_err(|e| ThawError::from(e).context(format!("{what} {}", path.display())))
}

fn bad(path: &Path, what: &str, e: impl std::fmt::Display) -> ThawError {
    ThawError::invalid(format!("{what} {}: {e}", path.display()))
}

/// A server's side: its certificate chain and key.
pub struct ServerTls {
    acceptor: tokio_rustls::TlsAcceptor,
    cert_pem: Vec<u8>,
    key_pem: Vec<u8>,
}

impl std::fmt::Debug for ServerTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ServerTls(..)")
    }
}

impl ServerTls {
    pub fn load(cert: &Path, key: &Path) -> Result<Self> {
        let cert_pem = read(cert, "TLS certificate")?;
        let key_pem = read(key, "TLS key")?;
        let chain = CertificateDer::pem_slice_iter(&cert_pem)
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(|e| bad(cert, "TLS certificate", e))?;
        if chain.is_empty() {
            return Err(bad(cert, "TLS certificate", "no certificate in it"));
        }
        let private = PrivateKeyDer::from_pem_slice(&key_pem).map_err(|e| bad(key, "TLS key", e))?;
        let config = rustls::ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| ThawError::internal(format!("TLS: {e}")))?
            .with_no_client_auth()
            .with_single_cert(chain, private)
            .map_err(|e| bad(cert, "TLS certificate and key", e))?;
        Ok(ServerTls { acceptor: tokio_rustls::TlsAcceptor::from(Arc::new(config)), cert_pem, key_pem })
    }

    /// The handshake of a connection a worker accepted.
    pub async fn accept(&self, tcp: TcpStream) -> io::Result<DataStream> {
        Ok(DataStream::Server(Box::new(self.acceptor.accept(tcp).await?)))
    }

    /// The same identity for tonic's server.
    pub fn tonic(&self) -> tonic::transport::ServerTlsConfig {
        let identity = tonic::transport::Identity::from_pem(&self.cert_pem, &self.key_pem);
        tonic::transport::ServerTlsConfig::new().identity(identity)
    }
}

/// A connecting party's side: the CA it trusts.
pub struct ClientTls {
    connector: tokio_rustls::TlsConnector,
    ca_pem: Vec<u8>,
}

impl std::fmt::Debug for ClientTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ClientTls(..)")
    }
}

impl ClientTls {
    pub fn load(ca: &Path) -> Result<Self> {
        let ca_pem = read(ca, "TLS CA")?;
        let mut roots = rustls::RootCertStore::empty();
        for c in CertificateDer::pem_slice_iter(&ca_pem) {
            roots.add(c.map_err(|e| bad(ca, "TLS CA", e))?).map_err(|e| bad(ca, "TLS CA", e))?;
        }
        if roots.is_empty() {
            return Err(bad(ca, "TLS CA", "no certificate in it"));
        }
        let config = rustls::ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| ThawError::internal(format!("TLS: {e}")))?
            .with_root_certificates(roots)
            .with_no_client_auth();
        Ok(ClientTls { connector: tokio_rustls::TlsConnector::from(Arc::new(config)), ca_pem })
    }

    /// `THAW_TLS_CA`, if set.
    pub fn from_env() -> Result<Option<Self>> {
        match std::env::var_os("THAW_TLS_CA").filter(|v| !v.is_empty()) {
            Some(p) => Ok(Some(Self::load(Path::new(&p))?)),
            None => Ok(None),
        }
    }

    /// The handshake with the server at `addr` (host:port), checked against
    /// the CA and the host's name or address.
    pub async fn connect(&self, tcp: TcpStream, addr: &str) -> io::Result<DataStream> {
        let name = server_name(addr).map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.message))?;
        Ok(DataStream::Client(Box::new(self.connector.connect(name, tcp).await?)))
    }

    /// The same trust for tonic's channel to `addr`.
    pub fn tonic(&self, addr: &str) -> Result<tonic::transport::ClientTlsConfig> {
        let host = host_of(addr);
        Ok(tonic::transport::ClientTlsConfig::new()
            .ca_certificate(tonic::transport::Certificate::from_pem(&self.ca_pem))
            .domain_name(host))
    }
}

/// The host of `host:port` (an IPv6 address without its brackets).
fn host_of(addr: &str) -> &str {
    let host = addr.rsplit_once(':').map_or(addr, |(h, _)| h);
    host.trim_start_matches('[').trim_end_matches(']')
}

fn server_name(addr: &str) -> Result<ServerName<'static>> {
    ServerName::try_from(host_of(addr).to_string())
        .map_err(|e| ThawError::invalid(format!("{addr:?} has no host name TLS can check: {e}")))
}

/// The files `thaw auth certs` makes.
#[derive(Debug, Clone)]
pub struct CertFiles {
    pub ca: std::path::PathBuf,
    pub ca_key: std::path::PathBuf,
    pub cert: std::path::PathBuf,
    pub key: std::path::PathBuf,
}

/// A new cluster CA and a server certificate it signs for `hosts` (names or
/// IP addresses), as PEM files in `dir` (made if missing; keys mode 600;
/// existing files are not overwritten): ca.pem, ca-key.pem, server.pem,
/// server-key.pem. One server certificate may serve the master and every
/// worker when it names all their hosts.
pub fn make_certs(dir: &Path, hosts: &[String]) -> Result<CertFiles> {
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose};
    if hosts.is_empty() {
        return Err(ThawError::invalid("name at least one host or IP address the certificate is for"));
    }
    let err = |e: rcgen::Error| ThawError::invalid(format!("making certificates: {e}"));
    let ca_key = KeyPair::generate().map_err(err)?;
    let mut ca = CertificateParams::new(Vec::<String>::new()).map_err(err)?;
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name.push(DnType::CommonName, "Thaw cluster CA");
    ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let ca_cert = ca.self_signed(&ca_key).map_err(err)?;
    let key = KeyPair::generate().map_err(err)?;
    let mut server = CertificateParams::new(hosts.to_vec()).map_err(err)?;
    server.distinguished_name.push(DnType::CommonName, hosts[0].clone());
    let cert = server.signed_by(&key, &Issuer::new(ca, &ca_key)).map_err(err)?;
    std::fs::create_dir_all(dir).map_err(|e| ThawError::from(e).context(format!("{}", dir.display())))?;
    let files = CertFiles {
        ca: dir.join("ca.pem"),
        ca_key: dir.join("ca-key.pem"),
        cert: dir.join("server.pem"),
        key: dir.join("server-key.pem"),
    };
    let write = |path: &Path, text: String, mode: u32| -> Result<()> {
        use std::io::Write;
        use std::os::unix::fs::OpenOptionsExt;
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .open(path)
            .map_err(|e| ThawError::from(e).context(format!("{}", path.display())))?;
        f.write_all(text.as_bytes())?;
        Ok(())
    };
    write(&files.ca, ca_cert.pem(), 0o644)?;
    write(&files.ca_key, ca_key.serialize_pem(), 0o600)?;
    write(&files.cert, cert.pem(), 0o644)?;
    write(&files.key, key.serialize_pem(), 0o600)?;
    Ok(files)
}

/// A data connection: plain TCP, or TLS on either side.
pub enum DataStream {
    Plain(TcpStream),
    Server(Box<tokio_rustls::server::TlsStream<TcpStream>>),
    Client(Box<tokio_rustls::client::TlsStream<TcpStream>>),
}

impl DataStream {
    /// The TCP connection underneath.
    pub fn tcp(&self) -> &TcpStream {
        match self {
            DataStream::Plain(s) => s,
            DataStream::Server(s) => s.get_ref().0,
            DataStream::Client(s) => s.get_ref().0,
        }
    }

    /// Whether bytes may go straight to the socket (sendfile): no TLS.
    pub fn is_plain(&self) -> bool {
        matches!(self, DataStream::Plain(_))
    }
}

impl AsyncRead for DataStream {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            DataStream::Plain(s) => Pin::new(s).poll_read(cx, buf),
            DataStream::Server(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
            DataStream::Client(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for DataStream {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            DataStream::Plain(s) => Pin::new(s).poll_write(cx, buf),
            DataStream::Server(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
            DataStream::Client(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            DataStream::Plain(s) => Pin::new(s).poll_flush(cx),
            DataStream::Server(s) => Pin::new(s.as_mut()).poll_flush(cx),
            DataStream::Client(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            DataStream::Plain(s) => Pin::new(s).poll_shutdown(cx),
            DataStream::Server(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
            DataStream::Client(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_of_addresses() {
        assert_eq!(host_of("127.0.0.1:19998"), "127.0.0.1");
        assert_eq!(host_of("[::1]:19998"), "::1");
        assert_eq!(host_of("node-3.example:80"), "node-3.example");
        assert!(server_name("127.0.0.1:1").is_ok() && server_name("a b:1").is_err());
    }
}
