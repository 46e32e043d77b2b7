//! Watching running jobs from outside, on the real binary: the Prometheus endpoint scraped
//! over loopback, the job registry (`sluice jobs`, `sluice stop`, a killed job not listed) and
//! `sluice top` under tmux (a checkpointed job's, with its checkpoints' line). Every test keeps
//! its own registry (its own `XDG_RUNTIME_DIR`), so jobs of other tests or users never show.

mod common;

use common::watch::{have_tmux, private_registry as registry, until, Terminal};
use common::{finish, jobs_in as jobs, sluice_in as sluice};

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Generous bound on each wait (a hang, not a slow machine, should trip it).
const PATIENCE: Duration = Duration::from_secs(60);

/// Starts WordCount in the background with `extra` arguments, its output piped.
fn start_wordcount(registry: &Path, extra: &[&str]) -> Child {
    sluice(registry)
        .args(["run", "wordcount", "--rate", "5000", "--set", "words=10"])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// The ID of the one job `sluice jobs` lists, once it lists one; `job`, its process, must not
/// end before (what it said is shown if it does).
fn listed_job(registry: &Path, job: &mut Child) -> String {
    until("the job to be listed", || {
        if let Some(status) = job.try_wait().unwrap() {
            let mut said = String::new();
            if let Some(mut stderr) = job.stderr.take() {
                let _ = std::io::Read::read_to_string(&mut stderr, &mut said);
            }
            panic!("the job ended ({status}) before it was listed: {said}");
        }
        let listing = jobs(registry);
        let line = listing.lines().find(|l| l.starts_with("wordcount-"))?;
        Some(line.split_whitespace().next()?.to_string())
    })
}

/// The number after `label: ` at the start of a line of `text`.
fn count(text: &str, label: &str) -> u64 {
    let line = text
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{label}: ")))
        .unwrap_or_else(|| panic!("no '{label}:' in {text}"));
    line.split_whitespace().next().unwrap().parse().unwrap()
}

#[test]
fn jobs_lists_a_running_job_and_stop_drains_it_with_nothing_lost() {
    let registry = registry();
    let mut job = start_wordcount(
        registry.path(),
        &["--plan", "processes", "--duration", "120"],
    );
    let id = listed_job(registry.path(), &mut job);
    let listing = jobs(registry.path());
    let row = listing.lines().find(|l| l.starts_with(&id)).unwrap();
    assert!(row.contains("processes"), "{listing}");

    common::stop_in(registry.path(), &id);
    let o = finish(job);
    let (stdout, stderr) = (
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr),
    );
    assert!(o.status.success(), "{stderr}");
    assert!(stderr.contains("asked by `sluice stop`"), "{stderr}");
    // Every sentence generated reached the counters: ten words each.
    let sentences = count(&stdout, "sentences");
    assert!(sentences > 0, "{stdout}");
    assert_eq!(count(&stdout, "words"), sentences * 10, "{stdout}");
    assert!(jobs(registry.path()).contains("no job is running"));
    assert_eq!(
        std::fs::read_dir(registry.path().join("sluice/jobs"))
            .unwrap()
            .count(),
        0
    );
}

#[test]
fn a_killed_job_is_not_listed_and_its_entries_are_removed() {
    let registry = registry();
    let mut job = start_wordcount(
        registry.path(),
        &["--plan", "threaded", "--duration", "120"],
    );
    listed_job(registry.path(), &mut job);
    job.kill().unwrap();
    job.wait().unwrap();
    assert!(jobs(registry.path()).contains("no job is running"));
    assert_eq!(
        std::fs::read_dir(registry.path().join("sluice/jobs"))
            .unwrap()
            .count(),
        0
    );
    let o = sluice(registry.path())
        .args(["stop", "wordcount-1"])
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("no running job 'wordcount-1'"));
}

#[test]
fn a_stopped_job_stays_listed_and_stop_keeps_its_entries_until_its_process_is_gone() {
    let registry = registry();
    let mut job = start_wordcount(
        registry.path(),
        &["--plan", "processes", "--duration", "120"],
    );
    let id = listed_job(registry.path(), &mut job);
    let entries = registry.path().join("sluice/jobs");
    let pid = job.id().to_string();
    let signal = |name: &str| {
        assert!(Command::new("kill")
            .args([name, &pid])
            .status()
            .unwrap()
            .success())
    };
    signal("-STOP");
    let o = sluice(registry.path())
        .args(["stop", &id, "--no-wait"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "job '{id}' (pid {pid}) does not answer: its process is stopped (SIGSTOP?); its \
             entry is kept"
        )),
        "{stderr}"
    );
    let listing = jobs(registry.path());
    let row = listing.lines().find(|l| l.starts_with(&id));
    assert!(
        row.is_some_and(|r| r.ends_with("not answering")),
        "{listing}"
    );
    let mut kept: Vec<String> = std::fs::read_dir(&entries)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    kept.sort();
    assert_eq!(kept, [format!("{id}.json"), format!("{id}.sock")]);
    // Gone for good: its entries go with it.
    job.kill().unwrap();
    job.wait().unwrap();
    assert!(jobs(registry.path()).contains("no job is running"));
    assert_eq!(std::fs::read_dir(&entries).unwrap().count(), 0);
}

#[test]
fn an_orphan_socket_of_a_process_that_is_gone_is_removed_by_jobs() {
    let registry = registry();
    assert!(jobs(registry.path()).contains("no job is running"));
    let entries = registry.path().join("sluice/jobs");
    // A process that has ended: its pid is free (until reused, which a test cannot rule out
    // but which `kill -0` then only makes this file be kept).
    let mut gone = Command::new("true").spawn().unwrap();
    gone.wait().unwrap();
    let orphan = entries.join(format!("wordcount-{}.sock", gone.id()));
    drop(std::os::unix::net::UnixListener::bind(&orphan).unwrap());
    let partial = entries.join(format!(".wordcount-{}.json.partial", gone.id()));
    std::fs::write(&partial, b"{").unwrap();
    assert!(jobs(registry.path()).contains("no job is running"));
    assert!(!orphan.exists() && !partial.exists());
}

/// Gets `/metrics` from `address`: the status line and the body.
fn scrape(address: &str) -> (String, String) {
    common::http_get(address, "/metrics")
}

/// The value of the series `name{labels...}` whose labels include `label`.
fn series(body: &str, name: &str, label: &str) -> Option<f64> {
    body.lines()
        .filter(|l| l.starts_with(&format!("{name}{{")) && l.contains(label))
        .find_map(|l| l.rsplit(' ').next()?.parse().ok())
}

#[test]
fn metrics_addr_serves_prometheus_counters_that_grow() {
    let registry = registry();
    let mut job = start_wordcount(
        registry.path(),
        &[
            "--plan",
            "threaded",
            "--duration",
            "120",
            "--metrics-addr",
            "127.0.0.1:0",
        ],
    );
    // The address bound is on standard error: `metrics: http://127.0.0.1:PORT/metrics`.
    let mut stderr = BufReader::new(job.stderr.take().unwrap());
    let address = until("the metrics address", || {
        let mut line = String::new();
        stderr.read_line(&mut line).ok()?;
        let url = line.trim().strip_prefix("metrics: http://")?;
        Some(url.strip_suffix("/metrics")?.to_string())
    });
    let sentences = |body: &str| {
        series(body, "sluice_tuples_out_total", "operator=\"sentences\"").unwrap_or(0.0)
    };
    let (status, first) = scrape(&address);
    assert_eq!(status, "HTTP/1.1 200 OK");
    let before = until("a sample with sentences", || {
        let (_, body) = scrape(&address);
        (sentences(&body) > 0.0).then(|| sentences(&body))
    });
    until("the count to grow", || {
        let (_, body) = scrape(&address);
        (sentences(&body) > before).then_some(())
    });
    assert!(
        first.contains("# TYPE sluice_tuples_out counter"),
        "{first}"
    );
    let (_, body) = scrape(&address);
    assert!(
        body.contains("job=\"wordcount\"")
            && body.contains("pe=\"")
            && body.contains("operator=\"split\""),
        "{body}"
    );
    for line in body.lines().filter(|l| !l.starts_with('#')) {
        assert!(line.starts_with("sluice_"), "{line}");
    }
    let o = sluice(registry.path())
        .args(["stop", &listed_job(registry.path(), &mut job)])
        .output()
        .unwrap();
    assert!(o.status.success());
    assert!(finish(job).status.success());
}

#[test]
fn top_shows_operators_and_rates_under_tmux_and_q_quits() {
    if !have_tmux() {
        sluice_skip::skip("tmux is not installed (the CI installs it)");
        return;
    }
    let registry = registry();
    // Checkpointed, so the header has a line of its checkpoints.
    let mut job = start_wordcount(
        registry.path(),
        &[
            "--plan",
            "threaded",
            "--duration",
            "120",
            "--checkpoint-every",
            "200ms",
            "--checkpoint-dir",
            registry.path().join("checkpoints").to_str().unwrap(),
        ],
    );
    let id = listed_job(registry.path(), &mut job);
    let top = Terminal::top(registry.path(), &id, "top-test");
    // The screen has the operator `split` with a rate above 0 in its IN/S column.
    let screen = top.rate_shown("split");
    assert!(
        screen.contains("OPERATOR") && screen.contains("sentences"),
        "{screen}"
    );
    assert!(screen.contains("BACKPRESSURE"), "{screen}");
    // The checkpoints' line counts complete ones.
    until("top to show a complete checkpoint", || {
        let screen = top.screen()?;
        let line = screen
            .lines()
            .find_map(|l| l.split_once("checkpoints: "))?
            .1;
        let complete: u64 = line.split_whitespace().next()?.parse().ok()?;
        (complete > 0 && line.contains("no restart")).then_some(())
    });
    top.quit();
    let o = sluice(registry.path())
        .args(["stop", &id])
        .output()
        .unwrap();
    assert!(o.status.success());
    assert!(finish(job).status.success());
}

/// A client that sends its request a byte at a time, never finishing it, delays no scrape
/// (they are served concurrently) and is closed by the server (REQUEST_DEADLINE bounds a
/// whole request, not each read).
#[test]
fn a_trickling_client_delays_no_scrape_and_is_cut_off() {
    let registry = registry();
    let mut job = start_wordcount(
        registry.path(),
        &["--duration", "120", "--metrics-addr", "127.0.0.1:0"],
    );
    let mut stderr = BufReader::new(job.stderr.take().unwrap());
    let address = until("the metrics address", || {
        let mut line = String::new();
        stderr.read_line(&mut line).ok()?;
        let url = line.trim().strip_prefix("metrics: http://")?;
        Some(url.strip_suffix("/metrics")?.to_string())
    });
    let mut slow = TcpStream::connect(&address).unwrap();
    write!(slow, "GET /metrics HTTP/1.1\r\nX-Slow: ").unwrap();
    // A byte every 100 ms until the server closes the connection (a write fails), for at most
    // PATIENCE.
    let trickle = std::thread::spawn(move || {
        let began = Instant::now();
        while began.elapsed() < PATIENCE {
            if slow.write_all(b"a").is_err() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        false
    });
    // Served while the slow client is connected (a scrape that waited for it would time out).
    let (status, body) = scrape(&address);
    assert_eq!(status, "HTTP/1.1 200 OK");
    assert!(body.contains("sluice_uptime_seconds"), "{body}");
    assert!(
        trickle.join().unwrap(),
        "the trickling client was never cut off"
    );
    let o = sluice(registry.path())
        .args(["stop", &listed_job(registry.path(), &mut job)])
        .output()
        .unwrap();
    assert!(o.status.success());
    assert!(finish(job).status.success());
}

#[test]
fn a_metrics_address_that_cannot_be_bound_fails_the_run_before_it_starts() {
    let registry = registry();
    // An address of the documentation range, on no interface here: binding it fails at once
    // and sends nothing.
    let o = sluice(registry.path())
        .args(["run", "wordcount", "--metrics-addr", "192.0.2.1:9464"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("cannot serve metrics on 192.0.2.1:9464 (--metrics-addr)"),
        "{stderr}"
    );
    assert!(!stderr.contains("started"), "{stderr}");
    let o = sluice(registry.path())
        .args([
            "run",
            "wordcount",
            "--metrics",
            "off",
            "--metrics-addr",
            "127.0.0.1:0",
        ])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&o.stderr).contains("which --metrics off turns off"));
}
