//! Files named in a query (`SELECT * FROM 'pages.jsonl.gz'`). A corpus in JSON Lines or CSV is
//! read as `run` reads it (`crate::input::format`: `.jsonl`, `.ndjson`, `.json` and `.csv`,
//! compressed or not; CSV columns all text from the header row, line breaks inside quoted
//! values kept). Everything else (Parquet, folders, Arrow, Avro) goes to DataFusion's own url
//! tables. Those do not know `.jsonl` or `.ndjson`, fail on CSV files with line breaks inside
//! quoted values once they read them in chunks, and answer "table not found" for a file whose
//! format they cannot tell; here every file that cannot be read gets the reader's error with
//! the file's name.

use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;
use datafusion::catalog::{DynamicFileCatalog, TableProvider, UrlTableFactory};
use datafusion::datasource::dynamic_file::DynamicListTableFactory;
use datafusion::datasource::listing::{ListingTableConfig, ListingTableConfigExt, ListingTableUrl};
use datafusion::error::{DataFusionError, Result as DfResult};
use datafusion::execution::SessionStateBuilder;
use datafusion::execution::context::SessionState;
use datafusion::prelude::SessionContext;

use crate::input::format::{FileFormat, Format};

/// The session with files as tables by their path, like DataFusion's `enable_url_table`.
pub fn with_file_tables(ctx: SessionContext) -> SessionContext {
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

#[derive(Debug)]
struct FileTables {
    /// DataFusion's url tables; also holds the session both read in.
    datafusion: DynamicListTableFactory,
}

#[async_trait]
impl UrlTableFactory for FileTables {
    async fn try_new(&self, name: &str) -> DfResult<Option<Arc<dyn TableProvider>>> {
        let reading = |format: &str, e| {
            DataFusionError::Context(format!("reading '{name}'{format}"), Box::new(e))
        };
        if let Some(file) = FileFormat::of_name(name).filter(|file| file.format != Format::Parquet)
        {
            let ctx = SessionContext::new_with_state(self.state()?);
            let frame = file
                .read(&ctx, name)
                .await
                .map_err(|e| reading(&format!(" as {}", file.format.name()), e))?;
            return Ok(Some(frame.into_view()));
        }
        match self.datafusion.try_new(name).await {
            Ok(Some(table)) => Ok(Some(table)),
            Err(e) => Err(reading("", e)),
            // DataFusion's answer for a file whose format it cannot tell is "not found"; for a
            // path that is there, ask it why.
            Ok(None) if Path::new(name).exists() => {
                let url = ListingTableUrl::parse(name).map_err(|e| reading("", e))?;
                match ListingTableConfig::new(url)
                    .infer_options(&self.state()?)
                    .await
                {
                    Err(e) => Err(reading("", e)),
                    Ok(_) => Ok(None),
                }
            }
            Ok(None) => Ok(None),
        }
    }
}

impl FileTables {
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
