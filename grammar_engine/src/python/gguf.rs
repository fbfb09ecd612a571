//! `read_gguf_metadata`: a GGUF file's header as a Python dict.

use std::collections::BTreeMap;
use std::path::PathBuf;

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString};

use super::errors::run;
use crate::vocab::gguf::{self, GgufValue};

/// Reads the metadata of a GGUF file's header into a dict (arrays become lists).
#[pyfunction]
pub(super) fn read_gguf_metadata<'py>(py: Python<'py>, path: PathBuf) -> PyResult<Bound<'py, PyDict>> {
    let meta: BTreeMap<String, GgufValue> = run(py, move || gguf::read_metadata(&path))?;
    let out = PyDict::new(py);
    for (k, v) in &meta {
        out.set_item(k, gguf_to_py(py, v)?)?;
    }
    Ok(out)
}

fn gguf_to_py<'py>(py: Python<'py>, v: &GgufValue) -> PyResult<Bound<'py, PyAny>> {
    Ok(match v {
        GgufValue::Uint(x) => x.into_pyobject(py)?.into_any(),
        GgufValue::Int(x) => x.into_pyobject(py)?.into_any(),
        GgufValue::Float(x) => x.into_pyobject(py)?.into_any(),
        GgufValue::Bool(x) => pyo3::types::PyBool::new(py, *x).to_owned().into_any(),
        GgufValue::Str(s) => PyString::new(py, s).into_any(),
        GgufValue::Array(items) => {
            let list = PyList::empty(py);
            for item in items {
                list.append(gguf_to_py(py, item)?)?;
            }
            list.into_any()
        }
    })
}
