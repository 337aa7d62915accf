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
///
/// The file is created with mode 0666 less the process umask, as `File::create` would: the
/// outputs are for the people and tools of the job to read, not secrets (a token never reaches
/// a file).
pub(crate) fn write_durable(path: &Path, body: &[u8]) -> std::io::Result<()> {
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let mut builder = tempfile::Builder::new();
    builder.prefix(".tmp").suffix(".partial");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        // Passed to open(2), which applies the umask.
        builder.permissions(std::fs::Permissions::from_mode(0o666));
    }
    let mut tmp = builder.tempfile_in(dir)?;
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

    #[cfg(unix)]
    #[test]
    fn the_file_mode_follows_the_umask() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.json");
        write_durable(&path, b"x").unwrap();
        // The umask cannot be read without setting it (a process-wide race in a test binary):
        // compare with what File::create gives under the same umask.
        let probe = dir.path().join("probe");
        std::fs::File::create(&probe).unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&path), mode(&probe));
    }

    #[test]
    fn a_missing_directory_is_an_error_and_the_target_is_untouched() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("absent").join("out.json");
        assert!(write_durable(&path, b"x").is_err());
        assert!(!path.exists());
    }
}
