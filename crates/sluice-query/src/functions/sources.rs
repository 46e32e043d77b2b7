//! The built-ins that make streams and name files:
//! - `iota(m, n)`: the integers `m` to `n`, both included (none if `m > n`).
//! - `gen_array(bytes, count)`: `count` byte arrays of `bytes` bytes each, the load of the
//!   paper's bandwidth queries. The arrays are copies of one pattern made once (byte `i` is
//!   `i mod 251`), so making them costs a copy, not a computation. At most 1 GiB an array.
//! - `receiver(name)`: a stream of real arrays. `name` is a generator or a file:
//!   - `'sine:N'` or `'sine:N:COUNT'`: arrays of `N` samples (at most [`MAX_SIGNAL_SAMPLES`]),
//!     array `k` (from 0) holding
//!     `sin(2 pi (k + 1) j / N)` for `j = 0 .. N`; `COUNT` arrays, or no end without it;
//!   - `'noise:N'` or `'noise:N:COUNT'`: the same shape, samples uniform in `[-1, 1)` from a
//!     fixed seed (the same arrays every run);
//!   - `'signal'`: `'sine:1024'`, an endless signal;
//!   - anything else is a file path: one array a line, its numbers separated by white space;
//!     empty lines and lines starting with `#` are skipped. (Write `./signal` for a file
//!     named like a generator.)
//! - `grep(pattern, file)`: the lines of the file (without their line ends) that contain a
//!   match of the pattern, a regular expression in the syntax of the Rust `regex` crate (a
//!   plain word matches itself). Bytes that are not UTF-8 are read as U+FFFD.
//! - `filename(i)`: the `i`-th name (from 1) of the file table, for the paper's mapreduce
//!   query `grep("pattern", filename(i))`. The environment variable `SLUICE_FILENAMES` names
//!   the table: a directory (its entries, sorted by name) or a file of names, one a line
//!   (empty lines skipped; a relative name is taken from the table file's directory). The
//!   variable is read at each call, in the process that evaluates it, and is inherited by
//!   the stream processes a query starts.
//!
//! A file that cannot be opened is an error when the generator is made, a line that cannot be
//! read or parsed, or longer than [`MAX_LINE_BYTES`], one when it is reached.

use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

use regex::Regex;

use super::{eval_error, integer_argument, string_argument};
use crate::stage::{EvalError, Generator};
use crate::value::Value;

/// The environment variable that names the table of `filename(i)`.
pub const FILE_TABLE_VARIABLE: &str = "SLUICE_FILENAMES";

/// The largest array `gen_array` makes: 1 GiB.
pub const MAX_GEN_ARRAY_BYTES: i64 = 1 << 30;

/// The most samples of an array a generator `receiver` makes: 2^27, 1 GiB of reals, as
/// `gen_array`'s largest array.
pub const MAX_SIGNAL_SAMPLES: usize = 1 << 27;

/// The longest line `grep` and a file `receiver` read, its line end included: 64 MiB. A line
/// is read whole into memory; a longer one (a file without line ends, `/dev/zero`) is an error
/// naming the file and the line.
pub const MAX_LINE_BYTES: usize = 64 << 20;

/// `iota(m, n)`.
pub fn iota(args: &[Value]) -> Result<Box<dyn Generator>, EvalError> {
    let first = integer_argument("iota", args.first(), 1)?;
    let last = integer_argument("iota", args.get(1), 2)?;
    Ok(Box::new(Iota {
        next: Some(first).filter(|first| *first <= last),
        last,
    }))
}

/// The stream of `iota`: `next` is `None` once `last` was given.
struct Iota {
    next: Option<i64>,
    last: i64,
}

impl Generator for Iota {
    fn next(&mut self) -> Option<Result<Value, EvalError>> {
        let current = self.next?;
        self.next = current.checked_add(1).filter(|next| *next <= self.last);
        Some(Ok(Value::Integer(current)))
    }

    fn skip(&mut self, count: u64) -> Result<(), EvalError> {
        self.next = self.next.and_then(|next| {
            i64::try_from(count)
                .ok()
                .and_then(|count| next.checked_add(count))
                .filter(|next| *next <= self.last)
        });
        Ok(())
    }
}

/// `gen_array(bytes, count)`.
pub fn gen_array(args: &[Value]) -> Result<Box<dyn Generator>, EvalError> {
    let bytes = integer_argument("gen_array", args.first(), 1)?;
    let count = integer_argument("gen_array", args.get(1), 2)?;
    if !(0..=MAX_GEN_ARRAY_BYTES).contains(&bytes) {
        return Err(eval_error(
            "gen_array",
            format!("an array of {bytes} bytes: the size must be from 0 to {MAX_GEN_ARRAY_BYTES}"),
        ));
    }
    let Ok(remaining) = u64::try_from(count) else {
        return Err(eval_error(
            "gen_array",
            format!("the count must not be negative, not {count}"),
        ));
    };
    let pattern = (0..bytes).map(|i| (i % 251) as u8).collect();
    Ok(Box::new(GenArray { pattern, remaining }))
}

/// The stream of `gen_array`: copies of `pattern`, the last one the pattern itself.
struct GenArray {
    pattern: Vec<u8>,
    remaining: u64,
}

impl Generator for GenArray {
    fn next(&mut self) -> Option<Result<Value, EvalError>> {
        self.remaining = self.remaining.checked_sub(1)?;
        let array = if self.remaining == 0 {
            std::mem::take(&mut self.pattern)
        } else {
            self.pattern.clone()
        };
        Some(Ok(Value::Bytes(array)))
    }

    fn skip(&mut self, count: u64) -> Result<(), EvalError> {
        self.remaining = self.remaining.saturating_sub(count);
        Ok(())
    }
}

/// The lines of a file, numbered from 1, read as they are asked for.
struct Lines {
    function: &'static str,
    path: String,
    reader: BufReader<File>,
    number: usize,
    buffer: Vec<u8>,
}

impl Lines {
    fn open(function: &'static str, path: &str) -> Result<Self, EvalError> {
        let file = File::open(path)
            .map_err(|error| eval_error(function, format!("cannot open '{path}': {error}")))?;
        Ok(Self {
            function,
            path: path.to_string(),
            reader: BufReader::new(file),
            number: 0,
            buffer: Vec::new(),
        })
    }

    /// The next line without its line end, and its number.
    fn next_line(&mut self) -> Option<Result<(usize, String), EvalError>> {
        self.buffer.clear();
        let limit = MAX_LINE_BYTES as u64 + 1;
        let read = Read::by_ref(&mut self.reader)
            .take(limit)
            .read_until(b'\n', &mut self.buffer);
        match read {
            Ok(0) => None,
            Ok(_) if self.buffer.len() > MAX_LINE_BYTES && self.buffer.last() != Some(&b'\n') => {
                Some(Err(eval_error(
                    self.function,
                    format!(
                        "'{}' line {}: longer than {MAX_LINE_BYTES} bytes, the limit of a line",
                        self.path,
                        self.number + 1
                    ),
                )))
            }
            Ok(_) => {
                self.number += 1;
                let line = String::from_utf8_lossy(&self.buffer);
                let line = line.trim_end_matches(['\n', '\r']).to_string();
                Some(Ok((self.number, line)))
            }
            Err(error) => Some(Err(eval_error(
                self.function,
                format!("cannot read '{}': {error}", self.path),
            ))),
        }
    }
}

/// `grep(pattern, file)`.
pub fn grep(args: &[Value]) -> Result<Box<dyn Generator>, EvalError> {
    let pattern = string_argument("grep", args.first(), 1)?;
    let path = string_argument("grep", args.get(1), 2)?;
    let pattern =
        Regex::new(pattern).map_err(|error| eval_error("grep", format!("bad pattern: {error}")))?;
    Ok(Box::new(Grep {
        pattern,
        lines: Lines::open("grep", path)?,
    }))
}

/// The stream of `grep`.
struct Grep {
    pattern: Regex,
    lines: Lines,
}

impl Generator for Grep {
    fn next(&mut self) -> Option<Result<Value, EvalError>> {
        loop {
            match self.lines.next_line()? {
                Ok((_, line)) if self.pattern.is_match(&line) => {
                    return Some(Ok(Value::String(line)))
                }
                Ok(_) => {}
                Err(error) => return Some(Err(error)),
            }
        }
    }
}

/// Whether the generator `name` called with `args` makes the same elements when it is made
/// again, as a stream process resumed from a checkpoint needs: every generator does but one
/// that reads a file that is not a regular file (a pipe, a socket, a terminal, `/dev/stdin`),
/// whose lines come once. A file that does not exist replays: it fails when it is opened.
pub fn replays(name: &str, args: &[Value]) -> bool {
    let file = if name.eq_ignore_ascii_case("grep") {
        args.get(1)
    } else if name.eq_ignore_ascii_case("receiver") {
        args.first()
            .filter(|a| matches!(a, Value::String(s) if matches!(SignalSpec::parse(s), Ok(None))))
    } else {
        None
    };
    match file {
        Some(Value::String(path)) => std::fs::metadata(path).map_or(true, |m| m.is_file()),
        _ => true,
    }
}

/// `receiver(name)`.
pub fn receiver(args: &[Value]) -> Result<Box<dyn Generator>, EvalError> {
    let name = string_argument("receiver", args.first(), 1)?;
    match SignalSpec::parse(name)? {
        Some(spec) => Ok(Box::new(SignalGenerator {
            spec,
            made: 0,
            noise: NOISE_SEED,
        })),
        None => Ok(Box::new(ArrayFile {
            lines: Lines::open("receiver", name)?,
        })),
    }
}

/// The shape of a generated signal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Waveform {
    Sine,
    Noise,
}

/// A generated signal: `length` samples an array, `count` arrays (no end if `None`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct SignalSpec {
    waveform: Waveform,
    length: usize,
    count: Option<u64>,
}

impl SignalSpec {
    /// The generator `name` names, `None` if it names a file.
    fn parse(name: &str) -> Result<Option<Self>, EvalError> {
        if name == "signal" {
            return Ok(Some(Self {
                waveform: Waveform::Sine,
                length: 1024,
                count: None,
            }));
        }
        let mut parts = name.split(':');
        let waveform = match parts.next() {
            Some("sine") => Waveform::Sine,
            Some("noise") => Waveform::Noise,
            _ => return Ok(None),
        };
        let bad = || {
            eval_error(
                "receiver",
                format!(
                    "bad generator '{name}': write 'sine:N', 'sine:N:COUNT', 'noise:N' or \
                     'noise:N:COUNT' with N at least 1"
                ),
            )
        };
        let length: usize = parts.next().and_then(|n| n.parse().ok()).ok_or_else(bad)?;
        let count = parts
            .next()
            .map(|count| count.parse::<u64>().map_err(|_| bad()))
            .transpose()?;
        if length == 0 || parts.next().is_some() {
            return Err(bad());
        }
        if length > MAX_SIGNAL_SAMPLES {
            return Err(eval_error(
                "receiver",
                format!(
                    "'{name}': arrays of {length} samples, over the limit of \
                     {MAX_SIGNAL_SAMPLES} (1 GiB of reals)"
                ),
            ));
        }
        Ok(Some(Self {
            waveform,
            length,
            count,
        }))
    }
}

const NOISE_SEED: u64 = 0x9E37_79B9_7F4A_7C15;

/// The stream of a generator `receiver`.
struct SignalGenerator {
    spec: SignalSpec,
    made: u64,
    /// The state of the xorshift generator of `noise`.
    noise: u64,
}

impl SignalGenerator {
    fn noise_sample(&mut self) -> f64 {
        self.noise ^= self.noise << 13;
        self.noise ^= self.noise >> 7;
        self.noise ^= self.noise << 17;
        (self.noise >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
    }
}

impl Generator for SignalGenerator {
    fn next(&mut self) -> Option<Result<Value, EvalError>> {
        if self.spec.count.is_some_and(|count| self.made >= count) {
            return None;
        }
        let n = self.spec.length;
        let samples = match self.spec.waveform {
            Waveform::Sine => {
                let frequency = (self.made + 1) as f64;
                (0..n)
                    .map(|j| (2.0 * std::f64::consts::PI * frequency * j as f64 / n as f64).sin())
                    .collect()
            }
            Waveform::Noise => (0..n).map(|_| self.noise_sample()).collect(),
        };
        self.made += 1;
        Some(Ok(Value::Array(samples)))
    }
}

/// The stream of a file `receiver`.
struct ArrayFile {
    lines: Lines,
}

impl Generator for ArrayFile {
    fn next(&mut self) -> Option<Result<Value, EvalError>> {
        loop {
            let (number, line) = match self.lines.next_line()? {
                Ok(line) => line,
                Err(error) => return Some(Err(error)),
            };
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let numbers: Result<Vec<f64>, EvalError> = line
                .split_whitespace()
                .map(|word| {
                    word.parse::<f64>().map_err(|_| {
                        eval_error(
                            "receiver",
                            format!(
                                "{} line {number}: '{word}' is not a number",
                                self.lines.path
                            ),
                        )
                    })
                })
                .collect();
            return Some(numbers.map(Value::Array));
        }
    }
}

/// `filename(i)`.
pub fn filename(args: &[Value]) -> Result<Value, EvalError> {
    let i = integer_argument("filename", args.first(), 1)?;
    let Some(table) = std::env::var_os(FILE_TABLE_VARIABLE) else {
        return Err(eval_error(
            "filename",
            format!("no file table: set {FILE_TABLE_VARIABLE} to a directory or a file of names"),
        ));
    };
    let table = PathBuf::from(table);
    let names = file_table(&table)?;
    let name = usize::try_from(i)
        .ok()
        .and_then(|i| i.checked_sub(1))
        .and_then(|index| names.get(index));
    match name {
        Some(name) => Ok(Value::String(name.to_string_lossy().into_owned())),
        None => Err(eval_error(
            "filename",
            format!(
                "no name {i} in the table {} (it has names 1 to {})",
                table.display(),
                names.len()
            ),
        )),
    }
}

/// The names of the file table at `table`, a directory or a file of names.
fn file_table(table: &Path) -> Result<Vec<PathBuf>, EvalError> {
    let unreadable = |error: std::io::Error| {
        eval_error(
            "filename",
            format!("cannot read the table {}: {error}", table.display()),
        )
    };
    if table.is_dir() {
        let mut names = std::fs::read_dir(table)
            .map_err(unreadable)?
            .map(|entry| entry.map(|entry| entry.path()))
            .collect::<Result<Vec<_>, _>>()
            .map_err(unreadable)?;
        names.sort();
        return Ok(names);
    }
    let text = std::fs::read_to_string(table).map_err(unreadable)?;
    let base = table.parent().unwrap_or(Path::new(""));
    Ok(text
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty())
        .map(|line| base.join(line))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::functions::collect_finite;

    fn all(generator: Box<dyn Generator>) -> Vec<Value> {
        collect_finite("test", generator, 1000).unwrap()
    }

    fn strings(values: &[&str]) -> Vec<Value> {
        values
            .iter()
            .map(|v| Value::String(v.to_string()))
            .collect()
    }

    #[test]
    fn iota_counts_both_ends_and_may_be_empty() {
        let iota_of = |m, n| all(iota(&[Value::Integer(m), Value::Integer(n)]).unwrap());
        assert_eq!(
            iota_of(2, 4),
            (2..=4).map(Value::Integer).collect::<Vec<_>>()
        );
        assert_eq!(iota_of(3, 2), vec![]);
        assert_eq!(
            iota_of(i64::MAX - 1, i64::MAX),
            vec![Value::Integer(i64::MAX - 1), Value::Integer(i64::MAX)]
        );
    }

    #[test]
    fn gen_array_makes_count_arrays_of_the_size() {
        let arrays = all(gen_array(&[Value::Integer(300), Value::Integer(3)]).unwrap());
        assert_eq!(arrays.len(), 3);
        for array in arrays {
            let Value::Bytes(bytes) = array else {
                panic!("not bytes: {array:?}")
            };
            assert_eq!(bytes.len(), 300);
            assert_eq!((bytes[0], bytes[252]), (0, 1));
        }
        let refused = gen_array(&[Value::Integer(-1), Value::Integer(3)]);
        assert!(refused.err().unwrap().message.contains("from 0 to"));
    }

    #[test]
    fn receiver_generators_are_deterministic_and_their_names_checked() {
        let sine = all(receiver(&[Value::String("sine:4:2".into())]).unwrap());
        assert_eq!(sine.len(), 2);
        let Value::Array(first) = &sine[0] else {
            panic!("not an array")
        };
        let expected = [0.0, 1.0, 0.0, -1.0];
        assert!(first
            .iter()
            .zip(expected)
            .all(|(a, b)| (a - b).abs() < 1e-12));
        let noise = || all(receiver(&[Value::String("noise:8:3".into())]).unwrap());
        assert_eq!(noise(), noise());
        assert_eq!(noise().len(), 3);
        for bad in ["sine:0", "sine:x", "noise:4:2:1", "sine:4:-1"] {
            let error = receiver(&[Value::String(bad.into())]).err().unwrap();
            assert!(error.message.contains("bad generator"), "{bad}: {error}");
        }
    }

    #[test]
    fn receiver_reads_a_file_of_arrays_and_names_a_bad_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("signal.txt");
        std::fs::write(&path, "# two arrays\n1 2.5 -3\n\n4e1\nx 1\n").unwrap();
        let path = path.to_str().unwrap().to_string();
        let mut arrays = receiver(&[Value::String(path.clone())]).unwrap();
        assert_eq!(arrays.next(), Some(Ok(Value::Array(vec![1.0, 2.5, -3.0]))));
        assert_eq!(arrays.next(), Some(Ok(Value::Array(vec![40.0]))));
        let error = arrays.next().unwrap().unwrap_err();
        assert_eq!(
            error.to_string(),
            format!("receiver: {path} line 5: 'x' is not a number")
        );
        let missing = receiver(&[Value::String("/nonexistent/signal".into())]);
        assert!(missing.err().unwrap().message.contains("cannot open"));
    }

    #[test]
    fn grep_gives_the_matching_lines() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("text");
        std::fs::write(&path, "a pattern\nnothing\r\npatterns too\nPATTERN\n").unwrap();
        let file = Value::String(path.to_str().unwrap().into());
        let grep_of =
            |pattern: &str| all(grep(&[Value::String(pattern.into()), file.clone()]).unwrap());
        assert_eq!(grep_of("pattern"), strings(&["a pattern", "patterns too"]));
        assert_eq!(grep_of("^n.*g$"), strings(&["nothing"]));
        let bad = grep(&[Value::String("(".into()), file]).err().unwrap();
        assert!(bad.message.starts_with("bad pattern"), "{bad}");
    }

    #[test]
    fn a_signal_larger_than_the_limit_is_refused_before_it_is_made() {
        let error = receiver(&[Value::String("sine:100000000000:1".into())])
            .err()
            .unwrap();
        assert_eq!(
            error.to_string(),
            "receiver: 'sine:100000000000:1': arrays of 100000000000 samples, over the limit of \
             134217728 (1 GiB of reals)"
        );
    }

    #[test]
    fn a_line_without_end_is_refused_at_the_limit() {
        for function in [receiver as fn(&[Value]) -> _, |args: &[Value]| {
            grep(&[Value::String("a".into()), args[0].clone()])
        }] {
            let mut lines = function(&[Value::String("/dev/zero".into())]).unwrap();
            let error = lines.next().unwrap().unwrap_err();
            assert!(
                error.message.ends_with(
                    "'/dev/zero' line 1: longer than 67108864 bytes, the limit of a line"
                ),
                "{error}"
            );
        }
    }

    #[test]
    fn filename_looks_names_up_in_the_table_the_variable_names() {
        let dir = tempfile::tempdir().unwrap();
        let table = dir.path().join("names");
        std::fs::write(&table, "first\nsecond\n").unwrap();
        // The only test that reads the variable, so setting it races with nothing.
        std::env::set_var(FILE_TABLE_VARIABLE, &table);
        let second = filename(&[Value::Integer(2)]);
        let third = filename(&[Value::Integer(3)]);
        std::env::remove_var(FILE_TABLE_VARIABLE);
        let missing = filename(&[Value::Integer(1)]);
        let expected = dir.path().join("second").to_str().unwrap().to_string();
        assert_eq!(second, Ok(Value::String(expected)));
        assert!(third.unwrap_err().message.contains("no name 3"));
        assert!(missing.unwrap_err().message.contains("no file table"));
    }

    #[test]
    fn file_tables_are_directories_or_files_of_names() {
        let dir = tempfile::tempdir().unwrap();
        for name in ["b", "a", "c"] {
            std::fs::write(dir.path().join(name), name).unwrap();
        }
        assert_eq!(file_table(dir.path()).unwrap()[0], dir.path().join("a"));
        let table = dir.path().join("a");
        std::fs::write(&table, "x.txt\n\n/abs/y.txt\n").unwrap();
        assert_eq!(
            file_table(&table).unwrap(),
            vec![dir.path().join("x.txt"), PathBuf::from("/abs/y.txt")]
        );
    }
}
