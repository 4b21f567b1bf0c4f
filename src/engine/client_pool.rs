//! The executors' pool of shuffle-read clients (connections to other executors' Flight
//! services), as Ballista's executor keeps one by default. Ballista's own pool is private to
//! its executor crate, which builds it only for its own engine; neardup's executor runs tasks
//! through `crate::engine::task_cancel`'s engine, so it brings this one: without a pool every
//! shuffle fetch would open a new connection (a TLS handshake each, on a guarded cluster).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ballista_core::client::BallistaClient;
use ballista_core::client_pool::{BallistaClientPool, PooledClient};
use ballista_core::error::Result;
use ballista_core::extension::BallistaConfigGrpcEndpoint;
use ballista_core::utils::GrpcClientConfig;

type Key = (String, u16, GrpcClientConfig);
type Idle = HashMap<Key, Vec<(Instant, BallistaClient)>>;

/// Idle clients by address and settings; one idle longer than `idle_timeout` is dropped.
pub struct IdleClients {
    idle: Arc<Mutex<Idle>>,
    idle_timeout: Duration,
}

impl IdleClients {
    pub fn new(idle_timeout: Duration) -> Self {
        Self {
            idle: Arc::default(),
            idle_timeout,
        }
    }
}

impl std::fmt::Debug for IdleClients {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IdleClients")
            .field("idle_timeout", &self.idle_timeout)
            .finish_non_exhaustive()
    }
}

/// Drops the clients idle for longer than `timeout`.
fn evict(idle: &mut Idle, timeout: Duration) {
    idle.retain(|_, clients| {
        clients.retain(|(since, _)| since.elapsed() < timeout);
        !clients.is_empty()
    });
}

#[async_trait::async_trait]
impl BallistaClientPool for IdleClients {
    async fn acquire(
        &self,
        host: &str,
        port: u16,
        config: &GrpcClientConfig,
        customize_endpoint: Option<Arc<BallistaConfigGrpcEndpoint>>,
    ) -> Result<PooledClient> {
        let key: Key = (host.to_string(), port, config.clone());
        let reused = self.idle.lock().ok().and_then(|mut idle| {
            evict(&mut idle, self.idle_timeout);
            idle.get_mut(&key)
                .and_then(Vec::pop)
                .map(|(_, client)| client)
        });
        let client = match reused {
            Some(client) => client,
            None => {
                BallistaClient::try_new(
                    host,
                    port,
                    config.max_message_size,
                    config.use_tls,
                    customize_endpoint,
                    config.io_retries_times,
                    config.io_retry_wait_time_ms,
                    config.initial_connection_window_size,
                    config.initial_stream_window_size,
                )
                .await?
            }
        };
        let idle = Arc::clone(&self.idle);
        Ok(PooledClient::new(
            client,
            Box::new(move |client| {
                if let Ok(mut idle) = idle.lock() {
                    idle.entry(key).or_default().push((Instant::now(), client));
                }
            }),
        ))
    }

    async fn evict_idle(&self) {
        if let Ok(mut idle) = self.idle.lock() {
            evict(&mut idle, self.idle_timeout);
        }
    }
}
