//! A user's data decides how large a tuple is, not the plan: WordCount counts the same words
//! under every plan whatever the length of a line, from an empty line to one of 50 MB, across
//! the transports' slot sizes (1 KiB for shm-vega, half of 1 MiB for shm-osr, 64 KiB for a tcp
//! record between hosts).

mod common;

use common::{direct_counts, line, wordcount};

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
