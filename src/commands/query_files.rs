//! Files named in a query (`SELECT * FROM 'pages.jsonl.gz'`). DataFusion's own url tables read
//! them (Parquet, CSV, `.json`, folders and patterns), with two exceptions read as `run` reads a
//! corpus file (`crate::input::format`): JSON Lines named `.jsonl` or `.ndjson` (compressed or
//! not), which DataFusion does not know, and a CSV file whose columns DataFusion cannot infer
//! (line breaks inside quoted values), whose columns are then text. DataFusion answers "table
//! not found" for a file whose format it cannot tell and leaves its errors unnamed; here a file
//! that is there but cannot be read is an error with the file's name.
//!
//! `COPY ... TO 'top.jsonl'` (or `.ndjson`) writes JSON Lines, which is what DataFusion's JSON
//! writer writes; DataFusion knows the format only by the name `.json`.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;
use datafusion::catalog::{DynamicFileCatalog, Session, TableProvider, UrlTableFactory};
use datafusion::common::GetExt;
use datafusion::datasource::dynamic_file::DynamicListTableFactory;
use datafusion::datasource::file_format::json::JsonFormatFactory;
use datafusion::datasource::file_format::{FileFormat as DfFileFormat, FileFormatFactory};
use datafusion::datasource::listing::{ListingTableConfig, ListingTableConfigExt, ListingTableUrl};
use datafusion::error::{DataFusionError, Result as DfResult};
use datafusion::execution::SessionStateBuilder;
use datafusion::execution::context::SessionState;
use datafusion::prelude::SessionContext;

use crate::input::format::{FileFormat, Format, is_plain_json};

/// The session with files as tables by their path, like DataFusion's `enable_url_table`, and
/// the JSON Lines names as names of DataFusion's JSON format.
pub fn with_file_tables(ctx: SessionContext) -> SessionContext {
    {
        let state = ctx.state_ref();
        let mut state = state.write();
        for extension in ["jsonl", "ndjson"] {
            let factory = Arc::new(JsonLinesNamed(extension));
            // Only fails for a name registered already, which these are not.
            let _ = state.register_file_format(factory, false);
        }
    }
    let tables = Arc::new(FileTables {
        datafusion: DynamicListTableFactory::default(),
    });
    let catalogs = Arc::new(DynamicFileCatalog::new(
        Arc::clone(ctx.state_ref().read().catalog_list()),
        Arc::clone(&tables) as Arc<dyn UrlTableFactory>,
    ));
    let session_id = ctx.session_id();
    let ctx: SessionContext = SessionStateBuilder::from(ctx.state())
        .with_session_id(session_id)
        .with_catalog_list(catalogs)
        .build()
        .into();
    tables
        .datafusion
        .session_store()
        .with_state(ctx.state_weak_ref());
    ctx
}

/// DataFusion's JSON format (one object per line) under a JSON Lines name.
#[derive(Debug)]
struct JsonLinesNamed(&'static str);

impl GetExt for JsonLinesNamed {
    fn get_ext(&self) -> String {
        self.0.to_string()
    }
}

impl FileFormatFactory for JsonLinesNamed {
    fn create(
        &self,
        state: &dyn Session,
        options: &HashMap<String, String>,
    ) -> DfResult<Arc<dyn DfFileFormat>> {
        JsonFormatFactory::new().create(state, options)
    }

    fn default(&self) -> Arc<dyn DfFileFormat> {
        FileFormatFactory::default(&JsonFormatFactory::new())
    }
}

#[derive(Debug)]
struct FileTables {
    /// DataFusion's url tables; also holds the session both read in.
    datafusion: DynamicListTableFactory,
}

#[async_trait]
impl UrlTableFactory for FileTables {
    async fn try_new(&self, name: &str) -> DfResult<Option<Arc<dyn TableProvider>>> {
        let reading = |e| DataFusionError::Context(format!("reading '{name}'"), Box::new(e));
        let file = FileFormat::of_name(name).filter(|_| names_one_file(name));
        // `.jsonl` and `.ndjson` are names DataFusion does not read.
        if let Some(file) = file.filter(|f| f.format == Format::JsonLines && !is_plain_json(name)) {
            return self.read_as_run(file, name).await.map(Some);
        }
        match self.datafusion.try_new(name).await {
            Ok(Some(table)) => Ok(Some(table)),
            // DataFusion infers a CSV file's columns from its lines as they come, and fails
            // on line breaks inside quoted values; `run`'s reading takes them (columns text).
            Err(e) => match file.filter(|f| f.format == Format::Csv) {
                Some(file) => match self.read_as_run(file, name).await {
                    Ok(table) => Ok(Some(table)),
                    Err(_) => Err(reading(e)),
                },
                None => Err(reading(e)),
            },
            // DataFusion's answer for a file whose format it cannot tell is "not found"; for a
            // path that is there, ask it why.
            Ok(None) if Path::new(name).exists() => {
                let url = ListingTableUrl::parse(name).map_err(reading)?;
                match ListingTableConfig::new(url)
                    .infer_options(&self.state()?)
                    .await
                {
                    Err(e) => Err(reading(e)),
                    Ok(_) => Ok(None),
                }
            }
            Ok(None) => Ok(None),
        }
    }
}

/// Whether `name` is one file: a local path to a file (not a folder, a pattern or nothing), or
/// a URL without a pattern or a closing `/`. Folders and patterns go to DataFusion's tables.
fn names_one_file(name: &str) -> bool {
    match name.contains("://") {
        true => !name.ends_with('/') && !name.contains(['*', '?', '[']),
        false => Path::new(name).is_file(),
    }
}

impl FileTables {
    /// `name` read as `run` reads a corpus file of `file`'s format.
    async fn read_as_run(&self, file: FileFormat, name: &str) -> DfResult<Arc<dyn TableProvider>> {
        let ctx = SessionContext::new_with_state(self.state()?);
        let frame = file.read(&ctx, name).await.map_err(|e| {
            let format = file.format.name();
            DataFusionError::Context(format!("reading '{name}' as {format}"), Box::new(e))
        })?;
        Ok(frame.into_view())
    }

    /// The query's session as it is now.
    fn state(&self) -> DfResult<SessionState> {
        self.datafusion
            .session_store()
            .get_session()
            .upgrade()
            .and_then(|session| {
                session
                    .read()
                    .as_any()
                    .downcast_ref::<SessionState>()
                    .cloned()
            })
            .ok_or_else(|| DataFusionError::Internal("the query's session is gone".into()))
    }
}
