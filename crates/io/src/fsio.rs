//! Durable file writes: the one way infergate replaces a file (results, baselines, reports,
//! verdicts, port files). A reader or a writer killed half-way never sees half a file, and a
//! power cut after the call returns does not lose the new contents: the body goes to a temp
//! file beside the target, is fsynced, renamed over the target, and the directory is fsynced.
//!
//! Bounded reads: the one way infergate reads a file someone else gave it (results, verdicts,
//! configs, store files). [`read_input`] refuses what is not a regular file (a FIFO would block
//! for ever, `/dev/zero` would fill the memory) and a file over [`MAX_INPUT_BYTES`], checked on
//! the opened file and again while reading (a file that grows): a 2 GiB file costs an error,
//! not 2 GB of memory.
//!
//! A leaf module: it imports nothing from the crate.

use std::io::{Read, Write};
use std::path::Path;

/// The most bytes infergate reads from one input file (256 MiB): a results file of the largest
/// matrix with every sample is a few MiB.
pub(crate) const MAX_INPUT_BYTES: u64 = 256 << 20;

/// The text of the input file `path`, read through [`read_bounded`] with [`MAX_INPUT_BYTES`].
/// The errors are `std::io::Error`s whose text says what is wrong and what to pass instead;
/// the caller names the file.
pub fn read_input(path: &Path) -> std::io::Result<String> {
    let bytes = read_bounded(path, MAX_INPUT_BYTES)?;
    String::from_utf8(bytes).map_err(|e| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!(
                "not UTF-8 text (byte {} is not); pass the text file infergate or the tool wrote",
                e.utf8_error().valid_up_to()
            ),
        )
    })
}

/// The bytes of the regular file `path`, at most `limit` of them: a FIFO, a device, a socket or
/// a directory is refused without blocking (opened non-blocking, its type checked on the open
/// file), and so is a file whose size is over `limit`, before any byte is read and again if it
/// grows while being read (the read stops at `limit + 1` bytes).
pub fn read_bounded(path: &Path, limit: u64) -> std::io::Result<Vec<u8>> {
    use std::io::{Error, ErrorKind};
    use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)?;
    let meta = file.metadata()?;
    let kind = meta.file_type();
    if !kind.is_file() {
        let what = [
            (kind.is_dir(), "a directory"),
            (kind.is_fifo(), "a FIFO (named pipe)"),
            (kind.is_char_device(), "a character device"),
            (kind.is_block_device(), "a block device"),
            (kind.is_socket(), "a socket"),
        ]
        .into_iter()
        .find_map(|(is, what)| is.then_some(what))
        .unwrap_or("not a regular file");
        return Err(Error::new(
            ErrorKind::InvalidInput,
            format!(
                "{what}, not a regular file; infergate reads its inputs from regular files only: pass the file itself"
            ),
        ));
    }
    let too_large = |size: &str| {
        Error::new(
            ErrorKind::InvalidData,
            format!(
                "{size}, over infergate's limit of {} for an input file; is it the right file? (results, verdicts and store files are a few MiB)",
                mib(limit)
            ),
        )
    };
    if meta.len() > limit {
        return Err(too_large(&mib(meta.len())));
    }
    let mut body = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    (&file)
        .take(limit.saturating_add(1))
        .read_to_end(&mut body)?;
    if body.len() as u64 > limit {
        return Err(too_large("it grew while being read"));
    }
    Ok(body)
}

/// `bytes` in MiB for messages (`256 MiB`, `2048.0 MiB`).
fn mib(bytes: u64) -> String {
    if bytes.is_multiple_of(1 << 20) {
        format!("{} MiB", bytes >> 20)
    } else {
        format!("{:.1} MiB", bytes as f64 / f64::from(1u32 << 20))
    }
}

/// Writes `body` to `path` durably (temp file in the same directory, fsync, rename, fsync the
/// directory). The directory must exist; the temp file is removed when any step fails.
///
/// The file is created with mode 0666 less the process umask, as `File::create` would: the
/// outputs are for the people and tools of the job to read, not secrets (a token never reaches
/// a file).
pub fn write_durable(path: &Path, body: &[u8]) -> std::io::Result<()> {
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
    fn a_fifo_a_device_and_a_directory_are_refused_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("results.json");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: mkfifo(3) on a NUL-terminated path this test owns.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        for (path, what) in [
            (fifo.as_path(), "a FIFO (named pipe)"),
            (Path::new("/dev/zero"), "a character device"),
            (dir.path(), "a directory"),
        ] {
            let e = read_input(path).unwrap_err().to_string();
            assert!(e.starts_with(what), "{}: {e}", path.display());
            assert!(e.contains("pass the file itself"), "{e}");
        }
    }

    #[test]
    fn a_sparse_2_gib_file_is_refused_before_a_byte_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("results.json");
        std::fs::File::create(&path)
            .unwrap()
            .set_len(2 << 30)
            .unwrap();
        let e = read_input(&path).unwrap_err().to_string();
        assert_eq!(
            e,
            "2048 MiB, over infergate's limit of 256 MiB for an input file; is it the right file? (results, verdicts and store files are a few MiB)"
        );
        // One byte over a limit is over; at the limit is read.
        std::fs::write(&path, b"12345").unwrap();
        assert!(read_bounded(&path, 4).is_err());
        assert_eq!(read_bounded(&path, 5).unwrap(), b"12345");
        assert_eq!(
            read_input(Path::new("/nonexistent/x.json"))
                .unwrap_err()
                .kind(),
            std::io::ErrorKind::NotFound
        );
    }

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
