//! Reading a file a user names as a job's description (a plan, hosts or configuration file,
//! a query, a profile): the whole file into memory, so it is bounded by
//! [`MAX_TEXT_FILE_BYTES`]. A larger file, or one that never ends (`--plan /dev/zero`), is
//! refused with its size and the limit once that many bytes were read, never read until
//! memory runs out.

use std::io::{self, Read};
use std::path::Path;

/// The largest description file Sluice reads: 16 MiB, far more than any plan or query needs.
pub const MAX_TEXT_FILE_BYTES: u64 = 16 << 20;

/// The text of the file at `path`, refused (`InvalidData`, naming the size and the limit) past
/// [`MAX_TEXT_FILE_BYTES`] bytes or when it is not UTF-8.
pub fn read_text_file(path: &Path) -> io::Result<String> {
    let file = std::fs::File::open(path)?;
    let too_large = |size: String| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("it has {size} bytes, over the limit of {MAX_TEXT_FILE_BYTES}"),
        )
    };
    let meta = file.metadata()?;
    if meta.is_file() && meta.len() > MAX_TEXT_FILE_BYTES {
        return Err(too_large(meta.len().to_string()));
    }
    let mut bytes = Vec::new();
    file.take(MAX_TEXT_FILE_BYTES + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > MAX_TEXT_FILE_BYTES {
        return Err(too_large(format!("more than {MAX_TEXT_FILE_BYTES}")));
    }
    String::from_utf8(bytes).map_err(|e| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "it is not UTF-8 (at byte offset {})",
                e.utf8_error().valid_up_to()
            ),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_endless_file_is_refused_at_the_limit() {
        let error = read_text_file(Path::new("/dev/zero")).unwrap_err();
        assert_eq!(
            error.to_string(),
            "it has more than 16777216 bytes, over the limit of 16777216"
        );
    }

    #[test]
    fn a_large_file_is_refused_with_its_size_and_a_small_one_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("plan.toml");
        let file = std::fs::File::create(&path).unwrap();
        file.set_len(MAX_TEXT_FILE_BYTES + 1).unwrap();
        let error = read_text_file(&path).unwrap_err();
        assert_eq!(
            error.to_string(),
            "it has 16777217 bytes, over the limit of 16777216"
        );
        std::fs::write(&path, "[plan]\n").unwrap();
        assert_eq!(read_text_file(&path).unwrap(), "[plan]\n");
        std::fs::write(&path, b"a\xff").unwrap();
        let error = read_text_file(&path).unwrap_err();
        assert_eq!(error.to_string(), "it is not UTF-8 (at byte offset 1)");
    }
}
