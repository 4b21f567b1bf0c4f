//! Who may use a cluster: the shared token every process proves it holds, TLS on the
//! scheduler's and the executors' servers, and the rule that a server reachable from other
//! machines is not left open.
//!
//! The token is read from `NEARDUP_CLUSTER_TOKEN` or from the file `--token-file` names, never
//! from argv. It never travels: a process sends HMAC-SHA256(token, [`PROOF_LABEL`]) in hex,
//! and a server recomputes it and compares in constant time (`ring::hmac::verify`). The proof
//! rides in the `user-agent` header because that is the one header tonic's `Endpoint` sets on
//! every request of a channel, and Ballista builds all of its channels (client to scheduler,
//! executor to scheduler, every Flight fetch of shuffle data or results) through the endpoint
//! hook [`ClusterAccess::endpoint_override`] installs; Ballista's metadata interceptor reaches
//! only the client's scheduler calls.

use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use ballista_core::extension::EndpointOverrideFn;
use ballista_core::utils::{GrpcClientConfig, create_grpc_client_endpoint};
use tonic::transport::server::{TcpConnectInfo, TlsConnectInfo};
use tonic::transport::{Certificate, ClientTlsConfig, Endpoint, Identity, ServerTlsConfig};
use tonic::{Request, Status};

use crate::error::{Error, Result};

/// The environment variable that holds the cluster's shared token.
pub const TOKEN_VARIABLE: &str = "NEARDUP_CLUSTER_TOKEN";

/// The fewest characters a token may have: shorter ones can be guessed.
pub const MIN_TOKEN_LENGTH: usize = 16;

/// What the proof of a token signs; a new label makes old proofs worthless.
const PROOF_LABEL: &[u8] = b"neardup cluster token, version 1";

/// The `user-agent` product that carries the proof: `neardup-cluster/<hex>`.
const PROOF_PRODUCT: &str = "neardup-cluster/";

/// Certificates and keys as files, as the flags name them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TlsFiles {
    /// This process's certificate chain (PEM): a server's identity, and the client certificate
    /// it presents to servers that ask for one.
    pub cert: Option<PathBuf>,
    /// The private key of `cert` (PEM).
    pub key: Option<PathBuf>,
    /// The authority (PEM) that signed the cluster's certificates: peers are verified against
    /// it (instead of the system's roots), and a server given one asks every client for a
    /// certificate it signed (mutual TLS).
    pub ca: Option<PathBuf>,
}

/// How a process reaches, and is reached by, the rest of its cluster.
#[derive(Clone, Default)]
pub struct ClusterAccess {
    /// The key the token makes; `None` when the cluster has no token.
    key: Option<ring::hmac::Key>,
    /// `neardup-cluster/<proof>`, sent on every call.
    proof: Option<String>,
    /// TLS as loaded from [`TlsFiles`]; `None` speaks plain text.
    tls: Option<Arc<LoadedTls>>,
}

/// PEM contents, read once (tonic parses them when a connection is configured).
struct LoadedTls {
    identity: Option<Identity>,
    ca: Option<Certificate>,
}

// Never print the key or the proof.
impl fmt::Debug for ClusterAccess {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClusterAccess")
            .field("token", &self.key.as_ref().map(|_| "<set>"))
            .field("tls", &self.tls.is_some())
            .finish()
    }
}

impl ClusterAccess {
    /// The token from `token_file` when given, else from `NEARDUP_CLUSTER_TOKEN`; TLS from
    /// `files` when `tls` is set (a server given a certificate, a client of `dfs://`).
    pub fn load(token_file: Option<&Path>, files: &TlsFiles, tls: bool) -> Result<Self> {
        let token = match token_file {
            Some(path) => Some(read_token_file(path)?),
            None => std::env::var(TOKEN_VARIABLE)
                .ok()
                .filter(|t| !t.trim().is_empty()),
        };
        let mut access = match token {
            Some(token) => Self::with_token(token.trim())?,
            None => Self::default(),
        };
        if tls {
            // tonic's servers take rustls's process-wide provider, which rustls cannot choose
            // itself when (as here) both of its providers are built in. Set once; a second
            // call finds it set.
            let _ = rustls::crypto::ring::default_provider().install_default();
            access.tls = Some(Arc::new(load_tls(files)?));
            access.validate_tls(files)?;
        }
        Ok(access)
    }

    /// Parses the certificates and the key as the servers and channels will, so a wrong file
    /// is named at start rather than at the first connection.
    fn validate_tls(&self, files: &TlsFiles) -> Result<()> {
        let unusable = |e: tonic::transport::Error| {
            let why = crate::error::error_chain(&e);
            let name = |path: &Option<PathBuf>| {
                path.as_ref()
                    .map_or("-".to_string(), |p| p.display().to_string())
            };
            Error::Usage(format!(
                "the TLS files cannot be used ({why}); --tls-cert {} and --tls-key {} must be a \
                 PEM certificate chain and its private key, --tls-ca {} a PEM certificate",
                name(&files.cert),
                name(&files.key),
                name(&files.ca)
            ))
        };
        if let (Some(_), Some(server)) = (&files.cert, self.server_tls()) {
            tonic::transport::Server::builder()
                .tls_config(server)
                .map_err(unusable)?;
        }
        self.configure(Endpoint::from_static("https://localhost"))
            .map_err(unusable)?;
        Ok(())
    }

    /// Access with `token` and no TLS.
    pub fn with_token(token: &str) -> Result<Self> {
        if token.chars().count() < MIN_TOKEN_LENGTH {
            return Err(Error::Usage(format!(
                "the cluster token is {} characters long; use at least {MIN_TOKEN_LENGTH} \
                 (e.g. `openssl rand -hex 32`)",
                token.chars().count()
            )));
        }
        let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, token.as_bytes());
        let proof = hex::encode(ring::hmac::sign(&key, PROOF_LABEL).as_ref());
        Ok(Self {
            key: Some(key),
            proof: Some(format!("{PROOF_PRODUCT}{proof}")),
            tls: None,
        })
    }

    /// Whether calls must carry the token's proof.
    pub fn has_token(&self) -> bool {
        self.key.is_some()
    }

    /// Whether connections are TLS.
    pub fn has_tls(&self) -> bool {
        self.tls.is_some()
    }

    /// Whether a server asks every client for a certificate signed by `--tls-ca`.
    pub fn verifies_clients(&self) -> bool {
        self.tls.as_ref().is_some_and(|tls| tls.ca.is_some())
    }

    /// The `user-agent` value that proves the token, for requests neardup writes itself.
    pub fn proof_header(&self) -> Option<&str> {
        self.proof.as_deref()
    }

    /// The server side of TLS: this process's certificate, and with `--tls-ca` a demand for a
    /// client certificate it signed. `None` without TLS.
    pub fn server_tls(&self) -> Option<ServerTlsConfig> {
        let tls = self.tls.as_ref()?;
        let mut config = ServerTlsConfig::new();
        if let Some(identity) = &tls.identity {
            config = config.identity(identity.clone());
        }
        if let Some(ca) = &tls.ca {
            config = config.client_ca_root(ca.clone());
        }
        Some(config)
    }

    /// The client side of TLS: peers verified against `--tls-ca` (or the system's roots), and
    /// this process's certificate presented when it has one.
    fn client_tls(&self) -> Option<ClientTlsConfig> {
        let tls = self.tls.as_ref()?;
        let mut config = ClientTlsConfig::new();
        config = match &tls.ca {
            Some(ca) => config.ca_certificate(ca.clone()),
            None => config.with_native_roots(),
        };
        if let Some(identity) = &tls.identity {
            config = config.identity(identity.clone());
        }
        Some(config)
    }

    /// `endpoint` as this process connects: `https` with TLS, and the proof on every request.
    pub fn configure(
        &self,
        endpoint: Endpoint,
    ) -> std::result::Result<Endpoint, tonic::transport::Error> {
        let mut endpoint = endpoint;
        if let Some(tls) = self.client_tls() {
            // Ballista writes `http://` into every address it dials; the same address over TLS.
            if endpoint.uri().scheme_str() != Some("https") {
                let authority = endpoint
                    .uri()
                    .authority()
                    .map(|a| a.to_string())
                    .unwrap_or_default();
                endpoint = create_grpc_client_endpoint(
                    format!("https://{authority}"),
                    Some(&GrpcClientConfig::default()),
                )?;
            }
            endpoint = endpoint.tls_config(tls)?;
        }
        if let Some(proof) = &self.proof {
            endpoint = endpoint.user_agent(proof.clone())?;
        }
        Ok(endpoint)
    }

    /// [`Self::configure`] as the hook Ballista calls for each channel it opens.
    pub fn endpoint_override(&self) -> EndpointOverrideFn {
        let access = self.clone();
        Arc::new(move |endpoint| access.configure(endpoint).map_err(Into::into))
    }

    /// The check every server runs on every call, gRPC or HTTP: the token's proof when the
    /// cluster has a token. It also hands Ballista the caller's address the way axum does,
    /// since tonic's server (which does the TLS) records it under its own type.
    pub fn check(&self, mut request: Request<()>) -> std::result::Result<Request<()>, Status> {
        if let Some(key) = &self.key {
            let proof = request
                .metadata()
                .get("user-agent")
                .and_then(|value| value.to_str().ok())
                .and_then(|agent| {
                    agent
                        .split_whitespace()
                        .find_map(|product| product.strip_prefix(PROOF_PRODUCT))
                })
                .and_then(|proof| hex::decode(proof).ok());
            let proven =
                proof.is_some_and(|proof| ring::hmac::verify(key, PROOF_LABEL, &proof).is_ok());
            if !proven {
                return Err(Status::unauthenticated(
                    "this neardup cluster needs its token: set NEARDUP_CLUSTER_TOKEN (or \
                     --token-file) to the token the scheduler and executors were given",
                ));
            }
        }
        let remote = request
            .extensions()
            .get::<TcpConnectInfo>()
            .and_then(TcpConnectInfo::remote_addr)
            .or_else(|| {
                request
                    .extensions()
                    .get::<TlsConnectInfo<TcpConnectInfo>>()
                    .and_then(|info| info.get_ref().remote_addr())
            });
        if let Some(remote) = remote {
            request
                .extensions_mut()
                .insert(axum::extract::ConnectInfo::<SocketAddr>(remote));
        }
        Ok(request)
    }
}

/// A token file: its first line, trimmed (a trailing newline is what editors write).
fn read_token_file(path: &Path) -> Result<String> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        Error::Usage(format!(
            "cannot read the token file {}: {e}",
            path.display()
        ))
    })?;
    let token = text.lines().next().unwrap_or_default().trim().to_string();
    if token.is_empty() {
        return Err(Error::Usage(format!(
            "the token file {} is empty",
            path.display()
        )));
    }
    Ok(token)
}

fn read_pem(path: &Path, what: &str) -> Result<Vec<u8>> {
    let bytes = std::fs::read(path)
        .map_err(|e| Error::Usage(format!("cannot read the {what} {}: {e}", path.display())))?;
    if !bytes.windows(11).any(|w| w == b"-----BEGIN ") {
        return Err(Error::Usage(format!(
            "the {what} {} is not PEM (no '-----BEGIN' line)",
            path.display()
        )));
    }
    Ok(bytes)
}

fn load_tls(files: &TlsFiles) -> Result<LoadedTls> {
    let identity = match (&files.cert, &files.key) {
        (Some(cert), Some(key)) => Some(Identity::from_pem(
            read_pem(cert, "certificate (--tls-cert)")?,
            read_pem(key, "private key (--tls-key)")?,
        )),
        (None, None) => None,
        (Some(_), None) => {
            return Err(Error::Usage(
                "--tls-cert needs --tls-key, the certificate's private key".into(),
            ));
        }
        (None, Some(_)) => {
            return Err(Error::Usage(
                "--tls-key needs --tls-cert, the certificate it belongs to".into(),
            ));
        }
    };
    let ca = match &files.ca {
        Some(ca) => Some(Certificate::from_pem(read_pem(
            ca,
            "certificate authority (--tls-ca)",
        )?)),
        None => None,
    };
    Ok(LoadedTls { identity, ca })
}

/// A server may listen on `address` with `access`: a loopback address always; any other only
/// with a token or mutual TLS, unless `insecure` says so, which prints what is exposed.
pub fn check_bind(
    role: &str,
    address: SocketAddr,
    access: &ClusterAccess,
    insecure: bool,
) -> Result<()> {
    if address.ip().is_loopback() || access.has_token() || access.verifies_clients() {
        if !address.ip().is_loopback() && !access.has_tls() {
            crate::to_stderr!(
                "neardup: warning: the {role} listens on {address} without TLS: the token's \
                 proof and the data cross the network in clear (give --tls-cert and --tls-key)"
            );
        }
        return Ok(());
    }
    let exposure = match role {
        "scheduler" => {
            "submit SQL that reads, and COPYs to, every file and store the executors reach"
        }
        _ => "fetch this executor's shuffle data and results",
    };
    if insecure {
        crate::to_stderr!(
            "neardup: warning: the {role} listens on {address} with no token and no client \
             certificates (--insecure): anyone who reaches that port can {exposure}"
        );
        return Ok(());
    }
    Err(Error::Usage(format!(
        "the {role} would listen on {address}, which other machines reach, with no token: \
         anyone there could {exposure}. Set {TOKEN_VARIABLE} (or --token-file) to the same \
         secret on every machine, or require client certificates with --tls-ca; or bind \
         127.0.0.1; or pass --insecure to accept the risk"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call_with(agent: Option<&str>) -> Request<()> {
        let mut request = Request::new(());
        if let Some(agent) = agent {
            request
                .metadata_mut()
                .insert("user-agent", agent.parse().unwrap());
        }
        request
    }

    #[test]
    fn a_call_passes_only_with_the_proof_of_the_same_token() {
        let access = ClusterAccess::with_token("a-secret-of-enough-length").unwrap();
        let proof = access.proof_header().unwrap().to_string();
        assert!(
            !proof.contains("a-secret"),
            "the token itself never travels"
        );
        // tonic appends its own product to the user agent.
        let sent = format!("{proof} tonic/0.14.9");
        assert!(access.check(call_with(Some(&sent))).is_ok());

        let other = ClusterAccess::with_token("another-secret-of-enough-length").unwrap();
        let wrong = other.proof_header().unwrap();
        for agent in [
            None,
            Some(wrong),
            Some("tonic/0.14.9"),
            Some("neardup-cluster/zz"),
        ] {
            let refused = access.check(call_with(agent)).unwrap_err();
            assert_eq!(refused.code(), tonic::Code::Unauthenticated, "{agent:?}");
        }
        // Without a token, every call passes.
        assert!(ClusterAccess::default().check(call_with(None)).is_ok());
    }

    #[test]
    fn short_tokens_are_refused_and_debug_hides_the_token() {
        assert!(ClusterAccess::with_token("short").is_err());
        let access = ClusterAccess::with_token("a-secret-of-enough-length").unwrap();
        let shown = format!("{access:?}");
        assert!(!shown.contains("secret") && !shown.contains(access.proof_header().unwrap()));
    }

    #[test]
    fn only_loopback_is_open_without_a_token() {
        let open = ClusterAccess::default();
        let loopback: SocketAddr = "127.0.0.1:50050".parse().unwrap();
        let anywhere: SocketAddr = "0.0.0.0:50050".parse().unwrap();
        assert!(check_bind("scheduler", loopback, &open, false).is_ok());
        let why = check_bind("scheduler", anywhere, &open, false)
            .unwrap_err()
            .to_string();
        assert!(
            why.contains(TOKEN_VARIABLE) && why.contains("--insecure"),
            "{why}"
        );
        assert!(check_bind("scheduler", anywhere, &open, true).is_ok());
        let guarded = ClusterAccess::with_token("a-secret-of-enough-length").unwrap();
        assert!(check_bind("executor", anywhere, &guarded, false).is_ok());
    }
}
