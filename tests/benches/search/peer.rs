//! The numpy peer: the matrix and queries written as `.npy`, `tests/benches/search_peer.py`
//! run over them.

use std::io::Write as _;
use std::path::Path;

use serde_json::Value;

use super::{DEPTH, WARMUP};

pub(crate) fn write_npy(path: &Path, data: &[f32], rows: usize, cols: usize) {
    let mut header =
        format!("{{'descr': '<f4', 'fortran_order': False, 'shape': ({rows}, {cols}), }}");
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let f = std::fs::File::create(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut w = std::io::BufWriter::with_capacity(1 << 20, f);
    let mut out = Vec::with_capacity(10 + header.len());
    out.extend_from_slice(b"\x93NUMPY\x01\x00");
    out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    w.write_all(&out)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    for x in data {
        w.write_all(&x.to_le_bytes())
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    }
    w.flush()
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
}

/// The peer's python: `CAIRN_PEER_PYTHON` (the test command's peer environment, which has
/// numpy), else `/var/tmp/cairn-bench-venv`, else `python3`.
pub(crate) fn python() -> String {
    if let Some(p) = std::env::var("CAIRN_PEER_PYTHON")
        .ok()
        .filter(|p| !p.is_empty() && Path::new(p).exists())
    {
        return p;
    }
    let venv = "/var/tmp/cairn-bench-venv/bin/python";
    if Path::new(venv).exists() {
        venv.to_owned()
    } else {
        "python3".to_owned()
    }
}

/// Runs the peer script with `threads` BLAS threads; its JSON line, or why not.
pub(crate) fn run_peer(
    py: &str,
    matrix: &Path,
    queries: &Path,
    threads: usize,
) -> Result<Value, String> {
    let script = cairn_tests::repo_root().join("tests/benches/search_peer.py");
    let t = threads.to_string();
    let out = std::process::Command::new(py)
        .arg(&script)
        .arg(matrix)
        .arg(queries)
        .arg(DEPTH.to_string())
        .arg(WARMUP.to_string())
        .env("OPENBLAS_NUM_THREADS", &t)
        .env("OMP_NUM_THREADS", &t)
        .env("MKL_NUM_THREADS", &t)
        .output()
        .map_err(|e| format!("cannot run {py}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{py} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    let last = stdout.lines().last().unwrap_or_default();
    serde_json::from_str(last).map_err(|e| format!("peer printed {last:?}: {e}"))
}
