//! `--launcher mpi`: the PEs of a job run as the ranks of Open MPI's mpirun, and (with the
//! `mpi` feature) edges pinned to the `mpi` transport move tuples as MPI messages; the test of
//! that transport is built only with the feature. Skips, saying so, where mpirun is not
//! installed, and fails so under `CI=true`.

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
        sluice_skip::skip("mpirun is not installed (Debian: apt-get install openmpi-bin)");
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

/// The three PEs with both edges between them pinned to the `mpi` transport.
fn three_pes_over_mpi() -> String {
    format!(
        "{THREE_PES}[[edge]]\nfrom = \"split\"\nto = \"sum\"\ntransport = {{ kind = \"mpi\" }}\n\
         [[edge]]\nfrom = \"sum\"\nto = \"counts\"\n\
         transport = {{ kind = \"mpi\", batch_bytes = 512, credit = 2 }}\n"
    )
}

/// Runs WordCount on a text file fused and under `--launcher mpi` with the plan `pes`, and
/// checks that both count the same.
fn wordcount_on_mpi_ranks_matches_one_thread(pes: &str) {
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
    std::fs::write(&plan, pes).unwrap();
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
fn wordcount_on_three_mpi_ranks_matches_one_thread() {
    wordcount_on_mpi_ranks_matches_one_thread(THREE_PES);
}

#[cfg(feature = "mpi")]
#[test]
fn wordcount_over_the_mpi_transport_matches_one_thread() {
    wordcount_on_mpi_ranks_matches_one_thread(&three_pes_over_mpi());
}

/// WordCount's source alone in a PE of its own before the three PEs, so lines cross an edge
/// too, and every edge pinned to the `mpi` transport (each with its default largest record,
/// 64 KiB).
#[cfg(feature = "mpi")]
fn four_pes_over_mpi() -> String {
    let three = three_pes_over_mpi().replace(
        r#"operators = ["sentences", "split"]"#,
        r#"operators = ["split"]"#,
    );
    format!(
        "[[thread]]\nname = \"source\"\npe = \"source\"\noperators = [\"sentences\"]\n{three}\
         [[edge]]\nfrom = \"sentences\"\nto = \"split\"\ntransport = {{ kind = \"mpi\" }}\n"
    )
}

/// Lines around and beyond an `mpi` record of 64 KiB, and words of up to 100 KB (beyond it
/// too, on the edges after the split), cross the `mpi` edges in parts and are counted as a
/// direct count does.
#[cfg(feature = "mpi")]
#[test]
fn lines_and_words_longer_than_an_mpi_record_are_counted_whole() {
    if !have_mpirun() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (input, plan) = (dir.path().join("in.txt"), dir.path().join("four.toml"));
    let lines = [
        (0, 6),
        (65_535, 6),
        (65_536, 6),
        (65_537, 6),
        (3, 6),
        (600_000, 6),
        (300_000, 100_000),
    ];
    let text: String = (0..)
        .zip(lines)
        .map(|(seed, (len, longest))| common::line(len, longest, seed) + "\n")
        .collect();
    std::fs::write(&input, &text).unwrap();
    std::fs::write(&plan, four_pes_over_mpi()).unwrap();
    let counts = common::wordcount(
        dir.path(),
        &input,
        plan.to_str().unwrap(),
        &["--launcher", "mpi"],
    );
    assert!(
        counts == common::direct_counts(&text),
        "the counts differ from a direct count"
    );
    assert!(
        counts.keys().any(|word| word.len() > 64 << 10),
        "a word longer than a record"
    );
}

#[test]
fn an_mpi_edge_needs_the_mpi_launcher_and_the_feature() {
    let dir = tempfile::tempdir().unwrap();
    let plan = dir.path().join("three.toml");
    std::fs::write(&plan, three_pes_over_mpi()).unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["run", "wordcount", "--rate", "1000", "--duration", "1"])
        .args(["--plan", plan.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    let wanted = if cfg!(feature = "mpi") {
        "edge split -> sum uses the mpi transport, which runs only between PEs launched by \
         mpirun: add --launcher mpi"
    } else {
        "edge split -> sum: the mpi transport: this program was built without the mpi feature"
    };
    assert!(err.contains(wanted), "{err}");
}

/// SIGINT to the launcher of a job whose edges are MPI stops it: its sources stop, what is in
/// flight drains through the MPI edges, every rank finalises, and the job ends cleanly with
/// its output written.
#[cfg(feature = "mpi")]
#[test]
fn a_stopped_mpi_job_drains_and_ends_cleanly() {
    if !have_mpirun() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (plan, output) = (dir.path().join("three.toml"), dir.path().join("out.tsv"));
    std::fs::write(&plan, three_pes_over_mpi()).unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["run", "wordcount", "--rate", "20000", "--duration", "120"])
        .args(["--plan", plan.to_str().unwrap(), "--launcher", "mpi"])
        .args(["--output", output.to_str().unwrap()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    // Wait for the last rank (the writer) to run, then a little for tuples to flow.
    let job = format!("SLUICE_JOB_ID=wordcount-{}-", child.id());
    while !std::fs::read_dir("/proc").unwrap().any(|e| {
        let env = e
            .ok()
            .and_then(|e| std::fs::read(e.path().join("environ")).ok())
            .unwrap_or_default();
        let env = String::from_utf8_lossy(&env);
        env.contains(&job) && env.contains("OMPI_COMM_WORLD_RANK=2\0")
    }) {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "rank 2 never started"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(1500));
    assert!(Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap()
        .success());
    let o = child.wait_with_output().unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(100),
        "the stop did not drain in time"
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("stopping: draining"), "{err}");
    let counts = std::fs::read_to_string(&output).unwrap();
    assert!(counts.lines().count() > 0, "nothing was counted: {err}");
}

#[test]
fn a_killed_rank_stops_the_mpi_job() {
    if !have_mpirun() {
        return;
    }
    let mut child = Command::new(env!("CARGO_BIN_EXE_sluice"))
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
        if child.try_wait().unwrap().is_some() {
            let o = child.wait_with_output().unwrap();
            panic!(
                "the job ended before rank 2 was found ({}): {}",
                o.status,
                String::from_utf8_lossy(&o.stderr)
            );
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

/// `sluice bench throughput|latency --transport mpi`: two ranks of mpirun beside raw TCP.
#[cfg(feature = "mpi")]
#[test]
fn mpi_benchmarks_run_on_two_ranks_beside_raw_tcp() {
    if !have_mpirun() {
        return;
    }
    for bench in [vec!["throughput"], vec!["latency", "--rate", "5000"]] {
        let o = Command::new(env!("CARGO_BIN_EXE_sluice"))
            .arg("bench")
            .args(&bench)
            // A second: a shorter window measured nothing on a machine at load 15.
            .args(["--transport", "mpi", "--size", "64", "--duration", "1"])
            .args(["--warmup", "0.2", "--repeat", "1", "--json"])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(o.status.success(), "{bench:?}: {err}");
        let json: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        let line = json.to_string();
        assert_eq!(json["transport"], "mpi", "{line}");
        assert_eq!(json["baseline"]["name"], "raw-tcp", "{line}");
        assert!(json["tuples_per_sec"].as_f64().unwrap() > 0.0, "{line}");
        assert!(
            json["baseline"]["tuples_per_sec"].as_f64().unwrap() > 0.0,
            "{line}"
        );
        if bench[0] == "latency" {
            assert!(json["latency_ns"]["p50"].as_f64().unwrap() > 0.0, "{line}");
        }
    }
}

#[cfg(not(feature = "mpi"))]
#[test]
fn an_mpi_benchmark_says_the_feature_is_missing() {
    let o = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["bench", "throughput", "--transport", "mpi", "--size", "64"])
        .args(["--duration", "0.1", "--warmup", "0", "--repeat", "1"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(err.contains("built without the mpi feature"), "{err}");
}
