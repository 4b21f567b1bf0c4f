//! Where the tool reads and writes: local paths, or URLs of object stores (`s3://`, `gs://`,
//! `az://`, `abfss://`, `http(s)://`) whose stores come from the environment (`registry`).
//!
//! A `Place` is what a user named. Local places keep the file-system code they always had; a
//! remote one is opened (`Remote`) for the few things the job does outside DataFusion's SQL:
//! listing inputs, reading and writing the small JSON files it keeps, and removing what a run
//! no longer needs. Everything else (tables read and written) goes through DataFusion, which
//! asks the same registry for the same store.

pub mod registry;

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use datafusion::execution::object_store::ObjectStoreRegistry;
use futures::TryStreamExt;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectMeta, ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload};
use url::Url;

use crate::error::{Error, Result};
use registry::EnvStoreRegistry;

/// The registry of this process: every session's runtime and the job's own requests share it,
/// so a bucket's client (and its credentials) is set up once.
pub fn registry() -> Arc<EnvStoreRegistry> {
    static REGISTRY: OnceLock<Arc<EnvStoreRegistry>> = OnceLock::new();
    Arc::clone(REGISTRY.get_or_init(EnvStoreRegistry::shared))
}

/// A place a user named: a local path or an object-store URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Place {
    Local(PathBuf),
    /// A URL without a trailing '/', `s3://bucket/prefix`.
    Remote(Url),
}

/// Schemes that name an object store; `file://` is a local path.
const REMOTE_SCHEMES: [&str; 10] = [
    "s3", "s3a", "gs", "az", "azure", "abfs", "abfss", "adl", "http", "https",
];

impl Place {
    /// Reads what a user gave (`role` names the flag, for messages): `file://` URLs and plain
    /// paths are local; the store schemes are remote; any other `scheme://` is refused.
    pub fn parse(text: &str, role: &str) -> Result<Place> {
        let Some((scheme, _)) = text.split_once("://") else {
            return Ok(Place::Local(PathBuf::from(text)));
        };
        let scheme = scheme.to_ascii_lowercase();
        if scheme == "file" {
            let url = Url::parse(text)
                .map_err(|e| Error::Usage(format!("{role} {text}: not a file:// URL ({e})")))?;
            let path = url.to_file_path().map_err(|()| {
                Error::Usage(format!(
                    "{role} {text}: not a local path (file:///absolute/path)"
                ))
            })?;
            return Ok(Place::Local(path));
        }
        if !REMOTE_SCHEMES.contains(&scheme.as_str()) {
            return Err(Error::Usage(format!(
                "{role} {}: neardup reads s3://, gs://, az:// (abfss://), http(s)://, file:// \
                 and local paths, not {scheme}://",
                crate::error::echo(&redacted(text))
            )));
        }
        let url = Url::parse(text).map_err(|e| {
            Error::Usage(format!(
                "{role} {}: not a URL ({e})",
                crate::error::echo(&redacted(text))
            ))
        })?;
        // abfss://container@account.dfs.core.windows.net/ names its container before the '@'.
        let container_before_at = matches!(scheme.as_str(), "abfs" | "abfss");
        if url.password().is_some() || (!url.username().is_empty() && !container_before_at) {
            // Never echo it: the part before '@' may be a secret.
            return Err(Error::Usage(format!(
                "{role} {}: credentials do not go in the URL; set them in the environment \
                 (docs/STORAGE.md)",
                redacted(text)
            )));
        }
        if url.host_str().is_none_or(str::is_empty) {
            return Err(Error::Usage(format!(
                "{role} {}: names no bucket ({scheme}://bucket/path)",
                redacted(text)
            )));
        }
        if url.query().is_some() || url.fragment().is_some() {
            return Err(Error::Usage(format!(
                "{role} {}: a location has no '?' or '#' part; settings come from the \
                 environment (docs/STORAGE.md)",
                redacted(text)
            )));
        }
        Ok(Place::Remote(without_trailing_slash(url)))
    }

    pub fn is_remote(&self) -> bool {
        matches!(self, Place::Remote(_))
    }

    pub fn as_local(&self) -> Option<&Path> {
        match self {
            Place::Local(path) => Some(path),
            Place::Remote(_) => None,
        }
    }

    /// The place of `name` inside this folder or prefix.
    pub fn join(&self, name: &str) -> Place {
        match self {
            Place::Local(path) => Place::Local(path.join(name)),
            Place::Remote(url) => Place::Remote(join_url(url, name)),
        }
    }

    /// As DataFusion takes a folder: the path or URL with a trailing '/'.
    pub fn folder(&self) -> String {
        format!("{self}/")
    }
}

impl fmt::Display for Place {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Place::Local(path) => write!(f, "{}", path.display()),
            Place::Remote(url) => write!(f, "{url}"),
        }
    }
}

fn without_trailing_slash(mut url: Url) -> Url {
    let path = url.path().trim_end_matches('/').to_string();
    url.set_path(&path);
    url
}

fn join_url(url: &Url, name: &str) -> Url {
    let mut joined = url.clone();
    let path = format!("{}/{}", url.path().trim_end_matches('/'), name);
    joined.set_path(&path);
    joined
}

/// `text` with anything between "://" and '@' hidden, and anything from a '?' or '#' on, for
/// messages about a URL that may hold credentials (a user and password, or a signed URL's
/// signature in its query).
pub fn redacted(text: &str) -> String {
    let (text, cut) = match text.find(['?', '#']) {
        Some(at) => (&text[..at], "?***"),
        None => (text, ""),
    };
    let text = match (text.find("://"), text.find('@')) {
        (Some(start), Some(at)) if at > start => {
            format!("{}://***{}", &text[..start], &text[at..])
        }
        _ => text.to_string(),
    };
    text + cut
}

/// A remote folder or object, opened: its store and its key.
#[derive(Debug, Clone)]
pub struct Remote {
    url: Url,
    store: Arc<dyn ObjectStore>,
    key: ObjectPath,
}

impl Remote {
    /// The store of `url` from the registry (set up from the environment on first use).
    pub fn open(url: &Url) -> Result<Remote> {
        let store = registry()
            .get_store(url)
            .map_err(|e| Error::Input(strip_plan_prefix(&e.to_string())))?;
        let key = ObjectPath::from_url_path(url.path()).map_err(|e| Error::Store {
            url: url.to_string(),
            source: e.into(),
        })?;
        Ok(Remote {
            url: url.clone(),
            store,
            key,
        })
    }

    pub fn url(&self) -> &Url {
        &self.url
    }

    /// The object key (or prefix), decoded as the store lists keys.
    pub fn key(&self) -> &str {
        self.key.as_ref()
    }

    /// The object `name` inside this prefix (`name` may hold '/': `run-1/summary.json`).
    pub fn child(&self, name: &str) -> Remote {
        let url = join_url(&self.url, name);
        let key = name
            .split('/')
            .filter(|part| !part.is_empty())
            .fold(self.key.clone(), |key, part| key.join(part));
        Remote {
            url,
            store: Arc::clone(&self.store),
            key,
        }
    }

    fn error(&self, source: object_store::Error) -> Error {
        Error::Store {
            url: self.url.to_string(),
            source,
        }
    }

    /// Every object under this prefix (recursively), sorted by key.
    pub async fn list(&self) -> Result<Vec<ObjectMeta>> {
        let prefix = (!self.key.as_ref().is_empty()).then_some(&self.key);
        let mut found: Vec<ObjectMeta> = self
            .store
            .list(prefix)
            .try_collect()
            .await
            .map_err(|e| self.error(e))?;
        found.sort_by(|a, b| a.location.cmp(&b.location));
        Ok(found)
    }

    /// The URL of an object this store listed.
    pub fn url_of(&self, key: &ObjectPath) -> Url {
        let mut url = self.url.clone();
        url.set_path(&format!("/{key}"));
        url
    }

    /// Whether an object (not a prefix) has this key.
    pub async fn exists_as_object(&self) -> Result<bool> {
        if self.key.as_ref().is_empty() {
            return Ok(false);
        }
        match self.store.head(&self.key).await {
            Ok(_) => Ok(true),
            Err(object_store::Error::NotFound { .. }) => Ok(false),
            Err(e) => Err(self.error(e)),
        }
    }

    /// The object's bytes, or `None` when there is no such object.
    pub async fn read(&self) -> Result<Option<Vec<u8>>> {
        match self.store.get(&self.key).await {
            Ok(got) => Ok(Some(got.bytes().await.map_err(|e| self.error(e))?.to_vec())),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(self.error(e)),
        }
    }

    /// Writes the object whole (a single PUT: readers see the old bytes or the new).
    pub async fn write(&self, bytes: Vec<u8>) -> Result<()> {
        self.store
            .put(&self.key, PutPayload::from(bytes))
            .await
            .map(|_| ())
            .map_err(|e| self.error(e))
    }

    /// Uploads a local file as this object, whole or not at all: a small file in one PUT
    /// (conditional unless `replace`: an object that appeared meanwhile is not replaced), a
    /// large one in parts that become the object only when the upload completes (a failed
    /// upload is aborted).
    pub async fn upload(&self, file: &Path, replace: bool) -> Result<()> {
        use std::io::Read;
        const ONE_PUT_BYTES: u64 = 16 << 20;
        const PARTS_IN_FLIGHT: usize = 8;
        let size = std::fs::metadata(file)
            .map_err(|e| Error::io(file, e))?
            .len();
        if size <= ONE_PUT_BYTES {
            let bytes = std::fs::read(file).map_err(|e| Error::io(file, e))?;
            if replace {
                return self.write(bytes).await;
            }
            return match self.create(bytes).await? {
                true => Ok(()),
                false => Err(Error::Usage(format!(
                    "{} appeared while the result was written; pass --overwrite to replace it",
                    self.url
                ))),
            };
        }
        let upload = self
            .store
            .put_multipart(&self.key)
            .await
            .map_err(|e| self.error(e))?;
        let mut writer = object_store::WriteMultipart::new(upload);
        let mut source = std::fs::File::open(file).map_err(|e| Error::io(file, e))?;
        let mut chunk = vec![0u8; 8 << 20];
        loop {
            let read = match source.read(&mut chunk) {
                Ok(0) => break,
                Ok(read) => read,
                Err(e) => {
                    let _ = writer.abort().await;
                    return Err(Error::io(file, e));
                }
            };
            if let Err(e) = writer.wait_for_capacity(PARTS_IN_FLIGHT).await {
                let _ = writer.abort().await;
                return Err(self.error(e));
            }
            writer.write(&chunk[..read]);
        }
        writer.finish().await.map(|_| ()).map_err(|e| self.error(e))
    }

    /// Writes the object only if no object has its key (a conditional PUT, If-None-Match: *):
    /// of two writers of one key exactly one succeeds. `Ok(false)` when the key was taken.
    /// Stores that cannot write conditionally say so (`NotImplemented`, an error).
    pub async fn create(&self, bytes: Vec<u8>) -> Result<bool> {
        let options = PutOptions::from(PutMode::Create);
        match self
            .store
            .put_opts(&self.key, PutPayload::from(bytes), options)
            .await
        {
            Ok(_) => Ok(true),
            Err(object_store::Error::AlreadyExists { .. }) => Ok(false),
            // A store may answer a lost race with 412 Precondition Failed instead.
            Err(object_store::Error::Precondition { .. }) => Ok(false),
            Err(e) => Err(self.error(e)),
        }
    }

    /// Removes this one object (absent is fine).
    pub async fn delete(&self) -> Result<()> {
        match self.store.delete(&self.key).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(self.error(e)),
        }
    }

    /// Removes every object under this prefix.
    pub async fn remove_all(&self) -> Result<()> {
        let objects = self.list().await?;
        let locations = futures::stream::iter(objects.into_iter().map(|o| Ok(o.location)));
        self.store
            .delete_stream(Box::pin(locations))
            .try_collect::<Vec<_>>()
            .await
            .map(|_| ())
            .map_err(|e| self.error(e))
    }
}

/// DataFusion's plan errors start with "Error during planning: "; the store's own message is
/// what the user needs.
fn strip_plan_prefix(message: &str) -> String {
    message
        .strip_prefix("Error during planning: ")
        .unwrap_or(message)
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn places_are_local_paths_or_store_urls() {
        assert_eq!(
            Place::parse("out/run", "--output").unwrap(),
            Place::Local(PathBuf::from("out/run"))
        );
        assert_eq!(
            Place::parse("file:///data/in.parquet", "--input").unwrap(),
            Place::Local(PathBuf::from("/data/in.parquet"))
        );
        let remote = Place::parse("s3://lake/neardup/dt=2026-11-30/", "--output").unwrap();
        assert_eq!(remote.to_string(), "s3://lake/neardup/dt=2026-11-30");
        assert_eq!(
            remote.join("groups").folder(),
            "s3://lake/neardup/dt=2026-11-30/groups/"
        );
        assert!(Place::parse("gs://bucket", "--input").unwrap().is_remote());
        let azure = Place::parse("abfss://corpus@account.dfs.core.windows.net/x", "--input");
        assert!(azure.unwrap().is_remote());
    }

    #[test]
    fn credentials_in_a_url_are_refused_without_echoing_them() {
        let err = Place::parse("s3://AKIAEXAMPLE:topsecret@lake/x", "--input").unwrap_err();
        let message = err.to_string();
        assert!(
            !message.contains("topsecret") && !message.contains("AKIA"),
            "{message}"
        );
        assert!(message.contains("environment"), "{message}");
        let err = Place::parse("hdfs://namenode/x", "--input").unwrap_err();
        assert!(err.to_string().contains("not hdfs://"), "{err}");
        assert_eq!(err.exit_code(), 2);
        let err = Place::parse("s3://lake/x?region=eu-west-1", "--input").unwrap_err();
        assert!(err.to_string().contains("environment"), "{err}");
        // A signed URL's signature, and a user and password under a scheme neardup does not
        // read, are not echoed either.
        for secret in [
            "https://host/x.parquet?X-Amz-Signature=topsecret",
            "az://c/x?sig=topsecret",
            "s3://lake/x#topsecret",
            "hdfs://user:topsecret@namenode/x",
            "hdfs://namenode/x?sig=topsecret",
        ] {
            let message = Place::parse(secret, "--input").unwrap_err().to_string();
            assert!(!message.contains("topsecret"), "{message}");
        }
    }
}
