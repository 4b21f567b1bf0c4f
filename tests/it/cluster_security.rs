//! A cluster nobody else can use: a scheduler and two executors on loopback with TLS (client
//! certificates required) and a shared token give the local run's tables, and everything that
//! lacks the token or the certificates is refused (a client, an executor, a plain-text client,
//! direct gRPC and Flight calls). Servers refuse to listen beyond loopback unguarded. The
//! certificates are made here with the `openssl` command.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use arrow_flight::Ticket;
use arrow_flight::flight_service_client::FlightServiceClient;
use ballista_core::serde::protobuf::GetJobStatusParams;
use ballista_core::serde::protobuf::scheduler_grpc_client::SchedulerGrpcClient;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint, Identity};

use crate::common::{fixture, path_str, run_sample, sorted_rows, summary};
use crate::processes::{Process, port_after, start_executor_with_env, wait_for};

const TOKEN: &str = "a-test-token-of-enough-length-0001";
const OTHER_TOKEN: &str = "another-test-token-of-enough-length";

/// A certificate authority and, signed by it, one certificate for every process (serverAuth
/// and clientAuth, for localhost and 127.0.0.1); and a second authority's certificate that
/// the cluster must not accept.
struct Certificates {
    ca: PathBuf,
    cert: PathBuf,
    key: PathBuf,
    stranger_cert: PathBuf,
    stranger_key: PathBuf,
}

fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("the openssl command runs (Debian: apt-get install openssl)");
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `openssl req` arguments for a new P-256 key, unencrypted.
const NEW_KEY: [&str; 5] = [
    "-newkey",
    "ec",
    "-pkeyopt",
    "ec_paramgen_curve:prime256v1",
    "-nodes",
];

/// `name.pem`/`name.key` signed by the authority `ca` (its `.pem` and `.key`) in `dir`.
fn signed(dir: &Path, ca: &str, name: &str) {
    let extensions = "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\n\
                      extendedKeyUsage=serverAuth,clientAuth\n\
                      subjectAltName=DNS:localhost,IP:127.0.0.1\n";
    std::fs::write(dir.join("ext.cnf"), extensions).unwrap();
    let (key, csr, pem) = (
        format!("{name}.key"),
        format!("{name}.csr"),
        format!("{name}.pem"),
    );
    let request = [
        "req",
        "-out",
        &csr,
        "-subj",
        "/CN=localhost",
        "-keyout",
        &key,
    ];
    openssl(dir, &[&request[..], &NEW_KEY].concat());
    let (ca_pem, ca_key) = (format!("{ca}.pem"), format!("{ca}.key"));
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            &csr,
            "-CA",
            &ca_pem,
            "-CAkey",
            &ca_key,
            "-CAcreateserial",
            "-days",
            "2",
            "-out",
            &pem,
            "-extfile",
            "ext.cnf",
        ],
    );
}

fn authority(dir: &Path, name: &str) {
    let (key, pem, subject) = (
        format!("{name}.key"),
        format!("{name}.pem"),
        format!("/CN={name}"),
    );
    let request = [
        "req",
        "-x509",
        "-keyout",
        &key,
        "-out",
        &pem,
        "-days",
        "2",
        "-subj",
        &subject,
        "-addext",
        "basicConstraints=critical,CA:TRUE",
        "-addext",
        "keyUsage=critical,keyCertSign,cRLSign",
    ];
    openssl(dir, &[&request[..], &NEW_KEY].concat());
}

fn certificates(dir: &Path) -> Certificates {
    let dir = dir.join("tls");
    std::fs::create_dir_all(&dir).unwrap();
    authority(&dir, "ca");
    signed(&dir, "ca", "node");
    authority(&dir, "stranger-ca");
    signed(&dir, "stranger-ca", "stranger");
    Certificates {
        ca: dir.join("ca.pem"),
        cert: dir.join("node.pem"),
        key: dir.join("node.key"),
        stranger_cert: dir.join("stranger.pem"),
        stranger_key: dir.join("stranger.key"),
    }
}

fn token_env(token: &str) -> Vec<(String, String)> {
    vec![("NEARDUP_CLUSTER_TOKEN".to_string(), token.to_string())]
}

impl Certificates {
    /// The server flags of a TLS scheduler or executor that requires client certificates.
    fn server_flags(&self) -> Vec<String> {
        [
            "--tls-cert",
            path_str(&self.cert),
            "--tls-key",
            path_str(&self.key),
            "--tls-ca",
            path_str(&self.ca),
        ]
        .map(str::to_string)
        .to_vec()
    }

    /// A tonic client configuration: this cluster's authority, and `identity` if any.
    fn client_tls(&self, identity: Option<(&Path, &Path)>) -> ClientTlsConfig {
        let mut tls = ClientTlsConfig::new()
            .ca_certificate(Certificate::from_pem(std::fs::read(&self.ca).unwrap()));
        if let Some((cert, key)) = identity {
            tls = tls.identity(Identity::from_pem(
                std::fs::read(cert).unwrap(),
                std::fs::read(key).unwrap(),
            ));
        }
        tls
    }
}

/// A channel to `address` over TLS with `tls`, and `proof` as the user agent if given; `Err`
/// when the connection itself is refused (the TLS handshake).
async fn channel(
    address: &str,
    tls: ClientTlsConfig,
    agent: Option<&str>,
) -> Result<Channel, tonic::transport::Error> {
    let mut endpoint = Endpoint::from_shared(format!("https://{address}"))
        .unwrap()
        .tls_config(tls)?
        .connect_timeout(Duration::from_secs(10));
    if let Some(agent) = agent {
        endpoint = endpoint.user_agent(agent.to_string()).unwrap();
    }
    endpoint.connect().await
}

/// The scheduler (TLS, client certificates, the token) on a free loopback port, and its
/// address.
fn start_secure_scheduler(dir: &Path, certs: &Certificates) -> (Process, String) {
    let mut args = vec![
        "scheduler".to_string(),
        "--bind".into(),
        "127.0.0.1:0".into(),
    ];
    args.extend(certs.server_flags());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let scheduler = Process::server_with_env(&args, dir.join("scheduler.log"), &token_env(TOKEN));
    let port = port_after(&scheduler, "scheduler listening on ");
    (scheduler, format!("127.0.0.1:{port}"))
}

/// Executor `n` with TLS and `token`, for `scheduler`, and its Flight port.
fn start_secure_executor(
    dir: &Path,
    n: usize,
    scheduler: &str,
    certs: &Certificates,
    token: &str,
) -> (Process, u16) {
    let extra = certs.server_flags();
    let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
    let executor = start_executor_with_env(dir, n, scheduler, &extra, &token_env(token));
    let port = port_after(&executor, "neardup: executor on ");
    (executor, port)
}

/// `neardup run` on the sample against `cluster`, with `extra` flags and `env`.
fn run_on(cluster: &str, output: &Path, extra: &[&str], env: &[(String, String)]) -> Output {
    let input = fixture("sample.parquet");
    Command::new(env!("CARGO_BIN_EXE_neardup"))
        .args([
            "run",
            "--input",
            path_str(&input),
            "--output",
            path_str(output),
            "--cluster",
            cluster,
            "--executor-timeout",
            "20",
            "--quiet",
        ])
        .args(extra)
        .env_remove("NEARDUP_CLUSTER_TOKEN")
        .envs(env.iter().map(|(k, v)| (k, v)))
        .output()
        .unwrap()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[tokio::test]
async fn a_tls_cluster_with_a_token_gives_the_local_outputs_and_refuses_everyone_else() {
    let dir = tempfile::tempdir().unwrap();
    let certs = certificates(dir.path());
    let (scheduler, address) = start_secure_scheduler(dir.path(), &certs);
    assert!(
        scheduler
            .log()
            .contains("TLS with client certificates, token required"),
        "{}",
        scheduler.log()
    );
    let (executors, flight_ports): (Vec<Process>, Vec<u16>) = (0..2)
        .map(|n| start_secure_executor(dir.path(), n, &address, &certs, TOKEN))
        .unzip();
    for executor in &executors {
        wait_for(executor, "Starting poll work loop with scheduler");
    }
    let cluster = format!("dfs://{address}");
    let client_tls = [
        "--tls-ca",
        path_str(&certs.ca),
        "--tls-cert",
        path_str(&certs.cert),
        "--tls-key",
        path_str(&certs.key),
    ];

    // The whole job over TLS with the token gives the local run's tables.
    let (local, clustered) = (dir.path().join("local"), dir.path().join("clustered"));
    run_sample(&local, &[]);
    let out = run_on(&cluster, &clustered, &client_tls, &token_env(TOKEN));
    assert!(
        out.status.success(),
        "run over TLS failed:\n{}\nscheduler:\n{}\nexecutor 0:\n{}",
        stderr(&out),
        scheduler.log(),
        executors[0].log()
    );
    for table in ["signatures", "pairs", "groups", "dedup"] {
        let sql = format!("SELECT * FROM {table}");
        let rows = sorted_rows(&local, &sql).await;
        assert!(rows.len() > 2, "{table}: the sample gives rows");
        assert_eq!(rows, sorted_rows(&clustered, &sql).await, "{table}");
    }
    let recorded = std::fs::read_to_string(clustered.join("summary.json")).unwrap();
    assert_eq!(summary(&clustered)["parameters"]["cluster"], cluster);
    for executor in &executors {
        assert!(
            executor.log().contains("Finished task"),
            "{}",
            executor.log()
        );
    }
    // The token appears in no output and no log.
    for text in [
        recorded,
        scheduler.log(),
        executors[0].log(),
        executors[1].log(),
    ] {
        assert!(!text.contains(TOKEN));
    }

    // A client without the token, or with another one, is refused before any work.
    for env in [vec![], token_env(OTHER_TOKEN)] {
        let output = dir.path().join("refused");
        let out = run_on(&cluster, &output, &client_tls, &env);
        assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
        assert!(
            stderr(&out).contains("refused this client"),
            "{}",
            stderr(&out)
        );
        assert!(
            stderr(&out).contains("NEARDUP_CLUSTER_TOKEN"),
            "{}",
            stderr(&out)
        );
        assert!(!output.exists());
    }
    // A plain-text client, and a TLS client without a certificate the cluster's authority
    // signed, cannot talk to it at all.
    let plain = format!("df://{address}");
    let out = run_on(&plain, &dir.path().join("plain"), &[], &token_env(TOKEN));
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("write dfs://"), "{}", stderr(&out));
    let stranger = [
        "--tls-ca",
        path_str(&certs.ca),
        "--tls-cert",
        path_str(&certs.stranger_cert),
        "--tls-key",
        path_str(&certs.stranger_key),
    ];
    let out = run_on(
        &cluster,
        &dir.path().join("stranger"),
        &stranger,
        &token_env(TOKEN),
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("no TLS connection"),
        "{}",
        stderr(&out)
    );

    // An executor without the token is refused by the scheduler and exits.
    let flags = certs.server_flags();
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let mut intruder =
        start_executor_with_env(dir.path(), 2, &address, &flags, &token_env(OTHER_TOKEN));
    let status = intruder.wait_until(Instant::now() + Duration::from_secs(60));
    assert_eq!(status.and_then(|s| s.code()), Some(1), "{}", intruder.log());
    assert!(
        intruder.log().contains("refused this executor"),
        "{}",
        intruder.log()
    );

    // Direct calls: the scheduler's gRPC and an executor's Flight service answer nothing
    // without the token, over a connection with the right certificate.
    let identity = Some((certs.cert.as_path(), certs.key.as_path()));
    let to_scheduler = channel(&address, certs.client_tls(identity), None)
        .await
        .expect("the certificate is accepted");
    let refused = SchedulerGrpcClient::new(to_scheduler)
        .get_job_status(GetJobStatusParams {
            job_id: "any".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(refused.code(), tonic::Code::Unauthenticated, "{refused}");
    for port in &flight_ports {
        let flight = format!("127.0.0.1:{port}");
        let to_executor = channel(&flight, certs.client_tls(identity), None)
            .await
            .expect("the certificate is accepted");
        let refused = FlightServiceClient::new(to_executor)
            .do_get(Ticket::new(Vec::new()))
            .await
            .unwrap_err();
        assert_eq!(refused.code(), tonic::Code::Unauthenticated, "{refused}");
        // With another token's proof it is refused the same way.
        let other =
            neardup::engine::cluster_access::ClusterAccess::with_token(OTHER_TOKEN).unwrap();
        let to_executor = channel(&flight, certs.client_tls(identity), other.proof_header())
            .await
            .unwrap();
        let refused = FlightServiceClient::new(to_executor)
            .do_get(Ticket::new(Vec::new()))
            .await
            .unwrap_err();
        assert_eq!(refused.code(), tonic::Code::Unauthenticated, "{refused}");
        // Without a client certificate the TLS handshake itself fails (tonic connects
        // lazily on the first call, so either may report it).
        let refused = match channel(&flight, certs.client_tls(None), None).await {
            Err(_) => true,
            Ok(channel) => FlightServiceClient::new(channel)
                .do_get(Ticket::new(Vec::new()))
                .await
                .is_err_and(|e| e.code() != tonic::Code::Unauthenticated),
        };
        assert!(
            refused,
            "a client without a certificate got through the handshake"
        );
    }
    // With the token's proof, the same call passes the check (and fails on the empty ticket).
    let access = neardup::engine::cluster_access::ClusterAccess::with_token(TOKEN).unwrap();
    let flight = format!("127.0.0.1:{}", flight_ports[0]);
    let to_executor = channel(&flight, certs.client_tls(identity), access.proof_header())
        .await
        .unwrap();
    let answer = FlightServiceClient::new(to_executor)
        .do_get(Ticket::new(Vec::new()))
        .await;
    assert!(
        !matches!(&answer, Err(e) if e.code() == tonic::Code::Unauthenticated),
        "the token's proof was refused"
    );
}

#[test]
fn servers_beyond_loopback_need_a_token_or_client_certificates() {
    for role in [
        vec!["scheduler", "--bind", "0.0.0.0:0"],
        vec![
            "executor",
            "--bind",
            "0.0.0.0:0",
            "--scheduler",
            "127.0.0.1:1",
        ],
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_neardup"))
            .args(&role)
            .env_remove("NEARDUP_CLUSTER_TOKEN")
            .output()
            .unwrap();
        let message = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{role:?}: {message}");
        assert!(message.contains("NEARDUP_CLUSTER_TOKEN"), "{message}");
        assert!(message.contains("--insecure"), "{message}");
    }
    // --insecure starts it, with a warning naming what is exposed.
    let dir = tempfile::tempdir().unwrap();
    let scheduler = Process::server_with_env(
        &["scheduler", "--bind", "0.0.0.0:0", "--insecure"],
        dir.path().join("scheduler.log"),
        &[],
    );
    wait_for(&scheduler, "scheduler listening on");
    assert!(
        scheduler.log().contains("anyone who reaches that port"),
        "{}",
        scheduler.log()
    );
    // The default is loopback, and a short token is refused.
    let out = Command::new(env!("CARGO_BIN_EXE_neardup"))
        .args(["scheduler", "--bind", "127.0.0.1:0"])
        .env("NEARDUP_CLUSTER_TOKEN", "short")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("at least 16"), "{}", stderr(&out));
    // Files that are not PEM, or not a certificate and its key, are named at start.
    let garbage = dir.path().join("garbage.pem");
    std::fs::write(&garbage, "not a certificate").unwrap();
    let fake = dir.path().join("fake.pem");
    std::fs::write(
        &fake,
        "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
    )
    .unwrap();
    for (cert, named) in [(&garbage, "is not PEM"), (&fake, "cannot be used")] {
        let out = Command::new(env!("CARGO_BIN_EXE_neardup"))
            .args(["scheduler", "--bind", "127.0.0.1:0", "--tls-cert"])
            .arg(cert)
            .arg("--tls-key")
            .arg(&fake)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
        assert!(stderr(&out).contains(named), "{}", stderr(&out));
        assert!(stderr(&out).contains(path_str(cert)), "{}", stderr(&out));
    }
}
