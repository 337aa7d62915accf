//! Durable file writes: the one way infergate replaces a file (results, baselines, reports,
//! verdicts, port files). A reader or a writer killed half-way never sees half a file, and a
//! power cut after the call returns does not lose the new contents: the body goes to a temp
//! file beside the target, is fsynced, renamed over the target, and the directory is fsynced.
//!
//! A leaf module: it imports nothing from the crate.

use std::io::Write;
use std::path::Path;

/// Writes `body` to `path` durably (temp file in the same directory, fsync, rename, fsync the
/// directory). The directory must exist; the temp file is removed when any step fails.
pub(crate) fn write_durable(path: &Path, body: &[u8]) -> std::io::Result<()> {
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let mut tmp = tempfile::Builder::new()
        .prefix(".tmp")
        .suffix(".partial")
        .tempfile_in(dir)?;
    tmp.write_all(body)?;
    tmp.as_file().sync_all()?;
    tmp.persist(path).map_err(|e| e.error)?;
    if let Ok(d) = std::fs::File::open(dir) {
        // Directory fsync makes the rename durable; not every filesystem supports it.
        let _ = d.sync_all();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_the_whole_file_and_leaves_no_temp_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.json");
        std::fs::write(&path, "old contents that are longer").unwrap();
        write_durable(&path, b"new").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "new");
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(names, ["out.json"]);
    }

    #[test]
    fn a_missing_directory_is_an_error_and_the_target_is_untouched() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("absent").join("out.json");
        assert!(write_durable(&path, b"x").is_err());
        assert!(!path.exists());
    }
}
