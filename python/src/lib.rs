//! `neardup._native`: what the Python package (`python/neardup/`) calls. The SQL functions
//! cross into datafusion-python as datafusion-ffi structs in PyCapsules; tables and arrays
//! cross into pyarrow through the Arrow C stream and data interfaces, also in PyCapsules.
//! The job is the CLI's own, parsed from the same flags.

use std::ffi::CString;
use std::path::PathBuf;
use std::sync::{Mutex, mpsc};
use std::time::Duration;

use clap::Parser;
use datafusion::arrow::array::{Array, RecordBatch, RecordBatchIterator};
use datafusion::arrow::ffi::{FFI_ArrowArray, FFI_ArrowSchema, to_ffi};
use datafusion::arrow::ffi_stream::FFI_ArrowArrayStream;
use neardup::udf::ffi::{FFI_AggregateUDF, FFI_ScalarUDF};
use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyRuntimeError};
use pyo3::prelude::*;
use pyo3::types::{PyCapsule, PyTuple};

create_exception!(
    _native,
    NeardupError,
    PyException,
    "The job or a query failed: bad input, an unreadable file, a store that refused."
);
create_exception!(
    _native,
    UsageError,
    NeardupError,
    "The options ask for something that cannot work (the CLI's exit code 2)."
);

fn to_python(error: neardup::Error) -> PyErr {
    match error {
        neardup::Error::Usage(message) => UsageError::new_err(message),
        other => NeardupError::new_err(other.to_string()),
    }
}

/// A runtime of `threads` worker threads (a job's `threads=`, as the CLI's `--threads`), or
/// one per core.
fn runtime(threads: Option<usize>) -> PyResult<tokio::runtime::Runtime> {
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    if let Some(threads) = threads {
        builder.worker_threads(threads);
    }
    builder
        .enable_all()
        .build()
        .map_err(|e| PyRuntimeError::new_err(format!("cannot start the async runtime: {e}")))
}

/// Runs `neardup <argv>` (`run` or `match`) and returns its summary as JSON. The job runs on a
/// thread of its own while this one, without the GIL, waits for it and for Ctrl-C: on
/// KeyboardInterrupt the job is dropped, which removes its staging folder, and nothing is
/// written.
#[pyfunction]
fn job(py: Python<'_>, argv: Vec<String>) -> PyResult<String> {
    let cli = neardup::cli::Cli::try_parse_from(std::iter::once("neardup".to_string()).chain(argv))
        .map_err(|e| UsageError::new_err(e.render().to_string().trim_end().to_string()))?;
    let runtime = runtime(cli.local_threads())?;
    let (cancel, cancelled) = tokio::sync::oneshot::channel::<()>();
    let (done, outcome) = mpsc::channel();
    let outcome = Mutex::new(outcome);
    let worker = std::thread::spawn(move || {
        let result = runtime.block_on(async {
            tokio::select! {
                summary = neardup::cli::job_summary(cli) => Some(summary),
                _ = cancelled => None,
            }
        });
        // Tasks still running (a writer's blocking I/O) end before the thread does.
        runtime.shutdown_timeout(Duration::from_secs(10));
        let _ = done.send(result);
    });
    loop {
        // detach() needs what it borrows to be Sync; the Mutex makes the receiver so.
        let waited = py.detach(|| {
            let outcome = outcome
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            outcome.recv_timeout(Duration::from_millis(100))
        });
        match waited {
            Ok(Some(Ok(summary))) => {
                return serde_json::to_string(&summary)
                    .map_err(|e| NeardupError::new_err(format!("the summary: {e}")));
            }
            Ok(Some(Err(error))) => return Err(to_python(error)),
            Ok(None) => return Err(NeardupError::new_err("the job was cancelled")),
            Err(mpsc::RecvTimeoutError::Timeout) => {
                if let Err(interrupt) = py.check_signals() {
                    // The job's future removes its staging folder when dropped; a task that
                    // was still writing may create it again until the runtime is shut down,
                    // so the folders are removed once more after the worker has ended.
                    let places = neardup::engine::staging::live_places();
                    let _ = cancel.send(());
                    py.detach(|| worker.join()).ok();
                    neardup::engine::staging::remove_places(&places);
                    return Err(interrupt);
                }
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                return Err(NeardupError::new_err(
                    "internal error, a bug in neardup; please report it: the job's thread ended \
                     without a result",
                ));
            }
        }
    }
}

/// The result of SQL over an output's tables (`data`) and an index's, as an Arrow stream.
#[pyfunction]
#[pyo3(signature = (sql, data=None, index=None, overwrite=false))]
fn query(
    py: Python<'_>,
    sql: String,
    data: Option<PathBuf>,
    index: Option<PathBuf>,
    overwrite: bool,
) -> PyResult<ArrowStream> {
    let runtime = runtime(None)?;
    let (schema, batches) = py
        .detach(|| {
            runtime.block_on(neardup::commands::query::query_batches(
                data.as_deref(),
                index.as_deref(),
                &sql,
                overwrite,
            ))
        })
        .map_err(to_python)?;
    let reader = RecordBatchIterator::new(batches.into_iter().map(Ok::<RecordBatch, _>), schema);
    Ok(ArrowStream {
        stream: Mutex::new(Some(FFI_ArrowArrayStream::new(Box::new(reader)))),
    })
}

/// The SimHash of each text, as `simhash(text, features)` computes it in SQL.
#[pyfunction]
#[pyo3(signature = (texts, features=String::new()))]
fn fingerprint(
    py: Python<'_>,
    texts: Vec<Option<String>>,
    features: String,
) -> PyResult<ArrowArray> {
    let array = py
        .detach(|| neardup::udf::fingerprints(texts.iter().map(Option::as_deref), &features))
        .map_err(|e| UsageError::new_err(e.strip_backtrace()))?;
    let (array, schema) = to_ffi(&array.to_data())
        .map_err(|e| NeardupError::new_err(format!("exporting the fingerprints: {e}")))?;
    Ok(ArrowArray {
        parts: Mutex::new(Some((schema, array))),
    })
}

/// What a read-once holder still holds.
fn take<T>(slot: &Mutex<Option<T>>) -> Option<T> {
    slot.lock().ok().and_then(|mut held| held.take())
}

/// An Arrow stream for `pyarrow.RecordBatchReader.from_stream` (read once).
#[pyclass(module = "neardup._native", frozen)]
struct ArrowStream {
    stream: Mutex<Option<FFI_ArrowArrayStream>>,
}

#[pymethods]
impl ArrowStream {
    #[pyo3(signature = (requested_schema=None))]
    fn __arrow_c_stream__<'py>(
        &self,
        py: Python<'py>,
        requested_schema: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyCapsule>> {
        let _ = requested_schema; // the schema is the query's own
        let stream = take(&self.stream)
            .ok_or_else(|| PyRuntimeError::new_err("this result was read already"))?;
        PyCapsule::new(py, stream, Some(CString::from(c"arrow_array_stream")))
    }
}

/// An Arrow array for `pyarrow.array` (read once).
#[pyclass(module = "neardup._native", frozen)]
struct ArrowArray {
    parts: Mutex<Option<(FFI_ArrowSchema, FFI_ArrowArray)>>,
}

#[pymethods]
impl ArrowArray {
    #[pyo3(signature = (requested_schema=None))]
    fn __arrow_c_array__<'py>(
        &self,
        py: Python<'py>,
        requested_schema: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyTuple>> {
        let _ = requested_schema; // the type is the fingerprint's own
        let (schema, array) = take(&self.parts)
            .ok_or_else(|| PyRuntimeError::new_err("this array was read already"))?;
        let schema = PyCapsule::new(py, schema, Some(CString::from(c"arrow_schema")))?;
        let array = PyCapsule::new(py, array, Some(CString::from(c"arrow_array")))?;
        PyTuple::new(py, [schema.into_any(), array.into_any()])
    }
}

/// One of neardup's scalar SQL functions, for `datafusion.udf` / `SessionContext.register_udf`.
#[pyclass(module = "neardup._native", frozen)]
struct ScalarFunction {
    udf: FFI_ScalarUDF,
}

#[pymethods]
impl ScalarFunction {
    #[getter]
    fn name(&self) -> String {
        self.udf.name.to_string()
    }

    fn __datafusion_scalar_udf__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyCapsule>> {
        PyCapsule::new(
            py,
            self.udf.clone(),
            Some(CString::from(c"datafusion_scalar_udf")),
        )
    }
}

/// One of neardup's aggregate SQL functions (`band_pairs`), for `datafusion.udaf`.
#[pyclass(module = "neardup._native", frozen)]
struct AggregateFunction {
    udaf: FFI_AggregateUDF,
}

#[pymethods]
impl AggregateFunction {
    #[getter]
    fn name(&self) -> String {
        self.udaf.name.to_string()
    }

    fn __datafusion_aggregate_udf__<'py>(
        &self,
        py: Python<'py>,
    ) -> PyResult<Bound<'py, PyCapsule>> {
        PyCapsule::new(
            py,
            self.udaf.clone(),
            Some(CString::from(c"datafusion_aggregate_udf")),
        )
    }
}

#[pyfunction]
fn scalar_functions() -> Vec<ScalarFunction> {
    neardup::udf::ffi::scalar_functions()
        .into_iter()
        .map(|udf| ScalarFunction { udf })
        .collect()
}

#[pyfunction]
fn aggregate_functions() -> Vec<AggregateFunction> {
    neardup::udf::ffi::aggregate_functions()
        .into_iter()
        .map(|udaf| AggregateFunction { udaf })
        .collect()
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("NeardupError", m.py().get_type::<NeardupError>())?;
    m.add("UsageError", m.py().get_type::<UsageError>())?;
    m.add("version", env!("CARGO_PKG_VERSION"))?;
    m.add_function(wrap_pyfunction!(job, m)?)?;
    m.add_function(wrap_pyfunction!(query, m)?)?;
    m.add_function(wrap_pyfunction!(fingerprint, m)?)?;
    m.add_function(wrap_pyfunction!(scalar_functions, m)?)?;
    m.add_function(wrap_pyfunction!(aggregate_functions, m)?)?;
    m.add_class::<ScalarFunction>()?;
    m.add_class::<AggregateFunction>()?;
    m.add_class::<ArrowStream>()?;
    m.add_class::<ArrowArray>()?;
    Ok(())
}
