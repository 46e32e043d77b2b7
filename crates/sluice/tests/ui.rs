//! `sluice run --ui ADDRESS:PORT`: the web page of a running job, loaded in headless Chromium
//! (its DOM after the page's script ran names every operator and shows rates; a screenshot is
//! taken), its self-contained page and JSON over plain HTTP, and a busy address refused
//! before the job starts. The Chromium test skips, saying why, where `chromium` is absent.

mod common;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use common::{signal, stderr};

/// The instances of WordCount's plan under `processes`.
const INSTANCES: [&str; 4] = ["sentences", "split", "sum", "counts"];

/// A port nobody listens on now.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Starts WordCount under `processes` with its page on `port`, until stopped, and waits until
/// its sources run.
fn start(port: u16) -> Child {
    let mut command = Command::new(env!("CARGO_BIN_EXE_sluice"));
    command
        .args(["run", "wordcount", "--plan", "processes", "--rate", "2000"])
        .args(["--duration", "120", "--ui", &format!("127.0.0.1:{port}")]);
    common::start_and_wait(command)
}

/// Stops the job as Ctrl-C does and checks it drained and ended well.
fn stop(child: Child) {
    signal(child.id(), "INT");
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
}

/// The body of `GET path` on `port`, after checking the status is 200.
fn get(port: u16, path: &str) -> String {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let (head, body) = response.split_once("\r\n\r\n").unwrap();
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    body.to_string()
}

/// Where Chromium is, if it is installed.
fn chromium() -> Option<String> {
    ["chromium", "chromium-browser"]
        .into_iter()
        .find_map(|name| {
            let found = Command::new("which").arg(name).output().ok()?;
            found
                .status
                .success()
                .then(|| String::from_utf8_lossy(&found.stdout).trim().to_string())
        })
}

/// Headless Chromium on `url` with `what` (`--dump-dom`, `--screenshot=FILE`), its profile in
/// `profile`, after letting the page's script run for a few seconds of virtual time.
fn browse(browser: &str, profile: &Path, url: &str, what: &str) -> String {
    let o = Command::new(browser)
        .args(["--headless", "--no-sandbox", "--disable-gpu"])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args([
            "--window-size=1280,900",
            "--virtual-time-budget=4000",
            what,
            url,
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    common::stdout(&o)
}

#[test]
fn chromium_shows_the_plan_with_live_rates() {
    let Some(browser) = chromium() else {
        eprintln!(
            "skipped: no chromium on PATH (Debian's `chromium` package; .ci/run installs it)"
        );
        return;
    };
    let port = free_port();
    let job = start(port);
    let dir = tempfile::tempdir().unwrap();
    let url = format!("http://127.0.0.1:{port}/");
    // The first figures come with the PEs' first samples; a page loaded before shows none yet.
    let deadline = Instant::now() + Duration::from_secs(60);
    let dom = loop {
        let dom = browse(&browser, dir.path(), &url, "--dump-dom");
        if dom.contains("4 PE(s) reporting") || Instant::now() > deadline {
            break dom;
        }
    };
    // The dumped DOM is HTML after the script ran: its text has the figures.
    assert!(dom.contains("running "), "{dom}");
    assert!(dom.contains("4 PE(s) reporting"), "{dom}");
    for instance in INSTANCES {
        assert!(
            dom.contains(&format!("<td>{instance}</td>")),
            "no row for {instance}: {dom}"
        );
        assert!(dom.contains(&format!("data-op=\"{instance}\"")), "{dom}");
    }
    // A rate on the drawing (an instance's live line) and in the status line.
    assert!(dom.contains(">out "), "{dom}");
    assert!(dom.contains("k/s") || dom.contains("/s ·"), "{dom}");

    let screenshot = dir.path().join("page.png");
    browse(
        &browser,
        dir.path(),
        &url,
        &format!("--screenshot={}", screenshot.display()),
    );
    let png = std::fs::read(&screenshot).expect("a screenshot");
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "not a PNG");
    stop(job);
}

#[test]
fn the_page_is_self_contained_and_its_json_has_the_figures() {
    let port = free_port();
    let job = start(port);
    let page = get(port, "/");
    assert!(page.starts_with("<!doctype html>"), "{page}");
    for external in ["src=\"http", "href=\"http", "@import", "url(http"] {
        assert!(!page.contains(external), "the page loads {external}");
    }
    for instance in INSTANCES {
        assert!(page.contains(&format!("data-op=\"{instance}\"")));
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    let snapshot = loop {
        let json: serde_json::Value = serde_json::from_str(&get(port, "/snapshot.json")).unwrap();
        let pes = json["snapshot"]["pes"].as_array().map_or(0, Vec::len);
        if pes == INSTANCES.len() || Instant::now() > deadline {
            break json;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(snapshot["state"], "running", "{snapshot}");
    assert_eq!(snapshot["snapshot"]["job"], "wordcount", "{snapshot}");
    assert!(get(port, "/plan.svg").starts_with("<svg"));
    stop(job);
    assert!(
        TcpStream::connect(("127.0.0.1", port)).is_err(),
        "the page is still served after the job ended"
    );
}

#[test]
fn a_busy_address_fails_the_run_before_it_starts() {
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = taken.local_addr().unwrap().to_string();
    let o = common::sluice(&["run", "wordcount", "--duration", "1", "--ui", &address]);
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    assert!(
        err.starts_with(&format!(
            "error: cannot serve the web page on {address} (--ui)"
        )),
        "{err}"
    );
    assert!(!err.contains("started:"), "{err}");
}
