//! What every command runs on: a DataFusion session in this process or on a Ballista cluster,
//! the runner of the SQL files in `sql/`, and outputs that appear whole or not at all.

pub mod ballista;
pub mod caught_panics;
pub mod client_pool;
pub mod cluster_access;
pub mod commit;
pub mod copy_leftovers;
pub mod on_demand;
pub mod page_locations;
pub mod parquet_writes;
pub mod partial_file;
pub mod row_slices;
pub mod session;
pub mod sql;
pub mod stages;
pub mod staging;
pub mod standalone;
pub mod task_cancel;
pub mod work_folder;
