//! A user's data decides how large a tuple is, not the plan: WordCount counts the same words
//! under every plan whatever the length of a line, from an empty line to one of 50 MB, across
//! the transports' slot sizes (1 KiB for shm-vega, half of 1 MiB for shm-osr, 64 KiB for a tcp
//! record between hosts).

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

/// A line of about `len` bytes: words of one letter `a`-`j` repeated `1..=longest` times, drawn
/// from a fixed pseudo-random sequence seeded by `seed`, separated by single spaces.
fn line(len: usize, longest: u64, seed: u64) -> String {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let mut line = String::with_capacity(len + 8);
    while line.len() < len {
        if !line.is_empty() {
            line.push(' ');
        }
        let letter = (b'a' + (next() % 10) as u8) as char;
        line.extend(std::iter::repeat_n(letter, 1 + (next() % longest) as usize));
    }
    line
}

/// The counts of the words of `text`, computed directly.
fn direct_counts(text: &str) -> BTreeMap<String, u64> {
    let mut counts = BTreeMap::new();
    for word in text.split_ascii_whitespace() {
        *counts.entry(word.to_owned()).or_insert(0) += 1;
    }
    counts
}

/// Runs WordCount on `input` under `plan` (with `extra` arguments) and returns the counts it
/// wrote.
fn wordcount(dir: &Path, input: &Path, plan: &str, extra: &[&str]) -> BTreeMap<String, u64> {
    let output = dir.join(format!("{plan}.tsv"));
    let o = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["run", "wordcount", "--plan", plan, "--input"])
        .arg(input)
        .arg("--output")
        .arg(&output)
        .args(extra)
        .output()
        .expect("sluice runs");
    assert!(
        o.status.success(),
        "{plan}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    std::fs::read_to_string(&output)
        .unwrap()
        .lines()
        .map(|l| {
            let (word, count) = l.split_once('\t').expect("word<TAB>count");
            (word.to_owned(), count.parse().expect("a count"))
        })
        .collect()
}

#[test]
fn lines_of_every_size_give_the_same_counts_under_every_plan() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.txt");
    // Around shm-vega's 1 KiB slot, the 2,009-byte line of the issue, and beyond shm-osr's
    // half-megabyte record.
    let lens = [0, 3, 1023, 1024, 1025, 2009, 600_000, 1_500_000, 0, 7];
    let text: String = lens
        .iter()
        .enumerate()
        .map(|(i, &len)| line(len, 6, i as u64) + "\n")
        .collect();
    std::fs::write(&input, &text).unwrap();
    let expected = direct_counts(&text);
    for plan in [
        "fused",
        "threaded",
        "processes",
        "two-threads",
        "two-processes",
    ] {
        assert!(
            wordcount(dir.path(), &input, plan, &[]) == expected,
            "{plan}: the counts differ from a direct count"
        );
    }
    // Two hosts on loopback: the edges between them are tcp.
    let hosts = dir.path().join("hosts.toml");
    std::fs::write(
        &hosts,
        "[[host]]\nname = \"a\"\naddress = \"127.0.0.1\"\ncores = 2\n\n\
         [[host]]\nname = \"b\"\naddress = \"127.0.0.1\"\ncores = 2\n",
    )
    .unwrap();
    assert!(
        wordcount(
            dir.path(),
            &input,
            "processes",
            &["--hosts", hosts.to_str().unwrap()]
        ) == expected,
        "two hosts: the counts differ from a direct count"
    );
}

/// Its words are up to 8,000 bytes long, beyond shm-vega's slot too; few enough (about 12,000)
/// that an unoptimized test build counts them in seconds.
#[test]
fn a_line_of_50_megabytes_crosses_processes() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.txt");
    let text = line(50_000_000, 8000, 99) + "\n";
    std::fs::write(&input, &text).unwrap();
    assert!(
        wordcount(dir.path(), &input, "processes", &[]) == direct_counts(&text),
        "the counts differ from a direct count"
    );
}
