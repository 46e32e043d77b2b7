//! What the tests that run jobs of processes share: killing a PE of a running job, and an
//! input for WordCount.
// Each test binary includes this module and uses a part of it.
#![allow(dead_code)]

use std::path::Path;
use std::process::{Child, Command, Output};
use std::time::{Duration, Instant};

/// SIGKILLs `victim`, a PE of the job `launcher` runs, and waits for the job to end (at most
/// 100 s from `started`, which would be a hang); returns the launcher's output, after checking
/// that it failed.
pub fn kill_pe_and_wait(launcher: Child, victim: u32, started: Instant) -> Output {
    assert!(Command::new("kill")
        .args(["-KILL", &victim.to_string()])
        .status()
        .unwrap()
        .success());
    let o = launcher.wait_with_output().unwrap();
    assert!(started.elapsed() < Duration::from_secs(100), "no hang");
    assert!(!o.status.success());
    o
}

/// Writes `lines` lines of 0 to 10 words, drawn from 211 (`w0` to `w210`), for WordCount.
pub fn write_wordcount_input(path: &Path, lines: u64) {
    let mut text = String::new();
    for i in 0..lines {
        let words: Vec<String> = (0..(i % 11))
            .map(|k| format!("w{}", (i * 13 + k * 17) % 211))
            .collect();
        text.push_str(&words.join(" "));
        text.push('\n');
    }
    std::fs::write(path, text).unwrap();
}
