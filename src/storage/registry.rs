//! The object stores every session resolves URLs with: built on first use of a bucket from the
//! environment, the way each cloud's own tools take their settings, and kept for the process.
//!
//! DataFusion asks its runtime's registry for the store of every URL a statement names (an
//! external table's location, a `COPY ... TO`, a `SELECT * FROM 's3://...'`), so one registry
//! given to every runtime (this process's, a cluster's scheduler and executors) is all it takes
//! for the same URL to mean the same store everywhere.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use datafusion::error::{DataFusionError, Result as DfResult};
use datafusion::execution::object_store::ObjectStoreRegistry;
use std::time::Duration;

use object_store::aws::AmazonS3Builder;
use object_store::azure::MicrosoftAzureBuilder;
use object_store::gcp::GoogleCloudStorageBuilder;
use object_store::http::HttpBuilder;
use object_store::local::LocalFileSystem;
use object_store::{ObjectStore, RetryConfig};
use url::Url;

/// A registry that builds the store of a bucket it has not seen from the environment.
#[derive(Debug, Default)]
pub struct EnvStoreRegistry {
    /// By `scheme://[container@]host[:port]`: DataFusion's own registry leaves out the part
    /// before '@', which for Azure's abfss:// URLs is the container.
    stores: Mutex<HashMap<String, Arc<dyn ObjectStore>>>,
}

impl EnvStoreRegistry {
    pub fn shared() -> Arc<Self> {
        Arc::new(Self::default())
    }
}

fn store_key(url: &Url) -> String {
    let container = match url.username() {
        "" => String::new(),
        name => format!("{name}@"),
    };
    let port = url.port().map(|p| format!(":{p}")).unwrap_or_default();
    format!(
        "{}://{container}{}{port}",
        url.scheme(),
        url.host_str().unwrap_or("")
    )
}

impl ObjectStoreRegistry for EnvStoreRegistry {
    fn register_store(
        &self,
        url: &Url,
        store: Arc<dyn ObjectStore>,
    ) -> Option<Arc<dyn ObjectStore>> {
        let mut stores = self.stores.lock().unwrap_or_else(|e| e.into_inner());
        stores.insert(store_key(url), store)
    }

    fn deregister_store(&self, url: &Url) -> DfResult<Arc<dyn ObjectStore>> {
        let mut stores = self.stores.lock().unwrap_or_else(|e| e.into_inner());
        stores
            .remove(&store_key(url))
            .ok_or_else(|| DataFusionError::Plan(format!("no store registered for {url}")))
    }

    fn get_store(&self, url: &Url) -> DfResult<Arc<dyn ObjectStore>> {
        let key = store_key(url);
        let mut stores = self.stores.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(store) = stores.get(&key) {
            return Ok(Arc::clone(store));
        }
        let store = store_from_env(url).map_err(DataFusionError::Plan)?;
        stores.insert(key, Arc::clone(&store));
        Ok(store)
    }
}

/// The store behind `url`'s scheme and bucket, configured from the environment. The message of
/// an error names the bucket and what to set, never a secret.
pub fn store_from_env(url: &Url) -> Result<Arc<dyn ObjectStore>, String> {
    let bucket = format!("{}://{}", url.scheme(), url.host_str().unwrap_or(""));
    let built: Result<Arc<dyn ObjectStore>, object_store::Error> = match url.scheme() {
        "file" => return Ok(Arc::new(LocalFileSystem::new())),
        "s3" | "s3a" => AmazonS3Builder::from_env()
            .with_url(bucket.as_str())
            .with_retry(retries())
            .build()
            .map(|s| Arc::new(s) as _),
        "gs" => GoogleCloudStorageBuilder::from_env()
            .with_url(bucket.as_str())
            .with_retry(retries())
            .build()
            .map(|s| Arc::new(s) as _),
        "az" | "azure" | "abfs" | "abfss" | "adl" => MicrosoftAzureBuilder::from_env()
            .with_url(url.as_str())
            .with_retry(retries())
            .build()
            .map(|s| Arc::new(s) as _),
        "http" | "https" => HttpBuilder::new()
            .with_url(url.origin().ascii_serialization())
            .with_retry(retries())
            .build()
            .map(|s| Arc::new(s) as _),
        other => {
            return Err(format!(
                "{bucket}: neardup does not know the scheme '{other}://'; it reads s3://, gs://, \
                 az:// (abfss://), http(s):// and local paths"
            ));
        }
    };
    built.map_err(|e| format!("{bucket}: {}", describe_setup_error(url.scheme(), &e)))
}

/// Retries of a failed request: object_store's backoff, but five retries within 30 s instead
/// of ten within three minutes, so that a wrong endpoint is reported in seconds while a store's
/// passing throttling (503 Slow Down) is still ridden out.
fn retries() -> RetryConfig {
    RetryConfig {
        max_retries: 5,
        retry_timeout: Duration::from_secs(30),
        ..RetryConfig::default()
    }
}

/// What to set when a store cannot be set up (missing region, no credentials found...).
fn describe_setup_error(scheme: &str, error: &object_store::Error) -> String {
    let hint = match scheme {
        "s3" | "s3a" => {
            "S3 takes AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN), \
             AWS_REGION, and AWS_ENDPOINT_URL with AWS_ALLOW_HTTP=true for an S3-compatible \
             server, or an instance or web-identity role"
        }
        "gs" => {
            "GCS takes GOOGLE_APPLICATION_CREDENTIALS (a service-account key file) or \
             GOOGLE_SERVICE_ACCOUNT, or the metadata server of a Google Cloud machine"
        }
        "az" | "azure" | "abfs" | "abfss" | "adl" => {
            "Azure takes AZURE_STORAGE_ACCOUNT_NAME with AZURE_STORAGE_ACCOUNT_KEY, a SAS \
             token, a service principal (AZURE_CLIENT_ID, AZURE_CLIENT_SECRET, \
             AZURE_TENANT_ID), or AZURE_STORAGE_USE_EMULATOR=true for Azurite"
        }
        _ => "",
    };
    format!("{error} ({hint})")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stores_are_kept_per_bucket_and_azure_container() {
        let a = Url::parse("abfss://one@account.dfs.core.windows.net/x").unwrap();
        let b = Url::parse("abfss://two@account.dfs.core.windows.net/x").unwrap();
        assert_ne!(store_key(&a), store_key(&b));
        let s3 = Url::parse("s3://lake/crawl/dt=1/part.parquet").unwrap();
        assert_eq!(store_key(&s3), "s3://lake");
        let http = Url::parse("http://127.0.0.1:9000/corpus.parquet").unwrap();
        assert_eq!(store_key(&http), "http://127.0.0.1:9000");
    }

    #[test]
    fn unknown_schemes_and_missing_settings_name_the_bucket() {
        let err = store_from_env(&Url::parse("hdfs://namenode/x").unwrap()).unwrap_err();
        assert!(err.contains("hdfs://namenode"), "{err}");
    }
}
