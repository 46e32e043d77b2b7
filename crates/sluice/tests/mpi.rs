//! `--launcher mpi`: the PEs of a job run as the ranks of Open MPI's mpirun. Skips, saying so,
//! where mpirun is not installed.

mod common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn have_mpirun() -> bool {
    let found = Command::new("mpirun")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !found {
        eprintln!("skipped: mpirun is not installed (Debian: apt-get install openmpi-bin)");
    }
    found
}

/// Three PEs: ingest (source and split), count, write.
const THREE_PES: &str = r#"
[[thread]]
name = "read"
pe = "ingest"
operators = ["sentences", "split"]
[[thread]]
name = "count"
pe = "count"
operators = ["sum"]
[[thread]]
name = "write"
pe = "write"
operators = ["counts"]
"#;

#[test]
fn wordcount_on_three_mpi_ranks_matches_one_thread() {
    if !have_mpirun() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (input, plan) = (dir.path().join("in.txt"), dir.path().join("three.toml"));
    let text: String = (0..1500u64)
        .map(|i| {
            let words: Vec<String> = (0..i % 9)
                .map(|k| format!("m{}", (i + k * 5) % 97))
                .collect();
            words.join(" ") + "\n"
        })
        .collect();
    std::fs::write(&input, text).unwrap();
    std::fs::write(&plan, THREE_PES).unwrap();
    let mut outputs = Vec::new();
    for extra in [
        vec!["--plan", "fused"],
        vec!["--plan", plan.to_str().unwrap(), "--launcher", "mpi"],
    ] {
        let output = dir.path().join(format!("out{}.tsv", outputs.len()));
        let o = Command::new(env!("CARGO_BIN_EXE_sluice"))
            .args(["run", "wordcount", "--input", input.to_str().unwrap()])
            .args(["--output", output.to_str().unwrap()])
            .args(&extra)
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "{extra:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        outputs.push(std::fs::read_to_string(&output).unwrap());
    }
    assert_eq!(outputs[0].lines().count(), 97);
    assert_eq!(outputs[0], outputs[1]);
}

#[test]
fn a_killed_rank_stops_the_mpi_job() {
    if !have_mpirun() {
        return;
    }
    let child = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args([
            "run",
            "wordcount",
            "--plan",
            "processes",
            "--launcher",
            "mpi",
        ])
        .args(["--rate", "20000", "--duration", "120"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    // Rank 2 is the PE of `sum`: find it by its environment once it runs.
    let victim = loop {
        let found = std::fs::read_dir("/proc").unwrap().find_map(|e| {
            let pid: u32 = e.ok()?.file_name().to_str()?.parse().ok()?;
            let env = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
            let env = String::from_utf8_lossy(&env);
            let ours = env.contains(&format!("SLUICE_JOB_ID=wordcount-{}-", child.id()));
            (ours && env.contains("OMPI_COMM_WORLD_RANK=2\0")).then_some(pid)
        });
        if let Some(pid) = found {
            break pid;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "rank 2 never started"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    std::thread::sleep(Duration::from_millis(300));
    let o = common::kill_pe_and_wait(child, victim, started);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("error: "), "{err}");
    assert!(
        err.contains("'sum'") || err.contains("mpirun ended"),
        "the error names the PE or mpirun: {err}"
    );
}
