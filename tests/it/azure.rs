//! Azure Blob Storage through Azurite (`azurite.rs`): a run with its input and outputs on Azure
//! against the same run on local files, and the index's conditional commit on Azure.

use crate::azurite::Azurite;
use crate::common::{fixture, run_sample_locally};
use crate::index_on_store::two_runs_commit_batch_one;
use crate::object_store::tables;

#[tokio::test]
async fn a_run_on_azure_writes_the_tables_of_the_same_run_on_local_files() {
    let Some(azure) = Azurite::start("run on azure") else {
        return;
    };
    azure.create_container("lake");
    azure.put_file("lake", "crawl/part-0.parquet", &fixture("sample.parquet"));
    let dir = tempfile::tempdir().unwrap();
    azure.neardup_ok(&[
        "run",
        "--input",
        "az://lake/crawl/",
        "--output",
        "az://lake/out",
        "-q",
    ]);
    let local = dir.path().join("local");
    run_sample_locally(&local);

    let manifest = azure.get("lake", "out/_SUCCESS").expect("the manifest");
    let manifest: serde_json::Value = serde_json::from_slice(&manifest).unwrap();
    let run = manifest["run"]
        .as_str()
        .expect("the manifest names its run");
    let downloaded = dir.path().join("downloaded");
    azure.download("lake", &format!("out/{run}/"), &downloaded);
    assert_eq!(tables(&downloaded).await, tables(&local).await);
    // Only the manifest and the run's prefix are there.
    let keys = azure.keys("lake", "out/");
    let prefix = format!("out/{run}/");
    assert!(
        keys.iter()
            .all(|k| k == "out/_SUCCESS" || k.starts_with(&prefix)),
        "{keys:?}"
    );
}

#[test]
fn two_runs_committing_one_batch_on_azure_land_exactly_one() {
    let Some(azure) = Azurite::start("index race on azure") else {
        return;
    };
    azure.create_container("lake");
    let keys = || azure.keys("lake", "index/batch=000001/");
    two_runs_commit_batch_one(&azure.env(), "az://lake/index", keys);
}
