//! `--cluster standalone`: Ballista's scheduler and one executor inside this process.
//!
//! Ballista's own standalone set-up gives the executor a temporary folder it never removes;
//! this one starts the same scheduler and executor with a [`WorkFolder`] that the job's session
//! holds, so the shuffle files go when the session does (or on Ctrl-C).

use std::sync::Arc;
use std::time::Duration;

use arrow_flight::flight_service_server::FlightServiceServer;
use ballista::prelude::SessionConfigExt;
use ballista_core::serde::BallistaCodec;
use ballista_core::serde::protobuf::ExecutorRegistration;
use ballista_core::serde::protobuf::scheduler_grpc_client::SchedulerGrpcClient;
use ballista_core::serde::scheduler::{
    ExecutorOperatingSystemSpecification, ExecutorSpecification,
};
use ballista_core::utils::{GrpcServerConfig, create_grpc_server};
use ballista_core::{BALLISTA_PROTOCOL_VERSION, ConfigProducer, RuntimeProducer};
use ballista_executor::executor::Executor;
use ballista_executor::flight_service::BallistaFlightService;
use ballista_executor::health::ExecutorHealth;
use ballista_executor::metrics::LoggingMetricsCollector;
use datafusion::execution::SessionState;
use datafusion_proto::protobuf::{LogicalPlanNode, PhysicalPlanNode};

use crate::engine::work_folder::WorkFolder;
use crate::error::{Error, Result};

/// How long to wait for the in-process scheduler to accept its client.
const SCHEDULER_START: Duration = Duration::from_secs(10);

/// Starts the scheduler and the executor, both planning and running with `state`'s functions
/// and settings. Returns the scheduler's URL and the executor's work folder, which must live
/// as long as jobs run there.
pub async fn start(state: &SessionState) -> Result<(String, WorkFolder)> {
    let failed = |e: &dyn std::fmt::Display| {
        Error::Input(format!("cannot start the in-process Ballista cluster: {e}"))
    };
    let address = ballista_scheduler::standalone::new_standalone_scheduler_from_state(state)
        .await
        .map_err(|e| failed(&e))?;
    let url = format!("http://localhost:{}", address.port());
    let scheduler = connect(&url).await.map_err(|e| failed(&e))?;
    let folder = WorkFolder::create("shuffle")?;
    start_executor(scheduler, state, &folder)
        .await
        .map_err(|e| failed(&e))?;
    Ok((url, folder))
}

/// The scheduler starts listening in a task of its own: retry until it answers.
async fn connect(
    url: &str,
) -> std::result::Result<SchedulerGrpcClient<tonic::transport::Channel>, tonic::transport::Error> {
    let started = std::time::Instant::now();
    loop {
        match SchedulerGrpcClient::connect(url.to_string()).await {
            Ok(client) => return Ok(client),
            Err(e) if started.elapsed() >= SCHEDULER_START => return Err(e),
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
}

/// Ballista's standalone executor (a Flight service on a free loopback port and the loop that
/// polls the scheduler for tasks) with `folder` for its shuffle files.
async fn start_executor(
    scheduler: SchedulerGrpcClient<tonic::transport::Channel>,
    state: &SessionState,
    folder: &WorkFolder,
) -> std::result::Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let config = state.config().clone().upgrade_for_ballista();
    let vcores = config.ballista_standalone_parallelism();
    let codec: BallistaCodec<LogicalPlanNode, PhysicalPlanNode> = BallistaCodec::new(
        config.ballista_logical_extension_codec(),
        config.ballista_physical_extension_codec(),
    );
    let listener = tokio::net::TcpListener::bind("localhost:0").await?;
    let port = listener.local_addr()?.port();
    let registration = ExecutorRegistration {
        id: ballista_core::ids::new_instance_id(),
        host: Some("localhost".to_string()),
        port: u32::from(port),
        // Unused in pull scheduling, where the executor polls; Ballista's value.
        grpc_port: 50020,
        specification: Some(
            ExecutorSpecification::default()
                .with_vcores(vcores as u32)
                .into(),
        ),
        os_info: Some(ExecutorOperatingSystemSpecification::default().into()),
        ballista_protocol_version: BALLISTA_PROTOCOL_VERSION,
    };
    let work_dir = folder.path().to_string_lossy().into_owned();
    let max_message_size = config.ballista_grpc_client_max_message_size();
    let runtime = state.runtime_env().clone();
    let runtime_producer: RuntimeProducer = Arc::new(move |_| Ok(runtime.clone()));
    let config_producer: ConfigProducer = Arc::new(move || config.clone());
    let executor = Arc::new(Executor::with_default_execution_engine(
        registration,
        &work_dir,
        runtime_producer,
        config_producer,
        Arc::new(state.into()),
        Arc::new(LoggingMetricsCollector::default()),
        vcores,
    ));
    let flight = FlightServiceServer::new(BallistaFlightService::new(work_dir))
        .max_decoding_message_size(max_message_size)
        .max_encoding_message_size(max_message_size);
    tokio::spawn(
        create_grpc_server(&GrpcServerConfig::default())
            .add_service(flight)
            .serve_with_incoming(tonic::transport::server::TcpIncoming::from(listener)),
    );
    tokio::spawn(ballista_executor::execution_loop::poll_loop(
        scheduler,
        executor,
        codec,
        None,
        None,
        ExecutorHealth::new(),
    ));
    Ok(())
}
