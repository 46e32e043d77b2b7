//! What the tests that kill a PE of a running job share.

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
